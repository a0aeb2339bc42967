"""Divergence, memory-access and occupancy figures: hand-computed cases and real reports."""

from __future__ import annotations

import pytest
from dataset_paths import REPORTS, needs_reports

from workbench.profile.derive import (
    DIVERGENCE_THRESHOLD,
    divergence,
    memory_access,
    occupancy,
    stall_reasons,
)


def test_threads_per_warp_instruction_from_counts() -> None:
    # 1000 warp instructions; 24,000 thread instructions: 24 threads each, at the threshold
    m = {
        "smsp__inst_executed.sum": 1000.0,
        "smsp__thread_inst_executed.sum": 24_000.0,
        "smsp__thread_inst_executed_pred_on.sum": 23_000.0,
    }
    d = divergence(m)
    assert d.threads_per_inst == 24.0 and d.simt_efficiency == 0.75
    assert d.pred_on_threads_per_inst == 23.0
    assert d.flagged  # 23 predicated-on threads < 24
    assert any("predicated-on" in n for n in d.notes)
    assert not any(" active threads" in n for n in d.notes)  # 24 is not below 24
    assert "recomputed" in d.notes[0]


def test_the_threshold_is_nvidias() -> None:
    assert DIVERGENCE_THRESHOLD == 24.0
    below = divergence({"smsp__thread_inst_executed_per_inst_executed.ratio": 23.99})
    at = divergence({"smsp__thread_inst_executed_per_inst_executed.ratio": 24.0})
    assert below.flagged and not at.flagged
    assert at.missing == (
        "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
        "smsp__sass_average_branch_targets_threads_uniform.pct",
    )


def test_branch_uniformity_from_counts_and_the_no_branch_case() -> None:
    m = {
        "smsp__sass_branch_targets.sum": 800.0,
        "smsp__sass_branch_targets_threads_uniform.sum": 600.0,
        "smsp__sass_branch_targets_threads_divergent.sum": 200.0,
        "smsp__thread_inst_executed_per_inst_executed.ratio": 28.0,
    }
    d = divergence(m)
    assert d.branch_uniform_pct == 75.0 and d.divergent_branch_targets == 200.0
    none = divergence(
        {
            "smsp__sass_average_branch_targets_threads_uniform.pct": 0.0,
            "smsp__sass_branch_targets.sum": 0.0,
        }
    )
    assert none.branch_uniform_pct is None and "does not apply" in none.notes[0]


def test_stall_reasons_sorted() -> None:
    m = {
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 8.0,
        "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 4.0,
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": None,
        "smsp__warps_active.avg.per_cycle_active": 3.0,
    }
    assert stall_reasons(m) == (("long_scoreboard", 8.0), ("wait", 4.0))


def test_memory_access_by_hand() -> None:
    # a warp loading 32 floats with stride 2: 256 bytes over 8 sectors, 4 useful bytes of 8
    m = {
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8000.0,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1000.0,
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio": 16.0,
        "l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_st.ratio": 4.0,
        "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio": 32.0,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 3000.0,
        "smsp__sass_inst_executed_op_shared_ld.sum": 1000.0,
        "l1tex__t_sector_hit_rate.pct": 50.0,
        "lts__t_sector_hit_rate.pct": 90.0,
    }
    a = memory_access(m)
    assert a.loads.sectors_per_request == 8.0 and a.loads.sector_efficiency == 0.5
    assert a.stores.sectors_per_request == 4.0 and a.stores.sector_efficiency == 1.0
    assert a.shared_conflicts_per_inst == {"ld": 3.0, "st": None}
    assert (a.l1_hit_rate_pct, a.l2_hit_rate_pct) == (50.0, 90.0)
    assert any("recomputed" in n for n in a.notes)


def test_occupancy_limiter() -> None:
    o = occupancy(
        {
            "sm__warps_active.avg.pct_of_peak_sustained_active": 40.0,
            "sm__maximum_warps_per_active_cycle_pct": 50.0,
            "launch__occupancy_limit_registers": 2.0,
            "launch__occupancy_limit_shared_mem": 3.0,
            "launch__occupancy_limit_warps": 8.0,
            "launch__occupancy_limit_blocks": 32.0,
        }
    )
    assert o.limiter == "registers" and o.achieved_pct == 40.0 and o.theoretical_pct == 50.0
    assert occupancy({}).limiter is None


def _kernels(file: str):  # type: ignore[no-untyped-def]
    from workbench.profile.report import load_report

    return load_report(REPORTS / file).kernels


@needs_reports
def test_divergent_tree_traversal_is_flagged() -> None:
    """SOURCES.md: bwd29 nodeByPoint5 ratio 18.34, 14.77, 11.32, 10.65; uniform 76.52 ..."""
    kernels = _kernels("bwd29_profileMSDKT23.out.ncu-rep")
    figures = [divergence(k.metrics) for k in kernels]
    assert [round(d.threads_per_inst, 2) for d in figures] == [18.34, 14.77, 11.32, 10.65]
    assert [round(d.branch_uniform_pct, 2) for d in figures] == [76.52, 75.69, 82.0, 88.7]
    assert all(d.flagged for d in figures)
    assert figures[0].stalls[0][0] == "long_scoreboard"


@needs_reports
def test_converged_kernels_and_kernels_without_branches() -> None:
    (scan,) = _kernels("thedavidchu_profile.ncu-rep")
    d = divergence(scan.metrics)
    assert round(d.threads_per_inst, 2) == 31.84 and round(d.branch_uniform_pct, 2) == 98.87
    assert not d.flagged
    fills = [k for k in _kernels("eschnett_profile.ncu-rep") if k.function_name != "julia_frb_5885"]
    for k in fills:  # ncu says 0 % uniform for kernels with no branch targets at all
        assert k.value("smsp__sass_average_branch_targets_threads_uniform.pct") == 0.0
        assert divergence(k.metrics).branch_uniform_pct is None
    for k in _kernels("panjd123_report.ncu-rep"):  # CUTLASS GEMMs: no divergence
        d = divergence(k.metrics)
        assert (d.threads_per_inst, d.branch_uniform_pct, d.flagged) == (32.0, 100.0, False)


@needs_reports
def test_reference_gemm_memory_access_by_hand() -> None:
    _, reference = _kernels("panjd123_report-s8.ncu-rep")
    v = reference.value
    a = memory_access(reference.metrics)
    sectors = v("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
    requests = v("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    assert (sectors, requests) == (31_868_928, 3_543_552)
    assert a.loads.sectors_per_request == pytest.approx(8.9935, abs=1e-4)  # 31868928 / 3543552
    assert a.loads.bytes_per_sector == pytest.approx(1.018, abs=1e-3)  # int8 loads, 1 B used
    assert a.l1_hit_rate_pct == pytest.approx(99.45, abs=0.01)
    assert a.l2_hit_rate_pct == pytest.approx(84.22, abs=0.01)
    o = occupancy(reference.metrics)
    assert (o.registers_per_thread, o.block_size, o.grid_size) == (40, 256, 576)
    assert o.theoretical_pct == 75.0 and o.limiter == "registers"
