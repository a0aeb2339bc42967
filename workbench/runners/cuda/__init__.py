"""The GPU side of the runner: Driver API calls, the worker's executor, and ``CudaRunner``.

Importing this package needs no GPU; constructing a :class:`CudaRunner` does.
"""

from __future__ import annotations

from workbench.runners.cuda.runner import CudaRunner, NoGpuError

__all__ = ["CudaRunner", "NoGpuError"]
