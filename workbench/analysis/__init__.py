"""Static analysis of compiled kernels, no GPU needed.

* :mod:`~workbench.analysis.resources`: registers, shared memory, stack and spills per kernel
  from the ptxas ``-v`` log and the cubin's ELF (:func:`kernel_resources`).
* :mod:`~workbench.analysis.sass`: SASS per kernel through nvdisasm, opcode histograms and
  categories.
* :mod:`~workbench.analysis.occupancy`: theoretical occupancy from per-architecture limits.
* :mod:`~workbench.analysis.lints`: spills, local memory, emulated FP8, missing instructions.
"""

from __future__ import annotations

from workbench.analysis.cubin import CubinInfo, CubinKernel, parse_nv_info, read_cubin
from workbench.analysis.errors import AnalysisError, CubinError, SassError
from workbench.analysis.lints import Lint, LintCode, Severity, lint
from workbench.analysis.occupancy import TheoreticalOccupancy, theoretical_occupancy
from workbench.analysis.resources import KernelResources, kernel_resources, parse_ptxas_log
from workbench.analysis.sass import (
    SassInstruction,
    category,
    category_histogram,
    disassemble,
    find_opcode,
    full_histogram,
    has_opcode,
    histogram,
    parse_sass,
    streaming_loads,
)
from workbench.arch_limits import ARCH_LIMITS, ArchLimits, arch_limits

__all__ = [
    "ARCH_LIMITS",
    "AnalysisError",
    "ArchLimits",
    "CubinError",
    "CubinInfo",
    "CubinKernel",
    "KernelResources",
    "Lint",
    "LintCode",
    "SassError",
    "SassInstruction",
    "Severity",
    "TheoreticalOccupancy",
    "arch_limits",
    "category",
    "category_histogram",
    "disassemble",
    "find_opcode",
    "full_histogram",
    "has_opcode",
    "histogram",
    "kernel_resources",
    "lint",
    "parse_nv_info",
    "parse_ptxas_log",
    "parse_sass",
    "read_cubin",
    "streaming_loads",
    "theoretical_occupancy",
]
