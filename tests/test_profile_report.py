"""Reading real public ``.ncu-rep`` files in place, with no GPU (see their SOURCES.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dataset_paths import REPORTS, needs_reports

from workbench.profile.errors import ReportError
from workbench.profile.importing import import_report, incomplete_note
from workbench.profile.metrics import MetricSet, missing_by_set
from workbench.profile.report import check_container, load_report

pytestmark = needs_reports

#: file -> (kernels, chip, cc, device) from SOURCES.md's Content table.
EXPECTED = {
    "panjd123_report.ncu-rep": (3, "GA100", 80, "NVIDIA A100 80GB PCIe"),
    "panjd123_report-s8.ncu-rep": (2, "GA100", 80, "NVIDIA A100 80GB PCIe"),
    "flyinglandlord_profile.ncu-rep": (5, "GH100", 90, "NVIDIA H800"),
    "eschnett_profile.ncu-rep": (5, "GA102", 86, "NVIDIA A40"),
    "bwd29_profileMSDKT23.out.ncu-rep": (4, "GA100", 80, "NVIDIA A100-PCIE-40GB"),
    "thedavidchu_profile.ncu-rep": (1, "GA104", 86, "NVIDIA GeForce RTX 3070"),
    "MgMap_profile.ncu-rep": (8, "TU106", 75, "NVIDIA GeForce RTX 2060 with Max-Q Design"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_public_report_parses(name: str) -> None:
    count, chip, cc, device = EXPECTED[name]
    report = load_report(REPORTS / name)
    assert len(report.kernels) == count
    assert len(report.sha256) == 64
    for k in report.kernels:
        assert (k.chip, k.cc, k.device) == (chip, cc, device)
        assert k.mangled_name and k.demangled_name and k.function_name
        assert k.metrics  # numbers, with NaN turned into None
        assert all(v is None or v == v for v in k.metrics.values())
    assert check_container(REPORTS / name) is None


def test_cutlass_kernels_sharing_the_short_name_are_told_apart() -> None:
    report = load_report(REPORTS / "panjd123_report.ncu-rep")
    assert {k.function_name for k in report.kernels} == {"Kernel"}
    assert len({k.mangled_name for k in report.kernels}) == 2  # two GEMMs, one B2bGemm
    b2b = report.find("B2bGemm")
    assert len(b2b) == 1 and "B2bMmaMultistageSmemAccumulator" in b2b[0].demangled_name
    gemms = [k for k in report.kernels if k not in b2b]
    assert [k.value("launch__registers_per_thread") for k in gemms] == [188, 188]
    assert b2b[0].value("launch__registers_per_thread") == 254
    by_mangled = report.find(b2b[0].mangled_name)
    assert by_mangled == b2b
    # NVTX push/pop ranges of the launches survive
    assert report.kernels[0].nvtx == ("<default domain>@Non-fused-GEMM",)
    assert b2b[0].nvtx == ("<default domain>@Fused-GEMM",)


def test_tensor_and_simt_kernels_in_one_file() -> None:
    report = load_report(REPORTS / "panjd123_report-s8.ncu-rep")
    gemm, reference = report.kernels
    imma = "sm__inst_executed_pipe_tensor_op_imma.avg.pct_of_peak_sustained_active"
    assert gemm.value(imma) == pytest.approx(5.70, abs=0.01)
    assert reference.value(imma) == 0.0
    assert reference.function_name == "ReferenceGemm_kernel"


def test_h800_flash_attention_all_nan_is_reported_missing_not_a_crash() -> None:
    report = load_report(REPORTS / "flyinglandlord_profile.ncu-rep")
    flash = report.find("flash_fwd_kernel")
    assert len(flash) == 1
    k = flash[0]
    assert not k.complete
    assert k.value("gpu__time_duration.sum") is None
    assert "gpu__time_duration.sum" in k.nan
    assert k.value("profiler__replayer_passes") == 1.0
    assert k.value("launch__registers_per_thread") is None  # absent altogether
    assert "dram__bytes.sum.per_second" in k.missing(["dram__bytes.sum.per_second"])
    note = incomplete_note(k)
    assert note is not None and "NaN" in note
    assert all(e.complete for e in report.kernels if e is not k)


def test_turing_basic_set_misses_most_metrics_per_set() -> None:
    k = load_report(REPORTS / "MgMap_profile.ncu-rep").kernels[0]
    missing = missing_by_set(n for n, v in k.metrics.items() if v is not None)
    for s in ("roofline", "divergence", "memory"):
        assert len(missing[s]) > 10, s
    assert "smsp__thread_inst_executed_per_inst_executed.ratio" in missing["divergence"]
    assert "dram__bytes.sum.per_second" in missing["roofline"]
    # the basic set has occupancy: only a few occupancy metrics are absent
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" not in missing["occupancy"]
    _, records = import_report(REPORTS / "MgMap_profile.ncu-rep", metric_set=MetricSet.DIVERGENCE)
    assert len(records) == 8
    assert "smsp__thread_inst_executed_per_inst_executed.ratio" in records[0].missing


@pytest.mark.parametrize(
    "cut", [3, 100, 1000, 50_000, 0.5, -1], ids=["3B", "100B", "1kB", "50kB", "half", "last-1"]
)
def test_truncated_copies_are_refused(tmp_path: Path, cut: float) -> None:
    data = (REPORTS / "bwd29_profileMSDKT23.out.ncu-rep").read_bytes()
    n = int(len(data) * cut) if isinstance(cut, float) else (len(data) + cut if cut < 0 else cut)
    path = tmp_path / "cut.ncu-rep"
    path.write_bytes(data[:n])
    with pytest.raises(ReportError, match=r"cut\.ncu-rep: .*(truncated|damaged|not an Nsight)"):
        load_report(path)


def test_half_a_report_would_load_silently_without_the_block_walk(tmp_path: Path) -> None:
    """Why :func:`check_container` exists: ncu_report loads 2 of the 4 kernels of a cut file."""
    import ncu_report

    data = (REPORTS / "bwd29_profileMSDKT23.out.ncu-rep").read_bytes()
    path = tmp_path / "half.ncu-rep"
    path.write_bytes(data[: len(data) // 2])
    context = ncu_report.load_report(str(path))
    assert context.num_ranges() == 1 and context.range_by_idx(0).num_actions() == 2
    assert check_container(path) is not None


def test_random_bytes_empty_and_missing_files(tmp_path: Path) -> None:
    noise = tmp_path / "noise.ncu-rep"
    noise.write_bytes(os.urandom(4096))
    with pytest.raises(ReportError, match="not an Nsight Compute report"):
        load_report(noise)
    fake = tmp_path / "fake.ncu-rep"
    fake.write_bytes(b"NVR\x00" + os.urandom(4096))  # the magic and garbage
    with pytest.raises(ReportError, match=r"fake\.ncu-rep"):
        load_report(fake)
    empty = tmp_path / "empty.ncu-rep"
    empty.write_bytes(b"")
    with pytest.raises(ReportError, match="not an Nsight Compute report"):
        load_report(empty)
    with pytest.raises(ReportError, match="no such file"):
        load_report(tmp_path / "absent.ncu-rep")


def test_import_selects_launches_by_name() -> None:
    _, records = import_report(REPORTS / "panjd123_report.ncu-rep", select="B2bGemm")
    assert len(records) == 1 and records[0].kernel == "Kernel"
    assert records[0].source == "import" and records[0].report_index == 2
    with pytest.raises(ReportError, match="no launch matches 'nothing'"):
        import_report(REPORTS / "panjd123_report.ncu-rep", select="nothing")
