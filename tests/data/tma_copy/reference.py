"""Reference of tma_copy: the output is the input."""

from __future__ import annotations

import numpy as np

from workbench.references import ReferenceCall


def copy(call: ReferenceCall) -> dict[str, np.ndarray]:
    return {"Y": call.inputs["X"].copy()}
