"""The ``workbench`` console script: the command line, with Ctrl-C answered from the start.

Importing the command line takes a second or two (typer, rich, numpy, SQLAlchemy, optuna);
a Ctrl-C in that time used to print a 22-line traceback. Nothing heavy is imported here.
"""

from __future__ import annotations

import sys

#: 128 + SIGINT, as the commands themselves end when interrupted (EXIT_INTERRUPTED)
_EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        from workbench.cli.main import app

        app()
    except KeyboardInterrupt:  # (in a command, cli_errors answers it first)
        sys.stderr.write("interrupted\n")
        raise SystemExit(_EXIT_INTERRUPTED) from None


if __name__ == "__main__":  # python -m workbench.cli.entry (tests run the CLI this way)
    main()
