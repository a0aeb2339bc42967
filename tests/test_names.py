"""Names say what they are, read from the package's source (AST): no public class or type alias
is defined in two modules (``StopReason`` of a timing loop and of a search were two different
things under one name), and the library's errors name its parameters, not the command line's
flags (a Python caller never typed ``--budget``); the CLI puts the flags back."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from workbench.cli.common import FLAG_OF, flag_wording

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


# -- errors below the CLI name parameters -------------------------------------------------------
#: A flag of ours or of another program (``--budget``, ``--kernel-name``), not a dash in prose.
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
#: Messages that name another program's flag (ptxas, ncu), which the user may pass on: (module,
#: flag) -> why. None today.
OTHER_PROGRAMS_FLAGS: dict[tuple[str, str], str] = {}
#: A name in backticks: the library's way to name a parameter (the CLI swaps in the flag);
#: ``backup=False`` too. Other backticked text (a path, ``module:function``) is not one.
BACKTICKED = re.compile(r"`([a-z_][a-z0-9_]*(?:=\w+)?)`")


def raise_texts(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """The string constants of each ``raise`` (f-strings' literal parts included), by line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    yield node.lineno, part.value


def library_modules() -> Iterator[tuple[str, ast.Module]]:
    return ((m, t) for m, t in modules() if not m.startswith("workbench.cli"))


def test_the_scan_finds_flags_in_raise_messages() -> None:
    tree = ast.parse(
        "def f(n):\n"
        "    if n < 1:\n"
        "        raise ValueError(f'--budget {n}: the budget must be at least 1')\n"
        "    raise KeyError('x-y--z, and a well-known dash -- in prose')\n"
    )
    found = [(line, FLAG.findall(text)) for line, text in raise_texts(tree)]
    assert [(line, flags) for line, flags in found if flags] == [(3, ["--budget"])]


def test_library_errors_name_parameters_not_command_line_flags() -> None:
    found = [
        f"{module}:{line}: {flag} in {text!r}"
        for module, tree in library_modules()
        for line, text in raise_texts(tree)
        for flag in FLAG.findall(text)
        if (module, flag) not in OTHER_PROGRAMS_FLAGS
    ]
    assert not found, "a library error names a flag (name the parameter, in backticks; the CLI "
    "maps it: workbench.cli.common.FLAG_OF):\n" + "\n".join(found)


def test_every_parameter_an_error_names_has_its_flag() -> None:
    named = {
        name
        for _, tree in library_modules()
        for _, text in raise_texts(tree)
        for name in BACKTICKED.findall(text)
    }
    assert named >= {"evaluations", "shape", "enqueue", "study"}, named  # the scan sees them
    assert named <= set(FLAG_OF), f"no flag for {sorted(named - set(FLAG_OF))} in FLAG_OF"


def test_every_flag_in_the_table_is_an_option_of_a_command() -> None:
    import click
    import typer

    from workbench.cli.main import app

    def options(command: click.Command) -> Iterator[str]:
        for param in command.params:
            yield from param.opts + param.secondary_opts
        for sub in getattr(command, "commands", {}).values():
            yield from options(sub)

    known = set(options(typer.main.get_command(app)))
    assert {"--budget", "--shape", "--no-backup"} <= known, sorted(known)
    assert not {f.split()[0] for f in FLAG_OF.values()} - known


def test_the_cli_words_a_library_error_in_flags() -> None:
    said = flag_wording("`evaluations` 0: the budget must be at least 1; see `workbench tune`")
    assert said == "--budget 0: the budget must be at least 1; see `workbench tune`"
    assert flag_wording("`all_configs` cannot go with `sample`") == "--all cannot go with --sample"


# -- Optuna through its public API ----------------------------------------------------------------
#: Private attributes of Optuna's objects (FrozenTrial, Study, its cached storage).
OPTUNA_PRIVATE_ATTRIBUTES = {"_trial_id", "_study_id", "_storage", "_backend"}


def optuna_private_uses(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``optuna.storages._CachedStorage``, ``from optuna._x import y``, ``from optuna import
    _x``, and ``trial._trial_id`` (on anything but ``self``), by line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "optuna":
            parts = (node.module or "").split(".") + [a.name for a in node.names]
            if any(p.startswith("_") for p in parts):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Attribute):
            dotted = ast.unparse(node)
            root = dotted.split(".")[0]
            of_optuna = root == "optuna" and any(p.startswith("_") for p in dotted.split("."))
            if of_optuna or (node.attr in OPTUNA_PRIVATE_ATTRIBUTES and root != "self"):
                yield node.lineno, dotted


def test_the_scan_finds_private_optuna_names() -> None:
    tree = ast.parse(
        "import optuna\n"
        "from optuna.storages._cached_storage import _CachedStorage\n"
        "s = optuna.storages._CachedStorage(rdb)\n"
        "n = trial._trial_id + self._study_id\n"
        "ok = optuna.storages.RDBStorage(url)\n"
    )
    assert [line for line, _ in optuna_private_uses(tree)] == [2, 3, 4]


def test_the_package_uses_optuna_through_its_public_api() -> None:
    found = [
        f"{module}:{line}: {what}"
        for module, tree in modules()
        for line, what in optuna_private_uses(tree)
    ]
    assert not found, "\n".join(found)
