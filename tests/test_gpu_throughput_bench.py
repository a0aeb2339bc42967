"""benchmarks/gpu_throughput.py without a GPU: the H200 run's breakdown from its store, and the
simulated comparison of the two pipelines, which runs the real search loop and says it is
simulated."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from dataset_paths import DEVICE_RUNS, missing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import gpu_throughput

STORE = DEVICE_RUNS / "h200-2026-12-04" / "run2" / "store.sqlite.gz"

pytestmark = pytest.mark.skipif(not STORE.is_file(), reason=missing(STORE))


def load_bench():
    return gpu_throughput


def test_the_breakdown_finds_the_unaccounted_time_growing_with_the_output() -> None:
    bench = load_bench()
    db = bench.open_h200_store(STORE)
    costs = {label: bench.study_costs(db, label, study) for label, study in bench.BREAKDOWN}
    big, mid, reduce = costs["gemm_int8 8192^3"], costs["gemm_int8 4096^3"], costs["reduce 16M"]
    assert big.evaluations == 14 and round(big.per_eval_s, 2) == 2.69
    assert big.rest_s > 10 * (big.compile_s + big.timing_s) / 2  # the ~2 s nobody saw
    assert big.rest_s / mid.rest_s == pytest.approx(256 / 64, rel=0.1)  # bytes of the output
    assert reduce.rest_s < 0.02 and big.gpu_busy < 0.05


def test_the_simulation_runs_both_pipelines_and_says_it_is_simulated(tmp_path: Path) -> None:
    bench = load_bench()
    out = tmp_path / "throughput.json"
    assert bench.main(["--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "SIMULATED" in doc["mode"]
    results = {(r["label"], r["pipeline"]): r for r in doc["results"]}
    assert len(results) == 6
    for label in ("gemm_int8 4096^3", "gemm_int8 8192^3", "reduce 16M"):
        old, new = results[label, "old"], results[label, "new"]
        assert old["evaluations"] == new["evaluations"]  # every recorded config, both ways
        assert new["per_minute"] > old["per_minute"]
        assert old["best"] == new["best"]  # the same configs: the same best in the end
    big_old = results["gemm_int8 8192^3", "old"]
    # the old pipeline's simulated wall is the H200 run's, within its first evaluation's extra
    assert 30 < big_old["seconds"] < 41
    assert results["gemm_int8 8192^3", "new"]["gpu_busy"] > big_old["gpu_busy"]


def test_the_racing_rule_is_estimated_on_every_recorded_sample() -> None:
    bench = load_bench()
    (path,) = bench.RECORDINGS.glob("gemm_int8/*M8192_N8192_K8192.json.gz")
    r = bench.racing_estimate(path, orders=5)
    assert r.evaluated == 5 * 13  # every config after the first, in each order
    assert 0 < r.abandoned < r.evaluated and r.false_abandons == 0
    assert 0.3 < r.samples_saved < 0.9
