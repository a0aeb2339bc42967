"""Set up ``regress record``: which problems (one per shape), which runners, which environment.

Four sources, as for ``tune``: a live GPU (the CUDA runner with the regression timing), a
recording replayed for a kernel's space (``K --replay FILE``), a bare recording (``--replay
FILE``: the recorded space), or, without a GPU, the recordings kept beside the space file. A
replayed plan carries a banner naming the device, file and date, and every run it stores is
marked as replayed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import ConfigError, NoGpuError
from workbench.gitinfo import repo_state
from workbench.runners.base import DeviceInfo, Runner
from workbench.runners.recordings import Recording, load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.kept_recordings import recording_for_shape, replay_banner, shipped_recordings
from workbench.search.problem import RecordingProblem, SearchProblem, SpaceProblem
from workbench.spaces import Space
from workbench.spaces.model import SpaceSpec, Value, shape_label
from workbench.spaces.targets import one_arch, shape_spaces
from workbench.store import Store


@dataclass
class RecordPlan:
    """Everything a regression recording needs; close the runners when done."""

    kernel: str
    problems: list[SearchProblem]
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
    """Record a kernel's spaces: live on the GPU, from ``replay``, or, without a GPU, from the
    recordings kept beside the space file (as ``tune`` replays them), bannered.

    Raises:
        NoGpuError: no replay, no GPU and no kept recording of every shape.
        WorkbenchError: the recording is not of this space, or the runner cannot start.
    """
    problems: list[SearchProblem] = [SpaceProblem(sp, pinned) for sp in spaces]
    if replay is not None:
        recording = load_recording(replay).for_space(spec)  # (see Recording.for_space)
        problems = _matching(problems, spaces, recording)
        return _replayed(store, problems, [recording] * len(problems), shape_set)
    from workbench.gpu import probe_gpu

    probe = probe_gpu()
    if not probe.available:  # as tune does: the recordings kept beside the space, bannered
        kept = [recording_for_shape(shipped_recordings(spec), sp.shape) for sp in spaces]
        if all(kept):
            return _replayed(store, problems, kept, shape_set)  # type: ignore[arg-type]
        raise NoGpuError(_no_gpu_message(probe.reason, spec, spaces, kept))
    return _plan_live(store, spec, spaces, problems, shape_set, cache_dir)


def _replayed(
    store: Store,
    problems: list[SearchProblem],
    recordings: Sequence[Recording],
    shape_set: str | None,
) -> RecordPlan:
    """A plan that replays ``recordings`` (one per problem; one environment: the first's
    device, every file named as the replay source)."""
    runners: dict[str, Runner] = {
        p.shape_label: ReplayRunner(r) for p, r in zip(problems, recordings, strict=True)
    }
    first = recordings[0]
    source = "; ".join(dict.fromkeys(r.source for r in recordings))
    env = store.environment(first.device, replay_source=source)
    banners = dict.fromkeys(replay_banner(r) for r in recordings)
    return RecordPlan(
        problems[0].kernel, problems, runners, first.device, env, shape_set, "\n".join(banners)
    )


def _no_gpu_message(
    reason: str, spec: SpaceSpec, spaces: Sequence[Space], kept: Sequence[Recording | None]
) -> str:
    missing = [shape_label(sp.shape) for sp, r in zip(spaces, kept, strict=True) if r is None]
    have = sorted({shape_label(r.shape) for r in shipped_recordings(spec) if r.shape})
    return (
        f"no CUDA GPU ({reason}): `regress record` measures on a GPU, and no recording of "
        f"{spec.name} at {', '.join(missing)} is kept beside its space file"
        + (f" (kept: {'; '.join(have)}: pick one with --shape)" if have else "")
        + "; give --replay FILE to record from a recording (the run is marked as replayed)"
    )


def _plan_live(
    store: Store,
    spec: SpaceSpec,
    spaces: Sequence[Space],
    problems: list[SearchProblem],
    shape_set: str | None,
    cache_dir: Path | None,
) -> RecordPlan:
    from workbench.compiler import CompileCache
    from workbench.regress.recorder import REGRESS_TIMING
    from workbench.runners.cuda.runner import CudaRunner

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
    problems: list[SearchProblem], spaces: Sequence[Space], recording: Recording
) -> list[SearchProblem]:
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
