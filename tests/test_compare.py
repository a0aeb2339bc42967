"""``workbench compare`` without a GPU: problem families, baseline selection and skipping, the
table's math against hand-computed values, the checks of baseline outputs, the store, the JSON
and the no-GPU command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from h200_compare import recorded_doc, recorded_int8_compare
from typer.testing import CliRunner

from workbench.cli.main import app
from workbench.compare.baselines import REGISTRY, Baseline, Choice, select
from workbench.compare.memory_baselines import COPY_OUTPUT, copy_source
from workbench.compare.problems import BaselineProblem, Family, classify
from workbench.compare.run import check_outputs
from workbench.compare.storage import load_comparisons, save_comparisons
from workbench.compare.table import (
    TUNED,
    ContenderEntry,
    ShapeComparison,
    Status,
    fit_ceilings,
    format_rows,
    roofline_bound,
    speedup,
    throughput,
)
from workbench.devices import DEVICES, device_for
from workbench.errors import ConfigError
from workbench.gpu import probe_gpu
from workbench.references.gemm import int8_gemm_exact
from workbench.roofline import (
    Ceilings,
    CeilingSource,
    ShareAboveRoofError,
    checked_share,
    datasheet_ceilings,
)
from workbench.runners.buffers import make_inputs
from workbench.spaces import Space, load_kernel
from workbench.spaces.targets import resolve_arches
from workbench.store import Store


def _space(kernel: str, **shape: int) -> Space:
    spec = load_kernel(kernel, [])
    arch = resolve_arches(spec, None)[0]
    return Space(spec, shape={**spec.default_shape, **shape}, arch=arch, device=device_for(arch))


def _problem(kernel: str, config: dict | None = None, **shape: int) -> BaselineProblem:
    space = _space(kernel, **shape)
    return classify(space, {**space.spec.default_config(), **(config or {})})


def _installed(b: Baseline, p: BaselineProblem, cc: int | None) -> str | None:
    """Baseline.check on a machine where every library is installed (the lent GPU's image)."""
    saved = type(b).modules, type(b).distributions
    try:
        type(b).modules, type(b).distributions = (), ()
        return b.check(p, cc)
    finally:
        type(b).modules, type(b).distributions = saved


def _by_name(selections: list) -> dict:
    return {s.name: s for s in selections}


# -- families --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kernel", "family"),
    [
        ("gemm_int8", Family.GEMM_INT8),
        ("gemm_w8a8", Family.GEMM_W8A8),
        ("gemm_fp8", Family.GEMM_FP8),
        ("reduce", Family.REDUCE),
        ("reduce_rows", Family.REDUCE_ROWS),
        ("aos_soa", Family.STREAM),
        ("divergence", Family.STREAM),
    ],
)
def test_families_come_from_the_reference(kernel: str, family: Family) -> None:
    p = _problem(kernel)
    assert p.family is family
    assert p.ops >= 0 and p.min_bytes > 0


def test_the_problem_carries_shape_dtypes_and_work() -> None:
    p = _problem("gemm_int8", M=128, N=256, K=512)
    assert (p.dim("M"), p.dim("N"), p.dim("K")) == (128, 256, 512)
    assert p.inputs["A"] == "int8" and p.outputs == {"C": "int32"}  # workspace is scratch
    assert p.ops == 2 * 128 * 256 * 512
    assert p.min_bytes == 128 * 512 + 256 * 512 + 4 * 128 * 256
    r = _problem("reduce", {"OP": "max"})
    assert r.op == "max" and r.unit == "GB/s"
    assert r.copy_bytes == (4 * 16777216 + 4) // 2


# -- selection and skipping ------------------------------------------------------------------
def test_int8_gemm_on_hopper_runs_cublas_cublaslt_and_cutlass() -> None:
    p = _problem("gemm_int8")
    sel, notes = select(_space("gemm_int8").spec.baselines, p, 90, check=_installed)
    assert [s.name for s in sel] == ["cublas", "cublaslt", "cutlass"]
    assert {s.choice for s in sel} == {Choice.RUN}
    assert notes == []


def test_shape_and_arch_limits_are_reported() -> None:
    decode = _problem("gemm_int8", M=16, N=4096, K=4096)
    by = _by_name(select(_space("gemm_int8").spec.baselines, decode, 90, check=_installed)[0])
    assert by["cublas"].choice is Choice.RUN
    assert by["cublaslt"].choice is Choice.SKIP and "M > 16 (M = 16)" in by["cublaslt"].reason
    odd = _problem("gemm_int8", M=77, N=300, K=160)
    by = _by_name(select(_space("gemm_int8").spec.baselines, odd, 90, check=_installed)[0])
    assert "multiples of 8 (K = 160, N = 300)" in by["cublaslt"].reason
    by = _by_name(select(_space("gemm_int8").spec.baselines, _problem("gemm_int8"), 60)[0])
    assert by["cublas"].reason == "needs compute capability 6.1+, the GPU has 6.0"


def test_fp8_needs_ada_or_hopper_and_one_e4m3_operand() -> None:
    p = _problem("gemm_fp8")
    by = _by_name(select(_space("gemm_fp8").spec.baselines, p, 90, check=_installed)[0])
    assert list(by) == ["cublaslt_fp8", "cutlass"] and by["cublaslt_fp8"].choice is Choice.RUN
    by = _by_name(select(_space("gemm_fp8").spec.baselines, p, 80, check=_installed)[0])
    assert "8.9+" in by["cublaslt_fp8"].reason
    e5 = _problem("gemm_fp8_e5m2")
    by = _by_name(select(_space("gemm_fp8_e5m2").spec.baselines, e5, 90, check=_installed)[0])
    assert "e5m2 x e5m2" in by["cublaslt_fp8"].reason
    assert by["cutlass"].choice is Choice.RUN  # CUTLASS has e5m2 x e5m2


def test_reductions_cub_limits_and_the_copy() -> None:
    spec = _space("reduce").spec
    for op, runs in (("sum", True), ("max", True), ("sumsq", False)):
        problem = _problem("reduce", {"OP": op})
        by = _by_name(select(spec.baselines, problem, 90, check=_installed)[0])
        assert (by["cub"].choice is Choice.RUN) is runs, op
        assert by["copy"].choice is Choice.RUN
    sumsq = _problem("reduce", {"OP": "sumsq"})
    by = _by_name(select(spec.baselines, sumsq, 90, check=_installed)[0])
    assert "not sumsq" in by["cub"].reason
    f16 = _by_name(
        select(_space("reduce_f16").spec.baselines, _problem("reduce_f16"), 90, check=_installed)[0]
    )
    assert "float16" in f16["cub"].reason and f16["cub"].choice is Choice.SKIP


def test_bandwidth_bound_kernels_get_the_copy_and_a_note() -> None:
    spec = _space("divergence").spec
    assert spec.baselines == ()
    sel, notes = select(spec.baselines, _problem("divergence"), 90)
    assert [(s.name, s.choice) for s in sel] == [("copy", Choice.RUN)]
    assert notes == ["copy added: the kernel is judged by its bandwidth"]


def test_a_family_without_a_library_and_unknown_names() -> None:
    spec = _space("gemm_w8a8").spec
    sel, _ = select(spec.baselines, _problem("gemm_w8a8"), 90, check=_installed)
    assert all(s.choice is Choice.SKIP for s in sel)
    assert "no cublas baseline for the gemm_w8a8 family" in _by_name(sel)["cublas"].reason
    with pytest.raises(ConfigError, match=r"unknown baseline.*nccl"):
        select(spec.baselines, _problem("gemm_w8a8"), 90, only=["nccl"])
    only, _ = select(spec.baselines, _problem("gemm_fp8"), 90, only=["cublaslt_fp8"])
    assert [s.name for s in only] == ["cublaslt_fp8"]


def test_an_absent_library_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a)
    )
    reason = REGISTRY["cublaslt"].check(_problem("gemm_int8"), 90)
    assert reason == "not installed: no Python module 'torch'"


# -- the table's math ------------------------------------------------------------------------
H200 = Ceilings(datasheet_ceilings(DEVICES["h200"]))


def _gemm_comparison() -> ShapeComparison:
    p = _problem("gemm_int8")  # 4096^3
    tuned = ContenderEntry(
        TUNED, "gemm_int8", Status.OK, median_ms=0.1, ops=p.ops, nbytes=p.min_bytes
    )
    cublas = ContenderEntry(
        "cublas", "cuBLAS", Status.OK, median_ms=0.12, ops=p.ops, nbytes=p.min_bytes
    )
    wrong = ContenderEntry(
        "cublaslt", "cuBLASLt", Status.WRONG, "C differs", 0.05, ops=p.ops, nbytes=1
    )
    skipped = ContenderEntry("cutlass", "CUTLASS", Status.SKIPPED, "not here")
    return ShapeComparison(
        p, "tensor_int8", {"PATH": "mma"}, "given", tuned, (cublas, wrong, skipped), (), H200
    )


def test_gemm_table_by_hand() -> None:
    c = _gemm_comparison()
    ops = 2 * 4096**3  # 137,438,953,472
    assert throughput(c.tuned, "TOPS") == pytest.approx(ops / 1e-4 / 1e12)  # 1374.39 TOPS
    assert throughput(c.tuned, "TOPS") == pytest.approx(1374.389534)
    bound = roofline_bound(c.tuned, "tensor_int8", H200)
    assert bound is not None and bound.limit == "compute"
    # intensity 137438953472 / 100663296 = 1365.3 op/B, right of the ridge 1979/4.8 = 412.3
    assert bound.attainable == 1979e12
    assert bound.fraction == pytest.approx(1374.389534e12 / 1979e12)  # 0.6945
    assert any("datasheet" in label for label in bound.ceilings)
    assert speedup(c.tuned, c.baselines[0]) == pytest.approx(1.2)
    assert speedup(c.tuned, c.baselines[1]) is None  # wrong results earn no speedup
    assert speedup(c.tuned, c.baselines[2]) is None
    rows = format_rows([c])
    assert rows[0][:3] == ["M=4096,N=4096,K=4096", "tuned", "ok"]
    assert rows[0][4] == "1374 TOPS" and rows[0][5] == "69.4% (compute)"
    assert rows[1][6] == "1.20x" and rows[2][6] == ""
    assert rows[3][2] == "skipped: not here"


def test_memory_bound_table_by_hand() -> None:
    p = _problem("reduce")  # n = 2^24 floats: 67,108,868 bytes, 16,777,216 adds
    tuned = ContenderEntry(
        TUNED, "reduce", Status.OK, median_ms=0.02, ops=p.ops, nbytes=p.min_bytes
    )
    copy = ContenderEntry(
        "copy", "copy", Status.OK, median_ms=0.016, ops=0.0, nbytes=2 * p.copy_bytes
    )
    c = ShapeComparison(p, "fp32", {}, "given", tuned, (copy,), (), H200)
    assert throughput(tuned, "GB/s") == pytest.approx(67_108_868 / 2e-5 / 1e9)  # 3355.4 GB/s
    b = roofline_bound(tuned, "fp32", H200)
    # intensity 0.25 op/B, far left of the fp32 ridge 67/4.8 = 14: memory-bound, and the
    # share of the bound is the bandwidth over the DRAM roof
    assert b is not None and b.limit == "memory"
    assert b.fraction == pytest.approx(3355.4434e9 / 4.8e12)
    cb = roofline_bound(copy, "fp32", H200)
    assert cb is not None and cb.limit == "memory" and cb.attainable == 4.8e12
    assert cb.fraction == pytest.approx(67_108_868 / 1.6e-5 / 4.8e12)
    assert speedup(tuned, copy) == pytest.approx(0.8)  # the copy is faster: 0.8x
    assert c.unit_of(copy) == "GB/s"


def test_json_shape() -> None:
    doc = _gemm_comparison().to_json()
    assert set(doc) == {
        "shape", "label", "family", "unit", "precision", "work", "config", "config_origin",
        "results", "notes",
    }  # fmt: skip
    assert doc["family"] == "gemm_int8" and doc["unit"] == "TOPS"
    names = [r["name"] for r in doc["results"]]
    assert names == ["tuned", "cublas", "cublaslt", "cutlass"]
    first = doc["results"][0]
    assert set(first) == {
        "name", "title", "status", "reason", "median_ms", "ci_ms", "samples", "throughput",
        "unit", "bound_fraction", "bound", "bound_clock_mhz", "speedup", "verify_max_error",
        "library", "compile_s", "variants",
    }  # fmt: skip
    assert first["speedup"] is None and doc["results"][1]["speedup"] == pytest.approx(1.2)
    json.dumps(doc)  # plain data


# -- checking a baseline's outputs -----------------------------------------------------------
def test_a_copy_is_checked_against_what_it_copied() -> None:
    inputs = {"x": np.arange(10, dtype=np.float32)}
    p = _problem("reduce", n=10)
    src = copy_source(inputs, p.copy_bytes)
    assert src.nbytes == p.copy_bytes == 22  # (4 * 10 + 4) // 2
    assert check_outputs("copy", {COPY_OUTPUT: src.copy()}, p, inputs, lambda: None).ok
    bad = src.copy()
    bad[7] ^= 1
    verdict = check_outputs("copy", {COPY_OUTPUT: bad}, p, inputs, lambda: None)
    assert not verdict.ok and "1 of 22" in verdict.reason
    # a copy longer than the inputs repeats them
    assert (
        copy_source(inputs, 100)[40:80].tolist()
        == np.arange(10, dtype=np.float32).view(np.uint8).tolist()
    )


def test_a_gemm_baseline_is_checked_against_the_reference() -> None:
    from workbench.compare.run import _expected

    space = _space("gemm_int8", M=64, N=96, K=128)
    config = space.spec.default_config()
    inputs = make_inputs(space, seed=0, config=config)
    p = classify(space, config)
    expected = lambda: _expected(space, config, inputs)  # noqa: E731
    right = int8_gemm_exact(inputs["A"], inputs["B"])
    assert check_outputs("cublas", {"C": right}, p, inputs, expected).ok
    wrong = right.copy()
    wrong[3, 5] += 1
    verdict = check_outputs("cublas", {"C": wrong}, p, inputs, expected)
    assert not verdict.ok and "(3, 5)" in verdict.reason
    with pytest.raises(ValueError, match="no output C"):
        check_outputs("cublas", {}, p, inputs, expected)


# -- the store ---------------------------------------------------------------------------------
def test_comparisons_are_stored_and_read_back(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    c = _gemm_comparison()
    first = save_comparisons(store, [c], device="NVIDIA H200", command="workbench compare x")
    second = save_comparisons(store, [c], device="NVIDIA H200")
    rows = load_comparisons(store, kernel="gemm_int8")
    assert len(rows) == 8 and {r.batch for r in rows} == {first, second}
    latest = load_comparisons(store, kernel="gemm_int8", latest=True)
    assert [r.contender for r in latest] == ["tuned", "cublas", "cublaslt", "cutlass"]
    tuned, cublas, wrong, skipped = latest
    assert tuned.throughput == pytest.approx(1374.389534) and tuned.unit == "TOPS"
    assert tuned.bound == "compute" and tuned.bound_fraction == pytest.approx(0.69449, rel=1e-4)
    assert cublas.speedup == pytest.approx(1.2) and wrong.speedup is None
    assert wrong.status == "wrong" and skipped.reason == "not here"
    assert tuned.params == {"PATH": "mma"} and tuned.shape == {"M": 4096, "N": 4096, "K": 4096}
    assert any("H200" in label for label in tuned.ceilings)
    assert load_comparisons(store, kernel="reduce") == []


# -- the command without a GPU ---------------------------------------------------------------
no_gpu = pytest.mark.skipif(probe_gpu().available, reason="a GPU is present")


@no_gpu
def test_without_a_gpu_compare_says_so_and_what_would_run(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    result = CliRunner().invoke(app, ["compare", "gemm_int8", "--storage", store])
    assert result.exit_code == 3, result.output  # one status for "this needs a GPU"
    assert "no GPU" in result.output and "nothing is timed" in result.output
    assert "cublas" in result.output and "cutlass" in result.output
    result = CliRunner().invoke(
        app, ["compare", "gemm_int8", "--shapes", "llm_decode", "--storage", store, "--json"]
    )
    assert result.exit_code == 3, result.output
    doc = json.loads(result.stdout)
    assert doc["gpu"] is False and doc["measured"] is False and doc["arch"] == "sm_90a"
    assert len(doc["shapes"]) == 16
    m1 = doc["shapes"][0]
    assert m1["label"] == "M=1,N=4096,K=4096"
    assert m1["config_origin"] == "default (no tuned study here)"
    lt = next(b for b in m1["baselines"] if b["name"] == "cublaslt")
    assert lt["would_run"] is False and lt["reason"]


@no_gpu
def test_bad_input_to_compare(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    r = CliRunner().invoke(app, ["compare", "gemm_int8", "--config", "best", "--storage", store])
    assert r.exit_code == 2 and "no study" in r.output
    r = CliRunner().invoke(app, ["compare", "gemm_int8", "--shapes", "nope", "--storage", store])
    assert r.exit_code == 2 and "no shape set 'nope'" in r.output
    r = CliRunner().invoke(app, ["compare", "reduce", "--baseline", "nccl", "--storage", store])
    assert r.exit_code == 2 and "unknown baseline" in r.output
    r = CliRunner().invoke(app, ["compare", "gemm_int8", "-c", "BM=7", "--storage", store])
    assert r.exit_code == 2


@no_gpu
def test_a_baseline_worker_that_cannot_start_is_reported_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    from workbench.compare.baselines import BaselineSelection
    from workbench.compare.run import CompareOptions, _BaselineWorker

    space = _space("reduce", n=1000)
    config = space.spec.default_config()
    problem = classify(space, config)
    inputs = make_inputs(space, seed=0, config=config)
    copy = BaselineSelection("copy", "copy", "copy", Choice.RUN)
    with _BaselineWorker(CompareOptions(call_timeout_s=60)) as worker:
        entries = [worker.run(copy, problem, inputs, space, config, lambda: None) for _ in range(2)]
    for e in entries:  # no driver here: the worker's context cannot be made, every time
        assert e.status is Status.FAILED and "did not start" in e.reason
        assert e.median_ms is None and e.nbytes == 2 * problem.copy_bytes


# -- the first H200 run's int8 comparison: roofs raised to the fastest measured ---------------


def test_a_share_above_its_roof_is_refused_not_printed() -> None:
    """The run printed 115 %, 136 % and 161 % of bound: the int8 roof was torch._int_mm's
    940 TOPS while cuBLAS ran 1,516. Such a share is now an internal error, never a figure."""
    doc, comparisons = recorded_doc(), recorded_int8_compare()
    above = [r for s in doc["shapes"] for r in s["results"] if (r["bound_fraction"] or 0) > 1]
    assert above  # what the recorded run printed
    with pytest.raises(ShareAboveRoofError, match="above 100 %"):
        format_rows(comparisons)
    with pytest.raises(ShareAboveRoofError):
        comparisons[1].to_json()
    with pytest.raises(ShareAboveRoofError):
        checked_share(above[0]["bound_fraction"], "a stored share")


def test_the_h200_int8_roof_is_raised_to_the_fastest_measured_cublas() -> None:
    doc, comparisons = recorded_doc(), recorded_int8_compare()
    timed = [(r, s) for s in doc["shapes"] for r in s["results"] if r["status"] == "ok"]
    fastest, at = max(timed, key=lambda rs: rs[0]["throughput"])
    assert fastest["name"] == "cublas" and at["label"] == "M=8192,N=8192,K=8192"
    fitted = fit_ceilings(comparisons)
    for c in fitted:
        roof = c.ceilings.best("tensor_int8")
        assert roof is not None and roof.source is CeilingSource.MEASURED
        assert roof.value == pytest.approx(fastest["throughput"] * 1e12)
        # said once per roof raised: to whom, and how fast (1,516 TOPS)
        (note,) = c.ceiling_notes
        assert note.startswith(
            f"tensor_int8 ceiling raised to the fastest measured: {fastest['title']} at "
            f"{at['label']}, {fastest['throughput']:,.0f} TOPS"
        )
        assert "torch._int_mm" in note  # the roof it replaced
        for entry in c.entries:
            b = roofline_bound(entry, c.precision, c.ceilings)
            assert b is None or b.fraction <= 1.0
    rows = {(r[0], r[1]): r for r in format_rows(fitted)}
    tuned = next(r for r in at["results"] if r["name"] == TUNED)
    share = 100 * tuned["throughput"] / fastest["throughput"]  # 84.5 %, not 136 %
    assert rows[(at["label"], TUNED)][5] == f"{share:.1f}% (compute)"
    assert rows[(at["label"], "cublas")][5] == "100.0% (compute)"
    doc_out = [r["bound_fraction"] for c in fitted for r in c.to_json()["results"]]
    assert max(f for f in doc_out if f is not None) == pytest.approx(1.0)
