"""Find space files: the built-in library, users' directories, or a path given directly.

Users keep kernels in their own repositories: ``--spaces DIR`` (repeatable) or the
``WORKBENCH_SPACES`` environment variable (``os.pathsep``-separated) add directories, searched
before the built-in library, and any command that takes a kernel also takes a space file path.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import SpaceFileError, UnknownKernelError
from workbench.spaces.loader import load_space
from workbench.spaces.model import SpaceSpec

SPACES_ENV = "WORKBENCH_SPACES"
SPACE_SUFFIXES = (".yaml", ".yml")


def library_root() -> Path:
    """Root of the kernel library: the source checkout, or the copy inside the wheel."""
    package = Path(__file__).resolve().parent.parent
    checkout = package.parent
    if (checkout / "tuning_spaces").is_dir() and (checkout / "kernels_cu").is_dir():
        return checkout
    return package / "_library"


def builtin_spaces_dir() -> Path:
    return library_root() / "tuning_spaces"


@dataclass(frozen=True)
class SpaceEntry:
    """A space file found on the search path (not yet loaded)."""

    name: str
    path: Path
    builtin: bool


def search_dirs(extra: Sequence[str | Path] = ()) -> list[Path]:
    """User directories (flags, then the environment), then the built-in library."""
    dirs = [Path(d) for d in extra]
    env = os.environ.get(SPACES_ENV, "")
    dirs += [Path(d) for d in env.split(os.pathsep) if d.strip()]
    for d in dirs:
        if d.is_file():
            raise UnknownKernelError(
                f"space directory {d} is a file: --spaces takes a directory of space files "
                "(a space file is given as the kernel itself)"
            )
        if not d.is_dir():
            raise UnknownKernelError(f"space directory {d} does not exist")
    return [*dirs, builtin_spaces_dir()]


def list_spaces(extra: Sequence[str | Path] = ()) -> list[SpaceEntry]:
    """Every space file on the search path; a user file shadows a built-in of the same name."""
    seen: dict[str, SpaceEntry] = {}
    builtin = builtin_spaces_dir().resolve()
    for d in search_dirs(extra):
        for path in sorted(_space_files(d)):
            name = path.stem
            if name not in seen:
                seen[name] = SpaceEntry(name, path, d.resolve() == builtin)
    return sorted(seen.values(), key=lambda e: e.name)


def _space_files(d: Path) -> Iterable[Path]:
    return (p for p in d.iterdir() if p.suffix in SPACE_SUFFIXES and p.is_file())


def resolve_space(kernel: str, extra: Sequence[str | Path] = ()) -> Path:
    """The space file for a kernel name or path.

    Raises:
        UnknownKernelError: no such name on the search path and no such file.
    """
    as_path = Path(kernel)
    if as_path.suffix in SPACE_SUFFIXES or os.sep in kernel:
        if not as_path.is_file():
            raise UnknownKernelError(f"space file {kernel} does not exist")
        return as_path
    for entry in list_spaces(extra):
        if entry.name == kernel:
            return entry.path
    known = ", ".join(e.name for e in list_spaces(extra)) or "none"
    raise UnknownKernelError(f"unknown kernel {kernel!r}; known kernels: {known}")


def load_kernel(kernel: str, extra: Sequence[str | Path] = ()) -> SpaceSpec:
    """Resolve and load a kernel's space.

    Raises:
        UnknownKernelError, SpaceFileError.
    """
    return load_space(resolve_space(kernel, extra))


__all__ = [
    "SpaceEntry",
    "SpaceFileError",
    "builtin_spaces_dir",
    "library_root",
    "list_spaces",
    "load_kernel",
    "resolve_space",
]
