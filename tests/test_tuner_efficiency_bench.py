"""benchmarks/tuner_efficiency.py: scores and the reversed value order of a recorded space."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
from dataset_paths import CACHES, needs_caches

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import tuner_efficiency as bench  # noqa: E402

pytestmark = needs_caches


def test_reversed_value_order_is_the_same_space_listed_backwards() -> None:
    path = CACHES / "pnpoly_RTX_3090.json.gz"
    plain = bench.load_space(path)
    rev = bench.load_space(path, value_order="reversed")
    for (name, values), (rname, rvalues) in zip(
        plain.recording.parameters, rev.recording.parameters, strict=True
    ):
        assert name == rname and tuple(reversed(values)) == rvalues
    assert list(rev.recording.entries) == list(reversed(list(plain.recording.entries)))
    assert rev.f_opt == plain.f_opt and rev.worst == plain.worst
    assert sorted(rev.values.tolist()) == sorted(plain.values.tolist())
    # the random-search baseline depends on the values only, not on their order
    assert rev.random_baseline(50) == plain.random_baseline(50)


def test_scores_random_search_at_zero_and_the_optimum_at_one() -> None:
    space = bench.load_space(CACHES / "convolution_milo_A100.json.gz")
    for t in (50, 200):
        assert abs(space.score(space.random_baseline(t), t)) < 1e-12
        assert space.score(space.f_opt, t) == 1.0
    # a better best value scores higher
    assert space.score(space.f_opt * 1.1, 50) > space.score(space.f_opt * 1.3, 50)


def test_a_workbench_run_on_the_reversed_space_is_valid(tmp_path: Path) -> None:
    space = bench.load_space(CACHES / "pnpoly_RTX_3090.json.gz", value_order="reversed")
    trace = bench.run_workbench(space, "portfolio", 30, seed=3)
    assert len(trace) == 30
    recorded = {v for v in space.values.tolist() if np.isfinite(v)}
    assert all(v is None or v in recorded for v in trace)


def test_a_warm_start_evaluates_the_other_gpus_fastest_config_first() -> None:
    a100 = bench.load_space(CACHES / "convolution_milo_A100.json.gz")
    source = CACHES / "convolution_milo_A4000.json.gz"
    (first,) = bench.warm_start(a100, source)
    a4000 = bench.load_space(source)
    fastest = min(
        (e for e in a4000.recording.entries.values() if e.value is not None),
        key=lambda e: e.value,  # type: ignore[arg-type,return-value]
    )
    assert first == dict(fastest.config)
    trace = bench.run_workbench(a100, "portfolio", 5, seed=0, enqueue=[first])
    assert trace[0] == a100.recording.lookup(first).value  # type: ignore[union-attr]
    # a recording of another kernel has no config of this space
    with pytest.raises(SystemExit, match="it has no"):
        bench.warm_start(a100, CACHES / "pnpoly_RTX_3090.json.gz")


def test_score_interval_brackets_the_score_and_narrows_with_repeats() -> None:
    space = bench.load_space(CACHES / "convolution_milo_A100.json.gz")
    rng = np.random.default_rng(1)
    finite = np.sort(space.values[np.isfinite(space.values)])
    few = rng.choice(finite[:200], 10).tolist()
    many = rng.choice(finite[:200], 400).tolist()
    for bests in (few, many):
        lo, hi = space.score_interval(bests, 100)
        assert lo <= space.score(float(np.mean(bests)), 100) <= hi
    width = [np.subtract(*space.score_interval(b, 100)[::-1]) for b in (few, many)]
    assert width[1] < width[0] / 3
    # identical repeats: no spread
    lo, hi = space.score_interval([space.f_opt] * 5, 100)
    assert lo == hi == 1.0


def _record(space, tool: str, strategy: str, first_seed: int, bests: list[float], t: int = 50):
    return {
        "space": space.name,
        "tool": tool,
        "strategy": strategy,
        "budget": t,
        "repeats": len(bests),
        "first_seed": first_seed,
        "value_order": "as-recorded",
        "score": space.score(float(np.mean(bests)), t),
        "score_ci90": list(space.score_interval(bests, t)),
        "mean_best": float(np.mean(bests)),
        "best_by_repeat": bests,
    }


def test_pooled_runs_score_as_one_run_of_all_their_seeds() -> None:
    """Two runs on disjoint seeds pool into the record one run of all the seeds would give;
    a run kept without per-repeat values still pools its score (it is affine in the mean
    best), without an interval."""
    space = bench.load_space(CACHES / "pnpoly_RTX_3090.json.gz")
    finite = np.sort(space.values[np.isfinite(space.values)])
    a, b = finite[:40:4].tolist(), finite[100:130:3].tolist()
    whole = _record(space, "workbench", "portfolio", 0, a + b)
    (pooled,) = bench.merge_records(
        [
            _record(space, "workbench", "portfolio", 10, b),
            _record(space, "workbench", "portfolio", 0, a),
        ],
        {space.name: space},
    )
    assert pooled["repeats"] == 20 and pooled["seeds"] == [[0, 19]]
    assert np.isclose(pooled["score"], whole["score"])
    assert np.allclose(pooled["score_ci90"], whole["score_ci90"])
    old = _record(space, "workbench", "portfolio", 10, b)
    del old["best_by_repeat"]
    (partial,) = bench.merge_records(
        [_record(space, "workbench", "portfolio", 0, a), old], {space.name: space}
    )
    assert np.isclose(partial["score"], whole["score"]) and partial["score_ci90"] is None
    # a pooled record pools again with runs on other seeds (its repeats' values are None there)
    c = finite[200:230:3].tolist()
    (again,) = bench.merge_records(
        [partial, _record(space, "workbench", "portfolio", 20, c)], {space.name: space}
    )
    assert again["repeats"] == 30 and again["seeds"] == [[0, 29]]
    assert np.isclose(
        again["score"], _record(space, "workbench", "portfolio", 0, a + b + c)["score"]
    )
    assert again["score_ci90"] is None


def test_pooling_refuses_a_seed_counted_twice() -> None:
    space = bench.load_space(CACHES / "pnpoly_RTX_3090.json.gz")
    bests = [space.f_opt] * 10
    runs = [
        _record(space, "kernel_tuner", "pso", 0, bests),
        _record(space, "kernel_tuner", "pso", 5, bests),
    ]
    with pytest.raises(ValueError, match="seed 5 is in two runs"):
        bench.merge_records(runs, {space.name: space})


def test_goal_compares_with_rivals_run_on_the_same_seeds_only() -> None:
    space = bench.load_space(CACHES / "pnpoly_RTX_3090.json.gz")
    finite = np.sort(space.values[np.isfinite(space.values)])
    ours = _record(space, "workbench", "portfolio", 0, finite[10:20].tolist())
    same = _record(space, "kernel_tuner", "pso", 0, finite[30:40].tolist())
    luckier = _record(space, "kernel_tuner", "firefly_algorithm", 100, finite[:10].tolist())
    (row,) = bench.goal_rows([ours, same, luckier])
    assert row["kernel_tuner"]["strategy"] == "pso"  # firefly ran on other seeds
    assert row["ours"]["score"] > row["kernel_tuner"]["score"]


@pytest.mark.slow
def test_cells_run_across_processes_give_the_records_of_one_process() -> None:
    common = dict(value_order="as-recorded", budgets=(10, 25), first_seed=5, repeats=3)
    cells = [
        bench.Cell(path=CACHES / name, tool="workbench", strategy=sampler, **common)
        for name in ("pnpoly_RTX_3090.json.gz", "convolution_milo_A100.json.gz")
        for sampler in ("portfolio", "random")
    ]
    one = {i: result.records for i, result in bench.run_cells(cells, jobs=1)}
    two = {i: result.records for i, result in bench.run_cells(cells, jobs=2)}
    assert one == two and sorted(one) == [0, 1, 2, 3]
    for i, cell in enumerate(cells):
        assert [r["budget"] for r in one[i]] == [10, 25]
        assert {(r["strategy"], r["repeats"]) for r in one[i]} == {(cell.strategy, 3)}
        assert len(one[i][0]["best_by_repeat"]) == 3
    # the seeds matter: another first seed gives other searches
    other = bench.run_cell(dataclasses.replace(cells[1], first_seed=50))[0]
    assert [r["best_by_repeat"] for r in other] != [r["best_by_repeat"] for r in one[1]]


@pytest.mark.kernel_tuner
def test_a_failing_kernel_tuner_strategy_is_left_out_and_bad_input_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the 15-config cache, Kernel Tuner's diff_evo raises (IndexError in its own code):
    the run goes on, and the JSON names the failed cell."""
    import json

    small = CACHES / "kernel_tuner_test_cache_time_energy_RTX4000Ada.json"
    out = tmp_path / "e.json"
    argv = ["tuner_efficiency.py", str(small), "--budgets", "5,10", "--repeats", "1",
            "--samplers", "random", "--kt-strategies", "diff_evo,random_sample",
            "--json", str(out)]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    doc = json.loads(out.read_text())
    assert {(r["tool"], r["strategy"]) for r in doc["records"]} == {
        ("workbench", "random"), ("kernel_tuner", "random_sample")
    }  # fmt: skip
    made = {r["strategy"]: r["evaluations_made"] for r in doc["records"] if r["budget"] == 10}
    assert made == {"random": 10, "random_sample": 10}
    (failed,) = doc["failed_cells"]
    assert failed["strategy"] == "diff_evo" and "IndexError" in failed["error"]
    assert "failed, left out" in capsys.readouterr().out
    for args, message in [
        ([str(small), "--budgets", "abc"], "expected integers"),
        ([str(small), "--budgets", "0"], "at least 1"),
        ([str(small), "--repeats", "0"], "at least 1"),
        ([str(small), "--tools", "bogus"], "expected workbench, kernel_tuner"),
        ([str(small), "--samplers", "nosuch"], "unknown nosuch"),
        ([str(small), "--kt-strategies", "nosuch"], "unknown nosuch"),
        ([str(tmp_path / "missing.json")], "error: "),
    ]:
        monkeypatch.setattr(sys, "argv", ["tuner_efficiency.py", *args])
        with pytest.raises(SystemExit) as stop:
            bench.main()
        assert stop.value.code == 2 and message in capsys.readouterr().err, args
