"""CPU references for the built-in kernels.

A reference is a function ``f(call: ReferenceCall) -> dict[str, numpy.ndarray]`` returning the
expected value of every output; the runner compares with the space's tolerance (or exactly).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ReferenceCall:
    """What a reference sees: input arrays, named scalar arguments, the shape and the config."""

    inputs: Mapping[str, np.ndarray]
    scalars: Mapping[str, float | int]
    shape: Mapping[str, int]
    config: Mapping[str, Any]  #: bool, int, float or str values
