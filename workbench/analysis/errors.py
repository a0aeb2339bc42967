"""Errors of the static-analysis package, all under :class:`workbench.errors.WorkbenchError`."""

from __future__ import annotations

from workbench.errors import WorkbenchError


class AnalysisError(WorkbenchError):
    """Static analysis could not be done on the given input (bad arguments, unusable data)."""


class CubinError(AnalysisError):
    """The bytes are not a CUDA cubin, or the cubin is truncated or malformed."""


class SassError(AnalysisError):
    """The disassemblers ran but gave no usable SASS for a cubin."""
