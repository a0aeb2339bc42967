"""The search loop on recorded spaces: budgets, repeats, failures, interruption, resume."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from cli_helpers import sigint_as_at_a_terminal
from dataset_paths import CACHES, needs_caches
from recording_helpers import record_space

from workbench.errors import WorkbenchError
from workbench.runners.base import DeviceInfo, Measurement, Runner, TrialOutcome
from workbench.runners.recordings import Recording, load_recording, write_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordingProblem
from workbench.search.tuner import Budget, SearchSettings, SearchStopReason, Tuner
from workbench.spaces.model import Config
from workbench.store import Store, StudyInfo

PNPOLY = CACHES / "pnpoly_RTX_3090.json.gz"


class CountingRunner(Runner):
    """Replays a recording, counts real evaluations, and can be told to break at call k."""

    def __init__(self, recording: Recording, interrupt_at: int | None = None) -> None:
        self.inner = ReplayRunner(recording)
        self.calls: list[Config] = []
        self.interrupt_at = interrupt_at

    @property
    def device(self) -> DeviceInfo:
        return self.inner.device

    def evaluate(self, config: Config) -> Measurement:
        if self.interrupt_at is not None and len(self.calls) == self.interrupt_at:
            raise KeyboardInterrupt
        self.calls.append(dict(config))
        return self.inner.evaluate(config)


def recorded_study(store: Store, recording: Recording) -> tuple[RecordingProblem, StudyInfo]:
    """The recording's search problem and its study in ``store``."""
    problem = RecordingProblem(recording)
    study = store.study(
        kernel=recording.kernel,
        shape_label=problem.shape_label,
        device_key=recording.device.key(),
        parameters=recording.parameters,
    )
    return problem, study


def tune(
    store_path: Path,
    recording: Recording,
    budget: Budget,
    *,
    sampler: str = "tpe",
    seed: int = 0,
    runner: Runner | None = None,
):
    store = Store(f"sqlite:///{store_path}")
    problem, study = recorded_study(store, recording)
    runner = runner or CountingRunner(recording)
    tuner = Tuner(problem, runner, store, study, SearchSettings(sampler=sampler, seed=seed))
    return tuner.run(budget), runner


@pytest.fixture(scope="module")
def pnpoly() -> Recording:
    return load_recording(PNPOLY)


@needs_caches
@pytest.mark.parametrize("sampler", ["tpe", "random", "brute"])
def test_budget_counts_unique_evaluations(tmp_path: Path, pnpoly: Recording, sampler: str) -> None:
    result, runner = tune(tmp_path / "s.sqlite", pnpoly, Budget(evaluations=40), sampler=sampler)
    assert result.stop is SearchStopReason.BUDGET
    assert result.evaluations == result.new_evaluations == 40
    keys = [json.dumps(c, sort_keys=True) for c in runner.calls]
    assert len(keys) == len(set(keys)) == 40  # nothing measured twice
    assert result.best is not None
    assert result.best.measurement.value == min(
        e.measurement.value for e in result.history if e.measurement.outcome is TrialOutcome.OK
    )


def test_brute_force_follows_domain_order_and_exhausts(tmp_path: Path) -> None:
    entries = [
        ({"a": a, "b": b}, Measurement(TrialOutcome.OK, value=float(10 - a - b)))
        for a in (1, 2)
        for b in (1, 2, 3)
    ]
    path = write_recording(
        tmp_path / "tiny.json",
        kernel="tiny",
        device=DeviceInfo("GPU"),
        parameters=[("a", [1, 2]), ("b", [1, 2, 3])],
        entries=entries,
    )
    result, runner = tune(
        tmp_path / "s.sqlite", load_recording(path), Budget(evaluations=50), sampler="brute"
    )
    assert result.stop is SearchStopReason.EXHAUSTED and result.evaluations == 6
    assert runner.calls == [c for c, _ in entries]
    assert result.best.config == {"a": 2, "b": 3}


@needs_caches
def test_failed_configs_count_and_never_win(tmp_path: Path, pnpoly: Recording) -> None:
    result, _ = tune(
        tmp_path / "s.sqlite", pnpoly, Budget(evaluations=400), sampler="random", seed=3
    )
    failed = [e for e in result.history if e.measurement.outcome.failed]
    assert failed, "pnpoly has 318 failed configs out of 4092: a 400 sample meets some"
    assert result.evaluations == 400
    assert result.best.measurement.outcome is TrialOutcome.OK


@needs_caches
def test_interrupt_then_resume_loses_nothing(tmp_path: Path, pnpoly: Recording) -> None:
    store_path = tmp_path / "s.sqlite"
    first, runner = tune(
        store_path, pnpoly, Budget(evaluations=30), runner=CountingRunner(pnpoly, interrupt_at=12)
    )
    assert first.stop is SearchStopReason.INTERRUPTED and first.evaluations == 12
    second, runner2 = tune(store_path, pnpoly, Budget(evaluations=30))
    assert second.evaluations == 30 and second.new_evaluations == 18
    before = {json.dumps(c, sort_keys=True) for c in runner.calls}
    after = {json.dumps(c, sort_keys=True) for c in runner2.calls}
    assert not before & after  # resumed: nothing re-measured
    con = sqlite3.connect(store_path)
    assert con.execute("SELECT count(*) FROM evaluations").fetchone() == (30,)
    statuses = [r[0] for r in con.execute("SELECT status FROM runs ORDER BY id")]
    assert statuses == ["interrupted", "finished"]


@needs_caches
def test_patience_and_time_budgets(tmp_path: Path, pnpoly: Recording) -> None:
    result, _ = tune(tmp_path / "a.sqlite", pnpoly, Budget(patience=5), sampler="brute")
    assert result.stop is SearchStopReason.PATIENCE
    ok = [e.measurement.value for e in result.history if e.measurement.outcome is TrialOutcome.OK]
    best_at = ok.index(min(ok))
    assert len(ok) - 1 - best_at <= 5
    # each evaluation takes 2 ms, as a fast kernel's would: the 4,092 configs need 8 s, so the
    # budget ends the run (without the delay a fast machine exhausts the space in 0.5 s)
    slow = ReplayRunner(pnpoly, delay_s=0.002)
    start = time.perf_counter()
    result, _ = tune(
        tmp_path / "b.sqlite", pnpoly, Budget(seconds=0.5), sampler="random", runner=slow
    )
    assert result.stop is SearchStopReason.TIME and time.perf_counter() - start < 5
    assert 0 < result.evaluations < len(pnpoly.entries)


def test_a_space_where_everything_fails(tmp_path: Path) -> None:
    entries = [
        ({"a": a}, Measurement.failure(TrialOutcome.COMPILE_FAILED, "boom")) for a in (1, 2, 3)
    ]
    path = write_recording(
        tmp_path / "bad.json",
        kernel="bad",
        device=DeviceInfo("GPU"),
        parameters=[("a", [1, 2, 3])],
        entries=entries,
    )
    result, _ = tune(tmp_path / "s.sqlite", load_recording(path), Budget(evaluations=10))
    assert result.best is None and result.evaluations == 3
    assert result.stop is SearchStopReason.EXHAUSTED


@pytest.mark.parametrize("kwargs", [{}, {"evaluations": 0}, {"seconds": -1}, {"patience": 0}])
def test_bad_budgets(kwargs: dict) -> None:
    with pytest.raises(WorkbenchError):
        Budget(**kwargs)


KILL_SCRIPT = textwrap.dedent("""
    import sys, time
    from workbench.runners.recordings import load_recording
    from workbench.runners.replay import ReplayRunner
    from workbench.search.problem import RecordingProblem
    from workbench.search.tuner import Budget, SearchSettings, Tuner
    from workbench.store import Store

    class Slow(ReplayRunner):
        def evaluate(self, config):
            time.sleep(0.02)
            return super().evaluate(config)

    rec = load_recording(sys.argv[1])
    store = Store("sqlite:///" + sys.argv[2])
    problem = RecordingProblem(rec)
    study = store.study(kernel=rec.kernel, shape_label=problem.shape_label,
                        device_key=rec.device.key(), parameters=rec.parameters)
    print("ready", flush=True)
    budget = Budget(evaluations=int(sys.argv[3]))
    Tuner(problem, Slow(rec), store, study, SearchSettings(sampler="random")).run(budget)
""")


@pytest.mark.slow
@needs_caches
def test_kill_9_mid_run_leaves_an_intact_store_that_resumes(
    tmp_path: Path, pnpoly: Recording
) -> None:
    script = tmp_path / "tune.py"
    script.write_text(KILL_SCRIPT)
    store_path = tmp_path / "s.sqlite"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(PNPOLY), str(store_path), "100000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(2.0)
    proc.kill()
    proc.wait()
    con = sqlite3.connect(store_path)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    done = con.execute("SELECT count(*) FROM evaluations").fetchone()[0]
    con.close()
    assert done > 5
    result, runner = tune(
        store_path, pnpoly, Budget(evaluations=done + 20), sampler="random", seed=1
    )
    assert result.evaluations == done + 20 and len(runner.calls) == 20
    con = sqlite3.connect(store_path)
    distinct = con.execute("SELECT count(DISTINCT config_key) FROM evaluations").fetchone()[0]
    assert distinct == done + 20


def test_a_space_without_a_valid_config_starts_no_run(tmp_path: Path, project: Path) -> None:
    from workbench.errors import ConfigError
    from workbench.search.problem import SpaceProblem
    from workbench.spaces import Space, load_space

    empty = project / "spaces" / "empty.yaml"
    tiny = (project / "spaces" / "tiny.yaml").read_text()
    empty.write_text(tiny.replace("BLOCK * SCALE <= 512", "BLOCK * SCALE < 32"))
    space = Space(load_space(empty))
    params = [(p.name, p.values) for p in space.spec.parameters]
    config = {"BLOCK": 32, "SCALE": 1, "WAVES": 1}  # recorded, but not valid in this space
    path = write_recording(
        tmp_path / "r.json",
        kernel="tiny",
        device=DeviceInfo("GPU"),
        parameters=params,
        entries=[(config, Measurement(TrialOutcome.OK, value=1.0))],
    )
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = store.study(kernel="tiny", shape_label="n=1000", device_key="GPU", parameters=params)
    runner = CountingRunner(load_recording(path))
    tuner = Tuner(SpaceProblem(space), runner, store, study, SearchSettings(enqueue=[config]))
    with pytest.raises(ConfigError, match=r"no config is valid \(24 in the product"):
        tuner.run(Budget(evaluations=5))
    assert runner.calls == [] and store.count_evaluations(study) == 0
    with sqlite3.connect(tmp_path / "s.sqlite") as con:  # no run was started
        assert con.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)


@pytest.mark.parametrize("sampler", ["portfolio", "random", "tpe"])
def test_valid_configs_missing_from_the_recording_end_the_search_not_hang_it(
    tmp_path: Path, project: Path, recording_without_scale_3: Path, sampler: str
) -> None:
    from workbench.search.problem import SpaceProblem
    from workbench.spaces import Space, load_space

    space = Space(load_space(project / "spaces" / "tiny.yaml"))  # 22 valid configs
    params = [(p.name, p.values) for p in space.spec.parameters]
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = store.study(kernel="tiny", shape_label="n=1000", device_key="GPU", parameters=params)
    runner = CountingRunner(load_recording(recording_without_scale_3))  # 6 configs missing
    tuner = Tuner(SpaceProblem(space), runner, store, study, SearchSettings(sampler=sampler))
    # (a time budget, so that a regression fails the test instead of hanging it)
    result = tuner.run(Budget(evaluations=50, seconds=30))
    assert result.stop is SearchStopReason.EXHAUSTED
    assert result.evaluations == 16 and result.unanswered == 6
    assert len(runner.calls) == 22  # each missing config was asked for once, never again


@pytest.mark.parametrize("sampler", ["portfolio", "random", "tpe"])
def test_a_replayed_space_is_searched_over_the_configs_its_recording_holds(
    tmp_path: Path, project: Path, recording_without_scale_3: Path, sampler: str
) -> None:
    """Replaying a space file from a recording (tune SPACE --replay): only recorded configs
    are proposed, so none is asked for in vain, and the unrecorded ones are counted."""
    from workbench.search.problem import RecordedSpaceProblem
    from workbench.spaces import Space, load_space

    space = Space(load_space(project / "spaces" / "tiny.yaml"))  # 22 valid configs
    recording = load_recording(recording_without_scale_3)  # 16 of them
    params = [(p.name, p.values) for p in space.spec.parameters]
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = store.study(kernel="tiny", shape_label="n=1000", device_key="GPU", parameters=params)
    runner = CountingRunner(recording)
    problem = RecordedSpaceProblem(space, recording)
    result = Tuner(problem, runner, store, study, SearchSettings(sampler=sampler)).run(
        Budget(evaluations=50, seconds=30)
    )
    assert result.stop is SearchStopReason.EXHAUSTED
    assert result.evaluations == len(runner.calls) == 16 and result.unanswered == 6
    assert all(c["SCALE"] != 3 for c in runner.calls)
    assert problem.violations({"BLOCK": 32, "SCALE": 3, "WAVES": 1}) == [
        f"not in the recording replayed ({recording_without_scale_3.name})"
    ]


def test_a_sparse_recording_of_a_large_space_is_replayed_without_enumerating_the_space(
    project: Path, recording_without_scale_3: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sampled recording (workbench record --sample) of a space too large to enumerate (the
    int8 GEMM's half million valid configs took 16 s to list, then every proposal outside the
    recording came back unanswered: minutes for 20 evaluations): the replay searches the
    recorded configs and never walks the space."""
    from workbench.cli.main import app
    from workbench.search import problem as problem_module
    from workbench.spaces.space import Space

    monkeypatch.setattr(problem_module, "VALID_LIST_LIMIT", 10)  # tiny's 24 is "too large"

    def no_walk(self: Space) -> None:
        raise AssertionError("the space was enumerated")

    monkeypatch.setattr(Space, "_walk", no_walk)
    from typer.testing import CliRunner

    tiny = project / "spaces" / "tiny.yaml"
    args = ["tune", str(tiny), "--replay", str(recording_without_scale_3), "--budget", "50"]
    res = CliRunner().invoke(app, [*args, "--json", "--storage", str(project / "s.sqlite")])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["evaluations"] == 16 and doc["stop"] == "exhausted"
    assert doc["unanswered"] is None  # not counted: that would enumerate the space
    res = CliRunner().invoke(app, [*args, "--storage", str(project / "t.sqlite")])
    assert res.exit_code == 0, res.output
    assert "covered the 16 recorded configs valid here" in " ".join(res.output.split())


def test_a_space_past_the_enumeration_limit_is_searched_on_a_uniform_sample(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The int8 GEMM has 498,692 valid configs, 1,308 under the limit: one more value of a
    tile would have sent the default sampler to TPE, whose proposals in a space 0.08% valid
    are almost all invalid. Past the limit the valid set is a uniform reservoir sample of
    limit-many configs (the same each time, so that a resumed search sees the same set)."""
    from workbench.search import problem as problem_module
    from workbench.search.problem import SpaceProblem
    from workbench.search.samplers import make_proposer
    from workbench.spaces import Space, load_space

    monkeypatch.setattr(problem_module, "VALID_LIST_LIMIT", 10)
    tiny = project / "spaces" / "tiny.yaml"
    space = Space(load_space(tiny))  # 22 valid configs
    problem = SpaceProblem(space)
    held = problem.valid_configs()
    assert held is not None and len(held) == 10 and problem.valid_total == 22
    assert all(space.is_valid(c) for c in held)
    assert SpaceProblem(space).valid_configs() == held  # the same sample every time
    # (the sample is uniform: Space.reservoir, tested in test_space)
    assert make_proposer("portfolio", problem, 1).moves() is not None  # not TPE
    with pytest.raises(WorkbenchError, match=r"too large to enumerate for brute force \(22 valid"):
        make_proposer("brute", problem, 1)
    params = [(p.name, p.values) for p in space.spec.parameters]
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = store.study(kernel="tiny", shape_label="n=1000", device_key="GPU", parameters=params)
    recording = load_recording(
        record_space(space, tmp_path / "all.json", [(c, 1.0) for c in space.iter_valid()])
    )
    runner = CountingRunner(recording)
    result = Tuner(problem, runner, store, study, SearchSettings(sampler="portfolio", seed=1)).run(
        Budget(evaluations=50, seconds=30)
    )
    assert result.stop is SearchStopReason.EXHAUSTED and result.evaluations == 10
    assert {str(c) for c in runner.calls} == {str(c) for c in held}


@needs_caches
def test_an_interrupt_between_the_commit_and_its_bookkeeping_is_counted(
    tmp_path: Path, pnpoly: Recording
) -> None:
    """Ctrl-C that lands right after an evaluation is committed: the result counts what the
    store holds (it said one fewer, and its best could miss the stored best)."""
    store = Store(f"sqlite:///{tmp_path}/s.sqlite")
    problem, study = recorded_study(store, pnpoly)
    record = store.record

    def record_then_interrupt(*args, **kwargs):  # the 5th commit, then Ctrl-C
        row = record(*args, **kwargs)
        if store.count_evaluations(study) == 5:
            raise KeyboardInterrupt
        return row

    store.record = record_then_interrupt  # type: ignore[method-assign]
    tuner = Tuner(problem, CountingRunner(pnpoly), store, study, SearchSettings(sampler="random"))
    result = tuner.run(Budget(evaluations=20))
    assert result.stop is SearchStopReason.INTERRUPTED
    assert result.evaluations == result.new_evaluations == store.count_evaluations(study) == 5
    assert len(result.history) == 5


@needs_caches
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_ctrl_c_or_sigterm_stops_tune_cleanly(tmp_path: Path, signum: str) -> None:
    """A tune stopped by Ctrl-C or by SIGTERM (timeout, a cancelled CI job) says so, exits 130
    and marks its run interrupted; what it committed stays. SIGTERM used to kill it silently
    with the run left "running"."""
    import signal

    store = tmp_path / "s.sqlite"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "workbench.cli.main", "tune", "--replay", str(PNPOLY)),
            *("--budget", "500", "--replay-delay", "0.05", "--storage", str(store)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_at_a_terminal,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until something is committed
        time.sleep(0.2)
        if store.exists():
            with sqlite3.connect(store) as conn, contextlib.suppress(sqlite3.Error):
                if conn.execute("SELECT count(*) FROM evaluations").fetchone()[0] >= 3:
                    break
    process.send_signal(getattr(signal, signum))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "stopped: interrupted" in out
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]
        assert conn.execute("SELECT count(*) FROM evaluations").fetchone()[0] >= 3
