"""One contract, every runner (``workbench.runners.base.Runner``).

Written once and run over a fixture parametrized by every runner, as Optuna runs one suite over
all of its storages: the replay runner (a recording), the worker runner with the CPU executor
of test_runner_isolation (the parent side the CUDA runner is made of, a real worker process and
real NVRTC compiles), and the CUDA runner on a GPU (skipped, saying so, without one).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from workbench.runners.base import (
    DeviceInfo,
    Measurement,
    Objective,
    Runner,
    TrialOutcome,
)
from workbench.spaces.model import Config


@dataclass
class RunnerCase:
    """A runner and configs that exercise its contract."""

    make: Callable[[], Runner]  #: a new runner of this kind
    correct: Config  #: runs, is correct
    outside: Config  #: breaks a constraint of the space, or is absent from the recording
    failing: Config | None  #: runs and fails (None: this runner has no such config at hand)
    live: bool  #: measures here (else answers from a recording)


def replay_case(tmp: Path) -> RunnerCase:
    from workbench.runners.recordings import load_recording, write_recording
    from workbench.runners.replay import ReplayRunner

    entries = [
        ({"BLOCK": b}, Measurement(TrialOutcome.OK, value=1.0 + b / 256, samples=(1.0 + b / 256,)))
        for b in (64, 128, 256)
    ]
    entries.append(({"BLOCK": 512}, Measurement.failure(TrialOutcome.WRONG, "max error 3")))
    path = write_recording(
        tmp / "rec.json",
        kernel="k",
        device=DeviceInfo("GPU"),
        parameters=[("BLOCK", [64, 128, 256, 512, 1024])],
        entries=entries,
    )
    recording = load_recording(path)
    return RunnerCase(
        make=lambda: ReplayRunner(recording),
        correct={"BLOCK": 128},
        outside={"BLOCK": 1024},
        failing={"BLOCK": 512},
        live=False,
    )


def emulated_case(tmp: Path) -> RunnerCase:
    from test_runner_isolation import EmulatedExecutor

    from workbench.compiler import CompileCache
    from workbench.runners.timing import StoppingRule, TimingOptions
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_kernel

    space = Space(load_kernel("stream_scale", []), shape={"n": 4096})
    fast = TimingOptions(rule=StoppingRule(min_time_s=0.0, max_time_s=1.0, max_samples=200))
    cache = CompileCache(tmp / "cache")

    def make() -> Runner:
        return WorkerRunner(
            space, cache, executor_factory=EmulatedExecutor, timing=fast, startup_timeout_s=60
        )

    return RunnerCase(
        make=make,
        correct=space.parse_config(["BLOCK=256"]),
        outside=space.parse_config(["BLOCK=1024", "BLOCKS_PER_SM=16"]),
        failing=space.parse_config(["HINT=nc"]),  # the executor's recoverable launch error
        live=True,
    )


def cuda_case(tmp: Path) -> RunnerCase:
    from test_runner_cuda import GPU, QUICK, on_this_gpu

    if not GPU.available:
        pytest.skip(f"no CUDA GPU: {GPU.reason}")
    from workbench.compiler import CompileCache
    from workbench.runners.cuda import CudaRunner
    from workbench.spaces import load_kernel

    space = on_this_gpu(load_kernel("stream_scale", []), {"n": 1 << 20})
    cache = CompileCache(tmp / "cache")
    return RunnerCase(
        make=lambda: CudaRunner(space, cache, timing=QUICK),
        correct=space.parse_config(["BLOCK=256"]),
        outside=space.parse_config(["BLOCK=1024", "BLOCKS_PER_SM=16"]),
        failing=None,
        live=True,
    )


CASES = {"replay": replay_case, "worker": emulated_case, "cuda": cuda_case}


@pytest.fixture(
    scope="module",
    params=["replay", "worker", pytest.param("cuda", marks=pytest.mark.gpu)],
)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RunnerCase:
    return CASES[request.param](tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def runner(case: RunnerCase) -> Iterator[Runner]:
    with case.make() as made:
        yield made


def test_the_device_names_where_the_measurements_come_from(runner: Runner) -> None:
    device = runner.device
    assert isinstance(device, DeviceInfo) and device.name
    assert device.key() == device.name and device.name in device.device_class()


def test_the_objective_says_what_is_minimised_in_which_unit(runner: Runner) -> None:
    assert isinstance(runner.objective, Objective)
    assert runner.objective.name and runner.objective.unit


def test_a_correct_config_gives_a_value_inside_its_interval(
    case: RunnerCase, runner: Runner
) -> None:
    m = runner.evaluate(case.correct)
    assert m.outcome is TrialOutcome.OK, m.reason
    assert m.value is not None and math.isfinite(m.value) and m.value > 0
    if m.ci_low is not None and m.ci_high is not None:
        assert m.ci_low <= m.value <= m.ci_high
    assert m.samples  # every sample is kept
    assert m.replayed_from == runner.replay_source
    assert (runner.replay_source is None) == case.live


def test_a_config_outside_the_space_is_infeasible_and_not_raised(
    case: RunnerCase, runner: Runner
) -> None:
    m = runner.evaluate(case.outside)
    assert m.outcome is TrialOutcome.INFEASIBLE and m.value is None and m.reason
    assert not m.outcome.failed  # infeasible is not a failure: nothing ran


def test_a_failing_config_is_a_failed_measurement_with_its_reason(
    case: RunnerCase, runner: Runner
) -> None:
    if case.failing is None:
        pytest.skip("no config of this runner's space fails on purpose")
    m = runner.evaluate(case.failing)
    assert m.outcome.failed and m.value is None and m.reason
    after = runner.evaluate(case.correct)  # the runner goes on
    assert after.outcome is TrialOutcome.OK, after.reason


def test_the_same_config_gives_the_same_outcome_again(case: RunnerCase, runner: Runner) -> None:
    first, again = runner.evaluate(case.correct), runner.evaluate(case.correct)
    assert first.outcome is again.outcome is TrialOutcome.OK
    if not case.live:  # a recording answers alike; a live timing differs by its noise
        assert first == again


def test_closing_twice_is_harmless_and_a_with_block_closes(case: RunnerCase) -> None:
    made = case.make()
    made.close()
    made.close()
    with case.make() as other:
        assert other.evaluate(case.correct).outcome is TrialOutcome.OK
