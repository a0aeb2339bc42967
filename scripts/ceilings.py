"""Measure the ceilings of the GPU at hand: device-to-device copy bandwidth and dense
matrix-multiply throughput per precision through every library that offers it (int8: cuBLAS
``cublasGemmEx`` through CuPy and cuBLASLt through ``torch._int_mm``; fp8: ``torch._scaled_mm``;
fp16: ``torch.matmul``). A ceiling is the best that was measured for its unit, so each
section's figure is its fastest library's, and every library's run is kept in ``libraries``.

Run on the lent GPU by scripts/device_check.sh (the repository on PYTHONPATH: the cuBLAS call
takes its enum values from workbench.compare.gemm_baselines); prints the JSON and writes it.
Timing: CUDA events around each repetition after warm-ups, median of the repetitions; each run
is timed twice (``repeat_ms``: the two medians, the same-run repeatability; ``median_ms`` is the
lower one). No clocks are changed. A run that fails is left out (its error goes to
``errors``, keyed ``section: via``) and the others are still written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _time_ms(fn: Callable[[], object], reps: int = 20, warmup: int = 3) -> list[float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end))
    return out


def timed_twice(fn: Callable[[], object]) -> tuple[float, list[float]]:
    """The lower of two medians, and both."""
    runs = [statistics.median(_time_ms(fn)) for _ in range(2)]
    return min(runs), runs


def library_run(via: str, median_ms: float, repeat_ms: list[float], work: float, key: str,
                scale: float) -> dict[str, Any]:  # fmt: skip
    """One library's figure: ``key`` (``tops``, ``tflops``, ``gbs_read_plus_write``) is
    ``work`` (operations or bytes) over the median, divided by ``scale``."""
    rate = work / (median_ms * 1e-3) / scale
    return {"via": via, "median_ms": median_ms, "repeat_ms": repeat_ms, key: rate}


def fastest_section(runs: list[dict[str, Any]], key: str, **facts: Any) -> dict[str, Any]:
    """A ceiling's section: ``facts`` (``n``...), the fastest run's figures at the top (what
    readers of the first format read) and every run under ``libraries``.

    Raises:
        ValueError: no run.
    """
    if not runs:
        raise ValueError("no library ran")
    best = max(runs, key=lambda r: r[key])
    return {**facts, **best, "libraries": runs}


def _cublas_int8(torch: Any, a8: Any, b8: Any) -> Callable[[], object]:
    """``C = A . B^T`` through cuBLAS ``cublasGemmEx`` (s8 x s8 -> s32), as ``workbench compare``
    calls it, on torch's current stream."""
    import cupy as cp
    import numpy as np
    from cupy_backends.cuda.libs import cublas

    from workbench.compare.gemm_baselines import (
        CUBLAS_COMPUTE_32I,
        CUBLAS_GEMM_DEFAULT,
        CUBLAS_OP_N,
        CUBLAS_OP_T,
        CUDA_R_8I,
        CUDA_R_32I,
    )

    n = a8.shape[0]
    c = torch.empty((n, n), dtype=torch.int32, device="cuda")
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, torch.cuda.current_stream().cuda_stream)
    alpha, beta = np.ones((), dtype=np.int32), np.zeros((), dtype=np.int32)

    def call() -> None:
        cublas.gemmEx(
            handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n,
            alpha.ctypes.data, b8.data_ptr(), CUDA_R_8I, n,
            a8.data_ptr(), CUDA_R_8I, n,
            beta.ctypes.data, c.data_ptr(), CUDA_R_32I, n,
            CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip

    return call


def _matmuls(torch: Any, n: int) -> dict[str, list[tuple[str, Callable[[], Callable[[], object]]]]]:
    """Per section, (via, make the call) of every library timed for it: inputs are made when
    a library is reached, so a failure costs that library only."""

    @functools.cache
    def int8() -> tuple[Any, Any]:  # one pair of inputs for both int8 libraries
        a = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
        return a, torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")

    def int_mm() -> Callable[[], object]:
        a, b = int8()
        return lambda: torch._int_mm(a, b.t())

    def scaled_mm() -> Callable[[], object]:
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        one = torch.tensor(1.0, device="cuda")
        kwargs = {"scale_a": one, "scale_b": one, "out_dtype": torch.bfloat16}
        return lambda: torch._scaled_mm(a, b.t(), **kwargs)

    def matmul() -> Callable[[], object]:
        a = torch.randn(n, n, dtype=torch.float16, device="cuda")
        b = torch.randn(n, n, dtype=torch.float16, device="cuda")
        return lambda: a @ b.t()

    return {
        "int8_matmul": [
            ("cuBLAS cublasGemmEx (CuPy)", lambda: _cublas_int8(torch, *int8())),
            ("torch._int_mm (cuBLASLt)", int_mm),
        ],
        "fp8_matmul": [("torch._scaled_mm e4m3 -> bf16 (cuBLASLt)", scaled_mm)],
        "fp16_matmul": [("torch.matmul", matmul)],
    }


#: section -> the key of its figure (what workbench.roofline.measured_ceilings reads)
MATMUL_KEYS = {"int8_matmul": "tops", "fp8_matmul": "tflops", "fp16_matmul": "tflops"}


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--copy-gib", type=float, default=4.0)
    parser.add_argument("--n", type=int, default=8192)
    args = parser.parse_args()
    dev = torch.cuda.get_device_properties(0)
    result: dict[str, object] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu": dev.name,
        "sm_count": dev.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }

    #: failed runs, kept out of their sections (workbench reads a section as a ceiling)
    errors: dict[str, str] = {}
    result["errors"] = errors

    n_bytes = int(args.copy_gib * 2**30)
    try:
        src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        copy_ms, runs = timed_twice(lambda: dst.copy_(src))
        run = library_run(
            "torch.Tensor.copy_", copy_ms, runs, 2 * n_bytes, "gbs_read_plus_write", 1e9
        )
        result["copy"] = {"bytes": n_bytes, **run}
    except Exception as exc:  # keep the other ceilings
        errors["copy"] = f"{type(exc).__name__}: {exc}"
    n = args.n
    flops = 2.0 * n * n * n
    for section, libraries in _matmuls(torch, n).items():
        key = MATMUL_KEYS[section]
        runs_ok = []
        for via, make in libraries:
            try:
                median, repeats = timed_twice(make())
                runs_ok.append(library_run(via, median, repeats, flops, key, 1e12))
            except Exception as exc:  # the section's other libraries still run
                errors[f"{section}: {via}"] = f"{type(exc).__name__}: {exc}"
        if runs_ok:
            result[section] = fastest_section(runs_ok, key, n=n)
    print(json.dumps(result, indent=1))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
