"""The CPU reference of rmsnorm.yaml: a plain NumPy function that takes the inputs and scalar
arguments it needs by name and returns the output array (workbench compares it with the
kernel's y within the space file's tolerance)."""

import numpy as np


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x32 = x.astype(np.float32)
    scale = 1.0 / np.sqrt(np.mean(x32 * x32, axis=1, keepdims=True) + np.float32(eps))
    return (x32 * scale * w.astype(np.float32)).astype(x.dtype)
