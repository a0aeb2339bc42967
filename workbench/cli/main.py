"""Entry point of the ``workbench`` command."""

from __future__ import annotations

import inspect

import rich.console
import typer

from workbench.cli import (
    compile_cmd,
    profile_cmds,
    run_cmds,
    scale_cmds,
    space_cmds,
    store_cmds,
    tune_cmd,
)
from workbench.cli.common import PipeAwareConsole
from workbench.cli.compare_cmd import compare_command
from workbench.cli.regress_cmds import app as regress_app
from workbench.cli.report_cmd import report

# typer prints --help through a rich console of its own: a reader gone away (`| head`) ends
# that with the documented 141 too, not rich's 1
rich.console.Console.on_broken_pipe = PipeAwareConsole.on_broken_pipe  # type: ignore[method-assign,assignment]

app = typer.Typer(
    name="workbench",
    help="Compile, inspect and tune parametrized CUDA C++ and PTX kernels. Without a GPU: "
    "compile every variant with NVRTC, read registers/shared memory/spills and SASS. With a GPU: "
    "verify, time and search.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("kernels")(space_cmds.kernels)
app.command("space")(space_cmds.space)
app.command("compile")(compile_cmd.compile_command)
app.command("tune")(tune_cmd.tune)
app.command("run")(run_cmds.run)
app.command("record")(run_cmds.record)
app.command("profile")(profile_cmds.profile)
app.command("worker")(scale_cmds.worker)
app.command("status")(scale_cmds.status)
app.command("compare")(compare_command)
app.command("report")(report)
app.add_typer(store_cmds.app, name="store")
app.add_typer(regress_app, name="regress")


def _one_line_summaries(*apps: typer.Typer) -> None:
    """Each command's line in a command list: its docstring's first paragraph on one line.
    (typer's rich mode keeps the docstring's line breaks there, so the list wrapped at
    random words.)"""
    for group in apps:
        for info in group.registered_commands:
            doc = inspect.getdoc(info.callback) if info.callback is not None else None
            if info.short_help is None and doc:
                info.short_help = " ".join(doc.split("\n\n")[0].split())


_one_line_summaries(app, store_cmds.app, regress_app)


if __name__ == "__main__":  # pragma: no cover
    app()
