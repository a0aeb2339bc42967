"""Compile configurations to CUBIN: NVRTC for CUDA C++, ptxas for PTX, with a content cache."""

from __future__ import annotations

from workbench.compiler.cache import CompileCache
from workbench.compiler.driver import CompileAhead, compile_job, compile_jobs
from workbench.compiler.jobs import CompileJob, make_job
from workbench.compiler.options import CompileOptions
from workbench.compiler.result import CompileResult

__all__ = [
    "CompileAhead",
    "CompileCache",
    "CompileJob",
    "CompileOptions",
    "CompileResult",
    "compile_job",
    "compile_jobs",
    "make_job",
]
