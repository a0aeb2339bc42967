"""Drift checks during a search, on real recorded samples (an A100 convolution with ~1 % noise)
answered by a test runner that slows down as it warms, as a throttling GPU would."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
from dataset_paths import CACHES, missing

from workbench.report.baselines import Baselines
from workbench.report.data import gather_studies
from workbench.report.history import draw_history, gather_history
from workbench.report.overview import add_overview
from workbench.report.page import Page
from workbench.runners.base import DeviceInfo, Measurement, Runner, TrialOutcome
from workbench.runners.recordings import load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.drift import DriftCheck, DriftWatch
from workbench.search.problem import RecordingProblem
from workbench.search.tuner import Budget, SearchSettings, Tuner
from workbench.spaces.model import Config
from workbench.stats.rule import Verdict
from workbench.store import Store, StoreError

CONV = CACHES / "convolution_milo_A100.json.gz"

pytestmark = pytest.mark.skipif(not CONV.is_file(), reason=missing(CONV))


class WarmingGpu(Runner):
    """Answers from the recording, every time scaled by ``1 + slowdown * calls so far``: a GPU
    whose clock sags as it heats. It measures "live" (no replay source), so the tuner watches
    it; a failure marker makes one config fail when timed again."""

    def __init__(self, recording, slowdown: float, fail_again: bool = False) -> None:
        self.inner = ReplayRunner(recording)
        self.slowdown = slowdown
        self.fail_again = fail_again
        self.calls = 0
        self.timed: set[str] = set()

    @property
    def device(self) -> DeviceInfo:
        return DeviceInfo("NVIDIA A100 (warming)", cc=80)

    def evaluate(self, config: Config) -> Measurement:
        key = repr(sorted(config.items()))
        again = key in self.timed
        self.timed.add(key)
        if again and self.fail_again:
            return Measurement.failure(TrialOutcome.LAUNCH_FAILED, "illegal address")
        m = self.inner.evaluate(config)
        factor = 1 + self.slowdown * self.calls
        self.calls += 1
        if m.outcome is not TrialOutcome.OK:
            return m
        return dataclasses.replace(
            m,
            value=m.value * factor,  # type: ignore[operator]
            samples=tuple(s * factor for s in m.samples),
            replayed_from=None,
        )


@pytest.fixture(scope="module")
def recording():
    return load_recording(CONV)


def tune(tmp_path: Path, recording, runner: Runner, every: int, budget: int = 40):
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = store.study(
        kernel="conv",
        shape_label="recorded",
        device_key="A100",
        parameters=recording.parameters,
    )
    tuner = Tuner(
        RecordingProblem(recording), runner, store, study, SearchSettings(seed=3, drift_every=every)
    )
    return store, tuner.run(Budget(evaluations=budget))


def test_a_gpu_that_slows_down_is_reported_and_stored(tmp_path: Path, recording) -> None:
    runner = WarmingGpu(recording, slowdown=0.005)  # 0.5 % per evaluation
    store, result = tune(tmp_path, recording, runner, every=10)
    n = len(result.drift)  # every 10 correct evaluations (the recording has failed configs)
    assert n >= 3 and [c.after for c in result.drift] == [10 * (i + 1) for i in range(n)]
    first = result.drift[0]
    assert first.verdict is Verdict.SLOWER and first.drifted
    assert first.ratio == pytest.approx(1.05, abs=0.015)  # ten calls later, about 5 % slower
    assert result.drift[-1].ratio > first.ratio
    assert "slower than at first" in first.describe() and len(first.samples) >= 32
    (data,) = gather_studies(store)  # stored with the run, read back whole
    assert data.runs[0].drift == result.drift
    page = Page("t")
    add_overview(page, data, Baselines())
    html = page.render()
    assert "<h3>Drift</h3>" in html and f"{n} of {n} re-timings differ" in html
    # the tuning history marks each at the evaluation it followed, on both axes
    history = gather_history(data)
    assert len(history.drifts) == n
    for k, (trial, seconds, text) in enumerate(history.drifts):
        correct = [v for v in history.value[:trial] if v is not None]
        assert len(correct) == 10 * (k + 1) and history.value[trial - 1] is not None
        assert seconds == history.tuning_s[trial - 1] and text.endswith("% slower")
    for by_time in (False, True):
        shapes = draw_history(history, by_time=by_time).layout.shapes
        assert len(shapes) == n and {s.x0 for s in shapes} == {
            seconds if by_time else trial for trial, seconds, _ in history.drifts
        }
    with sqlite3.connect(tmp_path / "s.sqlite") as db:  # a hand-edited row is named
        db.execute("""UPDATE runs SET drift = '[{"after": "soon"}]'""")
    with pytest.raises(StoreError, match="table runs is damaged"):
        gather_studies(store)


def test_a_steady_gpu_shows_no_drift_and_a_failing_reference_is_said(
    tmp_path: Path, recording
) -> None:
    store, result = tune(tmp_path, recording, WarmingGpu(recording, slowdown=0.0), every=10)
    assert result.drift and not result.drifted
    (data,) = gather_studies(store)
    assert gather_history(data).drifts == ()  # nothing marked on the history
    assert all(c.verdict is Verdict.SAME for c in result.drift)
    assert " ran as at first" in result.drift[0].describe()
    assert all(c.ratio == pytest.approx(1.0) for c in result.drift)
    broken = WarmingGpu(recording, slowdown=0.0, fail_again=True)
    _, result = tune(tmp_path / "b", recording, broken, every=10, budget=20)
    check = result.drift[0]
    assert check.verdict is Verdict.NOT_COMPARABLE and check.ratio is None
    assert "timed again, it failed: launch_failed illegal address" in check.note


def test_a_replay_is_not_watched_and_checks_survive_json(tmp_path: Path, recording) -> None:
    """A recording does not drift: a replay runner gets no watch, whatever --drift-every says."""
    from typer.testing import CliRunner

    from workbench.cli.main import app

    result = CliRunner().invoke(
        app,
        ["tune", "--replay", str(CONV), "--budget", "30", "--json", "--drift-every", "5",
         "--storage", str(tmp_path / "s.sqlite")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert '"drift"' not in result.stdout
    check = DriftCheck(25, "a=1", Verdict.SLOWER, 1.06, "SM clock median 1980 -> 1755 MHz",
                       (1.0, 1.1), (1980.0, 1755.0))  # fmt: skip
    assert DriftCheck.from_json(check.to_json()) == check
    assert DriftWatch.of(ReplayRunner(recording), 5) is None
    assert DriftWatch.of(WarmingGpu(recording, 0.0), 0) is None
    assert DriftWatch.of(WarmingGpu(recording, 0.0), 5) is not None
    with pytest.raises(ValueError, match="at least 1"):
        DriftWatch(WarmingGpu(recording, 0.0), every=0)
