"""Roofline math against hand-computed cases and against raw metrics of real A100 reports."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
from dataset_paths import REPORTS, needs_reports
from h200_compare import CEILINGS_JSON, COMPARE_JSON

from workbench.devices import DEVICES
from workbench.roofline import (
    Ceiling,
    CeilingFileError,
    CeilingKind,
    Ceilings,
    CeilingSource,
    achieved_from_metrics,
    achieved_from_timing,
    attainable,
    bandwidth_fractions,
    datasheet_ceilings,
    measured_ceilings,
    ncu_ceilings,
    ridge_point,
    roofline_points,
)


def _ceiling(name: str, value: float, source: CeilingSource = CeilingSource.DATASHEET) -> Ceiling:
    kind = CeilingKind.MEMORY if name in ("dram", "l2", "l1") else CeilingKind.COMPUTE
    return Ceiling(name, kind, value, source, "test")


def test_rates_read_in_their_unit_with_three_digits_below_a_hundred() -> None:
    """The H200 comparison's tuned rates as a table writes them: 1,076 TOPS at 4096^3, and
    28.1 at the decode shape M=16 (not 28: a rate below a hundred keeps three digits; a
    memory-bound kernel's compute rate of 0.96 TFLOP/s is not 1), never an exponent."""
    doc = json.loads(COMPARE_JSON.read_text())
    tuned = {s["label"]: s["results"][0]["throughput"] for s in doc["shapes"]}
    int8 = _ceiling("tensor_int8", 1.0)
    assert int8.rate_text(tuned["M=4096,N=4096,K=4096"] * 1e12) == "1,076 TOPS"
    assert int8.rate_text(tuned["M=16,N=4096,K=4096"] * 1e12) == "28.1 TOPS"
    fp32 = _ceiling("fp32", 1.0)
    assert fp32.rate_text(0.9634e12) == "0.963 TFLOP/s"
    assert fp32.rate_text(9.996e12) == "10.0 TFLOP/s"  # (rounding carries: three digits)
    assert _ceiling("dram", 1.0).rate_text(4.27e12) == "4,270 GB/s"


def test_ridge_point_attainable_and_bound_by_hand() -> None:
    compute, memory = _ceiling("fp32", 20e12), _ceiling("dram", 2e12)
    assert ridge_point(compute, memory) == 10.0  # 20 TFLOP/s / 2 TB/s
    assert attainable(2.5, compute, memory) == 5e12  # 2.5 FLOP/B x 2 TB/s
    assert attainable(40.0, compute, memory) == 20e12  # flat roof
    assert attainable(10.0, compute, memory) == 20e12  # exactly at the ridge
    # a kernel doing 1e9 FLOP on 4e8 bytes in 1 ms
    achieved = achieved_from_timing(1e9, 4e8, 1e-3, "fp32")
    assert achieved.ops_per_s == {"fp32": 1e12} and achieved.bytes_per_s == {"dram": 4e11}
    assert achieved.intensity("fp32", "dram") == 2.5
    (point,) = roofline_points(achieved, Ceilings([compute, memory]))
    assert point.bound == "memory" and point.ridge == 10.0
    assert point.attainable == 5e12 and point.fraction == pytest.approx(0.2)
    assert bandwidth_fractions(achieved, Ceilings([memory])) == {"dram": pytest.approx(0.2)}


def test_event_timing_refuses_a_zero_time() -> None:
    with pytest.raises(ValueError, match="positive"):
        achieved_from_timing(1.0, 1.0, 0.0)


def test_hierarchical_levels_and_precisions_from_synthetic_metrics() -> None:
    m = {
        "gpu__time_duration.sum": 2_000.0,  # 2 us
        "smsp__cycles_elapsed.avg.per_second": 1.5e9,
        "sm__cycles_elapsed.avg.per_second": 1.5e9,
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed": 10.0,
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed": 20.0,
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed": 100.0,
        "sm__ops_path_tensor_src_int8.sum.per_cycle_elapsed": 4096.0,
        "sm__ops_path_tensor_src_fp16_dst_fp16.sum.per_cycle_elapsed": 100.0,
        "sm__ops_path_tensor_src_fp16_dst_fp32.sum.per_cycle_elapsed": 300.0,
        "dram__bytes.sum.per_second": 1e12,
        "lts__t_bytes.sum.per_second": 3e12,
        "l1tex__t_bytes.sum": 16e6,  # bytes over 2 us = 8e12 B/s
    }
    a = achieved_from_metrics(m)
    assert a.duration_s == pytest.approx(2e-6)
    assert a.ops_per_s["fp32"] == pytest.approx((10 + 20 + 2 * 100) * 1.5e9)
    assert a.ops_per_s["tensor_int8"] == pytest.approx(4096 * 1.5e9)
    assert a.ops_per_s["tensor_fp16"] == pytest.approx((100 + 300) * 1.5e9)  # Ampere: 2 paths
    assert a.bytes_per_s == {"dram": 1e12, "l2": 3e12, "l1": pytest.approx(8e12)}
    assert a.main_precision == "tensor_int8"
    assert a.intensity("tensor_int8", "dram") == pytest.approx(4096 * 1.5e9 / 1e12)
    assert "fp64" not in a.ops_per_s and any("dadd" in n for n in a.missing)


def _kernel(file: str, name: str):  # type: ignore[no-untyped-def]
    from workbench.profile.report import load_report

    (k,) = [k for k in load_report(REPORTS / file).kernels if k.function_name == name][:1]
    return k


@needs_reports
def test_a100_reference_gemm_recomputed_by_hand() -> None:
    k = _kernel("panjd123_report-s8.ncu-rep", "ReferenceGemm_kernel")
    v = k.value
    seconds = v("gpu__time_duration.sum") * 1e-9
    fp32 = (
        v("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed")
        + v("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed")
        + 2 * v("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed")
    ) * v("smsp__cycles_elapsed.avg.per_second")
    a = achieved_from_metrics(k.metrics)
    assert a.ops_per_s["fp32"] == pytest.approx(fp32)
    assert fp32 == pytest.approx(3.494e11, rel=1e-3)  # 164.07 FFMA/cycle x 2 x 1.0648 GHz
    # DRAM: the rate ncu reports equals the bytes moved over the duration
    dram = v("dram__bytes.sum.per_second")
    assert a.bytes_per_s["dram"] == dram
    moved = v("dram__bytes_read.sum") + v("dram__bytes_write.sum")
    assert dram == pytest.approx(moved / seconds, rel=1e-3)
    # L2 from sectors (the report has no lts__t_bytes): 32 bytes a sector
    assert a.bytes_per_s["l2"] == pytest.approx(v("lts__t_sectors.sum.per_second") * 32)
    assert a.bytes_per_s["l2"] == pytest.approx(v("lts__t_sectors.sum") * 32 / seconds, rel=1e-3)
    # physical sanity: below the A100's DRAM peak, by ncu's own peak and by the datasheet
    peak = v("dram__bytes.sum.peak_sustained") * v("dram__cycles_elapsed.avg.per_second")
    assert peak == pytest.approx(1.935e12, rel=0.01)  # A100 80GB PCIe: 1,935 GB/s
    assert 0 < a.bytes_per_s["dram"] < peak
    assert a.bytes_per_s["dram"] < DEVICES["a100"].dram_bandwidth_gbs * 1e9
    # FP32 peak: 108 SMs x 64 lanes = 6912 FFMA/cycle, x 2 FLOP x the profiled clock
    ceilings = Ceilings(ncu_ceilings(k.metrics))
    fp32_roof = ceilings.best("fp32")
    assert fp32_roof is not None and fp32_roof.source is CeilingSource.NCU
    assert v("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained") == 6912
    assert fp32_roof.value == pytest.approx(6912 * 2 * v("sm__cycles_elapsed.avg.per_second"))
    assert fp32 < fp32_roof.value
    # intensity and the bound: 127 FLOP per DRAM byte, right of the ridge (~7.6)
    point = next(
        p for p in roofline_points(a, ceilings) if (p.precision, p.level) == ("fp32", "dram")
    )
    assert point.intensity == pytest.approx(fp32 / dram)
    assert point.ridge == pytest.approx(fp32_roof.value / peak)
    assert point.bound == "compute" and 0 < point.fraction < 1


@needs_reports
def test_a100_fp64_tree_traversal_recomputed_by_hand() -> None:
    k = _kernel("bwd29_profileMSDKT23.out.ncu-rep", "nodeByPoint5")
    v = k.value
    fp64 = (
        v("smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed")
        + v("smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed")
        + 2 * v("smsp__sass_thread_inst_executed_op_dfma_pred_on.sum.per_cycle_elapsed")
    ) * v("smsp__cycles_elapsed.avg.per_second")
    a = achieved_from_metrics(k.metrics)
    assert a.ops_per_s["fp64"] == pytest.approx(fp64) and a.main_precision == "fp64"
    assert a.ops_per_s["fp32"] == 0.0
    assert 0 < a.bytes_per_s["dram"] < DEVICES["a100"].dram_bandwidth_gbs * 1e9
    assert a.bytes_per_s["l1"] > 0 and any("l1:" in n for n in a.notes)


@needs_reports
def test_the_nan_profile_gives_no_figures_and_no_ceilings() -> None:
    k = _kernel("flyinglandlord_profile.ncu-rep", "flash_fwd_kernel")
    a = achieved_from_metrics(k.metrics)
    assert a.duration_s is None and not a.ops_per_s and not a.bytes_per_s
    assert "gpu__time_duration.sum" in a.missing
    assert ncu_ceilings(k.metrics) == ()  # peaks of 0 and NaN clocks are no roofs


@needs_reports
def test_a100_int8_gemm_l2_roof_derived_from_sector_peaks_by_hand() -> None:
    # CUTLASS int8 GEMM on an A100: no lts__t_bytes peak, only sectors per cycle per slice
    k = _kernel("panjd123_report.ncu-rep", "Kernel")
    v = k.value
    assert "lts__t_bytes.sum.peak_sustained" not in k.metrics
    assert v("lts__t_sectors.avg.peak_sustained") == 3.0  # sectors/cycle per L2 slice
    assert v("device__attribute_l2s_count") == 80.0
    assert v("lts__cycles_elapsed.sum") / v("lts__cycles_elapsed.avg") == 80.0  # ncu's units
    assert (v("lts__cycles_elapsed.avg"), v("gpu__time_duration.sum")) == (11063.0, 11168.0)
    # 3 sectors x 80 slices x 32 B x (11063 cycles / 11.168 us = 0.9906 GHz) = 7.608 TB/s
    by_hand = 3 * 80 * 32 * 11063 / 11168e-9
    ceilings = Ceilings(ncu_ceilings(k.metrics))
    l2 = ceilings.best("l2")
    assert l2 is not None and l2.source is CeilingSource.NCU_DERIVED
    assert l2.value == pytest.approx(by_hand) and by_hand == pytest.approx(7.6078e12, rel=1e-4)
    assert "(ncu report: derived from lts__t_sectors.avg.peak_sustained 3 sectors/cycle" in l2.label
    assert "lts clock 0.991 GHz" in l2.label
    # ncu's own share of peak, computed per cycle, agrees with achieved / derived roof
    share = v("lts__t_sectors.sum.pct_of_peak_sustained_elapsed") / 100
    assert bandwidth_fractions(achieved_from_metrics(k.metrics), ceilings)["l2"] == (
        pytest.approx(share, rel=1e-9)
    )
    # the report holds no L1 sector or byte peak: no L1 roof is made up
    assert not any(n.startswith("l1tex__t_") and n.endswith(".peak_sustained") for n in k.metrics)
    assert ceilings.best("l1") is None and ceilings.best("dram").source is CeilingSource.NCU  # type: ignore[union-attr]


@needs_reports
@pytest.mark.parametrize(
    ("file", "how"),
    [
        ("flyinglandlord_profile.ncu-rep", "lts__cycles_elapsed.sum / 80"),  # H800: no .avg
        ("thedavidchu_profile.ncu-rep", "lts__t_sectors.sum.per_second / "),  # no lts cycles
        ("bwd29_profileMSDKT23.out.ncu-rep", "lts__t_sectors.sum.per_second / "),
    ],
)
def test_l2_roof_from_every_clock_a_report_records(file: str, how: str) -> None:
    from workbench.profile.report import load_report

    for k in load_report(REPORTS / file).kernels:
        share = k.value("lts__t_sectors.sum.pct_of_peak_sustained_elapsed") or k.value(
            "lts__t_sectors.avg.pct_of_peak_sustained_elapsed"
        )
        if share is None:  # the NaN flash-attention launch: no roof, no crash
            assert Ceilings(ncu_ceilings(k.metrics)).best("l2") is None
            continue
        ceilings = Ceilings(ncu_ceilings(k.metrics))
        l2 = ceilings.best("l2")
        assert l2 is not None and how in l2.label
        achieved = achieved_from_metrics(k.metrics)
        fraction = bandwidth_fractions(achieved, ceilings)["l2"]
        assert fraction == pytest.approx(share / 100, rel=1e-9)


def test_sector_peaks_by_hand_and_exact_byte_peaks_first() -> None:
    # synthetic metrics: an L1 sector peak as a newer report would hold it
    m = {
        "l1tex__t_sectors.avg.peak_sustained": 4.0,
        "device__attribute_multiprocessor_count": 108.0,
        "l1tex__cycles_elapsed.avg.per_second": 1.4e9,
        "lts__t_sectors.avg.peak_sustained": 3.0,
        "device__attribute_l2s_count": 80.0,
        "lts__cycles_elapsed.avg.per_second": 1.0e9,
        "lts__t_bytes.sum.peak_sustained": 5120.0,
    }
    by_name = {c.name: c for c in ncu_ceilings(m)}
    assert by_name["l1"].value == 4 * 108 * 32 * 1.4e9  # 19.35 TB/s
    assert by_name["l1"].source is CeilingSource.NCU_DERIVED and "108 SMs" in by_name["l1"].label
    assert by_name["l2"].value == 5120 * 1.0e9 and by_name["l2"].source is CeilingSource.NCU
    # without a clock or a unit count nothing is derived; a zero rate gives no clock
    assert ncu_ceilings({"lts__t_sectors.avg.peak_sustained": 3.0}) == ()
    idle = {
        "lts__t_sectors.avg.peak_sustained": 3.0,
        "device__attribute_l2s_count": 80.0,
        "lts__t_sectors.sum.per_second": 0.0,
        "lts__t_sectors.avg.per_cycle_elapsed": 0.0,
    }
    assert ncu_ceilings(idle) == ()


def test_datasheet_ceilings_of_the_h200() -> None:
    by_name = {c.name: c for c in datasheet_ceilings(DEVICES["h200"])}
    assert by_name["dram"].value == 4.8e12 and by_name["dram"].unit == "B/s"
    assert by_name["tensor_int8"].value == 1979e12 and by_name["tensor_int8"].unit == "OP/s"
    assert by_name["fp32"].value == 67e12
    assert all(c.source is CeilingSource.DATASHEET for c in by_name.values())
    assert "datasheet" in by_name["dram"].label and "H200" in by_name["dram"].label
    # int8 ridge on the datasheet: 1979e12 / 4.8e12 = 412 operations per byte
    assert ridge_point(by_name["tensor_int8"], by_name["dram"]) == pytest.approx(412.29, rel=1e-4)


def _measured(tmp_path: Path, **over: object) -> Path:
    doc: dict[str, object] = {
        "date": "2026-01-01T00:00:00+00:00",
        "gpu": "NVIDIA H200",
        "copy": {"bytes": 4 << 30, "median_ms": 2.0, "gbs_read_plus_write": 4300.0},
        "int8_matmul": {"n": 8192, "median_ms": 0.8, "tops": 1370.0, "via": "torch._int_mm"},
        "fp16_matmul": {"n": 8192, "median_ms": 1.4, "tflops": 790.0, "via": "torch.matmul"},
    }
    doc.update(over)
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(doc))
    return path


def test_measured_ceilings_win_over_the_datasheet(tmp_path: Path) -> None:
    measured = measured_ceilings(_measured(tmp_path))
    assert {c.name: c.value for c in measured} == {
        "dram": 4.3e12,
        "tensor_int8": 1.37e15,
        "tensor_fp16": 7.9e14,
    }
    all_ceilings = Ceilings(datasheet_ceilings(DEVICES["h200"])).add(measured)
    assert all_ceilings.best("dram").source is CeilingSource.MEASURED  # type: ignore[union-attr]
    assert all_ceilings.best("fp32").source is CeilingSource.DATASHEET  # type: ignore[union-attr]
    assert "torch._int_mm" in all_ceilings.best("tensor_int8").label  # type: ignore[union-attr]


def test_bad_ceiling_files(tmp_path: Path) -> None:
    with pytest.raises(CeilingFileError, match="cannot read"):
        measured_ceilings(tmp_path / "absent.json")
    with pytest.raises(CeilingFileError, match=r"\[copy.gbs_read_plus_write\]"):
        measured_ceilings(_measured(tmp_path, copy={"gbs_read_plus_write": -1}))
    path = tmp_path / "other.json"
    path.write_text("{}")
    with pytest.raises(CeilingFileError, match="no ceiling"):
        measured_ceilings(path)


def _ceilings_script() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "scripts" / "ceilings.py"
    spec = importlib.util.spec_from_file_location("ceilings_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_int8_ceiling_is_the_fastest_library_the_script_timed(tmp_path: Path) -> None:
    """scripts/ceilings.py times every int8 library and the file's roof is the fastest, with
    the first H200 lease's timings at 8192^3: torch._int_mm from its ceilings.json (940 TOPS,
    the roof that run used), cuBLAS gemmEx from its compare (1,516 TOPS)."""
    script = _ceilings_script()
    lease = json.loads(CEILINGS_JSON.read_text())
    compare = json.loads(COMPARE_JSON.read_text())
    int_mm = lease["int8_matmul"]
    n = int_mm["n"]
    (shape,) = [s for s in compare["shapes"] if s["shape"] == {"M": n, "N": n, "K": n}]
    cublas = next(r for r in shape["results"] if r["name"] == "cublas")
    ops = 2.0 * n**3
    runs = [
        script.library_run(via, ms, repeats, ops, "tops", 1e12)
        for via, ms, repeats in (
            (int_mm["via"], int_mm["median_ms"], int_mm["repeat_ms"]),
            (cublas["title"], cublas["median_ms"], [cublas["median_ms"]]),
        )
    ]
    section = script.fastest_section(runs, "tops", n=n)
    assert section["via"] == cublas["title"] and len(section["libraries"]) == 2
    doc = {"date": lease["date"], "gpu": lease["gpu"], "int8_matmul": section}
    path = tmp_path / "ceilings.json"
    path.write_text(json.dumps(doc))
    (roof,) = measured_ceilings(path)
    assert roof.value == pytest.approx(cublas["throughput"] * 1e12)  # 1,516 TOPS, not 940
    assert f"via {cublas['title']}, the fastest of " in roof.label
    assert f"{int_mm['via']} {int_mm['tops']:,.0f} TOPS" in roof.label
    # the lease's own file (one library, written before the list) loads as it did
    old = {c.name: c for c in measured_ceilings(CEILINGS_JSON)}
    assert old["tensor_int8"].value == pytest.approx(int_mm["tops"] * 1e12)
    section["libraries"][1]["tops"] = 0
    path.write_text(json.dumps(doc))
    with pytest.raises(CeilingFileError, match=r"\[int8_matmul.libraries\[1\].tops\]"):
        measured_ceilings(path)


def test_the_most_trusted_source_gives_its_highest_roof() -> None:
    low = _ceiling("tensor_int8", 940e12, CeilingSource.MEASURED)
    high = _ceiling("tensor_int8", 1516e12, CeilingSource.MEASURED)
    sheet = _ceiling("tensor_int8", 1979e12)
    assert Ceilings([low, high, sheet]).best("tensor_int8") is high
    assert Ceilings([high, low, sheet]).best("tensor_int8") is high


def test_a_preset_is_found_by_the_exact_gpu_the_driver_names() -> None:
    from workbench.devices import preset_named

    assert preset_named("NVIDIA H200") is DEVICES["h200"]
    assert preset_named("NVIDIA GeForce RTX 3090") is DEVICES["rtx3090"]
    assert preset_named("NVIDIA A100-SXM4-80GB") is DEVICES["a100"]
    assert preset_named("Tesla T4") is DEVICES["t4"]
    assert preset_named("NVIDIA H100 80GB HBM3") is DEVICES["h100"]  # the SXM5 part's name
    # other parts of a family have other peaks: no preset rather than a wrong roofline
    others = (
        "NVIDIA H200 NVL",
        "NVIDIA A100-PCIE-40GB",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA H100 PCIe",
    )
    for name in (*others, "NVIDIA GeForce RTX 4000 Ada", "NVIDIA RTX A4000", "Test GPU"):
        assert preset_named(name) is None


def test_a_tuned_configs_share_of_the_roofline_bound_by_hand() -> None:
    from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
    from workbench.search.tune_plan import roofline_of
    from workbench.spaces import Space, load_kernel
    from workbench.spaces.launch import work_counts

    space = Space(load_kernel("gemm_int8"))
    config = space.spec.default_config()
    ops, nbytes = work_counts(space, config)
    h200 = DEVICES["h200"]
    bound = roofline_of(space, DeviceInfo("NVIDIA H200"))
    assert bound is not None
    # a 4096^3 int8 GEMM is right of the ridge: bound by the int8 tensor-core peak
    assert ops / nbytes > h200.peak_int8_tops * 1e12 / (h200.dram_bandwidth_gbs * 1e9)
    b = bound(config, Measurement(TrialOutcome.OK, value=0.1))  # no SM clock recorded
    assert b is not None and b.limit == "compute"
    assert b.fraction == pytest.approx(ops / 1e-4 / (h200.peak_int8_tops * 1e12))
    assert any("tensor_int8" in c and "H200" in c for c in b.ceilings)
    # a GPU without a preset of its own gets no share
    assert roofline_of(space, DeviceInfo("NVIDIA H200 NVL")) is None
