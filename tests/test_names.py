"""Names say what they are, read from the package's source (AST, nothing imported): no public
class or type alias is defined in two modules (``StopReason`` of a timing loop and of a search
were two different things under one name)."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"


def modules() -> Iterator[tuple[str, ast.Module]]:
    """Every module of the package: its dotted name and its syntax tree."""
    for path in sorted(PACKAGE.rglob("*.py")):
        dotted = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        yield dotted.removesuffix(".__init__"), ast.parse(path.read_text(), str(path))


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module body, including those under a module-level ``if`` or
    ``try`` (``if TYPE_CHECKING:``)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _module_level(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _module_level(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                yield from _module_level(handler.body)


def _is_type_alias(node: ast.Assign | ast.AnnAssign, name: str) -> bool:
    """``Name = X | Y`` or ``Name = Callable[...]`` (a CapWords name bound to a type
    expression), or ``Name: TypeAlias = ...``; not ``OtherName = Name`` (one thing, two names),
    not a CONSTANT."""
    if isinstance(node, ast.AnnAssign):
        annotation = ast.unparse(node.annotation)
        if annotation.endswith("TypeAlias"):
            return True
    if not name[0].isupper() or name.isupper():
        return False
    return node.value is not None and not isinstance(node.value, (ast.Name, ast.Attribute))


def public_types(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """The public classes and type aliases a module defines, with their lines."""
    for node in _module_level(tree.body):
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield node.name, node.lineno
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = target.id if isinstance(target, ast.Name) else ""
                if name and not name.startswith("_") and _is_type_alias(node, name):
                    yield name, node.lineno


def test_the_scan_finds_classes_and_aliases() -> None:
    tree = ast.parse(
        "from typing import TypeAlias\n"
        "class Public: ...\n"
        "class _Private: ...\n"
        "Alias = int | str\n"
        "Named: TypeAlias = 'Public'\n"
        "Same = Public\n"
        "LIMIT = 3\n"
        "if True:\n"
        "    class Guarded: ...\n"
    )
    assert [name for name, _ in public_types(tree)] == ["Public", "Alias", "Named", "Guarded"]


def test_no_public_class_or_type_alias_is_defined_in_two_modules() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for module, tree in modules():
        for name, line in public_types(tree):
            where[name].append(f"{module}:{line}")
    assert len(where) > 300, "the scan found too few names: is PACKAGE the package?"
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, (
        f"public names defined in more than one module (give each a name that says what it is): "
        f"{twice}"
    )
