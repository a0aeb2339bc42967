"""Runners turn a configuration into a verified measurement (see :mod:`workbench.runners.base`).

:class:`~workbench.runners.cuda.CudaRunner` runs on the local GPU through a supervised worker
process; the pieces it is made of (stopping rule, buffers, reference, verification, worker
supervision) are modules of their own and work without a GPU.

The names below load lazily: a worker process that only needs the protocol
(:mod:`workbench.runners.protocol`) does not pay for importing the space machinery.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DeviceInfo", "Measurement", "Objective", "Runner", "TrialOutcome"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("workbench.runners.base"), name)
    raise AttributeError(f"module 'workbench.runners' has no attribute {name!r}")
