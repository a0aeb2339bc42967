"""workbench: compile, inspect, tune and explain parametrized CUDA kernels."""

from __future__ import annotations

__version__ = "0.1.0"
