"""``compare`` on a real GPU (``-m gpu``; skipped without one): the libraries run on the same
inputs as the tuned config, and their outputs agree with the reference (hence with each other).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from workbench.compare.run import CompareOptions, ShapePlan, compare
from workbench.compare.table import Status, throughput
from workbench.compiler import CompileCache
from workbench.devices import device_for
from workbench.gpu import probe_gpu
from workbench.spaces import Space, load_kernel
from workbench.spaces.targets import resolve_arches

GPU = probe_gpu()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not GPU.available, reason=f"no CUDA GPU: {GPU.reason}"),
]


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _run(tmp_path: Path, kernel: str, only: tuple[str, ...], config: dict | None = None, **shape):  # type: ignore[no-untyped-def]
    spec = load_kernel(kernel, [])
    arch = next(a for a in resolve_arches(spec, "all") if a.cc == GPU.cc and not a.suffix)
    space = Space(spec, shape={**spec.default_shape, **shape}, arch=arch, device=device_for(arch))
    cfg = {**spec.default_config(), **(config or {})}
    options = CompareOptions(cache=CompileCache(tmp_path / "cache"), only=only)
    (result,) = compare([ShapePlan(space, cfg, "test")], options, lambda _: None)
    return result


def _entry(result, name: str):  # type: ignore[no-untyped-def]
    return next(e for e in result.baselines if e.contender == name)


def test_int8_gemm_against_cublas_and_cublaslt(tmp_path: Path) -> None:
    if not _has("cupy") and not _has("torch"):
        pytest.skip("neither CuPy nor PyTorch is installed")
    r = _run(tmp_path, "gemm_int8", ("cublas", "cublaslt"), M=512, N=1024, K=2048)
    assert r.tuned.status is Status.OK, r.tuned.reason
    for name, module in (("cublas", "cupy"), ("cublaslt", "torch")):
        e = _entry(r, name)
        if not _has(module):
            assert e.status is Status.SKIPPED and module in e.reason
            continue
        assert e.status is Status.OK, e.reason  # bit-exact against the int32 reference
        assert e.verify_max_error == 0.0 and e.library and e.median_ms > 0
        assert len(e.samples) >= 10 and throughput(e, "TOPS") > 0
        bound = r.bound(e)  # the datasheet's roofs at the clock its samples ran at
        assert bound is not None and 0 < bound.fraction <= 1.0


def test_the_decode_shape_is_refused_by_torch_int_mm_and_run_by_cublas(tmp_path: Path) -> None:
    if not _has("cupy"):
        pytest.skip("CuPy is not installed")
    r = _run(tmp_path, "gemm_int8", ("cublas", "cublaslt"), M=16, N=4096, K=4096)
    assert _entry(r, "cublas").status is Status.OK
    lt = _entry(r, "cublaslt")
    assert lt.status is Status.SKIPPED and lt.median_ms is None and lt.reason


def test_reduce_against_cub_and_a_copy(tmp_path: Path) -> None:
    r = _run(tmp_path, "reduce", ("cub", "copy"), {"OP": "sum"}, n=1 << 24)
    assert r.tuned.status is Status.OK, r.tuned.reason
    copy = _entry(r, "copy")
    assert copy.status is Status.OK and copy.verify_max_error == 0.0
    assert copy.nbytes == 2 * r.problem.copy_bytes and throughput(copy, "GB/s") > 100
    cub = _entry(r, "cub")
    if _has("cupy"):
        assert cub.status is Status.OK, cub.reason
    else:
        assert cub.status is Status.SKIPPED


def test_fp8_gemm_against_scaled_mm(tmp_path: Path) -> None:
    if GPU.cc < 89 or not _has("torch"):
        pytest.skip("FP8 needs sm_89+ and PyTorch")
    r = _run(tmp_path, "gemm_fp8", ("cublaslt_fp8",), M=1024, N=1024, K=1024)
    e = _entry(r, "cublaslt_fp8")
    assert e.status is Status.OK, e.reason  # within the space's stated tolerance


def _cutlass_missing() -> list[str]:
    from workbench.compare.baselines import missing_here

    return missing_here("cutlass")


def test_cutlass_times_every_operator_and_reports_the_fastest_correct_one(tmp_path: Path) -> None:
    if GPU.cc < 90 or _cutlass_missing():
        pytest.skip(f"needs sm_90+ and the CUTLASS extra (missing: {_cutlass_missing()})")
    r = _run(tmp_path, "gemm_int8", ("cutlass",), M=512, N=1024, K=2048)
    e = _entry(r, "cutlass")
    assert e.status is Status.OK, e.reason
    assert e.verify_max_error == 0.0 and e.library and "CUTLASS Operator API" in e.library
    assert len(e.variants) == 24 and sum(v.chosen for v in e.variants) == 1
    chosen = next(v for v in e.variants if v.chosen)
    assert chosen.label in e.title and chosen.median_ms == e.median_ms
    timed = [v.median_ms for v in e.variants if v.status is Status.OK]
    assert e.median_ms == min(timed)  # every correct one timed, the fastest reported
    assert e.compile_s is not None and e.compile_s > 0
    assert {v.compile_note for v in e.variants} == {"JIT"}
    again = _entry(_run(tmp_path, "gemm_int8", ("cutlass",), M=512, N=1024, K=2048), "cutlass")
    assert {v.compile_note for v in again.variants} == {"loaded from the cache"}


def test_cutlass_fp8_is_within_the_spaces_tolerance(tmp_path: Path) -> None:
    if GPU.cc < 90 or _cutlass_missing():
        pytest.skip(f"needs sm_90+ and the CUTLASS extra (missing: {_cutlass_missing()})")
    r = _run(tmp_path, "gemm_fp8", ("cutlass",), M=1024, N=1024, K=1024)
    e = _entry(r, "cutlass")
    assert e.status is Status.OK, e.reason  # fp32 out, scaled into bf16 by torch.mul
    assert len(e.variants) == 24
    wrong = [v.label for v in e.variants if v.status is not Status.OK]
    assert not wrong, [(v.label, v.reason) for v in e.variants if v.status is not Status.OK]
