"""Record a regression run: measure the tracked configs of a kernel on each shape, and store.

Which configs are tracked, per shape:

- ``best``: the fastest OK evaluation of the tune studies for (kernel, shape, this device);
- else ``default``: the space's default config (``recorded-best`` for a bare recording, whose
  space has no default: the recording's fastest entry);
- ``previous``: the ``best``/``default`` configs of the latest earlier run of the kernel on this
  device, when still valid, so that a re-tune does not cut the series that ``check`` and
  ``history`` compare config by config.

Live runs use the CUDA runner with :data:`REGRESS_TIMING`: the tune's protocol (warm-up, L2
flush before every sample, SM clock per sample) with a longer, tighter stopping rule, because a
regression check compares distributions, not just medians. Replayed runs answer every config
from a recording (its samples are the recorded ``times``) and are labelled as replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from workbench.regress.records import (
    MeasurementRecord,
    RegressError,
    RunInfo,
    list_runs,
    run_measurements,
    save_run,
)
from workbench.runners.base import Runner
from workbench.runners.timing import Noise, StoppingRule, TimingOptions
from workbench.search.problem import RecordingProblem, SearchProblem, SpaceProblem
from workbench.spaces.model import Config, config_label
from workbench.store import Store
from workbench.store.best import StudySelection, Variants, best_selected

#: Regression timing: at least 50 samples and 0.2 s of kernel time, until the median's 95 %
#: interval is within +-0.25 % (blind to rare outliers), capped at 2000 samples or 10 s. The
#: U test needs a few dozen samples per side to see a 2 % shift under 1 to 3 % noise.
REGRESS_TIMING = TimingOptions(
    rule=StoppingRule(
        min_samples=50,
        max_noise=0.0025,
        noise=Noise.MEDIAN_CI,
        min_time_s=0.2,
        max_time_s=10.0,
        max_samples=2000,
    )
)

#: Origins whose configs a later run keeps measuring (``previous``).
TRACKED_ORIGINS = frozenset({"best", "default", "recorded-best"})


@dataclass(frozen=True)
class Target:
    """One config to measure on one shape, and why."""

    shape_label: str
    shape: Mapping[str, int] | None
    config: Config
    origin: str


@dataclass(frozen=True)
class Recorded:
    """What :func:`record` stored."""

    run_id: int
    kernel: str
    measurements: tuple[MeasurementRecord, ...]
    replayed_from: str | None


def best_from_studies(
    store: Store, kernel: str, shape_label: str, device_key: str
) -> Config | None:
    """The best config (:mod:`workbench.store.best`) of the tune studies of exactly this
    kernel (its pinned variant, if any), shape and device, or None.

    Raises:
        StoreError: the store is damaged.
    """
    selection = StudySelection(kernel, Variants.EXACT, shape_label, device_key)
    found = best_selected(store, selection)
    return dict(found[1].config) if found else None


def choose_targets(
    store: Store,
    problems: Sequence[SearchProblem],
    device_name: str,
    *,
    include_previous: bool = True,
) -> list[Target]:
    """The configs to measure for each problem (one problem per shape).

    Args:
        store: the open store (tune studies, earlier regression runs).
        problems: the kernel's problems, one per shape (same kernel label).
        device_name: the GPU the run measures on (or the recording's).
        include_previous: also measure the tracked configs of the previous run.

    Returns:
        The targets, shape by shape, without duplicates.

    Raises:
        RegressError: a shape has nothing to measure (no study, no default).
        StoreError: the store is damaged.
    """
    previous = _previous_configs(store, problems[0].kernel, device_name) if include_previous else {}
    targets: list[Target] = []
    for problem in problems:
        shape = dict(problem.space.shape) if isinstance(problem, SpaceProblem) else None
        chosen: list[tuple[Config, str]] = []
        best = best_from_studies(store, problem.kernel, problem.shape_label, device_name)
        if best is not None and not problem.violations(best):
            chosen.append((best, "best"))
        else:
            chosen += [(c, _fallback_origin(problem)) for c in _fallbacks(problem)]
        for config in previous.get(problem.shape_label, []):
            if not problem.violations(config):
                chosen.append((config, "previous"))
        seen: set[str] = set()
        for config, origin in chosen:
            key = config_label(config)
            if key not in seen:
                seen.add(key)
                targets.append(Target(problem.shape_label, shape, config, origin))
        if not seen:
            raise RegressError(
                f"{problem.kernel} [{problem.shape_label}]: nothing to measure: no tune study "
                f"on {device_name} and no valid default config; tune it first"
            )
    return targets


def record(
    store: Store,
    runners: Mapping[str, Runner],
    targets: Sequence[Target],
    *,
    kernel: str,
    environment_id: int | None,
    label: str | None = None,
    shape_set: str | None = None,
    command: str | None = None,
    on_measure: Callable[[Target, MeasurementRecord], None] | None = None,
) -> Recorded:
    """Measure every target with its shape's runner and store the run.

    Args:
        store: the open store.
        runners: one runner per shape label (live, or replaying a recording).
        targets: from :func:`choose_targets`.
        kernel: the kernel label (with its pinned variant).
        environment_id: from :meth:`Store.environment`.
        label: free text for ``check --baseline LABEL``.
        shape_set: the named shape set, if any.
        command: the command line.
        on_measure: called after each measurement (progress).

    Returns:
        The stored run.

    Raises:
        WorkbenchError: a runner cannot go on (no device, unreadable recording).
        StoreError: the database failed.
    """
    records = []
    for target in targets:
        m = runners[target.shape_label].evaluate(target.config)
        rec = MeasurementRecord.from_measurement(
            target.shape_label, target.config, target.origin, m, target.shape
        )
        records.append(rec)
        if on_measure is not None:
            on_measure(target, rec)
    sources = {r.replay_source for r in runners.values()}
    replayed = "; ".join(sorted(s for s in sources if s)) or None
    run_id = save_run(
        store,
        kernel=kernel,
        environment_id=environment_id,
        measurements=records,
        label=label,
        shape_set=shape_set,
        replayed_from=replayed,
        command=command,
    )
    return Recorded(run_id, kernel, tuple(records), replayed)


def _fallbacks(problem: SearchProblem) -> list[Config]:
    if isinstance(problem, RecordingProblem):
        best = problem.recording.optimum()
        return [dict(best.config)] if best is not None else []
    return problem.defaults()


def _fallback_origin(problem: SearchProblem) -> str:
    return "recorded-best" if isinstance(problem, RecordingProblem) else "default"


def _previous_configs(store: Store, kernel: str, device_name: str) -> dict[str, list[Config]]:
    runs: list[RunInfo] = [
        r for r in list_runs(store) if r.kernel == kernel and r.environment.gpu_name == device_name
    ]
    if not runs:
        return {}
    out: dict[str, list[Config]] = {}
    for m in run_measurements(store, [runs[-1].id])[runs[-1].id]:
        if m.origin in TRACKED_ORIGINS:
            out.setdefault(m.shape_label, []).append(dict(m.params))  # type: ignore[arg-type]
    return out
