"""What the command line imports before it does anything (issue 53, "the first hour"):
``workbench --help``, every ``workbench COMMAND --help`` and ``workbench kernels`` load none of
the heavy libraries (optuna, SQLAlchemy, plotly, pandas, Numba, ml_dtypes, SciPy), which took
1.2 s of the 1.6 s that printing the help took. A command imports them when it runs.

Each check runs the console script's ``main`` in a fresh interpreter and reads its
``sys.modules`` afterwards (no timing: the modules are what decide it)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import typer
from typer.core import TyperGroup

from workbench.cli.main import app

HEAVY = ("optuna", "sqlalchemy", "plotly", "pandas", "numba", "ml_dtypes", "scipy")

#: Runs ``workbench ARGS`` for each ARGS of argv[1] (JSON) in this one interpreter and prints,
#: per command, the heavy modules that it was the first to import.
PROBE = """
import contextlib, io, json, sys
from workbench.cli.entry import main

heavy = set(sys.argv[2].split(","))
loaded = lambda: {m.split(".")[0] for m in sys.modules} & heavy
seen, found = loaded(), {"(import)": sorted(loaded())}
for args in json.loads(sys.argv[1]):
    sys.argv = ["workbench", *args]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main()
    found[" ".join(args)] = sorted(loaded() - seen)
    seen = loaded()
print(json.dumps(found))
"""


def command_paths(group: TyperGroup, prefix: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """Every command and command group, as the words that name it (``store header``)."""
    for name, command in group.commands.items():
        yield [*prefix, name]
        if isinstance(command, TyperGroup):
            yield from command_paths(command, (*prefix, name))


def heavy_imports(*runs: list[str]) -> dict[str, list[str]]:
    """The heavy packages each of ``runs`` (one ``workbench`` command line each) imported
    first, run one after the other in one fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(runs)), ",".join(HEAVY)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, list[str]] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_help_of_every_command_imports_no_heavy_library() -> None:
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    paths = list(command_paths(group))
    assert ["store", "header"] in paths and ["kernels"] in paths  # (the walk finds them)
    found = heavy_imports(["--help"], *([*p, "--help"] for p in paths))
    assert len(found) == len(paths) + 2
    assert {run: mods for run, mods in found.items() if mods} == {}


def test_kernels_imports_no_heavy_library() -> None:
    found = heavy_imports(["kernels"])
    assert {run: mods for run, mods in found.items() if mods} == {}
