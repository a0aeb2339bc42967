"""The package and the benchmark scripts keep a readable shape (issue 57), read from their source
(AST): no function over 60 lines, no module over 700.

A function is measured from its ``def`` line to its last line. A typer command (a parameter
annotated ``Annotated[..., typer.Option(...)]`` or ``typer.Argument(...)``, written out or
through a module-level alias such as ``ShapeOpt``) is measured from the first line of its body,
docstring included: its signature is the command's option list, as long as its options are."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"
#: The folders held to the rules: the package, and the benchmark scripts beside it.
CHECKED = (PACKAGE, PACKAGE.parent / "benchmarks")
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 700

#: The calls that make an ``Annotated`` parameter a typer option or argument.
TYPER_PARAMETERS = frozenset({"Option", "Argument"})

AnyFunction = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Measured:
    """One function's length by the rule above, and where it is."""

    where: str  # path relative to the repository, and the def line
    name: str  # qualified within its module: Class.method, outer.inner
    lines: int
    typer_command: bool

    def __str__(self) -> str:
        kind = " (typer command: body only)" if self.typer_command else ""
        return f"{self.where} {self.name}: {self.lines} lines{kind}"


def package_modules() -> Iterator[tuple[Path, ast.Module]]:
    """Every module of the package, with its syntax tree."""
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(), str(path))


def checked_modules() -> Iterator[tuple[Path, ast.Module]]:
    """Every module held to the rules (the package's and the benchmarks'), with its tree."""
    for folder in CHECKED:
        for path in sorted(folder.rglob("*.py")):
            yield path, ast.parse(path.read_text(), str(path))


def _names_a_typer_parameter(call: ast.expr) -> bool:
    """``typer.Option(...)``, ``typer.Argument(...)`` or the same imported bare."""
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in TYPER_PARAMETERS


def _annotated_with_typer(expression: ast.expr) -> bool:
    """``Annotated[T, typer.Option(...)]`` (or ``typer.Argument``) written out."""
    if not isinstance(expression, ast.Subscript):
        return False
    base = expression.value
    base_name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    if base_name != "Annotated" or not isinstance(expression.slice, ast.Tuple):
        return False
    return any(_names_a_typer_parameter(extra) for extra in expression.slice.elts[1:])


def is_typer_annotation(annotation: ast.expr | None, aliases: frozenset[str]) -> bool:
    """Whether a parameter's annotation makes it a typer option or argument: ``Annotated[T,
    typer.Option(...)]`` written out, or a name bound to one (``ShapeOpt``, ``common.ShapeOpt``).
    A string annotation is read as the expression it holds."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.Name):
        return annotation.id in aliases
    if isinstance(annotation, ast.Attribute):
        return annotation.attr in aliases
    return annotation is not None and _annotated_with_typer(annotation)


def typer_aliases(trees: list[ast.Module]) -> frozenset[str]:
    """The module-level names bound to a typer ``Annotated`` type anywhere in the package
    (``ShapeOpt = Annotated[..., typer.Option(...)]`` in cli/common.py)."""
    names: set[str] = set()
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and _annotated_with_typer(node.value):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return frozenset(names)


def is_typer_command(function: AnyFunction, aliases: frozenset[str]) -> bool:
    """Whether any parameter of the function is a typer option or argument."""
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return any(is_typer_annotation(argument.annotation, aliases) for argument in every)


def function_lines(function: AnyFunction, aliases: frozenset[str]) -> int:
    """The function's length: from ``def`` to its last line, or from the first body line for a
    typer command."""
    assert function.end_lineno is not None
    first = function.body[0].lineno if is_typer_command(function, aliases) else function.lineno
    return function.end_lineno - first + 1


def measured_functions(tree: ast.Module, where: str, aliases: frozenset[str]) -> Iterator[Measured]:
    """Every function and method of a module, nested ones included, measured."""

    def walk(nodes: Sequence[ast.AST], prefix: str) -> Iterator[Measured]:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield Measured(
                    f"{where}:{node.lineno}",
                    prefix + node.name,
                    function_lines(node, aliases),
                    is_typer_command(node, aliases),
                )
                yield from walk(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body, f"{prefix}{node.name}.")
            else:  # functions under if/try/except/with/for/match at any level
                children = [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.expr)]
                yield from walk(children, prefix)

    yield from walk(tree.body, "")


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def test_no_function_is_over_60_lines() -> None:
    modules = list(checked_modules())
    aliases = typer_aliases([tree for _, tree in modules])
    too_long = [
        str(function)
        for path, tree in modules
        for function in measured_functions(tree, _relative(path), aliases)
        if function.lines > MAX_FUNCTION_LINES
    ]
    assert not too_long, f"{len(too_long)} functions over {MAX_FUNCTION_LINES} lines:\n" + (
        "\n".join(too_long)
    )


def test_no_module_is_over_700_lines() -> None:
    too_long = [
        f"{_relative(path)}: {len(path.read_text().splitlines())} lines"
        for path, _ in checked_modules()
        if len(path.read_text().splitlines()) > MAX_MODULE_LINES
    ]
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(too_long)


_SAMPLE = '''
import typer
from typing import Annotated

NameOpt = Annotated[str, typer.Option("--name")]

def command(
    name: NameOpt = "x",
    count: Annotated[int, typer.Option("--count")] = 1,
) -> None:
    """Docstring."""
    print(name, count)

def inline(path: Annotated[str, typer.Argument()]) -> None:
    print(path)

def plain(
    name: str = "x",
    note: Annotated[str, "a note, not typer"] = "",
) -> None:
    print(name)

class Holder:
    def method(self) -> None:
        def inner() -> None:
            pass

try:
    pass
except ImportError:
    def fallback() -> None:
        pass
'''


def test_the_rule_tells_typer_commands_from_other_functions() -> None:
    tree = ast.parse(_SAMPLE)
    aliases = typer_aliases([tree])
    assert aliases == {"NameOpt"}
    measured = {m.name: m for m in measured_functions(tree, "sample.py", aliases)}
    assert set(measured) == {
        "command",
        "inline",
        "plain",
        "Holder.method",
        "Holder.method.inner",
        "fallback",
    }
    # a command counts from its docstring; the others from the def line
    assert (measured["command"].typer_command, measured["command"].lines) == (True, 2)
    assert (measured["inline"].typer_command, measured["inline"].lines) == (True, 1)
    assert (measured["plain"].typer_command, measured["plain"].lines) == (False, 5)
    assert measured["Holder.method"].lines == 3


def test_the_package_commands_are_read_as_typer_commands() -> None:
    """The CLI's commands, with their options written out or through cli/common.py's aliases,
    are found as typer commands (or the rule would measure their option lists)."""
    modules = list(package_modules())
    aliases = typer_aliases([tree for _, tree in modules])
    assert {"KernelNameArg", "ShapeOpt", "SpacesOpt", "JsonOpt"} <= aliases
    commands = {
        m.name
        for path, tree in modules
        if path.parent.name == "cli"
        for m in measured_functions(tree, _relative(path), aliases)
        if m.typer_command
    }
    assert {"compare_command", "report", "run", "record", "tune"} <= commands
