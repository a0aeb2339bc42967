"""benchmarks/tuner_overhead.py: per-trial accounting of ours, per-unique accounting of theirs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from dataset_paths import CACHES, needs_caches

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import tuner_overhead as bench  # noqa: E402


def test_kernel_tuner_overhead_is_divided_by_unique_configs() -> None:
    """Kernel Tuner's results repeat configs (a population revisits them); its overhead per
    unique evaluation counts every result's time once and divides by distinct configs."""
    results = [
        {"a": 1, "b": 2, "framework_time": 1.0, "strategy_time": 0.5},
        {"a": 1, "b": 2, "framework_time": 0.1, "strategy_time": 0.0},  # a revisit
        {"a": 2, "b": 2, "framework_time": 2.0, "strategy_time": 0.5},
        {},  # Kernel Tuner leaves empty results for configs it skipped
        {"a": 3, "b": 2, "framework_time": 0.4},
    ]
    got = bench.per_unique(results, ["a", "b"])
    assert got["unique"] == 3 and got["results"] == 4
    assert got["total_ms"] == pytest.approx(4.5)
    assert got["per_unique_ms"] == pytest.approx(1.5)
    assert got["median_per_result_ms"] == pytest.approx((0.4 + 1.5) / 2)


@needs_caches
def test_workbench_overhead_times_every_new_evaluation() -> None:
    got = bench.workbench_overhead(CACHES / "pnpoly_RTX_3090.json.gz", 30, "portfolio", 0)
    assert got["evaluations"] == 30
    per_trial = got["per_trial_ms"]
    assert len(per_trial) == 30 and min(per_trial) > 0
    assert got["first_ms"] == per_trial[0]  # the setup is in the first evaluation's share
    assert got["mean_ms"] == pytest.approx(sum(per_trial) / 30)
    assert 0 < got["store_mean_ms"] < got["mean_ms"]  # one insert and commit per evaluation


def test_same_strategy_twins_are_our_samplers() -> None:
    """Each Kernel Tuner strategy compared like for like names one of our samplers, so that a
    renamed sampler cannot silently drop the comparison."""
    from workbench.search.samplers import SAMPLERS

    assert bench.SAME_STRATEGY, "random sampling is compared strategy against strategy"
    for strategy, sampler in bench.SAME_STRATEGY.items():
        assert strategy in bench.KT_DEFAULT
        assert sampler in SAMPLERS


def test_our_overhead_per_unique_counts_setup_and_closing() -> None:
    """The first ``n`` evaluations' shares (the set-up in the first) plus the store's closing,
    over ``n``; nothing evaluated is no number, not a division by zero."""
    import math

    import numpy as np

    assert bench.ours_per_unique(np.array([40.0, 1.0, 1.0, 9.0]), 2.0, 3) == pytest.approx(
        (40 + 1 + 1 + 2) / 3
    )
    assert math.isnan(bench.ours_per_unique(np.array([]), 2.0, 0))


@needs_caches
@pytest.mark.parametrize(
    "args,message",
    [
        (["--repeats", "0"], "at least 1"),
        (["--trials", "0"], "at least 1"),
        (["--sampler", "nosuch"], "ours are portfolio"),
        (["/nonexistent.json"], "error: /nonexistent.json: cannot read"),
        ([str(CACHES / "convolution_milo_A100_T4.json.gz")], "reads only its own cache files"),
    ],
)
@pytest.mark.kernel_tuner
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Nothing is measured (no goal reported met on nothing, as NaN comparisons did)."""
    argv = ["tuner_overhead.py", *args, "--kt-strategies", "random_sample"]
    monkeypatch.setattr(sys, "argv", [*argv, "--json", str(tmp_path / "o.json")])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "o.json").exists()
