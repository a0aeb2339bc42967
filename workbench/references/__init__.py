"""CPU references for the built-in kernels.

A reference is a function ``f(call: ReferenceCall) -> dict[str, numpy.ndarray]`` returning the
expected value of every output; the runner compares with the space's tolerance (or exactly).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., object])


@dataclass(frozen=True)
class ReferenceCall:
    """What a reference sees: input arrays, named scalar arguments, the shape and the config."""

    inputs: Mapping[str, np.ndarray]
    scalars: Mapping[str, float | int]
    shape: Mapping[str, int]
    config: Mapping[str, Any]  #: bool, int, float or str values


def njit_cached(**options: Any) -> Callable[[F], F]:
    """``numba.njit`` with its on-disk cache (compiled once per machine), or without it where
    Numba finds no folder it may write (a read-only install and home): compiled per process."""
    from numba import njit

    def wrap(fn: F) -> F:
        try:
            return njit(cache=True, **options)(fn)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return njit(**options)(fn)

    return wrap
