"""References for the reduce family (``kernels_cu/reduce.cu``).

Sums are accumulated in float64 (exact enough to judge a float32 kernel, whatever order the
kernel adds in); max is exact. float16 inputs convert to float64 exactly, as they convert to
float32 exactly on the GPU.
"""

from __future__ import annotations

import numpy as np

from workbench.references import ReferenceCall

#: The reductions of ``Op`` in reduce.cu.
OPS = ("sum", "max", "sumsq")


def sum_all(call: ReferenceCall) -> dict[str, np.ndarray]:
    """``total = sum(x)``, accumulated in float64 (exact enough to judge a float32 kernel)."""
    x = call.inputs["x"]
    return {"total": np.array([np.sum(x, dtype=np.float64)], dtype=np.float32)}


def reduce_all(call: ReferenceCall) -> dict[str, np.ndarray]:
    """``total = OP(x)`` over the whole tensor, for ``OP`` in the config (default ``sum``)."""
    op = str(call.config.get("OP", "sum"))
    x = call.inputs["x"].reshape(-1)
    return {"total": np.array([reduce_1d(x, op)], dtype=np.float32)}


def reduce_rows(call: ReferenceCall) -> dict[str, np.ndarray]:
    """``out[r] = OP(x[r, :])`` for each row of the ``[rows, cols]`` input, as float32."""
    op = str(call.config.get("OP", "sum"))
    rows, cols = int(call.shape["rows"]), int(call.shape["cols"])
    x = call.inputs["x"].reshape(rows, cols)
    return {"out": reduce_rows_2d(x, op).astype(np.float32)}


def reduce_1d(x: np.ndarray, op: str) -> float:
    """``OP`` of a 1-D array in float64.

    Raises:
        ValueError: ``op`` is not one of :data:`OPS`.
    """
    return float(reduce_rows_2d(x.reshape(1, -1), op)[0])


def reduce_rows_2d(x: np.ndarray, op: str) -> np.ndarray:
    """``OP`` of each row of a 2-D array, in float64.

    Raises:
        ValueError: ``op`` is not one of :data:`OPS`.
    """
    wide = x.astype(np.float64)
    if op == "sum":
        return wide.sum(axis=1)
    if op == "max":
        return wide.max(axis=1)
    if op == "sumsq":
        return (wide * wide).sum(axis=1)
    raise ValueError(f"unknown reduction {op!r}; expected one of {', '.join(OPS)}")
