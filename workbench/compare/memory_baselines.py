"""Baselines for bandwidth-bound kernels: CUB reductions through CuPy, and a device-to-device
copy of the bytes a kernel must move.

The copy is the yardstick of a memory-bound kernel: ``cuMemcpyDtoDAsync`` of half the work
model's minimum bytes reads and writes, together, as many bytes as the kernel must, so its
time is what moving that traffic costs on this GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported, register
from workbench.compare.gemm_baselines import cupy_on_stream
from workbench.compare.problems import BaselineProblem, Family
from workbench.runners.buffers import INT_POISON_BYTE
from workbench.spaces.schema import BaselineKind

#: Output name of the copy baseline (never a kernel output: it is checked against its source).
COPY_OUTPUT = "copy"


@register
class CubReduce(Baseline):
    """CUB ``DeviceReduce`` / ``DeviceSegmentedReduce`` through CuPy's ``cupy.cuda.cub``."""

    name = "cub"
    kind = BaselineKind.CUB
    title = "CUB DeviceReduce (CuPy)"
    label = "CUB"
    families = frozenset({Family.REDUCE, Family.REDUCE_ROWS})
    dtypes = frozenset({"float32", "float16"})
    modules = ("cupy",)

    def limits(self, problem: BaselineProblem) -> str | None:
        if problem.op not in ("sum", "max"):
            return f"CUB has sum and max reductions, not {problem.op} (it would take two kernels)"
        if problem.op == "sum" and "float16" in problem.input_dtypes:
            return (
                "CUB's sum of float16 returns float16 (no accumulation type), the kernel sums "
                "into float32"
            )
        return None

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        cp = cupy_on_stream(stream)
        try:
            from cupy.cuda import cub

            op = {"sum": cub.CUPY_CUB_SUM, "max": cub.CUPY_CUB_MAX}[str(problem.op)]
            reduction = cub.cub_reduction
        except (ImportError, AttributeError) as exc:
            raise BaselineUnsupported(f"this CuPy has no CUB reductions: {exc}") from exc
        x = cp.asarray(np.ascontiguousarray(inputs["x"]))
        if problem.family is Family.REDUCE_ROWS:
            x = x.reshape(problem.dim("rows"), problem.dim("cols"))
            return _CubRun(cp, lambda: reduction(x, op, axis=1), "out")
        return _CubRun(cp, lambda: reduction(x.reshape(-1), op, axis=None), "total")

    def version(self) -> str:
        import cupy as cp
        from cupy.cuda import cub

        return f"CUB {cub.get_build_version()} via CuPy {cp.__version__}"


class _CubRun:
    def __init__(self, cp: Any, call: Any, name: str) -> None:
        self.cp, self.call, self.name = cp, call, name
        self.result: Any = None

    def poison(self) -> None:
        self.result = None  # CuPy allocates the result of every call from its pool

    def launch(self) -> None:
        result = self.call()
        if result is None:  # cub_reduction's answer when CUB cannot do it
            raise BaselineUnsupported("CuPy says CUB cannot do this reduction (dtype or layout)")
        self.result = result

    def outputs(self) -> dict[str, np.ndarray]:
        if self.result is None:
            return {}
        return {self.name: self.cp.asnumpy(self.result).astype(np.float32).reshape(-1)}


@register
class DeviceCopy(Baseline):
    """``cuMemcpyDtoDAsync`` of half the kernel's minimum bytes (read + write = all of them)."""

    name = "copy"
    kind = BaselineKind.COPY
    title = "device-to-device copy of the work model's bytes (cuMemcpyDtoDAsync)"
    families = frozenset({Family.STREAM, Family.REDUCE, Family.REDUCE_ROWS})
    modules = ("cuda.bindings",)

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        return _CopyRun(copy_source(inputs, problem.copy_bytes), stream)

    def version(self) -> str:
        from cuda.bindings import driver as cu

        from workbench.runners.cuda.driver import call

        v = int(call(cu.cuDriverGetVersion))
        return f"CUDA driver {v // 1000}.{v % 1000 // 10} cuMemcpyDtoDAsync"


def copy_source(inputs: Mapping[str, np.ndarray], nbytes: int) -> np.ndarray:
    """The bytes the copy baseline copies: the kernel's inputs, repeated up to ``nbytes``."""
    raw = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in inputs.values()]
    data = np.concatenate(raw) if raw else np.arange(256, dtype=np.uint8)
    if data.size == 0:
        data = np.arange(256, dtype=np.uint8)
    reps = -(-nbytes // data.size)
    return np.tile(data, reps)[:nbytes] if reps > 1 else data[:nbytes].copy()


class _CopyRun:
    def __init__(self, source: np.ndarray, stream: int) -> None:
        from cuda.bindings import driver as cu

        from workbench.runners.cuda.driver import call

        self.cu, self.call = cu, call
        self.nbytes = int(source.nbytes)
        self.stream = cu.CUstream(stream)
        self.src = call(cu.cuMemAlloc, self.nbytes)  # CUdeviceptr objects, as driver.py keeps
        self.dst = call(cu.cuMemAlloc, self.nbytes)
        call(cu.cuMemcpyHtoD, self.src, source.ctypes.data, self.nbytes)
        call(cu.cuCtxSynchronize)  # the copy may still be in flight (pageable memory)

    def poison(self) -> None:
        self.call(self.cu.cuMemsetD8Async, self.dst, INT_POISON_BYTE, self.nbytes, self.stream)

    def launch(self) -> None:
        self.call(self.cu.cuMemcpyDtoDAsync, self.dst, self.src, self.nbytes, self.stream)

    def outputs(self) -> dict[str, np.ndarray]:
        host = np.empty(self.nbytes, dtype=np.uint8)
        self.call(self.cu.cuMemcpyDtoH, host.ctypes.data, self.dst, self.nbytes)
        return {COPY_OUTPUT: host}

    def close(self) -> None:
        for ptr in (self.src, self.dst):
            self.call(self.cu.cuMemFree, ptr)
