"""References for the GEMM family: exact int8 GEMM (int32 out) and the W8A8 epilogue.

Both kernels compute ``acc = A[M, K] . B[N, K]^T`` with int8 inputs and int32 accumulators.

How the exact product is computed here: in float64 BLAS, one block of rows at a time. Every
product of two int8 values is an integer of magnitude at most 2**14, and every partial sum an
integer of magnitude at most K * 2**14; float64 represents all integers below 2**53 exactly, so
as long as K * 2**14 < 2**53 (K < 2**39) every multiply, add and FMA BLAS performs is exact, in
any order. The result is the exact integer product, at BLAS speed. (numpy's int64 matmul has no
BLAS behind it: 1024**3 took ~7 s on a 2-core machine, 4096**3 would take minutes.)

int32 overflow: the GPU accumulates in int32, which wraps (mma.sync without ``.satfinite``,
``atomicAdd``). With worst-case inputs (every product (-128) * (-128) = 2**14) the sum reaches
2**31 at K = 131072 = 2**17, one past the int32 maximum; random inputs stay far below (the sum
grows like sqrt(K)). :func:`int8_gemm_exact` refuses results outside int32 instead of
returning a number the kernel cannot match; the space files also state ``K < 131072``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from workbench.references import ReferenceCall

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
#: Largest K for which every float64 partial sum of int8 products is an exactly
#: representable integer (K * 2**14 < 2**53).
FLOAT64_EXACT_K = 2**39 - 1
#: Rows of A and B converted to float64 at a time: bounds the temporaries to about
#: 2 * BLOCK_ROWS * K * 8 bytes plus BLOCK_ROWS**2 * 8 (~200 MB at K = 4096).
BLOCK_ROWS = 2048

#: numpy dtypes of the W8A8 output types (the space's OUT parameter).
OUT_DTYPES: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
}


def int8_gemm_exact(a: np.ndarray, b: np.ndarray, *, block_rows: int = BLOCK_ROWS) -> np.ndarray:
    """``A[M, K] . B[N, K]^T`` of int8 matrices, exactly, as int32.

    Args:
        a: int8 array [M, K] (row-major activations).
        b: int8 array [N, K] (row-major weights: the layout of a linear layer).
        block_rows: rows of ``a`` and of ``b`` per float64 block.

    Returns:
        The int32 product [M, N].

    Raises:
        ValueError: wrong dtypes or shapes, or a result outside int32 (the GPU's int32
            accumulators would wrap; see the module docstring).
    """
    if a.dtype != np.int8 or b.dtype != np.int8:
        raise ValueError(f"expected int8 inputs, got {a.dtype} and {b.dtype}")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"expected A[M, K] and B[N, K], got {a.shape} and {b.shape}")
    m, k = a.shape
    n = b.shape[0]
    if k > FLOAT64_EXACT_K:
        raise ValueError(f"K = {k} is too large for an exact float64 product")
    out = np.empty((m, n), dtype=np.int32)
    for n0 in range(0, n, block_rows):
        b_block = b[n0 : n0 + block_rows].astype(np.float64).T  # (K, block of N)
        for m0 in range(0, m, block_rows):
            acc = a[m0 : m0 + block_rows].astype(np.float64) @ b_block  # exact integers
            lo, hi = (acc.min(), acc.max()) if acc.size else (0.0, 0.0)
            if lo < INT32_MIN or hi > INT32_MAX:
                worst = int(lo if lo < INT32_MIN else hi)
                raise ValueError(
                    f"the int32 accumulators overflow (a sum reaches {worst} at K = {k}): the "
                    "GPU result would wrap around; keep K < 131072 or bound the inputs"
                )
            out[m0 : m0 + block_rows, n0 : n0 + block_rows] = acc.astype(np.int32)
    return out


def w8a8_dequantize(
    acc: np.ndarray, row_scale: np.ndarray, col_scale: np.ndarray, out: str
) -> np.ndarray:
    """``C = float(acc) * row_scale[m] * col_scale[n]`` in float32, rounded to ``out``.

    The same operations in the same order as the kernel's epilogue: int32 -> float32
    (round to nearest), two float32 multiplies (each correctly rounded; nothing to fuse), then one
    round-to-nearest-even conversion to the output type.

    Raises:
        ValueError: unknown output type, or scale vectors that do not match ``acc``.
    """
    if out not in OUT_DTYPES:
        raise ValueError(f"unknown W8A8 output type {out!r}; expected one of {list(OUT_DTYPES)}")
    m, n = acc.shape
    if row_scale.shape != (m,) or col_scale.shape != (n,):
        raise ValueError(
            f"expected row_scale [{m}] and col_scale [{n}], "
            f"got {row_scale.shape} and {col_scale.shape}"
        )
    rs = row_scale.astype(np.float32, copy=False)[:, None]
    cs = col_scale.astype(np.float32, copy=False)[None, :]
    value = (acc.astype(np.float32) * rs) * cs  # float32 throughout
    return value.astype(OUT_DTYPES[out])


def gemm_int8(call: ReferenceCall) -> dict[str, np.ndarray]:
    """The space ``gemm_int8``: for the config's epilogue ``EPI`` (raw when not given),
    ``C = A . B^T`` in int32 (exact), or the W8A8 result of :func:`gemm_w8a8`."""
    if call.config.get("EPI", "raw") == "w8a8":
        return gemm_w8a8(call)
    return {"C": int8_gemm_exact(call.inputs["A"], call.inputs["B"])}


def gemm_w8a8(call: ReferenceCall) -> dict[str, np.ndarray]:
    """``C = (A . B^T) * row_scale[:, None] * col_scale[None, :]`` (``gemm_int8`` with
    EPI=w8a8, the name ``gemm_w8a8``).

    The output type is the config's ``OUT`` (float16, bfloat16 or float32).
    """
    acc = int8_gemm_exact(call.inputs["A"], call.inputs["B"])
    out = str(call.config["OUT"])
    return {"C": w8a8_dequantize(acc, call.inputs["row_scale"], call.inputs["col_scale"], out)}
