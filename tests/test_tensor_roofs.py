"""Tensor-core roofs are the dense rates: Nsight Compute's ``sm__ops_path_tensor_src_<type>``
peak is the 2:4-sparse rate from sm_80 on. Checked against NVIDIA's own metric model of each
chip (libnvperf_host, no GPU), against the datasheets, and on the H200 lease's int8 GEMM
profile (tests/data/ncu), which ran at 58 % of the dense int8 roof, not the 29 % of the sparse
one."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cli_helpers import invoke

from workbench.devices import DEVICES
from workbench.profile.importing import import_report
from workbench.profile.nvperf import NvperfUnavailable, catalog, supported_chips
from workbench.profile.storage import ProfileRecord
from workbench.profile.summary import summarize, to_json
from workbench.roofline import (
    SPARSE_COUNTERS,
    Ceilings,
    achieved_from_metrics,
    datasheet_ceilings,
    measured_ceilings,
    ncu_ceilings,
    roofline_points,
)
from workbench.roofline.ceilings import SPARSE_TENSOR_FROM_CC, TENSOR_PEAK_PATHS
from workbench.spaces.registry import builtin_spaces_dir

DATA = Path(__file__).parent / "data"
#: the lease's report, kept with gemm_int8's recordings (a no-GPU tune imports it)
GEMM_INT8 = (
    builtin_spaces_dir() / "recordings/gemm_int8/ncu/gemm_int8-072dda65e8-20261204T143245.ncu-rep"
)
CEILINGS = DATA / "h200" / "ceilings.json"
#: ops per cycle per SM of the lease's gemm_int8 launch (sm__ops_path_tensor_src_int8
#: .avg.per_cycle_elapsed in the report) over the dense int8 rate of an H200 SM (8,192).
DENSE_SHARE = 4783.93 / 8192
#: The compute capability of each chip family Perfworks knows (CUDA C++ Programming Guide).
FAMILY_CC = {"TU": 75, "GA100": 80, "GA10B": 87, "GA": 86, "AD": 89, "GH": 90, "GB": 100}


def _gemm_record() -> ProfileRecord:
    (record,) = import_report(GEMM_INT8)[1]
    return record


def _int8_point(record: ProfileRecord, extra: Ceilings | None = None):  # type: ignore[no-untyped-def]
    summary = summarize(record, extra)
    (point,) = [p for p in summary.points if p.precision == "tensor_int8" and p.level == "dram"]
    return summary, point


def test_the_h200_int8_gemm_runs_at_58_percent_of_the_dense_int8_roof() -> None:
    summary, point = _int8_point(_gemm_record())
    assert point.fraction == pytest.approx(DENSE_SHARE, abs=0.01)
    assert point.compute.name == "tensor_int8"
    assert "dense int8, ncu peak / 2" in point.compute.legend
    assert "1.69 GHz" in point.compute.legend
    sparse = {c.name: c for c in summary.ceilings}["tensor_int8_sparse"]
    assert sparse.value == pytest.approx(2 * point.compute.value)
    assert "2:4-sparse int8" in sparse.legend
    # 16,384 ops/cycle/SM x 132 SMs is the report's peak; the dense roof is half of it
    metrics = _gemm_record().metrics
    assert metrics["sm__ops_path_tensor_src_int8.avg.peak_sustained"] == 16384
    assert point.compute.value == pytest.approx(
        8192 * 132 * metrics["sm__cycles_elapsed.avg.per_second"]
    )


def test_profile_import_json_says_58_percent_against_a_dense_roof(tmp_path: Path) -> None:
    code, out, err = invoke(
        "profile", "--import", str(GEMM_INT8), "--json", "--storage", str(tmp_path / "s.sqlite")
    )
    assert code == 0, err
    (doc,) = json.loads(out)["profiles"]
    roofs = {c["name"]: c for c in doc["ceilings"]}
    assert roofs["tensor_int8"]["value"] == pytest.approx(roofs["tensor_int8_sparse"]["value"] / 2)
    assert roofs["tensor_fp8"]["value"] == pytest.approx(roofs["tensor_int8"]["value"])
    assert roofs["tensor_fp16"]["value"] == pytest.approx(roofs["tensor_int8"]["value"] / 2)
    assert roofs["tensor_int8"]["clock_hz"] == pytest.approx(1.694e9, rel=1e-3)
    for entry in doc["roofline"]:
        assert entry["fraction"] == pytest.approx(DENSE_SHARE, abs=0.01)
        assert "dense int8, ncu peak / 2" in entry["compute_roof"]


def test_a_measured_roof_timed_at_another_clock_does_not_move_the_profiled_share() -> None:
    """The lease's ceilings.json (cuBLASLt 940 TOPS, timed at up to 1.98 GHz) is below the
    launch's 1.07 POP/s at 1.69 GHz: it is left out for the profile, which keeps its share of
    its own peak, and a note says why."""
    summary, point = _int8_point(_gemm_record(), Ceilings(measured_ceilings(CEILINGS)))
    assert point.fraction == pytest.approx(DENSE_SHARE, abs=0.01)
    assert point.compute.source.value == "ncu"
    assert point.memory.source.value == "measured"  # DRAM's copy ceiling still applies
    assert any("tensor_int8: the measured roof" in n and "1.69 GHz" in n for n in summary.notes)
    assert not any(n.startswith("tensor_fp16") for n in summary.notes)  # not this launch's work


def test_a_launch_that_ran_sparse_mma_is_placed_under_the_sparse_roof() -> None:
    record = _gemm_record()
    sparse = dict(record.metrics)
    sparse["sm__ops_path_tensor_op_igmma_src_int8_sparsity_on.sum"] = 1e12
    _, point = _int8_point(replace(record, metrics=sparse))
    assert point.compute.name == "tensor_int8_sparse"
    assert point.fraction == pytest.approx(DENSE_SHARE / 2, abs=0.01)
    # without the counter: a rate only the sparse path reaches says so by itself
    fast = dict(record.metrics)
    fast["sm__ops_path_tensor_src_int8.sum.per_cycle_elapsed"] = 1.5 * 8192 * 132
    summary, point = _int8_point(replace(record, metrics=fast))
    assert point.compute.name == "tensor_int8_sparse" and point.fraction == pytest.approx(0.75)
    assert any("above the dense roof" in n for n in summary.achieved.notes)


def test_no_sparse_path_before_sm_80_and_an_unknown_capability_is_said() -> None:
    metrics = dict(_gemm_record().metrics)
    turing = {c.name: c for c in ncu_ceilings(metrics, cc=75)}
    assert "tensor_int8_sparse" not in turing
    assert turing["tensor_int8"].value == pytest.approx(
        metrics["sm__ops_path_tensor_src_int8.sum.peak_sustained"]
        * metrics["sm__cycles_elapsed.avg.per_second"]
    )
    metrics.pop("device__attribute_compute_capability_major")
    unknown = {c.name: c for c in ncu_ceilings(metrics)}
    assert "unknown" in unknown["tensor_int8"].legend and "tensor_int8_sparse" not in unknown
    # and a dense sparsity-off peak, where a report holds one, is taken as it is
    metrics["sm__ops_path_tensor_src_int8_sparsity_off.sum.peak_sustained"] = 8192 * 132
    dense = {c.name: c for c in ncu_ceilings(metrics)}
    assert "sparsity-off" in dense["tensor_int8"].legend
    assert dense["tensor_int8_sparse"].value == pytest.approx(2 * dense["tensor_int8"].value)


def _catalog(chip: str):  # type: ignore[no-untyped-def]
    try:
        return catalog(chip)
    except NvperfUnavailable as exc:
        pytest.skip(f"no Perfworks library: {exc}")


def _family_cc(chip: str) -> int | None:
    return next((cc for prefix, cc in FAMILY_CC.items() if chip.startswith(prefix)), None)


def _dense_twins(chip: str, path: str) -> list[str]:
    """The base metrics of ``chip`` that count ``path`` with sparsity off: the path's own twin
    (Ampere, Ada) or Hopper's wgmma one (``*gmma``). Not mma.sync's: on Hopper it peaks at 2/3
    of wgmma (5,461 int8 ops per SM and cycle), on Blackwell at 1/8 of the path: limits of that
    instruction, not of the tensor cores."""
    known = _catalog(chip).base_metrics
    src = path.split("_dst_")[0]
    twins = [f"sm__ops_path_tensor_src_{path}_sparsity_off"]
    for op in ("igmma", "hgmma"):
        twins += [f"sm__ops_path_tensor_op_{op}_src_{p}_sparsity_off" for p in (path, src)]
    return [t for t in dict.fromkeys(twins) if t in known]


def test_nvidia_metric_model_gives_sparse_tensor_peaks_exactly_from_sm_80_on() -> None:
    """Per chip Perfworks knows: every tensor path the roofline reads peaks at twice its
    sparsity-off twin (the wgmma one on Hopper) from compute capability 8.0 on; before that
    there is no twin: the rule :data:`SPARSE_TENSOR_FROM_CC` halves by."""
    checked = 0
    for chip in _supported():
        cc = _family_cc(chip)
        if cc is None:
            continue  # a family this test has no capability for
        cat = _catalog(chip)
        for _, path in TENSOR_PEAK_PATHS:
            base = f"sm__ops_path_tensor_src_{path}"
            if base not in cat.base_metrics:
                continue
            twins = _dense_twins(chip, path)
            if cc < SPARSE_TENSOR_FROM_CC:
                assert not twins, (chip, path)
                continue
            if not twins:
                continue  # Blackwell names no sparsity-off twin of its tcgen05 path
            peaks = cat.peaks_per_unit([base, *twins])
            assert {peaks[t] for t in twins} == {peaks[base] / 2}, (chip, path, peaks)
            checked += 1
    assert checked >= 15  # GA100, GA10x, AD10x, GH100 int8/fp8/fp16/bf16/tf32


def _supported() -> tuple[str, ...]:
    try:
        return supported_chips()
    except NvperfUnavailable as exc:
        pytest.skip(f"no Perfworks library: {exc}")


#: (preset, chip, a datasheet figure the chip's consumer part runs at a lower rate)
PRESET_CHIPS = (
    ("t4", "TU104", None),
    ("a100", "GA100", None),
    # GeForce runs FP16 with FP32 accumulation at half the GA102's rate: 71 of 142 TFLOP/s
    ("rtx3090", "GA102", "tensor_fp16"),
    ("l40s", "AD102", None),
    ("h100", "GH100", None),
    ("h200", "GH100", None),
)


@pytest.mark.parametrize(("preset", "chip", "consumer"), PRESET_CHIPS)
def test_dense_roofs_are_the_datasheet_peaks_at_the_presets_clocks(
    preset: str, chip: str, consumer: str | None
) -> None:
    """The dense peak per SM and cycle (half the tensor path's from sm_80 on) x SMs x the
    preset's tensor clock is its datasheet tensor peak, and 2 FFMA flops x the FFMA peak x SMs
    x its boost clock its FP32 peak, within 1.5 % (the L40S's FP16 figure, 362, is quoted 1.2 %
    below its int8 clock). BF16 runs at the FP16 rate and TF32 at half of it (A100: 312 and
    156 TFLOP/s; H100: 989 and 495)."""
    spec = DEVICES[preset]
    cat = _catalog(chip)
    paths = {
        name: f"sm__ops_path_tensor_src_{path}"
        for name, path in reversed(TENSOR_PEAK_PATHS)  # the first listed wins, as in ncu_ceilings
        if f"sm__ops_path_tensor_src_{path}" in cat.base_metrics
    }
    ffma = "sm__sass_thread_inst_executed_op_ffma_pred_on"
    peaks = cat.peaks_per_unit([*paths.values(), ffma])
    halve = 2 if _family_cc(chip) >= SPARSE_TENSOR_FROM_CC else 1  # type: ignore[operator]
    per_second = spec.sm_count * spec.tensor_clock_mhz * 1e6
    dense = {name: peaks[base] / halve * per_second for name, base in paths.items()}
    sheet = {
        "tensor_int8": spec.peak_int8_tops,
        "tensor_fp8": spec.peak_fp8_tflops,
        "tensor_fp16": spec.peak_fp16_tflops,
    }
    for name, tera in sheet.items():
        if tera and name != consumer:
            assert dense[name] == pytest.approx(tera * 1e12, rel=0.015), name
    fp32 = 2 * peaks[ffma] * spec.sm_count * spec.boost_clock_mhz * 1e6
    assert fp32 == pytest.approx(spec.peak_fp32_tflops * 1e12, rel=0.015)
    if "tensor_bf16" in dense:
        assert dense["tensor_bf16"] == dense["tensor_fp16"]
        assert dense["tensor_tf32"] == dense["tensor_fp16"] / 2


def test_datasheet_compute_roofs_scale_to_the_timed_clock() -> None:
    """An H200 timed at 1,980 MHz: its dense int8 roof is 1,979 TOPS x 1,980 / 1,830 (8,192 ops
    per SM and cycle at the clock it ran at); FP32 is quoted at 1,980 already; DRAM never
    scales."""
    h200 = DEVICES["h200"]
    quoted = {c.name: c for c in datasheet_ceilings(h200)}
    timed = {c.name: c for c in datasheet_ceilings(h200, 1980)}
    assert timed["tensor_int8"].value == pytest.approx(8192 * 132 * 1980e6, rel=0.002)
    assert quoted["tensor_int8"].value == 1979e12 and "1,830 MHz" in quoted["tensor_int8"].legend
    assert "scaled to 1,980 MHz" in timed["tensor_int8"].legend
    assert timed["fp32"].value == quoted["fp32"].value == 67e12
    assert timed["dram"].value == quoted["dram"].value and timed["dram"].clock_hz is None


def test_every_sparse_counter_exists_on_some_chip_and_no_chip_lacks_all_of_a_precision() -> None:
    for precision, names in SPARSE_COUNTERS.items():
        for chip in ("GA100", "AD102", "GH100"):
            cat = _catalog(chip)
            present = [n for n in names if cat.known(n)]
            if precision == "tensor_fp8" and chip == "GA100":
                assert not present  # Ampere has no fp8 tensor path
            else:
                assert present, (precision, chip)


def test_the_synthetic_sparse_counter_is_read_per_precision() -> None:
    metrics = dict(_gemm_record().metrics)
    assert achieved_from_metrics(metrics).sparse == frozenset()
    metrics["sm__ops_path_tensor_src_fp8_sparsity_on.sum"] = 5.0
    a = achieved_from_metrics(metrics)
    assert a.sparse == {"tensor_fp8"} and a.roof_name("tensor_fp8") == "tensor_fp8_sparse"
    assert all(
        p.compute.name == "tensor_int8" for p in roofline_points(a, Ceilings(ncu_ceilings(metrics)))
    )


def test_summary_json_of_the_record_names_the_roof_of_each_point() -> None:
    doc = to_json(summarize(_gemm_record()))
    assert {e["compute_roof"] for e in doc["roofline"]} == {
        next(c["label"] for c in doc["ceilings"] if c["name"] == "tensor_int8")
    }


#: The first H200 lease's tune of gemm_int8 at 4096^3 (device-runs/h200-2026-12-04,
#: tune/gemm_int8_4096.json): its best's median (ms), and the share of the roofline bound it
#: printed, of the datasheet's dense int8 roof as quoted (1,979 TOPS at 1,830 MHz). Every sample
#: of that run's drift re-timings ran at 1,980 MHz.
H200_TUNE_BEST_MS = 0.1268479973077774
H200_TUNE_SHARE_AS_QUOTED = 0.5474953442983325
H200_TUNE_CLOCK_MHZ = 1980.0


def test_tune_and_compare_take_one_share_at_the_clock_the_samples_ran_at(tmp_path: Path) -> None:
    """The lease's tune printed 54.7 % of the roofline bound: 1,083 TOPS over the int8 roof as
    quoted at 1,830 MHz, although its samples ran at 1,980 MHz, where the same tensor cores
    peak at 2,141 TOPS (8,192 ops per SM and cycle). Tune and compare now place a timed config
    under the datasheet roof scaled to its samples' median SM clock, the same function for
    both, and say the clock; a measurement without clocks keeps the roof as quoted."""
    from recording_helpers import record_space

    from workbench.cli.tune_output import best_text
    from workbench.compare.problems import classify
    from workbench.compare.run import tuned_entry
    from workbench.compare.table import ShapeComparison, fit_ceilings, format_rows
    from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
    from workbench.runners.recordings import load_recording
    from workbench.search.start import plan_space_replay
    from workbench.search.tune_plan import roofline_of
    from workbench.spaces import Space, load_kernel
    from workbench.spaces.launch import work_precision
    from workbench.store import Store, StoredEvaluation

    space = Space(load_kernel("gemm_int8"))  # 4096^3: 2 x 4096^3 operations whatever the config
    config = space.spec.default_config()
    ms = H200_TUNE_BEST_MS
    timed = Measurement(
        TrialOutcome.OK, value=ms, samples=(ms,) * 3, sm_clock_mhz=(H200_TUNE_CLOCK_MHZ,) * 3
    )
    share_of = roofline_of(space, DeviceInfo("NVIDIA H200"))
    assert share_of is not None
    quoted = share_of(config, Measurement(TrialOutcome.OK, value=ms))
    assert quoted is not None and quoted.fraction == pytest.approx(H200_TUNE_SHARE_AS_QUOTED)
    assert quoted.clock_text == "" and not quoted.clock_timed
    tune = share_of(config, timed)
    at_clock = 8192 * 132 * H200_TUNE_CLOCK_MHZ * 1e6  # dense int8 ops per second at 1,980 MHz
    assert tune is not None and tune.limit == "compute"
    assert tune.fraction == pytest.approx(2 * 4096**3 / (ms * 1e-3) / at_clock, rel=0.002)  # 50.6 %
    assert tune.clock_text == "at 1,980 MHz"
    assert "x 1,980 / 1,830 (the timed clock)" in tune.ceilings[0]
    # compare: the same share for the same samples; a contender without clocks as quoted
    problem = classify(space, config)
    tuned = tuned_entry(timed, space, config, problem)
    unclocked = tuned_entry(Measurement(TrialOutcome.OK, value=ms), space, config, problem)
    other = replace(unclocked, contender="again", title="the same, no clock")
    (c,) = fit_ceilings(
        [
            ShapeComparison(
                problem, work_precision(space), config, "given", tuned, (other,),
                datasheet=DEVICES["h200"],
            )
        ]
    )  # fmt: skip
    row = c.row(tuned)
    assert row["bound_fraction"] == pytest.approx(tune.fraction) and row["bound"] == "compute"
    assert row["bound_clock_mhz"] == H200_TUNE_CLOCK_MHZ
    assert c.row(other)["bound_fraction"] == pytest.approx(H200_TUNE_SHARE_AS_QUOTED)
    assert c.row(other)["bound_clock_mhz"] is None
    rows = format_rows([c])
    assert rows[0][5] == f"{100 * tune.fraction:.1f}% (compute at 1,980 MHz)"
    assert rows[1][5] == f"{100 * H200_TUNE_SHARE_AS_QUOTED:.1f}% (compute)"
    # and tune's progress line says the clock
    rec = record_space(space, tmp_path / "h200.json", [(config, ms)], device="NVIDIA H200")
    plan = plan_space_replay(
        Store(f"sqlite:///{tmp_path / 's.sqlite'}"), space, load_recording(rec)
    )
    text = best_text(plan, StoredEvaluation(0, config, timed, 1, None))
    assert (
        text
        == f"best 0.1268 ms (1,083.5 TOPS, {tune.fraction:.0%} of the roofline bound at 1,980 MHz)"
    )
