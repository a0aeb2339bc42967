"""Real timing noise for testing and calibrating the decision rule.

Recordings that keep every sample (Kernel Tuner caches keep 10 to 32 ``times`` per config)
are repeated measurements of real kernels on real GPUs. The tests and the power benchmark draw
runs from them: a "run" of a config is a resampling (with replacement) of its recorded
samples, optionally rescaled to a chosen noise level and shifted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workbench.runners.base import TrialOutcome
from workbench.runners.recordings import load_recording
from workbench.stats.rule import MAD_TO_SIGMA

if TYPE_CHECKING:
    from workbench.regress.history import Point


@dataclass(frozen=True)
class SampleSet:
    """The recorded samples of one config, and where they come from."""

    source: str  #: device and file
    config: str
    samples: np.ndarray

    @property
    def spread(self) -> float:
        """Robust relative spread: ``1.4826 * MAD / median`` (a normal's sigma / mu)."""
        return relative_spread(self.samples)


def relative_spread(samples: Sequence[float] | np.ndarray) -> float:
    """``1.4826 * median(|x - median(x)|) / median(x)``: the noise of a sample set.

    Args:
        samples: positive times.

    Returns:
        The robust relative spread (0 for a constant set).
    """
    x = np.asarray(samples, dtype=float)
    med = float(np.median(x))
    return float(MAD_TO_SIGMA * np.median(np.abs(x - med)) / med) if med > 0 else float("nan")


def load_sample_sets(paths: Iterable[Path | str], min_samples: int = 10) -> list[SampleSet]:
    """Every OK config with at least ``min_samples`` positive samples in these recordings.

    Args:
        paths: recordings (Kernel Tuner cache, T4 or workbench files).
        min_samples: configs with fewer samples are left out.

    Returns:
        The sample sets, in file order.

    Raises:
        RecordingError: a file cannot be read.
    """
    out = []
    for path in paths:
        recording = load_recording(path)
        for entry in recording.entries.values():
            if entry.outcome is not TrialOutcome.OK or len(entry.samples) < min_samples:
                continue
            x = np.asarray(entry.samples, dtype=float)
            if np.all(x > 0) and np.all(np.isfinite(x)):
                label = ",".join(f"{k}={v}" for k, v in entry.config.items())
                out.append(SampleSet(recording.source, label, x))
    return out


def with_noise(samples: np.ndarray, target: float) -> np.ndarray:
    """The samples' deviations from their median scaled to a relative standard deviation
    (``stdev / mean``) of about ``target``.

    Keeps the shape of the real distribution (skew, outliers, modes), changes its width.

    Raises:
        ValueError: the samples have no spread to scale.
    """
    med = float(np.median(samples))
    rel = float(np.std(samples, ddof=1) / np.mean(samples))
    if not rel > 0:
        raise ValueError("a constant sample set has no spread to scale")
    scaled = med + (samples - med) * (target / rel)
    return np.maximum(scaled, med * 1e-3)  # a time stays positive however wide the spread


def draw_run(
    samples: np.ndarray,
    rng: np.random.Generator,
    *,
    n: int | None = None,
    factor: float = 1.0,
) -> np.ndarray:
    """One simulated run: ``n`` samples drawn with replacement, times ``factor``."""
    idx = rng.integers(0, len(samples), n or len(samples))
    return samples[idx] * factor


def series_points(runs: Sequence[np.ndarray], keep_samples: bool = True) -> list[Point]:
    """A history series of one config made of these simulated runs (one a day, one GPU), for
    :func:`workbench.regress.history.change_points`; ``keep_samples=False`` stores medians only.
    """
    import datetime as dt

    from workbench.regress.history import Point
    from workbench.regress.records import MeasurementRecord, RunInfo
    from workbench.store.environments import EnvironmentInfo

    env = EnvironmentInfo(1, "GPU")
    start = dt.datetime(2026, 1, 1)
    out = []
    for i, x in enumerate(runs):
        run = RunInfo(i, "k", None, start + dt.timedelta(days=i), env, None, None)
        m = MeasurementRecord(
            "s",
            "c",
            {},
            "best",
            TrialOutcome.OK,
            median=float(np.median(x)),
            samples=tuple(float(v) for v in x) if keep_samples else (),
        )
        out.append(Point(run, m))
    return out
