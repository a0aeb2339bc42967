"""Entry point of the ``workbench`` command."""

from __future__ import annotations

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
rich.console.Console.on_broken_pipe = PipeAwareConsole.on_broken_pipe  # type: ignore[method-assign]

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


if __name__ == "__main__":  # pragma: no cover
    app()
