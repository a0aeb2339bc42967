"""``workbench store``: list studies, export results, import recorded spaces, upgrade a store
written by an earlier workbench."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from workbench.cli.common import (
    JsonOpt,
    StorageOpt,
    cli_errors,
    console,
    err_console,
    shown,
)
from workbench.errors import ConfigError
from workbench.jsontext import strict_dumps

app = typer.Typer(
    help="Inspect the store: list studies, export results, import recordings, upgrade it.",
    no_args_is_help=True,
)


@app.command("list")
def list_studies(
    storage: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every study: kernel, shape, device, evaluations, best value, source, runs by status."""
    from workbench.store.best import best_of  # (SQLAlchemy: imported when the command runs)
    from workbench.store.opening import open_store

    with cli_errors(json_errors=as_json):
        store = open_store(storage, read_only=True)
        rows: list[dict[str, Any]] = []
        for s in store.studies():
            evs = store.evaluations(s, with_samples=False)
            best = best_of(evs)
            rows.append(
                {
                    "id": s.id,
                    "name": s.name,
                    "kernel": s.kernel,
                    "shape": s.shape_label,
                    "device": s.device_key,
                    "evaluations": len(evs),
                    "failed": sum(1 for e in evs if e.measurement.outcome.failed),
                    "best_value": best.measurement.value if best else None,
                    "unit": s.unit,
                    "source": s.replay_source
                    or ("compiled only" if s.compile_only else "measured"),
                    "replay_note": s.replay_note,
                    # status -> count, in the order of each status's first run (abandoned: killed)
                    "runs": dict(Counter(r.status for r in store.runs(s))),
                }
            )
        if as_json:
            print(strict_dumps({"store": store.shown_url, "studies": rows}, indent=1))
            return
        table = Table(title=f"studies in {shown(store.shown_url)}")
        columns = ("id", "kernel", "shape", "device", "evals", "failed", "best", "source", "runs")
        for col in columns:
            table.add_column(col, overflow="fold")
        for r in rows:
            best_text = f"{r['best_value']:.5g} {r['unit']}" if r["best_value"] is not None else "-"
            table.add_row(
                str(r["id"]),
                shown(r["kernel"]),
                shown(r["shape"]),
                shown(r["device"]),
                str(r["evaluations"]),
                str(r["failed"]),
                shown(best_text),
                shown(r["source"]),
                ", ".join(f"{n} {status}" for status, n in r["runs"].items()) or "-",
            )
        console.print(table)


@app.command("export")
def export(
    study: Annotated[str, typer.Argument(help="Study name, id, or a unique part of the name.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="File to write: .csv, .parquet, or .json with --format kt-cache."
        ),
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="table (CSV/Parquet by suffix) or kt-cache (a Kernel Tuner cache file).",
        ),
    ] = "table",
    storage: StorageOpt = None,
) -> None:
    """Export a study's evaluations."""
    from workbench.store.opening import open_store

    with cli_errors():
        store = open_store(storage, read_only=True)
        info = store.find_study(study)
        if fmt == "kt-cache":
            from workbench.store.exchange import export_kt_cache  # pandas: only when used

            path = export_kt_cache(store, info, out)
        elif fmt == "table":
            from workbench.store.exchange import export_table

            path = export_table(store, info, out)
        else:
            raise ConfigError(f"--format {fmt!r}: expected table or kt-cache")
        console.print(f"wrote {escape(str(path))}")


@app.command("import")
def import_(
    recording: Annotated[
        Path, typer.Argument(help="A Kernel Tuner cache, T4 file or workbench recording.")
    ],
    storage: StorageOpt = None,
) -> None:
    """Import a recorded space as a study (entries already there are skipped)."""
    from workbench.store.opening import open_store

    with cli_errors():
        from workbench.runners.recordings import load_recording
        from workbench.store.exchange import import_recording

        read = load_recording(recording)  # first: an unreadable file creates no store
        info, added = import_recording(open_store(storage), read)
        console.print(f"study {escape(info.name)!r}: {added} evaluations imported")


@app.command("copy")
def copy(
    src: Annotated[str, typer.Argument(help="Source store: a SQLite path or URL.")],
    dst: Annotated[str, typer.Argument(help="Destination store, e.g. postgresql://USER@HOST/DB.")],
) -> None:
    """Copy a store into another (a local SQLite file into a shared PostgreSQL database):
    studies, runs, evaluations with every raw sample, compile results, profiles. Rows already in
    the destination are kept, not duplicated; workers then continue the copied studies. A
    source written by an earlier workbench is read as it is (SQLite; PostgreSQL: store upgrade
    it first)."""
    from workbench.store.copy import copy_store, refuse_same
    from workbench.store.opening import open_store, storage_url
    from workbench.store.upgrade import readable_store

    with cli_errors():
        src_url, dst_url = storage_url(src), storage_url(dst)
        refuse_same(src_url, dst_url)  # (an older source is read from a copy of its own)
        # the source is only read: a missing one is named, never created empty; an older one
        # is read through a migrated copy, itself left as it is
        with readable_store(src_url) as source:
            report = copy_store(source, open_store(dst_url))
        for table, n in report.copied.items():
            if n or report.existing[table]:
                console.print(
                    f"{table}: {n} copied"
                    + (
                        f", {report.existing[table]} already there"
                        if report.existing[table]
                        else ""
                    )
                )


@app.command("header")
def header(
    kernel: Annotated[
        str, typer.Argument(help="Kernel (reduce: every variant; reduce[OP=max]: that one).")
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Header file to write (default: stdout)."),
    ] = None,
    study: Annotated[
        list[str] | None,
        typer.Option("--study", help="Only these studies (name, id or unique part); repeatable."),
    ] = None,
    storage: StorageOpt = None,
) -> None:
    """Write a kernel's tuned configs as a C++ header: one compile-time target per study
    (GPU x shape x variant: #define WORKBENCH_<STUDY>, then include the header and the kernel;
    it defines the kernel's macros as the workbench compiled the fastest config) and a run-time
    table of every entry (parameters, shape, value, NVRTC flags, entry, launch geometry)."""
    import sys

    from workbench.store.header import collect, render
    from workbench.store.opening import open_store

    with cli_errors():
        store = open_store(storage, read_only=True)
        found = collect(store, kernel, study or ())
        text = render(found, store_url=store.shown_url)
        for e in found.entries:
            for note in e.notes:
                err_console.print(f"[yellow]{shown(e.study.name)}[/]: {shown(note)}")
        for name, why in found.skipped:
            err_console.print(f"[yellow]skipped {shown(name)}[/]: {shown(why)}")
        if out is None:
            sys.stdout.write(text)
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        console.print(
            f"wrote {escape(str(out))}: {len(found.entries)} target"
            + ("s" if len(found.entries) != 1 else "")
            + "".join(f"\n  {escape(e.target)}  ({shown(e.study.name)})" for e in found.entries)
        )


@app.command("upgrade")
def upgrade(
    storage: StorageOpt = None,
    no_backup: Annotated[
        bool,
        typer.Option(
            "--no-backup",
            help="Migrate without a backup copy (PostgreSQL: the workbench takes none; make a "
            "pg_dump first).",
        ),
    ] = False,
) -> None:
    """Migrate a store written by an earlier workbench to this one's schema, as optuna
    storage upgrade does: a SQLite file is first copied beside itself (named with its old
    schema version and the time), then migrated in one transaction. Read commands (list,
    export, report) need it; tune, worker and the other writers migrate on their own."""
    from workbench.store.opening import storage_url
    from workbench.store.upgrade import upgrade_store

    with cli_errors():
        done = upgrade_store(storage_url(storage), backup=not no_backup)
        console.print(shown(done.summary()), soft_wrap=True)
