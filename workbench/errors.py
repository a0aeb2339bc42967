"""The workbench's exception hierarchy: one root, narrow classes, evidence attached.

Every error a user can cause (bad file, bad flag, missing tool) derives from
:class:`WorkbenchError`; the CLI prints its message and exits non-zero without a
traceback. Anything else escaping is a bug in the workbench.
"""

from __future__ import annotations

from pathlib import Path


class WorkbenchError(Exception):
    """Root of every error the workbench raises on purpose."""


class SparseSampleError(WorkbenchError):
    """A space too sparse at its shape for a uniform sample of the size asked for to be found
    in the time allowed (random draws, then a walk of the valid set)."""


class SpaceFileError(WorkbenchError):
    """A tuning-space file is malformed.

    Args:
        path: the space file.
        message: what is wrong and what was expected.
        line: 1-based line of the offending node, when known.
        key: dotted key path of the offending node (``parameters.BLOCK.values``).
    """

    def __init__(
        self, path: Path | str, message: str, *, line: int | None = None, key: str | None = None
    ) -> None:
        self.path = Path(path)
        self.line = line
        self.key = key
        self.detail = message
        where = str(self.path) + (f":{line}" if line is not None else "")
        at_key = f" [{key}]" if key else ""
        super().__init__(f"{where}{at_key}: {message}")


class ExpressionError(WorkbenchError):
    """An expression in a space file is not allowed, does not parse, or fails to evaluate."""


class UnknownKernelError(WorkbenchError):
    """A kernel name matches no built-in or user space file."""


class ConfigError(WorkbenchError):
    """A configuration names an unknown parameter or a value outside its domain."""


class ToolchainError(WorkbenchError):
    """A CUDA toolchain component (NVRTC, ptxas, nvdisasm, cuobjdump) is missing or broken."""


class ArchError(WorkbenchError):
    """An architecture name the toolchain does not know or the kernel does not support."""


class CompileError(WorkbenchError):
    """A compile failed; carries the compiler log.

    The sweep records this as a result; it is raised only where a caller asked for one
    compile and must have a binary.
    """

    def __init__(self, message: str, log: str = "") -> None:
        self.log = log
        super().__init__(message + (f"\n{log}" if log else ""))


class LaunchRefusedError(WorkbenchError):
    """A binary that compiled but would hang or fault if launched, refused before the launch
    (its launch register count is not the setmaxnreg budget it was built for)."""


class InternalError(WorkbenchError):
    """An invariant of the workbench broke (a bug, not bad input): refused with one line rather
    than a wrong figure printed."""


class NoGpuError(WorkbenchError):
    """This needs a CUDA GPU (and its driver) and there is none here, nor anything to replay:
    nothing was measured. Commands exit with a status of their own for it (3), so that a
    script or a CI job without a GPU can tell it from a failure and from bad input."""
