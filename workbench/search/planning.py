"""From a :class:`~workbench.search.request.TuneRequest` to the plans of its studies.

A tune's numbers come from one of five places (:class:`Source`): the space a recording holds
(``--replay FILE`` alone), a space file's space answered from ``--replay FILE``, the GPU here,
and, on a machine without a GPU, a recording kept beside the space file or, without one, no
numbers at all: the compile stage (:mod:`~workbench.search.configs`). ``workbench tune`` and
``workbench worker`` both plan here; a shared study's plan is of one shape on one arch, and
never compile-only.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import ConfigError, WorkbenchError
from workbench.gpu import probe_gpu
from workbench.runners.objective_kind import ObjectiveKind
from workbench.runners.objectives import ObjectiveRunner
from workbench.runners.recordings import Recording, load_recording
from workbench.search.enqueue import Say, enqueued_configs
from workbench.search.problem import SpaceProblem
from workbench.search.request import TuneRequest
from workbench.search.session import (
    TunePlan,
    plan_replay_file,
    plan_space_replay,
    recording_for_shape,
    shipped_recordings,
)
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config, SpaceSpec, Value
from workbench.spaces.targets import one_arch, option_spaces, resolve_arches
from workbench.store import Store
from workbench.store.kept_space import keep_space, kept_space
from workbench.toolchain import Arch


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


def plan_tune(
    request: TuneRequest, open_store: Callable[[], Store], *, shared: bool = False
) -> TuneSetup:
    """The plans of ``request``'s studies, in the store ``open_store`` opens once the request's
    recording is read (one that cannot be read creates no store). ``shared``: a shared study's
    (one shape, one arch; no GPU and no recording is an error, not a compile stage).

    Raises:
        WorkbenchError: the kernel, shape, arch, recording or GPU asked for is not here, or
            the recording is not of the space.
    """
    recording = _recording(request, shared)
    store = open_store()
    if request.kernel is None:
        assert recording is not None  # (checked by the request)
        plan = plan_replay_file(store, recording, study_name=request.study, fresh=request.fresh)
        return _finish(TuneSetup(Source.RECORDED_SPACE, store, [plan]), request)
    spec = load_kernel(request.kernel, list(request.spaces))
    if shared:
        one_arch(spec, request.arch)  # every worker measures one
    arches = resolve_arches(spec, request.arch)  # without a GPU, --arch all compiles each
    shape = list(request.shape) if request.shape is not None else None
    spaces = option_spaces(spec, arches[0], request.device, shape, request.shapes)
    setup = TuneSetup(Source.GPU, store, [], spec, spaces[:1] if shared else spaces, arches)
    setup.pinned = spaces[0].parse_pins(list(request.pin) if request.pin is not None else None)
    if recording is not None:
        one_arch(spec, request.arch)  # a recording is of one GPU
        setup.source = Source.REPLAY
        setup.plans = [_replayed(setup, request, sp, recording) for sp in setup.spaces]
        return _finish(setup, request)
    gpu = probe_gpu()
    if gpu.available:
        one_arch(spec, request.arch)  # the GPU runs one
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


def first_configs(setup: TuneSetup, plan: TunePlan, request: TuneRequest, say: Say) -> list[Config]:
    """The configs ``--enqueue`` puts first in ``plan``'s search (``say``: what the user is
    told of other studies' best). A refusal leaves no empty study of the tune behind.

    Raises:
        ConfigError: no valid config in the space, or an ``--enqueue`` item is refused.
    """
    try:
        plan.problem.check_not_empty()  # (before the search's progress shows; it checks too)
        return enqueued_configs(plan, request.enqueue, setup.store, say)
    except WorkbenchError:
        for unused in setup.plans:
            setup.store.discard_if_unused(unused.study)
        raise


def _recording(request: TuneRequest, shared: bool) -> Recording | None:
    if request.replay is None:
        return None
    if shared and not Path(request.replay).exists():  # a study's path, from another host
        raise ConfigError(
            f"the study replays {request.replay}, which is not on this machine: give its path "
            "as `replay`"
        )
    return load_recording(request.replay)


def _replayed(setup: TuneSetup, request: TuneRequest, sp: Space, rec: Recording) -> TunePlan:
    return plan_space_replay(
        setup.store, sp, rec, setup.pinned, study_name=request.study, fresh=request.fresh
    )


def _live(setup: TuneSetup, request: TuneRequest, sp: Space) -> TunePlan:
    from workbench.compiler import CompileCache
    from workbench.search.live import plan_live

    return plan_live(
        setup.store,
        sp,
        CompileCache(request.cache_dir),
        pipeline=request.pipeline,
        pinned=setup.pinned,
        study_name=request.study,
        fresh=request.fresh,
    )


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
            plan = plan_space_replay(setup.store, sp, recording, setup.pinned, fresh=request.fresh)
            plans.append(plan)
    return plans


def _finish(setup: TuneSetup, request: TuneRequest) -> TuneSetup:
    return _on_objective(_delayed(setup, request), request)


def _on_objective(setup: TuneSetup, request: TuneRequest) -> TuneSetup:
    """``--objective energy|edp``: each plan searches its own study of that objective (named
    after the time study, `` | energy``), its runner giving the objective's value; no
    throughput or roofline share (they are of a time)."""
    kind = request.objective
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


def _delayed(setup: TuneSetup, request: TuneRequest) -> TuneSetup:
    """``--replay-delay``: replayed measurements take that long, as a GPU's would."""
    if request.replay_delay:
        for plan in setup.plans:
            if plan.runner.replay_source is not None:
                plan.runner.delay_s = request.replay_delay  # type: ignore[attr-defined]
    return setup
