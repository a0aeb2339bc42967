"""The new pipeline's CPU half: the search keeps proposals ahead of the one measured (several in
flight: each sampler takes them), the runner compiles them in background processes meanwhile,
and a tune with ``--pipeline new`` is the same search, only faster where compiles overlap."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from workbench.compiler import CompileAhead, CompileCache, compile_job, make_job
from workbench.runners.base import DeviceInfo, Measurement, Runner
from workbench.runners.recordings import Recording, load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordingProblem, SpaceProblem
from workbench.search.request import PIPELINE_AHEAD, Pipeline
from workbench.search.tuner import Budget, SearchSettings, Tuner
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config
from workbench.store import Store

REDUCE = Path(__file__).parent.parent / "tuning_spaces/recordings/reduce"


class Preparing(Runner):
    """Replays a recording and notes, in order, what the search prepares and evaluates."""

    def __init__(self, recording: Recording) -> None:
        self.inner = ReplayRunner(recording)
        self.events: list[tuple[str, str]] = []

    @property
    def device(self) -> DeviceInfo:
        return self.inner.device

    def prepare(self, config: Config) -> None:
        self.events.append(("prepare", repr(sorted(config.items()))))

    def evaluate(self, config: Config) -> Measurement:
        self.events.append(("evaluate", repr(sorted(config.items()))))
        return self.inner.evaluate(config)


@pytest.fixture(scope="module")
def reduce_recording() -> Recording:
    (path,) = REDUCE.glob("*.json.gz")
    return load_recording(path)


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["portfolio", "tpe", "random"])
def test_proposals_ahead_are_prepared_before_they_are_measured(
    tmp_path: Path, reduce_recording: Recording, sampler: str
) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    problem = RecordingProblem(reduce_recording)
    study = store.study(
        kernel=reduce_recording.kernel,
        shape_label=problem.shape_label,
        device_key=reduce_recording.device.key(),
        parameters=reduce_recording.parameters,
    )
    runner = Preparing(reduce_recording)
    ahead = Pipeline.NEW.ahead
    result = Tuner(problem, runner, store, study, SearchSettings(sampler=sampler, ahead=ahead)).run(
        Budget(evaluations=30)
    )
    assert result.evaluations == result.new_evaluations == 30
    evaluated = [c for what, c in runner.events if what == "evaluate"]
    assert len(set(evaluated)) == 30  # never measured twice
    prepared: list[str] = []
    waiting = 0
    for what, config in runner.events:
        if what == "prepare":
            prepared.append(config)
            waiting += 1
            assert waiting <= ahead  # never more in flight than asked
        else:
            assert config in prepared  # compiled ahead of its turn
            waiting -= 1
    # the budget bounds the proposals: none is prepared past the last evaluation's slot
    assert len(prepared) == 30


def test_one_at_a_time_prepares_nothing(tmp_path: Path, reduce_recording: Recording) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    problem = RecordingProblem(reduce_recording)
    study = store.study(
        kernel=reduce_recording.kernel,
        shape_label=problem.shape_label,
        device_key=reduce_recording.device.key(),
        parameters=reduce_recording.parameters,
    )
    runner = Preparing(reduce_recording)
    Tuner(problem, runner, store, study, SearchSettings(ahead=Pipeline.OLD.ahead)).run(
        Budget(evaluations=10)
    )
    assert {what for what, _ in runner.events} == {"evaluate"}
    assert PIPELINE_AHEAD >= 1


def test_compiles_ahead_run_in_background_processes(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    space = Space(load_kernel("reduce"), shape={"n": 1 << 20})
    configs = (SpaceProblem(space).valid_configs() or [])[::97][:4]
    assert len(configs) == 4
    jobs = [make_job(space, c) for c in configs]
    ahead = CompileAhead(cache, workers=2)
    try:
        start = time.perf_counter()
        for job in jobs:
            ahead.submit(job)
            ahead.submit(job)  # twice: compiled once
        submitted = time.perf_counter() - start
        assert ahead.pending() == len(jobs)
        results = [ahead.result(job) for job in jobs]
        assert submitted < sum(r.seconds for r in results)  # nothing waited for at submission
        assert ahead.pending() == 0
        for job, result in zip(jobs, results, strict=True):
            assert result.ok and result.key == job.key()
            assert compile_job(job, cache).cubin == result.cubin  # in the cache now
        ahead.submit(jobs[0])  # cached: nothing to start
        assert ahead.pending() == 0
    finally:
        ahead.close()


@pytest.mark.parametrize("sampler", ["portfolio", "tpe"])
def test_a_sampler_takes_several_proposals_in_flight(
    reduce_recording: Recording, sampler: str
) -> None:
    """Proposed before any is observed: distinct configs (the portfolio closes a row in
    flight), each observed by its config in any order, each credited to its own move."""
    from workbench.search.samplers import make_proposer

    problem = RecordingProblem(reduce_recording)
    proposer = make_proposer(sampler, problem, 3)
    proposer.start([])
    runner = ReplayRunner(reduce_recording)
    for _ in range(3):  # a few rounds past the portfolio's random start-up
        batch = [proposer.next() for _ in range(PIPELINE_AHEAD + 1)]
        assert all(c is not None for c in batch)
        keys = [problem.key(c) for c in batch]  # type: ignore[arg-type]
        if sampler == "portfolio":
            assert len(set(keys)) == len(keys)
        for config in reversed(batch):
            proposer.observe(config, runner.evaluate(config))  # type: ignore[arg-type]
    moves = proposer.moves()
    if moves is not None:
        assert sum(m["proposed"] for m in moves.values()) == 3 * (PIPELINE_AHEAD + 1)
    if sampler == "tpe":
        trials = proposer.study.trials  # type: ignore[attr-defined]
        assert len(trials) == 15 and all(t.state.name == "COMPLETE" for t in trials)
