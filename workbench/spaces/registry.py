"""Find space files: the built-in library, users' directories, or a path given directly.

Users keep kernels in their own repositories: ``--spaces DIR`` (repeatable) or the
``WORKBENCH_SPACES`` environment variable (``os.pathsep``-separated) add directories, searched
before the built-in library, and any command that takes a kernel also takes a space file path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from workbench.errors import SpaceFileError, UnknownKernelError
from workbench.spaces.loader import load_space
from workbench.spaces.model import SpaceSpec
from workbench.spaces.variants import variant_named, variant_spec

SPACES_ENV = "WORKBENCH_SPACES"
SPACE_SUFFIXES = (".yaml", ".yml")
#: A top-level ``variants:`` key: only such files are parsed for their variants' names.
VARIANTS_KEY = re.compile(r"^variants\s*:", re.MULTILINE)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
                f"space directory {d} is a file: `spaces` takes a directory of space files "
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
    """The space file for a kernel name (a file's, or a named variant's in a file) or path.

    Raises:
        UnknownKernelError: no such name on the search path and no such file.
    """
    as_path = Path(kernel)
    if as_path.suffix in SPACE_SUFFIXES or os.sep in kernel:
        if not as_path.is_file():
            raise UnknownKernelError(f"space file {kernel} does not exist")
        return as_path
    entries = list_spaces(extra)
    for entry in entries:
        if entry.name == kernel:
            return entry.path
    variants = variant_names(entries)
    if kernel in variants:
        return variants[kernel].path
    known = ", ".join(sorted([e.name for e in entries] + list(variants))) or "none"
    raise UnknownKernelError(f"unknown kernel {kernel!r}; known kernels: {known}")


def load_kernel(kernel: str, extra: Sequence[str | Path] = ()) -> SpaceSpec:
    """Resolve and load a kernel's space: a named variant's (``reduce_f16``) is its file's
    space with the variant's values (see :func:`~workbench.spaces.variants.variant_spec`).

    Raises:
        UnknownKernelError, SpaceFileError.
    """
    path = resolve_space(kernel, extra)
    spec = load_space(path)
    if path.stem != kernel and variant_named(spec, kernel) is not None:
        return variant_spec(spec, kernel)
    return spec


def variant_names(entries: Sequence[SpaceEntry]) -> dict[str, SpaceEntry]:
    """Each named variant (``variants:``) of the space files ``entries``, with its file; a
    file's own name, or an earlier file's variant, shadows a variant of the same name. A file
    is read only for the names under its ``variants:`` (a damaged one gives none here; its
    error comes when it is loaded)."""
    found: dict[str, SpaceEntry] = {}
    files = {e.name for e in entries}
    for entry in entries:
        for name in _declared_variants(entry.path):
            if name not in files and name not in found:
                found[name] = entry
    return found


def _declared_variants(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return []
    if not VARIANTS_KEY.search(text):
        return []  # (most files: no YAML parse)
    try:
        data = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        return []
    variants = data.get("variants") if isinstance(data, dict) else None
    return [str(n) for n in variants] if isinstance(variants, dict) else []


__all__ = [
    "SpaceEntry",
    "SpaceFileError",
    "builtin_spaces_dir",
    "library_root",
    "list_spaces",
    "load_kernel",
    "resolve_space",
    "variant_names",
]
