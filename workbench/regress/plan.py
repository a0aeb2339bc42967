"""Set up ``regress record``: which problems (one per shape), which runners, which environment.

Three sources, as for ``tune``: a live GPU (the CUDA runner with the regression timing), a
recording replayed for a kernel's space (``K --replay FILE``), or a bare recording
(``--replay FILE``: the recorded space). A replayed plan carries a banner naming the device,
file and date, and every run it stores is marked as replayed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import ConfigError
from workbench.gitinfo import repo_state
from workbench.runners.base import DeviceInfo, Runner
from workbench.runners.recordings import Recording, load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import Problem, RecordingProblem, SpaceProblem
from workbench.search.session import replay_banner
from workbench.spaces import Space
from workbench.spaces.model import SpaceSpec, Value, shape_label
from workbench.spaces.targets import one_arch, shape_spaces
from workbench.store import Store


@dataclass
class RecordPlan:
    """Everything a regression recording needs; close the runners when done."""

    kernel: str
    problems: list[Problem]
    runners: dict[str, Runner]  #: by shape label
    device: DeviceInfo
    environment_id: int
    shape_set: str | None
    banner: str | None  #: set when the numbers are replayed, not measured here

    def close(self) -> None:
        """Close every runner (worker processes of a live plan)."""
        for runner in self.runners.values():
            runner.close()


def plan_recording_file(store: Store, path: Path | str) -> RecordPlan:
    """Record the space recorded in a file (no space file involved).

    Raises:
        RecordingError: the file cannot be read.
    """
    recording = load_recording(path)
    problem = RecordingProblem(recording)
    env = store.environment(recording.device, replay_source=recording.source)
    return RecordPlan(
        problem.kernel,
        [problem],
        {problem.shape_label: ReplayRunner(recording)},
        recording.device,
        env,
        None,
        replay_banner(recording),
    )


def kernel_spaces(
    spec: SpaceSpec,
    *,
    arch: str | None = None,
    device: str | None = None,
    shape: Mapping[str, int] | None = None,
    shapes: str | None = None,
) -> list[Space]:
    """One space per shape to record.

    Args:
        spec: the kernel's space (from :func:`~workbench.spaces.load_kernel`).
        arch: target arch (default: the space's newest).
        device: device preset for the constraints.
        shape: one explicit shape (default: the space's default shape).
        shapes: a named shape set of the space (overrides ``shape``).

    Raises:
        WorkbenchError: unknown arch, device or shape set.
    """
    return shape_spaces(spec, one_arch(spec, arch), device, shape, shapes)


def plan_space(
    store: Store,
    spec: SpaceSpec,
    spaces: Sequence[Space],
    *,
    pinned: Mapping[str, Value] | None = None,
    replay: Path | str | None = None,
    shape_set: str | None = None,
    cache_dir: Path | None = None,
) -> RecordPlan:
    """Record a kernel's spaces: live on the GPU, or from ``replay``.

    Raises:
        NoGpuError: no replay and no GPU.
        WorkbenchError: the recording is not of this space, or the runner cannot start.
    """
    problems: list[Problem] = [SpaceProblem(sp, pinned) for sp in spaces]
    if replay is not None:
        recording = load_recording(replay).for_space(spec)  # (see Recording.for_space)
        problems = _matching(problems, spaces, recording)
        runners: dict[str, Runner] = {p.shape_label: ReplayRunner(recording) for p in problems}
        env = store.environment(recording.device, replay_source=recording.source)
        return RecordPlan(
            problems[0].kernel,
            problems,
            runners,
            recording.device,
            env,
            shape_set,
            replay_banner(recording),
        )
    return _plan_live(store, spec, spaces, problems, shape_set, cache_dir)


def _plan_live(
    store: Store,
    spec: SpaceSpec,
    spaces: Sequence[Space],
    problems: list[Problem],
    shape_set: str | None,
    cache_dir: Path | None,
) -> RecordPlan:
    from workbench.compiler import CompileCache
    from workbench.gpu import probe_gpu
    from workbench.regress.recorder import REGRESS_TIMING
    from workbench.runners.cuda.runner import CudaRunner, NoGpuError

    probe = probe_gpu()
    if not probe.available:
        raise NoGpuError(
            f"no CUDA GPU ({probe.reason}): `regress record` measures on a GPU; give --replay "
            "FILE to record from a recording instead (the run is marked as replayed)"
        )
    cache = CompileCache(cache_dir)
    runners: dict[str, Runner] = {}
    try:
        for problem, space in zip(problems, spaces, strict=True):
            runners[problem.shape_label] = CudaRunner(space, cache, timing=REGRESS_TIMING)
    except BaseException:
        for r in runners.values():
            r.close()
        raise
    device = next(iter(runners.values())).device
    git = repo_state(spec.source)
    env = store.environment(device, git_commit=git.commit, git_dirty=git.dirty)
    return RecordPlan(problems[0].kernel, problems, runners, device, env, shape_set, None)


def _matching(
    problems: list[Problem], spaces: Sequence[Space], recording: Recording
) -> list[Problem]:
    """The problems a recording (of their space) can answer: those of its shape when it names
    one."""
    if not recording.shape:
        return problems
    kept = [p for p, sp in zip(problems, spaces, strict=True) if sp.shape == dict(recording.shape)]
    if not kept:
        asked = "; ".join(shape_label(sp.shape) for sp in spaces)
        raise ConfigError(
            f"{recording.path} was recorded for {shape_label(recording.shape)}, not {asked}"
        )
    return kept
