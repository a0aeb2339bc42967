"""What every command shares: consoles, error handling, the options that name a kernel.

Every command module imports this one to register its options, so it imports nothing heavy:
the store (SQLAlchemy) is imported when a command opens one.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console, ConsoleDimensions
from rich.markup import escape
from rich.segment import Segment

from workbench.errors import CompileError, ConfigError, NoGpuError, WorkbenchError
from workbench.jsontext import strict_dumps
from workbench.printable import printable

if TYPE_CHECKING:
    from workbench.spaces.model import SpaceSpec
    from workbench.store import Store

#: Exit statuses, documented in docs/tuning.md.
EXIT_FAILED = 1  #: the command ran but what it checks failed (e.g. every compile failed)
EXIT_BAD_INPUT = 2  #: bad input: unknown kernel, malformed space file, unknown arch, ...
EXIT_NO_GPU = 3  #: it needs a GPU and there is none (nor anything to replay): nothing measured
EXIT_INTERRUPTED = 130
EXIT_PIPE = 141  #: 128 + SIGPIPE, as a shell reports a command whose reader went away


#: Width of piped output (CI logs, files) when $COLUMNS does not say: wide tables instead of
#: rich's 80-column default.
PIPED_WIDTH = 200


class PipeAwareConsole(Console):
    """rich's console, but a reader that went away (``| head``) ends the command with
    EXIT_PIPE, as documented, where rich would exit with 1 (the status of a failed check);
    and its width is $COLUMNS when set (read at each print, not once at import), else the
    terminal's, else :data:`PIPED_WIDTH`."""

    @property
    def size(self) -> ConsoleDimensions:
        columns = os.environ.get("COLUMNS", "")
        height = super().size.height
        if columns.isdigit() and int(columns) > 0:
            return ConsoleDimensions(int(columns), height)
        if not self.is_terminal:
            return ConsoleDimensions(PIPED_WIDTH, height)
        return ConsoleDimensions(super().size.width, height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def on_broken_pipe(self) -> None:
        self.quiet = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the exit's flush cannot fail again
        raise SystemExit(EXIT_PIPE)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # the backstop under shown(): whatever text reaches the terminal, from whichever
        # command, carries no control character but the newlines of its layout (rich's own
        # cursor moves are control segments, kept)
        safe = (
            s if s.control else Segment(printable(s.text, newlines=True), s.style) for s in buffer
        )
        return super()._render_buffer(safe)


def shown(text: object) -> str:
    """Text from a file or a store (a kernel, device or study name, a message) as console
    markup on one line: control characters as escapes (``\\x1b``, ``\\n``), ``[`` not markup."""
    return escape(printable(text))


console = PipeAwareConsole(highlight=False, emoji=False)
err_console = PipeAwareConsole(stderr=True, highlight=False, emoji=False)

KernelNameArg = Annotated[
    str,
    typer.Argument(
        help="A kernel name from the library (see `workbench kernels`) or the path of a space "
        "file (its source path is relative to that file).",
        show_default=False,
    ),
]
SpacesOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--spaces",
        metavar="DIR",
        help="A directory of your own space files, searched before the built-in library "
        "(repeatable; also $WORKBENCH_SPACES, separated by ':').",
        show_default=False,
    ),
]
ArchOpt = Annotated[
    str | None,
    typer.Option(
        "--arch",
        metavar="SM",
        help="Target architecture (sm_80, sm_89, sm_90, sm_90a, ...); 'all' for every arch the "
        "space declares where a command builds several (compile, tune without a GPU). Default: "
        "the space's newest declared arch.",
        show_default=False,
    ),
]
DeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--device",
        metavar="PRESET",
        help="Device preset whose limits constraints see (t4, a100, rtx3090, l40s, h100, h200). "
        "Default: the preset for the arch.",
        show_default=False,
    ),
]
ShapeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--shape",
        metavar="NAME=INT",
        help="Problem size as NAME=VALUE (repeatable, or comma-separated), e.g. --shape "
        "n=1048576 or --shape M=4096,N=4096,K=4096; default: the space's default shape.",
        show_default=False,
    ),
]
ShapesOpt = Annotated[
    str | None,
    typer.Option(
        "--shapes",
        metavar="SET",
        help="A named shape set of the space (each of its shapes in turn).",
        show_default=False,
    ),
]


#: ``--json``: one JSON document on stdout (an error too, with ``cli_errors(json_errors=...)``).
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]

#: What a ``--config`` option may be (workbench.cli.config_request parses it).
CONFIG_FORMS = (
    "'default' (the space's default for the arch), 'best' (the fastest correct config of the "
    "shape's study in the store) or NAME=VALUE[,NAME=VALUE...] (the other parameters are "
    "filled in from the default, or the nearest valid config; the output says which)"
)

#: ``--config`` of the commands that take one config: repeated options are merged.
OneConfigOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        "-c",
        help=f"The config: {CONFIG_FORMS}. Repeated NAME=VALUE options are merged into one "
        "config (-c BM=64 -c BN=128). Default: 'default'.",
        show_default=False,
    ),
]

#: ``--study`` of the commands that take ``--config best``.
BestStudyOpt = Annotated[
    str | None,
    typer.Option("--study", help="With --config best: the study to take it from."),
]

#: ``--set``: a parameter fixed for the whole command (tune, regress, compile).
PinOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Fix a parameter, NAME=VALUE (repeatable); problem variants (tunable: false in "
        "the space, e.g. a reduction's OP) are fixed to their default unless set here.",
        show_default=False,
    ),
]

DbWaitOpt = Annotated[
    float,
    typer.Option(
        "--db-wait",
        min=0,
        help="PostgreSQL: seconds to wait for an unavailable database before stopping.",
    ),
]


#: What the library's messages name in backticks (a parameter of its API, as in "`shape` 'n=0':
#: sizes must be positive") -> how a command line says it: the error a flag caused names the flag.
FLAG_OF = {
    "all_configs": "--all",
    "arch": "--arch",
    "backup=False": "--no-backup",
    "config": "--config",
    "device": "--device",
    "emit": "--emit",
    "enqueue": "--enqueue",
    "evaluations": "--budget",
    "export_kt_cache": "--format kt-cache",
    "fresh": "--fresh",
    "grace_s": "--grace",
    "heartbeat_s": "--heartbeat",
    "label": "--label",
    "ncu": "--ncu",
    "objective": "--objective",
    "patience": "--patience",
    "replay": "--replay",
    "sample": "--sample",
    "seconds": "--time",
    "shape": "--shape",
    "shapes": "--shapes",
    "spaces": "--spaces",
    "storage": "--storage",
    "study": "--study",
}
_BACKTICKED = re.compile(r"`([^`\s]+)`")


def flag_wording(message: str) -> str:
    """A library error's message as a command line's user reads it: each parameter it names in
    backticks becomes its flag (evaluations in backticks -> ``--budget``); other backticked
    text (a command) stays as it is."""
    return _BACKTICKED.sub(lambda m: FLAG_OF.get(m[1], m[0]), message)


@contextlib.contextmanager
def cli_errors(json_errors: bool = False) -> Iterator[None]:
    """Turn the workbench's own errors, and a file that cannot be written or read (an output
    path under a file, a full disk, no permission), into one red line and exit status 2;
    ``json_errors`` (a command's ``--json``): also one JSON document on stdout,
    ``{"exit_status": 2, "error": ...}``, so that a script parsing stdout always gets one.

    SIGTERM (``timeout``, a CI job cancelled, ``kill``) stops the command as Ctrl-C does: a
    tune marks its run interrupted and says so, instead of dying with the run left "running".
    """
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
        # what is still buffered goes out here, so that a reader gone away (`| head`) ends
        # in the BrokenPipeError branch below and not in click's exit status 1
        sys.stdout.flush()
    except NoGpuError as exc:
        text = flag_wording(str(exc))
        err_console.print(f"[bold red]needs a GPU:[/] {shown(text)}", soft_wrap=True)
        if json_errors:
            _json_error(text, EXIT_NO_GPU)
        raise typer.Exit(EXIT_NO_GPU) from None
    except WorkbenchError as exc:
        message = flag_wording(_headline(exc))
        err_console.print(f"[bold red]error:[/] {shown(message)}", soft_wrap=True)
        if isinstance(exc, CompileError) and exc.log:  # the compiler's evidence, in its lines
            err_console.print(escape(exc.log), soft_wrap=True)
        if json_errors:
            _json_error(flag_wording(str(exc)))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except MemoryError:  # (a problem too large for this machine: said, not a traceback)
        text = "out of memory: the problem is too large for this machine; give a smaller --shape"
        err_console.print(f"[bold red]error:[/] {text}", soft_wrap=True)
        if json_errors:
            _json_error(text)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except KeyboardInterrupt:
        err_console.print("interrupted")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:  # the reader of our output went away (`| head`): stop quietly
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the exit's flush cannot fail
        raise typer.Exit(EXIT_PIPE) from None
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        text = f"{where}{exc.strerror or exc}"
        err_console.print(f"[bold red]error:[/] {shown(text)}", soft_wrap=True)
        if json_errors:
            _json_error(text)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _headline(exc: WorkbenchError) -> str:
    """An error's message without the compiler log a CompileError carries after it."""
    text = str(exc)
    if isinstance(exc, CompileError) and exc.log:
        return text.removesuffix(f"\n{exc.log}")
    return text


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _json_error(message: str, status: int = EXIT_BAD_INPUT) -> None:
    with contextlib.suppress(OSError):  # (stdout itself may be what failed)
        sys.stdout.write(strict_dumps({"exit_status": status, "error": message}) + "\n")
        sys.stdout.flush()


JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=0,
        help="Compile processes (default, or 0: one per core).",
        show_default=False,
    ),
]


CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Compile cache (default $WORKBENCH_CACHE_DIR or ~/.cache/workbench/compile).",
        show_default=False,
    ),
]


StorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        help="Store URL or SQLite path (default $WORKBENCH_STORE or .workbench/store.sqlite).",
        show_default=False,
    ),
]


def open_best_store(storage: str | None, kernel: str) -> Store:
    """The store ``--config best`` reads its config from (read only); one that cannot be
    opened says to tune first.

    Raises:
        ConfigError: no store there, or it cannot be read.
    """
    from workbench.store import StoreError
    from workbench.store.opening import open_store

    try:
        return open_store(storage, read_only=True)
    except StoreError as exc:
        raise ConfigError(
            f"--config best takes the tuned config from the store, but {exc}: tune {kernel} "
            "first, or give the store with --storage"
        ) from None


def check_user_code(spec: SpaceSpec) -> dict[str, tuple[str, ...]]:
    """Find the space's reference and its own baselines and check how they are called, in
    the user-code process, without a GPU (``space`` and ``compare`` before anything runs).

    Returns:
        Each own baseline's name and the packages its module needs that are missing here.

    Raises:
        SpaceFileError: located at ``reference`` or ``baselines``: a missing module, file or
            function, a parameter nothing provides, or loading exited, crashed or hung.
    """
    from workbench.compare.user_baselines import check_user_baselines
    from workbench.runners.reference import ReferenceNotFoundError, check_reference

    try:
        check_reference(spec)
    except ReferenceNotFoundError as exc:
        raise spec.error("reference", str(exc)) from None
    try:
        return check_user_baselines(spec)
    except ReferenceNotFoundError as exc:
        raise spec.error("baselines", str(exc)) from None
