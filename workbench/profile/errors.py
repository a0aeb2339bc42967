"""Errors of the profiler: each names the file, metric or tool it is about."""

from __future__ import annotations

import enum
from pathlib import Path

from workbench.errors import NoGpuError, WorkbenchError


class ProfileError(WorkbenchError):
    """Root of the profiler's errors."""


class ReportError(ProfileError):
    """An ``.ncu-rep`` file cannot be read: missing, damaged, truncated or not a report.

    Args:
        path: the file.
        message: what is wrong with it.
    """

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        self.detail = message
        super().__init__(f"{self.path}: {message}")


class MetricNameError(ProfileError):
    """Metric names the target chip does not know (a typo, or a metric of another chip).

    Args:
        chip: the chip the names were checked against (``GH100``).
        unknown: the refused names, each with its closest known names.
        source: what the names were checked against (the Perfworks host library, or the
            curated list of names Nsight Compute adds itself).
    """

    def __init__(self, chip: str, unknown: dict[str, list[str]], source: str) -> None:
        self.chip = chip
        self.unknown = dict(unknown)
        parts = []
        for name, close in self.unknown.items():
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            parts.append(f"{name}{hint}")
        super().__init__(
            f"unknown metric name{'s' if len(parts) > 1 else ''} for {chip} "
            f"(checked against {source}): {'; '.join(parts)}"
        )


class NcuProblem(enum.Enum):
    """Why Nsight Compute gave no profile."""

    NOT_FOUND = "ncu not found"
    NO_PERMISSION = "no permission to read GPU performance counters"
    UNSUPPORTED = "the GPU or its virtualization does not expose performance counters"
    NO_KERNELS = "no kernel matched the filters"
    TIMEOUT = "ncu timed out"
    FAILED = "ncu failed"
    NO_GPU = "no CUDA GPU"


class NcuUnavailable(ProfileError):
    """Nsight Compute could not profile: ``problem`` says which way, the message says why.

    Args:
        problem: the kind of failure.
        message: the evidence (ncu's own error lines, the command).
    """

    def __init__(self, problem: NcuProblem, message: str) -> None:
        self.problem = problem
        self.detail = message
        super().__init__(f"{problem.value}: {message}")


class NoGpuToProfile(NcuUnavailable, NoGpuError):
    """There is no GPU to profile on (the command's status says "needs a GPU")."""

    def __init__(self, message: str) -> None:
        super().__init__(NcuProblem.NO_GPU, message)
