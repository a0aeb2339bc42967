"""Set up a tune that measures on the local GPU (the CUDA runner)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from workbench.compiler import CompileAhead, CompileCache, CompileResult
from workbench.gitinfo import repo_state
from workbench.runners.cuda.runner import CudaRunner
from workbench.search.problem import SpaceProblem
from workbench.search.request import Pipeline
from workbench.search.session import TunePlan, roofline_of, space_study, throughput_of
from workbench.spaces.model import Config, Value
from workbench.spaces.space import Space
from workbench.static.sweep import compiled_record
from workbench.store import Store, StudyInfo
from workbench.store.compiles import save_compiles


def plan_live(
    store: Store,
    space: Space,
    cache: CompileCache,
    *,
    pipeline: Pipeline = Pipeline.OLD,
    seed: int = 0,
    pinned: Mapping[str, Value] | None = None,
    study_name: str | None = None,
    fresh: bool = False,
) -> TunePlan:
    """A plan whose evaluations compile, verify and time on GPU 0 (``study_name``, ``fresh``:
    as for :func:`~workbench.search.session.plan_replay_file`; ``pipeline``: how configs move
    through the GPU).

    Raises:
        NoGpuError, WorkbenchError: no GPU, or the runner cannot start.
    """
    new = pipeline is Pipeline.NEW
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

    def record(config: Config, result: CompileResult) -> None:
        save_compiles(store, study, [compiled_record(space, config, result)])

    return record
