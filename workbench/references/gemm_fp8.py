"""Reference for the FP8 GEMM family (``gemm_fp8``, ``gemm_fp8_e5m2``).

``C = (A . B^T) * scale_a[0] * scale_b[0]``, rounded to the output dtype. The FP8 inputs are
decoded exactly (every E4M3 / E5M2 value is a float64) and multiplied and summed in float64:
E4M3 products are integer multiples of 2^-18 below 2^18, so sums of up to K = 2^17 of them are
exact; E5M2 products span 2^-32 .. 2^32, where float64 is exact for inputs of ordinary size and
otherwise off by less than 2^-53 of the largest partial sum. The scaled result is rounded to
nearest even: directly to float16; to bfloat16 through float32 (ml_dtypes converts that way),
which is also what the kernel does with its fp32 value.

Tolerance (stated in the space files, ``|C - ref| <= atol + rtol * |ref|``):

* the kernel rounds an fp32 value to the output type, the reference the exact one: when the
  two straddle a rounding boundary they land on neighbouring values, one output ulp apart:
  ``rtol`` = 2^-9 (float16: 2^-10 relative spacing, doubled: 2e-3) or 2^-6 (bfloat16: 1e-2);
* the fp32 accumulation on the GPU is not the exact sum: its order is the tensor cores', and
  the FP8 tensor-core accumulators are reported to keep about 14 bits (DeepSeek-V3 technical
  report, section 3.3.2) rather than fp32's 24. That error grows with the partial sums, whose
  size for these inputs (normal(0, 1) before quantisation, scales <= 1) is about sqrt(K):
  ``atol`` = 2e-2 * sqrt(K) when the whole K accumulates in the tensor core (PROMOTE=false),
  4e-3 * sqrt(K) when every BK-slice is added into fp32 registers (PROMOTE=true). These bounds
  are estimates to be confirmed on the GPU, not measurements.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from workbench.references import ReferenceCall

#: numpy dtype of each output type name a space may give
OUTPUT_DTYPES: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
}


def decode_fp8(x: np.ndarray) -> np.ndarray:
    """FP8 values (``ml_dtypes.float8_e4m3fn`` or ``float8_e5m2`` arrays) as exact float64.

    Raises:
        TypeError: ``x`` is not an FP8 array.
    """
    if x.dtype not in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)):
        raise TypeError(f"expected float8_e4m3fn or float8_e5m2 values, got {x.dtype}")
    return x.astype(np.float64)


def scaled_matmul(
    a: np.ndarray, b: np.ndarray, scale_a: float, scale_b: float, out_dtype: np.dtype
) -> np.ndarray:
    """``(a . b^T) * scale_a * scale_b`` for FP8 ``a`` [M, K] and ``b`` [N, K], rounded once to
    ``out_dtype``."""
    exact = decode_fp8(a) @ decode_fp8(b).T
    return (exact * float(scale_a) * float(scale_b)).astype(out_dtype)


def gemm_fp8(call: ReferenceCall) -> dict[str, np.ndarray]:
    """Expected ``C`` of ``gemm_fp8(A, B, C, scale_a, scale_b, M, N, K)``.

    Raises:
        KeyError: the config has no ``OUT`` or names an output type this family does not have.
    """
    out = OUTPUT_DTYPES[str(call.config["OUT"])]
    a, b = call.inputs["A"], call.inputs["B"]
    scale_a = float(np.asarray(call.inputs["scale_a"]).reshape(-1)[0])
    scale_b = float(np.asarray(call.inputs["scale_b"]).reshape(-1)[0])
    return {"C": scaled_matmul(a, b, scale_a, scale_b, out)}
