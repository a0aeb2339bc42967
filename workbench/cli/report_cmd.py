"""``workbench report``: self-contained HTML pages of what the store holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from workbench.cli.common import (
    EXIT_FAILED,
    CacheOpt,
    SpacesOpt,
    StorageOpt,
    cli_errors,
    console,
    err_console,
)
from workbench.report import DEFAULT_OUT


def report(
    kernel: Annotated[
        str | None,
        typer.Argument(
            help="A kernel (library name or space file); default: every study in the store.",
            show_default=False,
        ),
    ] = None,
    storage: StorageOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Directory of the HTML pages.")] = DEFAULT_OUT,
    png: Annotated[
        bool,
        typer.Option("--png", help="Also export every figure as PNG (kaleido + Chromium)."),
    ] = False,
    ceilings: Annotated[
        Path | None,
        typer.Option("--ceilings", help="Measured ceilings (JSON of scripts/ceilings.py)."),
    ] = None,
    spaces: SpacesOpt = None,
    cache_dir: CacheOpt = None,
) -> None:
    """Write HTML reports from the store: overview (replay banner), tuning history, parameter
    importance, parallel coordinates, compile resources, what tuning changed in the binary,
    roofline, divergence, memory access.

    Reads the store only (never writes it); the default and best config of each study with a
    space file are compiled here unless the compile cache has them, and a library kernel with
    nothing stored gets a static page (compiled here, never timed). Exit status: 0 written;
    1 nothing to report, or PNG export impossible (the HTML is still written); 2 bad input.
    """
    # (plotly, pandas, optuna: imported when the command runs, not for --help)
    from workbench.compiler import CompileCache
    from workbench.report import NothingToReport, PngUnavailable, ReportOptions, build_reports
    from workbench.roofline import Ceilings, measured_ceilings
    from workbench.store.opening import open_store

    with cli_errors():
        store = open_store(storage, read_only=True)
        options = ReportOptions(
            out_dir=out,
            png=png,
            ceilings=Ceilings(measured_ceilings(ceilings)) if ceilings else None,
            spaces=tuple(spaces or ()),
            cache=CompileCache(cache_dir),
        )
        try:
            result = build_reports(
                store, kernel, options, lambda m: err_console.print(escape(m), style="dim")
            )
        except NothingToReport as exc:
            err_console.print(f"[bold]nothing to report:[/] {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(EXIT_FAILED) from None
        except PngUnavailable as exc:
            console.print(f"HTML written under {escape(str(out))}/index.html")
            err_console.print(f"[bold red]no PNG:[/] {escape(str(exc))}", soft_wrap=True)
            raise typer.Exit(EXIT_FAILED) from None
        for line in result.housekeeping:
            err_console.print(escape(line), soft_wrap=True)
        n, f = len(result.pages), result.figures
        console.print(  # (the index is a page too: every file written is counted)
            f"{n + 1} pages, the index and {n} study or profile page{'s' * (n != 1)} "
            f"({f} figure{'s' * (f != 1)}): {escape(str(result.index))}"
        )
        if result.pngs:
            console.print(f"{len(result.pngs)} PNG files under {escape(str(out / 'png'))}")
