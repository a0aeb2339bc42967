"""The history of a kernel: one series of runs per (GPU, shape, config), with change points.

Change points are found in two steps:

1. **Candidates**: PELT (``ruptures``, least-squares cost, segments of at least two runs) on
   the log medians of the series, scaled by the series' noise ``sigma`` (the standard deviation
   of one run's log median: ``1.4826 * median(|diff(log m)|) / sqrt(2)``, at least
   :data:`SIGMA_MIN`), with the BIC-like penalty ``PENALTY_BETA * log(n)``.
2. **Confirmation**: a candidate is kept only when the pooled raw samples of the segments on
   either side pass the check's decision rule (:mod:`workbench.stats.rule`: Mann-Whitney U,
   the ratio's whole interval beyond the threshold). The rule's history noise is the noise of
   the *segments'* log ratio, not of two single runs': this series' run-to-run noise (the
   standard deviation ``s`` of a consecutive difference of log medians) times
   ``sqrt((1/n_l + 1/n_r) / 2)`` for segments of ``n_l`` and ``n_r`` runs (the difference of
   two means of ``n`` runs, each of variance ``s^2 / 2``), with ``k =`` :data:`CONFIRM_K`
   rather than the check's 3, since PELT put the candidate where the step looks largest. The
   weakest unconfirmed candidate is dropped and its neighbours merged until every
   remaining one is confirmed. This keeps the median of a bimodal kernel, which jumps between
   its modes from run to run, from looking like a series of changes. Without raw samples, a
   candidate must move the segment median by the rule's 2 % floor.

A step needs two runs after it to be a change point (``min_size = 2``): the latest run alone is
what ``regress check`` is for.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from workbench.regress.records import (
    MeasurementRecord,
    RunInfo,
    list_runs,
    run_measurements,
)
from workbench.runners.base import TrialOutcome
from workbench.stats.rule import MAD_TO_SIGMA, DecisionRule, Verdict, compare_samples
from workbench.store import Store
from workbench.store.environments import EnvChange, EnvironmentInfo

#: Penalty per change point, times log(n), on the noise-scaled series.
PENALTY_BETA = 3.0
#: Smallest noise assumed for a series (log scale): replays of one recording repeat exactly.
SIGMA_MIN = math.log1p(0.02) / 4
#: Shortest segment (runs).
MIN_SEGMENT = 2
#: Pooled samples per side used to confirm a change point (a fixed subsample beyond this).
MAX_POOLED = 5000
#: Segment noise deviations a candidate's step must clear (the check's rule uses 3 for one
#: pre-chosen pair of runs; here PELT chose the split, so the largest-looking step is tested).
CONFIRM_K = 4.0


@dataclass(frozen=True)
class Point:
    """One run of a series."""

    run: RunInfo
    measurement: MeasurementRecord

    @property
    def median(self) -> float:
        assert self.measurement.median is not None
        return self.measurement.median


@dataclass(frozen=True)
class Broken:
    """A run in which the config gave no time: it failed to compile, crashed, hung or was
    wrong. Kept beside the series so that a timeline shows where it broke."""

    run: RunInfo
    measurement: MeasurementRecord

    def describe(self) -> str:
        """``launch_failed: an illegal memory access was encountered``."""
        reason = self.measurement.reason
        return self.measurement.outcome.value + (f": {reason}" if reason else "")


@dataclass(frozen=True)
class ChangePoint:
    """A step in a series: ``points[index]`` is the first run after it."""

    index: int
    before: float  #: median of the segment's run medians before the step (ms)
    after: float  #: likewise after
    changes: tuple[EnvChange, ...]  #: what differs between the runs on either side

    @property
    def ratio(self) -> float:
        return self.after / self.before

    def describe(self) -> str:
        """``+6.1% slower: driver 535 -> 550`` (or ``no environment change recorded``)."""
        pct = 100 * (self.ratio - 1)
        what = "slower" if pct > 0 else "faster"
        env = ", ".join(c.text() for c in self.changes) or "no environment change recorded"
        return f"{pct:+.1f}% {what}: {env}"


@dataclass(frozen=True)
class Series:
    """The runs of one config on one shape and GPU, oldest first, with change points; the
    runs where it broke apart (``points`` is empty for a config that never ran)."""

    kernel: str
    gpu: str
    shape_label: str
    config_key: str
    points: tuple[Point, ...]
    change_points: tuple[ChangePoint, ...]
    broken: tuple[Broken, ...] = ()

    @property
    def environments(self) -> list[EnvironmentInfo]:
        """The distinct environments of the series, in order of first use."""
        seen: dict[object, EnvironmentInfo] = {}
        runs: list[Point | Broken] = sorted(
            [*self.points, *self.broken], key=lambda p: (p.run.created_at, p.run.id)
        )
        for p in runs:
            seen.setdefault(p.run.environment.id, p.run.environment)
        return list(seen.values())


def gather_history(store: Store, kernel: str, rule: DecisionRule | None = None) -> list[Series]:
    """Every series of ``kernel`` (and its variants) in the store, with change points.

    Args:
        store: the open store.
        kernel: the kernel name.
        rule: the decision rule confirming change points.

    Returns:
        Series sorted by kernel, GPU, shape and config; failed measurements are in each
        series' ``broken``, out of its points and change points.

    Raises:
        RegressError: no regression run of ``kernel``.
        StoreError: the store is damaged.
    """
    from workbench.regress.records import RegressError

    runs = list_runs(store, kernel)
    if not runs:
        raise RegressError(
            f"no regression run of {kernel} in the store: record one with "
            f"`workbench regress record {shlex.quote(kernel)}`"
        )
    measured = run_measurements(store, [r.id for r in runs])
    groups: dict[tuple[str, str, str, str], list[Point]] = {}
    broken: dict[tuple[str, str, str, str], list[Broken]] = {}
    for run in runs:
        for m in measured[run.id]:
            key = (run.kernel, run.environment.gpu_name, m.shape_label, m.config_key)
            if m.outcome is TrialOutcome.OK and m.median:
                groups.setdefault(key, []).append(Point(run, m))
            elif m.outcome.failed:
                broken.setdefault(key, []).append(Broken(run, m))
    out = []
    for key in sorted(groups.keys() | broken.keys()):
        points = tuple(groups.get(key, ()))
        found = tuple(change_points(points, rule))
        out.append(Series(*key, points, found, tuple(broken.get(key, ()))))
    return out


def change_points(points: Sequence[Point], rule: DecisionRule | None = None) -> list[ChangePoint]:
    """The confirmed change points of a series (see the module docstring).

    Args:
        points: the runs, oldest first.
        rule: the decision rule confirming candidates.

    Returns:
        Change points in order.
    """
    rule = rule or DecisionRule()
    medians = np.array([p.median for p in points])
    breaks = candidate_breaks(medians)
    logs = np.log(medians)
    noise = float(MAD_TO_SIGMA * np.median(np.abs(np.diff(logs)))) if len(logs) > 1 else 0.0
    while breaks:
        scores = [_support(points, breaks, i, noise, rule) for i in range(len(breaks))]
        weakest = int(np.argmin(scores))
        if scores[weakest] > 0:
            break
        breaks.pop(weakest)
    out = []
    edges = [0, *breaks, len(points)]
    for i, b in enumerate(breaks):
        before = float(np.median(medians[edges[i] : b]))
        after = float(np.median(medians[b : edges[i + 2]]))
        env = points[b].run.environment.changes_from(points[b - 1].run.environment)
        out.append(ChangePoint(b, before, after, tuple(env)))
    return out


def candidate_breaks(medians: Sequence[float] | np.ndarray) -> list[int]:
    """PELT's breakpoints on the noise-scaled log medians (indices of first runs after a step).

    Args:
        medians: positive run medians, oldest first.

    Returns:
        Sorted indices (empty for fewer than ``2 * MIN_SEGMENT`` runs).
    """
    import ruptures

    x = np.log(np.asarray(medians, dtype=float))
    n = len(x)
    if n < 2 * MIN_SEGMENT:
        return []
    sigma = max(MAD_TO_SIGMA * float(np.median(np.abs(np.diff(x)))) / math.sqrt(2), SIGMA_MIN)
    algo = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit((x / sigma).reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=PENALTY_BETA * math.log(n))[:-1]]


def _support(
    points: Sequence[Point], breaks: Sequence[int], i: int, noise: float, rule: DecisionRule
) -> float:
    """How strongly the segments around ``breaks[i]`` differ: > 0 confirmed, <= 0 not.

    With raw samples on both sides: 1 when the rule says faster/slower, else 0 (or -|log r|
    so that the weakest goes first). Without: ``|log r| - log(1 + floor)`` on the medians.
    """
    edges = [0, *breaks, len(points)]
    left, right = points[edges[i] : edges[i + 1]], points[edges[i + 1] : edges[i + 2]]
    ml = float(np.median([p.median for p in left]))
    mr = float(np.median([p.median for p in right]))
    shift = abs(math.log(mr / ml))
    base, cand = _pooled(left), _pooled(right)
    if base is None or cand is None:
        return shift - math.log1p(rule.floor)
    segment_noise = noise * math.sqrt((1.0 / len(left) + 1.0 / len(right)) / 2.0)
    confirm = replace(rule, noise_k=max(rule.noise_k, CONFIRM_K))
    try:
        result = compare_samples(base, cand, history=segment_noise, rule=confirm)
    except ValueError:  # samples the rule cannot compare (a zero time): the shift alone says
        return shift - math.log1p(rule.floor)
    return 1.0 if result.verdict in (Verdict.SLOWER, Verdict.FASTER) else -1.0 / (1.0 + shift)


def _pooled(points: Sequence[Point]) -> np.ndarray | None:
    parts = [np.asarray(p.measurement.used()[0]) for p in points]
    if any(len(x) == 0 for x in parts):
        return None
    pooled = np.concatenate(parts)
    if len(pooled) > MAX_POOLED:
        pooled = np.random.default_rng(0).choice(pooled, MAX_POOLED, replace=False)
    return pooled
