"""The default sampler: valid, unvisited proposals; deterministic; better than random search."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import load_recording, write_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordingProblem
from workbench.search.tuner import Budget, StopReason, Tuner
from workbench.store import Store

CACHES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "tuning-caches"


def run(tmp: Path, rec, sampler: str, budget: int, seed: int):
    store = Store(f"sqlite:///{tmp}/{sampler}-{seed}.sqlite")
    problem = RecordingProblem(rec)
    study = store.study(
        kernel=rec.kernel, shape_label="x", device_key="d", parameters=rec.parameters
    )
    return Tuner(problem, ReplayRunner(rec), store, study, sampler=sampler, seed=seed).run(
        Budget(evaluations=budget)
    )


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory):
    """A 3-parameter space with an interaction and a failing region (values from a formula)."""
    entries = []
    for a in range(12):
        for b in range(10):
            for c in ("x", "y", "z"):
                if a + b > 18:
                    continue  # outside the space
                if c == "z" and a > 8:
                    m = Measurement.failure(TrialOutcome.LAUNCH_FAILED, "boom")
                else:
                    bonus = 0.0 if (c == "y") == (b >= 7) else 3.0
                    m = Measurement(TrialOutcome.OK, value=1.0 + abs(a - 9) + abs(b - 8) + bonus)
                entries.append(({"a": a, "b": b, "c": c}, m))
    path = write_recording(
        tmp_path_factory.mktemp("rec") / "syn.json",
        kernel="syn",
        device=DeviceInfo("GPU"),
        parameters=[("a", list(range(12))), ("b", list(range(10))), ("c", ["x", "y", "z"])],
        entries=entries,
    )
    return load_recording(path)


def test_proposals_are_valid_and_never_repeat(tmp_path: Path, synthetic) -> None:
    result = run(tmp_path, synthetic, "portfolio", 1000, seed=0)
    assert result.stop is StopReason.EXHAUSTED
    assert result.evaluations == len(synthetic.entries)
    assert result.proposals == result.evaluations  # no repeats, nothing outside the space
    assert result.best.measurement.value == 1.0


def test_same_seed_same_search(tmp_path: Path, synthetic) -> None:
    a = run(tmp_path / "a", synthetic, "portfolio", 40, seed=5)
    b = run(tmp_path / "b", synthetic, "portfolio", 40, seed=5)
    assert [e.config for e in a.history] == [e.config for e in b.history]


def test_better_than_random_search_on_a_real_space(tmp_path: Path) -> None:
    rec = load_recording(CACHES / "pnpoly_RTX_3090.json.gz")
    ours = [run(tmp_path, rec, "portfolio", 100, s).best.measurement.value for s in range(6)]
    rand = [run(tmp_path, rec, "random", 100, s).best.measurement.value for s in range(6)]
    assert statistics.mean(ours) < statistics.mean(rand)
