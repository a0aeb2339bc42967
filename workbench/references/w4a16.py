"""Reference of gemm_w4a16: ``C = A . dequant(W)`` with W in the kernel's tiled int4 layout.

Unpack the same packed words the kernel reads (:func:`workbench.quant.int4.from_tiled`),
dequantize exactly to float32 (``s * (q - z)``: an fp16 scale times an integer of at most 4
bits), multiply in float32 (BLAS) and round once to the output type. The space file's tolerance
covers what the kernel rounds on top (each weight to fp16/bf16 with SCALE=element, fp32 sums in
another order).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from workbench.quant.int4 import TiledInt4, from_tiled
from workbench.references import ReferenceCall

#: numpy dtypes of the space's DTYPE values.
DTYPES: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}
#: Columns of W dequantized at a time: bounds the float32 temporaries to about K * 4096 * 4
#: bytes (the 70B MLP's W is 8192 x 28672: 0.9 GB at once).
BLOCK_COLUMNS = 4096


def tiled_from_inputs(
    qweight: np.ndarray,
    scales: np.ndarray,
    zeros: np.ndarray | None,
    *,
    n: int,
    group: int,
    symmetric: bool,
) -> TiledInt4:
    """The space's input arrays as a :class:`TiledInt4` (``zeros`` ignored when symmetric)."""
    return TiledInt4(qweight, scales, None if symmetric else zeros, n, group)


def w4a16_matmul(
    a: np.ndarray, weights: TiledInt4, out_dtype: np.dtype, *, block_columns: int = BLOCK_COLUMNS
) -> np.ndarray:
    """``round(float32(a) . dequant(weights))`` to ``out_dtype``, ``[M, N]``.

    Raises:
        Int4LayoutError: arrays that are not gemm_w4a16's layout.
        ValueError: ``a`` is not ``[M, K]`` for the weights' K.
    """
    w = from_tiled(weights)
    if a.ndim != 2 or a.shape[1] != w.k:
        raise ValueError(f"expected A[M, {w.k}], got {list(a.shape)}")
    a32 = a.astype(np.float32)
    out = np.empty((a.shape[0], w.n), dtype=out_dtype)
    rows = np.arange(w.k) // w.group
    zeros = w.zero_points().astype(np.float32)
    scales = w.scales.astype(np.float32)
    for n0 in range(0, w.n, block_columns):
        cols = slice(n0, n0 + block_columns)
        wd = (w.q[:, cols].astype(np.float32) - zeros[rows, cols]) * scales[rows, cols]
        out[:, cols] = (a32 @ wd).astype(out_dtype)
    return out


def gemm_w4a16(call: ReferenceCall) -> dict[str, np.ndarray]:
    """The space ``gemm_w4a16``: DTYPE, G and SYMMETRIC from the config, N from the shape."""
    symmetric = bool(call.config.get("SYMMETRIC", True))
    weights = tiled_from_inputs(
        call.inputs["qweight"],
        call.inputs["scales"],
        call.inputs.get("zeros"),
        n=int(call.shape["N"]),
        group=int(call.config.get("G", 128)),
        symmetric=symmetric,
    )
    dtype = DTYPES[str(call.config.get("DTYPE", "float16"))]
    return {"C": w4a16_matmul(call.inputs["A"], weights, dtype)}
