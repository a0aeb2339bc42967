"""One study of a tune, as :mod:`workbench.search.start` plans it: :class:`TunePlan` (its
problem, runner, study and environment, and what the user must be told), the study of a space
(:func:`space_study`), a config's throughput and roofline share, and what a resumed study
resumes (:class:`Resumption`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.devices import preset_named
from workbench.errors import ConfigError
from workbench.roofline.timed import Bound, clocked_bound, rate_in_unit
from workbench.runners.base import DeviceInfo, Measurement, Runner
from workbench.search.problem import SearchProblem
from workbench.search.request import Budget
from workbench.spaces.launch import work_counts, work_precision
from workbench.spaces.model import Config, shape_label, space_sha256
from workbench.spaces.space import Space
from workbench.store import RunSummary, Store, StudyInfo
from workbench.store.kept_space import keep_space, kept_space_of

Throughput = Callable[[Config, float], float | None]
#: Where a config's measurement sits under the roofline of the GPU that measured it, at the SM
#: clock its samples ran at (None: its work is unknown for that config)
RooflineBound = Callable[[Config, Measurement], Bound | None]


@dataclass
class TunePlan:
    """Everything one study of a tune needs."""

    problem: SearchProblem
    runner: Runner
    study: StudyInfo
    environment_id: int
    banner: str | None  #: shown first when numbers are replayed, not measured here
    unit: str | None  #: throughput unit (TOPS, TFLOP/s, GB/s) when the space has a work model
    throughput: Throughput | None
    recorded_optimum: float | None = None
    #: share of the roofline bound, when the space has a work model and the measuring GPU's
    #: datasheet is known
    roofline: RooflineBound | None = None


@dataclass(frozen=True)
class Resumption:
    """What a tune of an existing study resumes: the evaluations the study holds, which the
    evaluation budget counts and the sampler is warm-started from, and the runs that stored
    them (with their samplers and seeds)."""

    evaluations: int
    runs: tuple[RunSummary, ...]  #: the earlier runs that stored evaluations

    @classmethod
    def of(cls, store: Store, study: StudyInfo) -> Resumption | None:
        """None when the study holds no evaluation (new, or its runs stored none)."""
        held = store.count_evaluations(study)
        if not held:
            return None
        return cls(held, tuple(r for r in store.runs(study) if r.evaluations))

    @property
    def searches(self) -> list[RunSummary]:
        """The runs that searched (imports of a recording have no sampler or seed)."""
        return [r for r in self.runs if r.sampler is not None]

    @property
    def seeds(self) -> list[int | None]:
        return list(dict.fromkeys(r.seed for r in self.searches))

    @property
    def samplers(self) -> list[str]:
        return list(dict.fromkeys(r.sampler for r in self.searches))  # type: ignore[misc]

    def budget_left(self, budget: Budget) -> int | None:
        """Evaluations this run may add under the evaluation budget, which counts the stored
        ones (None: no evaluation budget)."""
        if budget.evaluations is None:
            return None
        return max(0, budget.evaluations - self.evaluations)


def space_study(
    store: Store,
    space: Space,
    kernel: str,
    device_key: str,
    replay_source: str | None,
    recorded_optimum: float | None,
    *,
    study_name: str | None = None,
    replay_note: str | None = None,
    fresh: bool = False,
) -> StudyInfo:
    spec = space.spec
    kept = kept_space_of(spec)  # (its hash is the study's: the source is read once)
    study = store.study(
        kernel=kernel,
        shape_label=shape_label(space.shape),
        device_key=device_key,
        parameters=[(p.name, p.values) for p in spec.parameters],
        arch=space.arch.sm,
        space_path=str(spec.path),
        space_sha256=kept.space_sha256 if kept else space_sha256(spec),
        replay_source=replay_source,
        replay_note=replay_note,
        recorded_optimum=recorded_optimum,
        work={"flops": spec.work.flops.text, "bytes": spec.work.bytes.text, "unit": spec.work.unit},
        name=study_name,
        fresh=fresh,
    )
    # its pages then need neither file (a store taken to another machine reports in full)
    keep_space(store, study, kept)
    return study


def throughput_of(space: Space) -> tuple[str, Throughput]:
    """The space's unit, and a config's throughput in it at a time (ms) from the work model
    (:func:`~workbench.roofline.timed.rate_in_unit`; None: the model fails for the config)."""
    unit = space.spec.work.unit

    def per_second(config: Config, ms: float) -> float | None:
        try:
            ops, nbytes = work_counts(space, config)
        except ConfigError:
            return None
        return rate_in_unit(ops, nbytes, ms * 1e-3, unit) if ms and ms > 0 else None

    return unit, per_second


def roofline_of(space: Space, device: DeviceInfo) -> RooflineBound | None:
    """A config's share of the roofline bound on the GPU that measured it (``device``), at the
    SM clock its samples ran at: the space's work model (operations, minimum bytes) over the
    time, against the datasheet ceilings of that GPU's preset (compute at the work's precision,
    scaled to the samples' median clock; DRAM), as ``workbench compare`` computes it
    (:func:`~workbench.roofline.timed.clocked_bound`). None when no preset is that exact GPU:
    another part's roofline (an H200 NVL's, a PCIe A100's) would give a wrong share. Asked of
    the study's best, it raises a roof the best beats to the best's rate (the fastest
    measured), which the bound's ceiling labels then say."""

    preset = preset_named(device.name)
    if preset is None:
        return None
    precision = work_precision(space)

    def bound(config: Config, m: Measurement) -> Bound | None:
        try:
            ops, nbytes = work_counts(space, config)
        except ConfigError:
            return None
        if m.value is None or not m.value > 0:
            return None
        seconds, who = m.value * 1e-3, "the best config"
        clocks = m.sm_clock_mhz
        return clocked_bound(ops, nbytes, seconds, precision, preset, clocks, who)[0]

    return bound
