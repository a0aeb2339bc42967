"""One space file being read: its document and validated model, errors located by key,
expressions over known names, and the files it names, which must lie inside the project."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from workbench.errors import ExpressionError, SpaceFileError
from workbench.expressions import Expression
from workbench.spaces import schema
from workbench.spaces.model import MAX_SOURCE_BYTES, source_too_large
from workbench.spaces.yamlmarks import MarkedDocument

#: Files whose presence marks a project root: sources must lie inside it.
PROJECT_MARKERS = (".git", "pyproject.toml", "workbench.toml")


def project_root(space_file: Path) -> Path:
    """The nearest ancestor holding a project marker; else the space file's parent's parent."""
    for parent in space_file.resolve().parents:
        if any((parent / marker).exists() for marker in PROJECT_MARKERS):
            return parent
    return space_file.resolve().parent.parent


class FileChecks:
    """What every part of a space file is checked with; one instance per file.

    Args:
        doc: the file as YAML with line marks.
        model: its shape and types, validated.
        kept: a store's copy: the files it names are not read (they were checked when it was
            kept).
    """

    def __init__(
        self, doc: MarkedDocument, model: schema.SpaceModel, *, kept: bool = False
    ) -> None:
        self.doc = doc
        self.m = model
        self.path = doc.path
        self.kept = kept
        self.root = project_root(doc.path) if not kept else doc.path.parent

    def err(self, key: Sequence[str | int], message: str) -> SpaceFileError:
        """An error at ``key`` of the file (its line)."""
        return self.doc.error(key, message)

    def expr(self, key: Sequence[str | int], text: object, known: Iterable[str]) -> Expression:
        """``text`` at ``key`` as an expression that uses only ``known`` names."""
        try:
            expr = Expression.parse(text)  # type: ignore[arg-type]
        except ExpressionError as exc:
            raise self.err(key, str(exc)) from None
        unknown = expr.unknown_names(set(known))
        if unknown:
            raise self.err(
                key,
                f"`{expr.text}` uses unknown name(s) {', '.join(unknown)}; known: "
                f"parameters, shape variables, derived names, device.* and arch.*",
            )
        return expr

    def dims(self, key: tuple[str, ...], value: object, known: set[str]) -> tuple[Expression, ...]:
        """One to three dimensions at ``key``, each an expression of ``known`` names."""
        items = value if isinstance(value, list) else [value]
        if not 1 <= len(items) <= 3:
            raise self.err(key, "give one to three dimensions")
        return tuple(self.expr((*key, i), t, known) for i, t in enumerate(items))

    def inside_project(
        self,
        key: tuple[str | int, ...],
        rel: str,
        *,
        must_be_file: bool = False,
        must_be_dir: bool = False,
        what: str = "source file",
    ) -> Path:
        """The file (or, ``must_be_dir``, folder) ``rel`` names beside the space file, checked to
        lie inside the project (and, ``must_be_file``, to be a regular file of at most
        ``MAX_SOURCE_BYTES``); a kept space's path as it was, unread."""
        if self.kept:  # where it was (nothing is read from it)
            return Path(os.path.normpath(self.path.parent / rel))
        target = (self.path.parent / rel).resolve()
        if not target.is_relative_to(self.root):
            # (kept: a shared space file cannot read ~/.ssh into a compile log or a report)
            raise self.err(
                key,
                f"{rel!r} lies outside the project root {self.root} (the nearest folder above "
                f"the space file holding {' or '.join(PROJECT_MARKERS)}, else its folder's "
                "parent): move the file inside, or put an empty workbench.toml in a folder "
                "that holds both",
            )
        if must_be_file and target.is_dir():
            raise self.err(key, f"{what} {rel!r} is a directory ({target})")
        if must_be_file and target.exists() and not target.is_file():
            # (a FIFO would block the read that follows for ever)
            raise self.err(key, f"{what} {rel!r} is not a regular file (a FIFO, socket or device)")
        if must_be_file and not target.is_file():
            raise self.err(key, f"{what} {rel!r} does not exist (looked for {target})")
        if must_be_file and target.stat().st_size > MAX_SOURCE_BYTES:
            raise self.err(key, f"{what} {rel!r} is {source_too_large()} ({target})")
        if must_be_dir and not target.is_dir():
            raise self.err(key, f"include directory {rel!r} does not exist (looked for {target})")
        return target

    def python_target(self, key: tuple[str | int, ...], text: str, what: str) -> str:
        """``file.py:function`` as the absolute path's target, or ``module:function`` as it is."""
        where, _, function = text.rpartition(":")
        # a path (file.py, ./x.py, dir/x.py) is a file beside the space; else a module
        if where.endswith(".py") or "/" in where:
            return self.reference_file(key, where, function, what)
        return text

    def reference_file(
        self, key: tuple[str | int, ...], rel: str, function: str, what: str = "reference file"
    ) -> str:
        """``rel:function`` as ``/absolute/rel.py:function``, the file inside the project."""
        path = self.inside_project(key, rel, must_be_file=True, what=what)
        if path.suffix != ".py":
            raise self.err(key, f"{what} {rel!r} is not a .py file")
        return f"{path}:{function}"
