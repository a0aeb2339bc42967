"""Metric names checked offline against the chip (Perfworks host library of the ncu-report
wheel, no GPU), and the metric sets themselves."""

from __future__ import annotations

import pytest
from dataset_paths import REPORTS, needs_reports

from workbench.profile import metrics as metrics_mod
from workbench.profile import nvperf
from workbench.profile.chips import chip_for_cc, chip_for_id, chip_for_name, chip_for_preset
from workbench.profile.errors import MetricNameError
from workbench.profile.metrics import (
    MetricSet,
    declared_names,
    metrics_of,
    resolve,
    validate_names,
)
from workbench.profile.nvperf import NCU_SIDE_METRICS, catalog, is_ncu_side, supported_chips

#: The chips of the GPUs this workbench targets (A100, A40/RTX 3090, L40S, H100/H200, T4).
CHIPS = ("GA100", "GA102", "AD102", "GH100", "TU104")


def test_the_perfworks_library_runs_offline() -> None:
    chips = supported_chips()
    assert {"GA100", "GH100", "TU106"} <= set(chips)
    gh100 = catalog("GH100")
    assert gh100.base_metrics["dram__bytes"] == "counter"
    assert gh100.base_metrics["smsp__thread_inst_executed_per_inst_executed"] == "ratio"
    assert len(gh100.base_metrics) > 1000


@pytest.mark.parametrize("chip", ["GA100", "GH100"])
def test_real_names_are_accepted(chip: str) -> None:
    names = [
        "dram__bytes.sum.per_second",
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
        "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
        "sm__ops_path_tensor_src_int8.sum.per_cycle_elapsed",
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        "smsp__sass_average_branch_targets_threads_uniform.pct",
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio",
        "lts__t_sector_hit_rate.pct",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "launch__registers_per_thread",  # Nsight Compute's own, from the curated list
    ]
    assert "Perfworks" in validate_names(names, chip)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("dram__bytez.sum", "dram__bytes.sum"),
        ("dram__bytes.sum.per_secnd", "dram__bytes.sum.per_second"),
        ("smsp__thread_inst_executed_per_inst_executd.ratio", "per_inst_executed.ratio"),
        ("launch__registers_per_thred", "launch__registers_per_thread"),
    ],
)
def test_typos_are_refused_with_a_suggestion(name: str, hint: str) -> None:
    for chip in ("GA100", "GH100"):
        with pytest.raises(MetricNameError, match="unknown metric name") as info:
            validate_names(["lts__t_sector_hit_rate.pct", name], chip)
        assert list(info.value.unknown) == [name]
        assert any(hint in s for s in info.value.unknown[name])


def test_a_hopper_metric_is_refused_for_an_a100() -> None:
    fp8 = "sm__ops_path_tensor_src_fp8.sum.per_cycle_elapsed"
    validate_names([fp8], "GH100")
    with pytest.raises(MetricNameError, match="GA100"):
        validate_names([fp8], "GA100")


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("metric_set", list(MetricSet))
def test_every_set_resolves_on_every_target_chip(chip: str, metric_set: MetricSet) -> None:
    resolved = resolve(metric_set, chip)
    assert resolved.collect and not any(is_ncu_side(n) for n in resolved.collect)
    assert set(resolved.collect) <= set(resolved.expected)
    optional = {m.name for m in metrics_of(metric_set) if m.optional}
    assert set(resolved.skipped) <= optional
    occupancy = {m.name for m in metrics_of(MetricSet.OCCUPANCY)}
    assert occupancy <= set(resolved.expected)  # every set carries occupancy and launch


def test_chip_specific_tensor_paths() -> None:
    hopper = resolve(MetricSet.ROOFLINE, "GH100")
    ampere = resolve(MetricSet.ROOFLINE, "GA100")
    assert "sm__ops_path_tensor_src_fp8.sum.per_cycle_elapsed" in hopper.collect
    assert "sm__ops_path_tensor_src_fp8.sum.per_cycle_elapsed" in ampere.skipped
    assert "sm__ops_path_tensor_src_fp16_dst_fp32.sum.per_cycle_elapsed" in ampere.collect
    assert "sm__ops_path_tensor_src_int8.sum.per_cycle_elapsed" in ampere.collect


def test_every_optional_metric_exists_somewhere() -> None:
    """An optional name unknown to every chip would be a typo hiding behind 'optional'."""
    for m in metrics_of(MetricSet.FULL):
        if m.optional:
            assert any(catalog(c).known(m.name) for c in CHIPS), m.name


def test_extra_names_are_never_optional() -> None:
    with pytest.raises(MetricNameError, match="dram__bytez"):
        resolve(MetricSet.OCCUPANCY, "GH100", ["dram__bytez.sum"])
    extra = resolve(MetricSet.OCCUPANCY, "GH100", ["dram__bytes_read.sum"])
    assert "dram__bytes_read.sum" in extra.collect


@needs_reports
def test_curated_ncu_side_names_appear_in_real_reports() -> None:
    from workbench.profile.report import load_report

    seen: set[str] = set()
    for path in REPORTS.glob("*.ncu-rep"):
        for k in load_report(path).kernels:
            seen |= set(k.metrics) | set(k.strings)
    assert seen >= NCU_SIDE_METRICS


def test_without_perfworks_the_declared_names_are_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unavailable(chip: str) -> None:
        raise nvperf.NvperfUnavailable("libnvperf_host.so not found (test)")

    monkeypatch.setattr(metrics_mod, "catalog", unavailable)
    source = validate_names(sorted(declared_names()), "GH100")
    assert "declared metric sets" in source and "not found (test)" in source
    with pytest.raises(MetricNameError, match=r"did you mean dram__bytes\.sum"):
        validate_names(["dram__bytez.sum"], "GH100")
    resolved = resolve(MetricSet.ROOFLINE, "GA100")
    assert not resolved.skipped  # optional names cannot be told apart without the library


def test_chip_names() -> None:
    assert chip_for_preset("h200") == chip_for_preset("H100") == "GH100"
    assert chip_for_preset("a100") == "GA100" and chip_for_preset("nope") is None
    assert chip_for_cc(90) == "GH100" and chip_for_cc(12) is None
    assert chip_for_name("NVIDIA H200") == "GH100"
    assert chip_for_name("NVIDIA A100-SXM4-80GB") == "GA100"
    assert chip_for_name("NVIDIA A10G") == "GA102"
    assert chip_for_name("Some Future GPU", cc=80) == "GA100"
    assert chip_for_id(0x180) == "GH100" and chip_for_id(0x999, cc=86) == "GA102"
