"""Set up a tune: which problem, which runner, which study, and what the user must be told.

``workbench tune`` has three sources of measurements: a live GPU (the CUDA runner), a
recording named with ``--replay FILE`` (any Kernel Tuner cache, T4 file or workbench
recording), or, on a machine without a GPU, a recording kept in ``recordings/KERNEL/`` beside
the space file.
Each plan says where its numbers come from (``banner``), and the store keeps it too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.devices import preset_named
from workbench.errors import ConfigError
from workbench.roofline.timed import Bound, clocked_bound, rate_in_unit
from workbench.runners.base import DeviceInfo, Measurement, Runner
from workbench.runners.recordings import Recording, load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordedSpaceProblem, RecordingProblem, SearchProblem
from workbench.search.tuner import Budget
from workbench.spaces.launch import work_counts, work_precision
from workbench.spaces.model import Config, SpaceSpec, base_kernel, shape_label, space_sha256
from workbench.spaces.space import Space
from workbench.store import RunSummary, Store, StudyInfo
from workbench.store.exchange import recording_study
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


def replay_banner(recording: Recording) -> str:
    when = f" on {recording.date[:10]}" if recording.date else ""
    note = f" Note: {recording.note}." if recording.note else ""
    return (
        f"REPLAY: every number below was measured on {recording.device.name}{when} and read "
        f"from {recording.path}; nothing runs on this machine.{note}"
    )


def plan_replay_file(
    store: Store,
    path: Path | str | Recording,
    *,
    study_name: str | None = None,
    fresh: bool = False,
) -> TunePlan:
    """Tune the space recorded in a file (no space file involved; or the recording already
    read from it); ``study_name`` overrides the default (kernel | shape | device); ``fresh``
    makes a new study beside an existing one of that name."""
    recording = path if isinstance(path, Recording) else load_recording(path)
    problem = RecordingProblem(recording)
    runner = ReplayRunner(recording)
    optimum = recording.optimum()
    study = recording_study(store, recording, name=study_name, fresh=fresh)
    env = store.environment(recording.device, replay_source=recording.source)
    return TunePlan(
        problem,
        runner,
        study,
        env,
        replay_banner(recording),
        None,
        None,
        optimum.value if optimum else None,
    )


def plan_space_replay(
    store: Store,
    space: Space,
    recording: Recording,
    pinned: Mapping[str, object] | None = None,
    *,
    study_name: str | None = None,
    fresh: bool = False,
) -> TunePlan:
    """Tune a space file's space, answered from a recording of that kernel (``study_name``,
    ``fresh``: as for :func:`plan_replay_file`).

    Raises:
        WorkbenchError: the recording lacks parameters of the space.
    """
    recording = recording.for_space(space.spec)  # (a parameter added since: see for_space)
    if recording.shape and dict(recording.shape) != space.shape:
        raise ConfigError(
            f"{recording.path} was recorded for {shape_label(recording.shape)}, "
            f"not {shape_label(space.shape)}"
        )
    problem = RecordedSpaceProblem(space, recording, pinned)  # type: ignore[arg-type]
    optimum = recording.optimum(problem.pinned)  # the best of this variant, not of them all
    study = space_study(
        store,
        space,
        problem.kernel,
        recording.device.key(),
        recording.source,
        optimum.value if optimum else None,
        study_name=study_name,
        replay_note=recording.note,
        fresh=fresh,
    )
    env = store.environment(recording.device, replay_source=recording.source)
    unit, throughput = throughput_of(space)
    return TunePlan(
        problem,
        ReplayRunner(recording),
        study,
        env,
        replay_banner(recording),
        unit,
        throughput,
        optimum.value if optimum else None,
        roofline_of(space, recording.device),
    )


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


def recordings_dir(spec: SpaceSpec) -> Path:
    """Where recordings of ``spec``'s kernel are kept: ``recordings/<kernel>/`` beside its
    space file (the library's are in ``tuning_spaces/recordings/``), every problem variant's
    (``reduce[OP=sum]``) in its kernel's folder."""
    return spec.path.parent / "recordings" / spec.name


def shipped_recordings(spec: SpaceSpec) -> list[Recording]:
    """Recordings of ``spec``'s kernel (any of its problem variants) kept in
    :func:`recordings_dir`, and in the folders of its file's named variants (``reduce``:
    ``recordings/reduce_f16/`` too).

    Raises:
        RecordingError: a recording there is damaged (it is not silently skipped).
    """
    names = dict.fromkeys([spec.name, *(v.name for v in spec.variants)])
    out = []
    for name in names:
        folder = spec.path.parent / "recordings" / name
        for path in sorted(folder.glob("*.json*")) if folder.is_dir() else []:
            recording = load_recording(path)
            if base_kernel(recording.kernel) in names:
                out.append(recording)
    return out


def recording_for_shape(
    recordings: list[Recording], shape: Mapping[str, int], kernel: str | None = None
) -> Recording | None:
    """The recording of ``shape`` (and, given ``kernel``, of that problem variant:
    ``reduce[OP=sum]``; a recording named without a variant matches any)."""
    for r in recordings:
        if not r.shape or dict(r.shape) != dict(shape):
            continue
        if kernel is None or r.kernel in (kernel, base_kernel(kernel)):
            return r
    return None
