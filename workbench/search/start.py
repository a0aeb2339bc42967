"""How a tune starts, top to bottom: from a :class:`~workbench.search.request.TuneRequest` to
the plans of its studies and the settings of their searches.

``workbench tune`` and ``workbench worker`` both start here, in this order:

1. :func:`check_request` refuses what no path of tune can take, before anything is opened;
2. :func:`plan_tune` reads the request's recording (one that cannot be read opens no store),
   opens its store (:func:`~workbench.store.opening.open_store`; a shared study's is open
   already) and finds where the numbers come from (:class:`Source`): the space a recording
   holds (``--replay FILE`` alone), a space file's space answered from ``--replay FILE``, the
   GPU here, and, on a machine without a GPU, a recording kept beside the space file or,
   without one, no numbers at all: the compile stage;
3. one plan per shape (:class:`~workbench.search.tune_plan.TunePlan`), by
   :func:`plan_replay_file`, :func:`plan_space_replay` or :func:`plan_live`;
4. the plans finished: a replay's simulated delay, and the study of ``--objective``;
5. each search's first configs (:func:`first_configs`) and settings (:func:`search_settings`).

What the compile stage compiles is :mod:`workbench.search.configs`'s (``compile_batches``). A
shared study's plan is of one shape on one arch, and never compile-only.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.errors import ConfigError, WorkbenchError
from workbench.gitinfo import repo_state
from workbench.gpu import probe_gpu
from workbench.runners.objective_kind import ObjectiveKind
from workbench.runners.objectives import ObjectiveRunner
from workbench.runners.recordings import Recording, load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.enqueue import Say, check_enqueue, enqueued_configs
from workbench.search.kept_recordings import recording_for_shape, replay_banner, shipped_recordings
from workbench.search.loop import OnDrift, OnEvaluation, SearchSettings
from workbench.search.problem import RecordedSpaceProblem, RecordingProblem, SpaceProblem
from workbench.search.request import Pipeline, TuneRequest
from workbench.search.samplers import check_sampler
from workbench.search.tune_plan import TunePlan, roofline_of, space_study, throughput_of
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config, SpaceSpec, Value, shape_label
from workbench.spaces.targets import one_arch, option_spaces, resolve_arches
from workbench.store import Store, StudyInfo
from workbench.store.compiles import save_compiles
from workbench.store.exchange import recording_study
from workbench.store.kept_space import keep_space, kept_space
from workbench.store.opening import open_store
from workbench.toolchain import Arch

if TYPE_CHECKING:
    from collections.abc import Callable

    from workbench.compiler import CompileResult


class Source(enum.Enum):
    """Where a tune's numbers come from."""

    RECORDED_SPACE = "recorded space"  #: --replay FILE alone: the space the file records
    REPLAY = "replay"  #: a space file's space, answered from --replay FILE
    GPU = "gpu"  #: measured on the GPU here
    SHIPPED = "shipped recording"  #: no GPU: the recording kept beside the space file
    COMPILE = "compile"  #: no GPU and no recording: compiled only, nothing timed


@dataclass
class TuneSetup:
    """What :func:`plan_tune` decided: one plan per shape (none for the compile stage)."""

    source: Source
    store: Store
    plans: list[TunePlan]
    spec: SpaceSpec | None = None  #: the kernel's space file (None: a recorded space)
    spaces: list[Space] = field(default_factory=list)  #: one per shape, of the first arch
    arches: list[Arch] = field(default_factory=list)  #: every arch asked (compile stage)
    pinned: dict[str, Value] | None = None  #: the ``--set`` values: the variant searched
    no_gpu: str | None = None  #: why no GPU measures (SHIPPED, COMPILE)


# -- 1. the request ---------------------------------------------------------------------------
def check_request(request: TuneRequest, *, shared: bool = False) -> TuneRequest:
    """``request``, after refusing what no path of tune can take (``shared``: a study on
    PostgreSQL), before anything is opened or written.

    Raises:
        WorkbenchError: nothing to tune, options that do not go together, an unknown sampler,
            or a malformed ``enqueue`` item.
    """
    request.check(shared=shared)
    check_sampler(request.strategy.sampler)
    check_enqueue(request.strategy.enqueue)
    return request


# -- 2. recording, store, source ----------------------------------------------------------------
def plan_tune(
    request: TuneRequest, store: Store | None = None, *, shared: bool = False
) -> TuneSetup:
    """The plans of ``request``'s studies, in ``store`` (a shared study's, open already) or
    else in the store of ``request.study.storage``, opened once the request's recording is read
    (one that cannot be read creates no store). ``shared``: a shared study's (one shape, one
    arch; no GPU and no recording is an error, not a compile stage).

    Raises:
        WorkbenchError: the kernel, shape, arch, recording or GPU asked for is not here, or
            the recording is not of the space.
    """
    recording = _recording(request, shared)
    store = open_store(request.study.storage) if store is None else store
    target, choice = request.target, request.study
    if target.kernel is None:
        assert recording is not None  # (checked by the request)
        plan = plan_replay_file(store, recording, study_name=choice.name, fresh=choice.fresh)
        return _finish(TuneSetup(Source.RECORDED_SPACE, store, [plan]), request)
    spec = load_kernel(target.kernel, list(target.spaces))
    if shared:
        one_arch(spec, target.arch)  # every worker measures one
    arches = resolve_arches(spec, target.arch)  # without a GPU, --arch all compiles each
    shape = list(target.shape) if target.shape is not None else None
    spaces = option_spaces(spec, arches[0], target.device, shape, target.shapes)
    setup = TuneSetup(Source.GPU, store, [], spec, spaces[:1] if shared else spaces, arches)
    setup.pinned = spaces[0].parse_pins(list(target.pin) if target.pin is not None else None)
    if recording is not None:
        one_arch(spec, target.arch)  # a recording is of one GPU
        setup.source = Source.REPLAY
        setup.plans = [_replayed(setup, request, sp, recording) for sp in setup.spaces]
        return _finish(setup, request)
    gpu = probe_gpu()
    if gpu.available:
        one_arch(spec, target.arch)  # the GPU runs one
        setup.plans = [_live(setup, request, sp) for sp in setup.spaces]
        return _finish(setup, request)
    if shared:
        raise WorkbenchError(
            f"no CUDA GPU here ({gpu.reason}): a worker of a live study needs one (or rehearse "
            "the fleet with a recording as `replay`)"
        )
    setup.no_gpu = gpu.reason
    setup.plans = _shipped(setup, request)
    setup.source = Source.SHIPPED if setup.plans else Source.COMPILE
    return _finish(setup, request)


def _recording(request: TuneRequest, shared: bool) -> Recording | None:
    replay = request.measuring.replay
    if replay is None:
        return None
    if shared and not Path(replay).exists():  # a study's path, from another host
        raise ConfigError(
            f"the study replays {replay}, which is not on this machine: give its path as `replay`"
        )
    return load_recording(replay)


# -- 3. one plan per shape ----------------------------------------------------------------------
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


def _replayed(setup: TuneSetup, request: TuneRequest, sp: Space, rec: Recording) -> TunePlan:
    choice = request.study
    return plan_space_replay(
        setup.store, sp, rec, setup.pinned, study_name=choice.name, fresh=choice.fresh
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


def _live(setup: TuneSetup, request: TuneRequest, sp: Space) -> TunePlan:
    return plan_live(
        setup.store,
        sp,
        cache_dir=request.compile.cache_dir,
        pipeline=request.measuring.pipeline,
        pinned=setup.pinned,
        study_name=request.study.name,
        fresh=request.study.fresh,
    )


def plan_live(
    store: Store,
    space: Space,
    *,
    cache_dir: Path | None = None,
    pipeline: Pipeline = Pipeline.OLD,
    seed: int = 0,
    pinned: Mapping[str, Value] | None = None,
    study_name: str | None = None,
    fresh: bool = False,
) -> TunePlan:
    """A plan whose evaluations compile (into the cache at ``cache_dir``), verify and time on
    GPU 0 (``study_name``, ``fresh``: as for :func:`plan_replay_file`; ``pipeline``: how
    configs move through the GPU).

    Raises:
        NoGpuError, WorkbenchError: no GPU, or the runner cannot start.
    """
    from workbench.compiler import CompileAhead, CompileCache  # (a GPU's: NVRTC, CUDA)
    from workbench.runners.cuda.runner import CudaRunner

    new = pipeline is Pipeline.NEW
    cache = CompileCache(cache_dir)
    runner = CudaRunner(
        space,
        cache,
        seed=seed,
        compile_ahead=CompileAhead(cache) if new else None,
        device_verify=new,
    )
    git = repo_state(space.spec.source)
    env = store.environment(runner.device, git_commit=git.commit, git_dirty=git.dirty)
    problem = SpaceProblem(space, pinned)
    study = space_study(
        store,
        space,
        problem.kernel,
        runner.device.key(),
        None,
        None,
        study_name=study_name,
        fresh=fresh,
    )
    runner.on_compiled = compile_recorder(store, study, runner.space)
    unit, throughput = throughput_of(space)
    roofline = roofline_of(space, runner.device)
    return TunePlan(problem, runner, study, env, None, unit, throughput, roofline=roofline)


def compile_recorder(
    store: Store, study: StudyInfo, space: Space
) -> Callable[[Config, CompileResult], None]:
    """A runner hook keeping each compile's resources (registers, shared memory, spills,
    occupancy) as the study's compile result, for the report's compile-resources figure."""
    from workbench.static.sweep import compiled_record

    def record(config: Config, result: CompileResult) -> None:
        save_compiles(store, study, [compiled_record(space, config, result)])

    return record


def _shipped(setup: TuneSetup, request: TuneRequest) -> list[TunePlan]:
    """No GPU: the plans of the recordings kept beside the space file, for the shapes (and the
    problem variant) asked; none when a shape has none."""
    assert setup.spec is not None
    recordings = shipped_recordings(setup.spec)
    plans = []
    for sp in setup.spaces:
        variant = SpaceProblem(sp, setup.pinned).kernel  # the variant searched
        recording = recording_for_shape(recordings, sp.shape, variant)
        if recording is not None:
            fresh = request.study.fresh
            plans.append(plan_space_replay(setup.store, sp, recording, setup.pinned, fresh=fresh))
    return plans


# -- 4. the plans finished ----------------------------------------------------------------------
def _finish(setup: TuneSetup, request: TuneRequest) -> TuneSetup:
    return _on_objective(_delayed(setup, request), request)


def _delayed(setup: TuneSetup, request: TuneRequest) -> TuneSetup:
    """``--replay-delay``: replayed measurements take that long, as a GPU's would."""
    if request.measuring.replay_delay:
        for plan in setup.plans:
            if plan.runner.replay_source is not None:
                plan.runner.delay_s = request.measuring.replay_delay  # type: ignore[attr-defined]
    return setup


def _on_objective(setup: TuneSetup, request: TuneRequest) -> TuneSetup:
    """``--objective energy|edp``: each plan searches its own study of that objective (named
    after the time study, `` | energy``), its runner giving the objective's value; no
    throughput or roofline share (they are of a time)."""
    kind = request.strategy.objective
    if kind is ObjectiveKind.TIME:
        return setup
    plans = []
    for plan in setup.plans:
        old = plan.study
        study = setup.store.study(
            kernel=old.kernel,
            shape_label=old.shape_label,
            device_key=old.device_key,
            parameters=old.parameters,
            arch=old.arch,
            space_path=old.space_path,
            space_sha256=old.space_sha256,
            objective=kind.objective.name,
            unit=kind.objective.unit,
            replay_source=old.replay_source,
            work=old.work,
            name=f"{old.name} | {kind.value}",
            replay_note=old.replay_note,
        )
        keep_space(setup.store, study, kept_space(setup.store, old))
        setup.store.discard_if_unused(old)
        runner = ObjectiveRunner(plan.runner, kind)
        plans.append(
            dataclasses.replace(
                plan,
                study=study,
                runner=runner,
                unit=None,
                throughput=None,
                roofline=None,
                recorded_optimum=None,
            )
        )
    setup.plans = plans
    return setup


# -- 5. each search: its first configs and settings ---------------------------------------------
def first_configs(setup: TuneSetup, plan: TunePlan, request: TuneRequest, say: Say) -> list[Config]:
    """The configs ``--enqueue`` puts first in ``plan``'s search (``say``: what the user is
    told of other studies' best). A refusal leaves no empty study of the tune behind.

    Raises:
        ConfigError: no valid config in the space, or an ``--enqueue`` item is refused.
    """
    try:
        plan.problem.check_not_empty()  # (before the search's progress shows; it checks too)
        return enqueued_configs(plan, request.strategy.enqueue, setup.store, say)
    except WorkbenchError:
        for unused in setup.plans:
            setup.store.discard_if_unused(unused.study)
        raise


def search_settings(
    request: TuneRequest,
    plan: TunePlan,
    first: Sequence[Config] = (),
    *,
    command: str | None = None,
    on_evaluation: OnEvaluation | None = None,
    on_drift: OnDrift | None = None,
) -> SearchSettings:
    """How ``plan``'s search runs as ``request`` asks: its sampler, seed and drift checks,
    the ``first`` configs, and as many proposals ahead as the pipeline compiles (a replay:
    none ahead); ``command`` is stored with the run, the hooks are told as it goes."""
    strategy = request.strategy
    live = plan.runner.replay_source is None
    return SearchSettings(
        sampler=strategy.sampler,
        seed=strategy.seed,
        enqueue=tuple(first),
        drift_every=strategy.drift_every,
        ahead=request.measuring.pipeline.ahead if live else 1,
        command=command,
        on_evaluation=on_evaluation,
        on_drift=on_drift,
    )
