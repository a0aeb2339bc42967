"""References for element-wise kernels."""

from __future__ import annotations

import numpy as np

from workbench.references import ReferenceCall


def scale(call: ReferenceCall) -> dict[str, np.ndarray]:
    """``y = alpha * x`` in float32: one correctly rounded multiply, as on the GPU."""
    x = call.inputs["x"].astype(np.float32, copy=False)
    return {"y": np.float32(call.scalars["alpha"]) * x}
