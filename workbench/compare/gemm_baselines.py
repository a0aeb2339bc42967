"""GEMM baselines: cuBLAS ``cublasGemmEx`` through CuPy, cuBLASLt through ``torch._int_mm``
(int8) and ``torch._scaled_mm`` (FP8); CUTLASS is :mod:`workbench.compare.cutlass_baseline`.

Layouts: the kernels compute ``C[M, N] = A[M, K] . B[N, K]^T`` with both operands K-major and C
row-major. cuBLAS is column-major, so it computes ``C^T = B . A^T``: ``op(B) = T`` on B read as
a column-major [K, N] matrix, ``op(A) = N`` on A read as a column-major [K, M] matrix, which
is the "TN" layout cuBLAS's int8 tensor-core kernels want. PyTorch takes ``B.t()``, a
column-major view of the same bytes, as FACTS.md says ``torch._int_mm`` prefers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported, register
from workbench.compare.problems import BaselineProblem, Family
from workbench.runners.buffers import INT_POISON_BYTE
from workbench.spaces.schema import BaselineKind

# cuBLAS / CUDA enum values (cublas_api.h, library_types.h): part of the C ABI
CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUDA_R_8I, CUDA_R_32I = 3, 10
CUBLAS_COMPUTE_32I = 72
CUBLAS_GEMM_DEFAULT = -1


@register
class CublasGemmEx(Baseline):
    """cuBLAS ``cublasGemmEx`` with int8 inputs, int32 output and int32 compute."""

    name = "cublas"
    kind = BaselineKind.CUBLAS
    title = "cuBLAS cublasGemmEx s8*s8->s32 (CuPy)"
    label = "cuBLAS"
    families = frozenset({Family.GEMM_INT8})
    dtypes = frozenset({"int8"})
    min_cc = 61  # int8 GEMMs need dp4a (sm_61) or tensor cores
    modules = ("cupy",)  # find_spec of a submodule would import its parents here

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        cp = cupy_on_stream(stream)
        try:
            from cupy_backends.cuda.libs import cublas
        except ImportError as exc:
            raise BaselineUnsupported(f"this CuPy has no cuBLAS bindings: {exc}") from exc

        return _CublasRun(cp, cublas, problem, inputs)

    def version(self) -> str:
        import cupy as cp
        from cupy_backends.cuda.libs import cublas

        v = cublas.getVersion(cp.cuda.device.get_cublas_handle())
        return f"cuBLAS {v // 10000}.{v // 100 % 100}.{v % 100} via CuPy {cp.__version__}"


class _CublasRun:
    def __init__(
        self, cp: Any, cublas: Any, problem: BaselineProblem, inputs: Mapping[str, np.ndarray]
    ):
        self.cp, self.cublas = cp, cublas
        self.m, self.n, self.k = problem.dim("M"), problem.dim("N"), problem.dim("K")
        self.a = cp.asarray(np.ascontiguousarray(inputs["A"]))
        self.b = cp.asarray(np.ascontiguousarray(inputs["B"]))
        self.c = cp.empty((self.m, self.n), dtype=cp.int32)
        self.handle = cp.cuda.device.get_cublas_handle()
        # host scalars: cuBLAS's default pointer mode reads alpha and beta from the host
        self.alpha = np.ones((), dtype=np.int32)
        self.beta = np.zeros((), dtype=np.int32)

    def poison(self) -> None:
        self.c.view(self.cp.uint8).fill(INT_POISON_BYTE)

    def launch(self) -> None:
        try:
            self.cublas.gemmEx(
                self.handle, CUBLAS_OP_T, CUBLAS_OP_N, self.n, self.m, self.k,
                self.alpha.ctypes.data, self.b.data.ptr, CUDA_R_8I, self.k,
                self.a.data.ptr, CUDA_R_8I, self.k,
                self.beta.ctypes.data, self.c.data.ptr, CUDA_R_32I, self.n,
                CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT,
            )  # fmt: skip
        except self.cublas.CUBLASError as exc:  # e.g. CUBLAS_STATUS_NOT_SUPPORTED
            raise BaselineUnsupported(
                f"cublasGemmEx refused M={self.m} N={self.n} K={self.k}: {exc}"
            ) from exc

    def outputs(self) -> dict[str, np.ndarray]:
        return {"C": self.cp.asnumpy(self.c)}


@register
class TorchIntMM(Baseline):
    """cuBLASLt int8 GEMM through ``torch._int_mm`` (int32 output)."""

    name = "cublaslt"
    kind = BaselineKind.CUBLASLT
    title = "cuBLASLt s8*s8->s32 (torch._int_mm)"
    label = "cuBLASLt"
    families = frozenset({Family.GEMM_INT8})
    dtypes = frozenset({"int8"})
    min_cc = 75
    modules = ("torch",)

    def limits(self, problem: BaselineProblem) -> str | None:
        # the checks aten's _int_mm_cuda makes before it calls cuBLASLt
        m, n, k = problem.dim("M"), problem.dim("N"), problem.dim("K")
        if m <= 16:
            return f"torch._int_mm needs M > 16 (M = {m})"
        if k % 8 or n % 8:
            return f"torch._int_mm needs K and N multiples of 8 (K = {k}, N = {n})"
        return None

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        torch = torch_on_stream(stream)
        a = to_torch(torch, inputs["A"], "int8")
        b = to_torch(torch, inputs["B"], "int8")
        bt = b.t()  # the column-major [K, N] view of B's bytes
        out = torch.empty((problem.dim("M"), problem.dim("N")), dtype=torch.int32, device=a.device)

        def call(o: Any) -> Any:
            return torch._int_mm(a, bt) if o is None else torch._int_mm(a, bt, out=o)

        return _TorchRun(torch, call, out, "C", "int32")

    def version(self) -> str:
        return _torch_version()


@register
class TorchScaledMM(Baseline):
    """cuBLASLt FP8 GEMM through ``torch._scaled_mm`` with tensor-wise float32 scales."""

    name = "cublaslt_fp8"
    kind = BaselineKind.CUBLASLT
    title = "cuBLASLt fp8 (torch._scaled_mm, tensor-wise scales)"
    label = "cuBLASLt"
    families = frozenset({Family.GEMM_FP8})
    dtypes = frozenset({"float8_e4m3", "float8_e5m2"})
    min_cc = 89  # FP8 tensor cores: Ada and Hopper
    modules = ("torch",)

    def limits(self, problem: BaselineProblem) -> str | None:
        n, k = problem.dim("N"), problem.dim("K")
        if k % 16 or n % 16:
            return f"torch._scaled_mm needs K and N multiples of 16 (K = {k}, N = {n})"
        if {problem.inputs.get("A"), problem.inputs.get("B")} == {"float8_e5m2"}:
            return "cuBLASLt has no e5m2 x e5m2 FP8 GEMM (one operand must be e4m3)"
        if problem.out_dtype not in ("bfloat16", "float16", "float32"):
            return f"no output type {problem.out_dtype!r} in torch._scaled_mm"
        return None

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        torch = torch_on_stream(stream)
        a = to_torch(torch, inputs["A"], problem.inputs["A"])
        b = to_torch(torch, inputs["B"], problem.inputs["B"])
        scales = [
            torch.tensor(float(np.asarray(inputs[s]).reshape(-1)[0]), device=a.device)
            for s in ("scale_a", "scale_b")
        ]
        out_dtype = _TORCH_DTYPES[str(problem.out_dtype)]
        shape = (problem.dim("M"), problem.dim("N"))
        out = torch.empty(shape, dtype=getattr(torch, out_dtype), device=a.device)
        bt = b.t()

        def call(o: Any) -> Any:
            kwargs = {"scale_a": scales[0], "scale_b": scales[1], "out_dtype": out.dtype}
            if o is None:
                return torch._scaled_mm(a, bt, **kwargs)
            return torch._scaled_mm(a, bt, **kwargs, out=o)

        return _TorchRun(torch, call, out, "C", str(problem.out_dtype))

    def version(self) -> str:
        return _torch_version()


# -- torch and CuPy plumbing (worker side) ---------------------------------------------------
#: space dtype -> torch dtype attribute
_TORCH_DTYPES = {
    "int8": "int8",
    "int32": "int32",
    "float8_e4m3": "float8_e4m3fn",
    "float8_e5m2": "float8_e5m2",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float32": "float32",
}


def cupy_on_stream(stream: int) -> Any:
    """CuPy, working on the timing stream."""
    try:
        import cupy as cp
    except Exception as exc:  # ImportError, or a CUDA library mismatch at import
        raise BaselineUnsupported(f"CuPy does not import: {type(exc).__name__}: {exc}") from exc
    cp.cuda.ExternalStream(stream).use()
    return cp


def torch_on_stream(stream: int) -> Any:
    """PyTorch, working on the timing stream."""
    try:
        import torch
    except Exception as exc:
        raise BaselineUnsupported(f"PyTorch does not import: {type(exc).__name__}: {exc}") from exc
    if not torch.cuda.is_available():
        raise BaselineUnsupported(f"PyTorch {torch.__version__} sees no CUDA device")
    torch.cuda.set_stream(torch.cuda.ExternalStream(stream))
    return torch


def _torch_version() -> str:
    import torch

    return f"PyTorch {torch.__version__} (CUDA {torch.version.cuda})"


def torch_dtype(torch: Any, dtype: str) -> Any:
    """The torch dtype of the space dtype ``dtype`` (``float8_e4m3`` -> ``torch.float8_e4m3fn``)."""
    return getattr(torch, _TORCH_DTYPES[dtype])


def to_torch(torch: Any, array: np.ndarray, dtype: str) -> Any:
    """A device tensor of ``array``'s bytes as ``dtype`` (torch has no ml_dtypes arrays)."""
    raw = torch.from_numpy(np.ascontiguousarray(array).reshape(-1).view(np.uint8))
    flat = raw.to("cuda").view(torch_dtype(torch, dtype))
    return flat.reshape(array.shape)


def torch_to_numpy(torch: Any, tensor: Any, dtype: str) -> np.ndarray:
    """A host copy of ``tensor`` as the space dtype ``dtype`` (bytes reinterpreted)."""
    from workbench.runners.buffers import numpy_dtype
    from workbench.spaces.schema import DType

    raw = tensor.contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
    return raw.view(numpy_dtype(DType(dtype))).reshape(tuple(tensor.shape))


class _TorchRun:
    """One torch call that writes ``out``: ``out=`` keeps allocation out of the timing; a torch
    without the ``out=`` overload gets ``call(None)``, served by its caching allocator."""

    def __init__(self, torch: Any, call: Any, out: Any, name: str, dtype: str) -> None:
        self.torch, self.call, self.out, self.name, self.dtype = torch, call, out, name, dtype
        self.use_out = True

    def poison(self) -> None:
        self.out.view(self.torch.uint8).fill_(INT_POISON_BYTE)

    def launch(self) -> None:
        try:
            if self.use_out:
                self.call(self.out)
            else:
                self.out = self.call(None)
        except TypeError:
            if not self.use_out:
                raise
            self.use_out = False
            self.out = self.call(None)
        except RuntimeError as exc:
            if "CUDA error" in str(exc):
                raise  # a fault, not a refusal: the worker restarts
            raise BaselineUnsupported(str(exc).splitlines()[0]) from exc

    def outputs(self) -> dict[str, np.ndarray]:
        return {self.name: torch_to_numpy(self.torch, self.out, self.dtype)}
