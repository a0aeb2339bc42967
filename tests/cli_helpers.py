"""Running the CLI in-process for tests."""

from __future__ import annotations

from collections.abc import Mapping

from typer.testing import CliRunner

from workbench.cli.main import app


def invoke(*args: str, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """``workbench ARGS`` in this process (``env``: environment variables set meanwhile, e.g.
    ``COLUMNS``): (exit code, stdout, stderr). A traceback in the output fails the test
    whatever the exit code: every error is a one-line message."""
    result = CliRunner().invoke(app, list(args), env=env)
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


def sigint_as_at_a_terminal() -> None:
    """For ``Popen(preexec_fn=...)``: the child takes SIGINT as a command started at a
    terminal does. A shell starts background jobs with SIGINT ignored, and a child inherits
    that: a test run from one (``pytest ... &``) would see Ctrl-C ignored, not handled."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
