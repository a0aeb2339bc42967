"""Set up a tune that measures on the local GPU (the CUDA runner)."""

from __future__ import annotations

from collections.abc import Mapping

from workbench.compiler import CompileCache
from workbench.gitinfo import repo_state
from workbench.runners.cuda.runner import CudaRunner
from workbench.search.problem import SpaceProblem
from workbench.search.session import TunePlan, space_study, throughput_of
from workbench.spaces.model import Value
from workbench.spaces.space import Space
from workbench.store import Store


def plan_live(
    store: Store,
    space: Space,
    cache: CompileCache,
    *,
    seed: int = 0,
    pinned: Mapping[str, Value] | None = None,
    study_name: str | None = None,
) -> TunePlan:
    """A plan whose evaluations compile, verify and time on GPU 0.

    Raises:
        NoGpuError, WorkbenchError: no GPU, or the runner cannot start.
    """
    runner = CudaRunner(space, cache, seed=seed)
    git = repo_state(space.spec.source)
    env = store.environment(runner.device, git_commit=git.commit, git_dirty=git.dirty)
    problem = SpaceProblem(space, pinned)
    study = space_study(
        store, space, problem.kernel, runner.device.key(), None, None, study_name=study_name
    )
    unit, throughput = throughput_of(space)
    return TunePlan(problem, runner, study, env, None, unit, throughput)
