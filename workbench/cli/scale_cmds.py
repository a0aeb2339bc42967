"""Scale-out commands: ``tune`` on PostgreSQL, ``worker`` and ``status`` (shared studies).

What a command uses is imported when it runs (``--help`` stays light)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from workbench.cli.common import (
    DbWaitOpt,
    cli_errors,
    console,
    err_console,
)
from workbench.errors import ConfigError, NoGpuError
from workbench.jsontext import strict_dumps
from workbench.search.request import DEFAULT_DB_WAIT_S, Coordination

if TYPE_CHECKING:
    from workbench.fleet.status import StudyStatus
    from workbench.store import Store

StorageArg = Annotated[
    str,
    typer.Option(
        "--storage",
        help="The shared database: postgresql://USER[:PASSWORD]@HOST[:PORT]/DB.",
        show_default=False,
    ),
]
StudyArg = Annotated[str, typer.Option("--study", help="Name of the shared study.")]
GpuOpt = Annotated[
    int | None,
    typer.Option("--gpu", help="The GPU this worker measures on (index among the visible ones)."),
]
GpusOpt = Annotated[
    str | None, typer.Option("--gpus", help="'all': one worker process per visible GPU.")
]
WorkerReplayOpt = Annotated[
    Path | None,
    typer.Option(
        "--replay",
        help="Answer from this recording instead of a GPU (rehearse a fleet, test).",
        show_default=False,
    ),
]
WorkerDelayOpt = Annotated[
    float,
    typer.Option(
        "--replay-delay",
        min=0,
        help="With --replay: simulated measurement time per config, in seconds.",
    ),
]
WorkerTimeOpt = Annotated[
    float | None,
    typer.Option("--time", help="Stop this worker after this many seconds.", show_default=False),
]
WorkerJsonOpt = Annotated[bool, typer.Option("--json", help="Print this worker's summary as JSON.")]


# -- workbench worker ----------------------------------------------------------------------------
def worker(
    storage: StorageArg,
    study: StudyArg,
    gpu: GpuOpt = None,
    gpus: GpusOpt = None,
    replay: WorkerReplayOpt = None,
    replay_delay: WorkerDelayOpt = 0.0,
    seconds: WorkerTimeOpt = None,
    db_wait: DbWaitOpt = DEFAULT_DB_WAIT_S,
    as_json: WorkerJsonOpt = False,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", hidden=True)] = None,
) -> None:
    """Work on a shared study (created by `workbench tune K --storage postgresql://... --study
    NAME`) until its budget is complete. Start one per GPU, on any number of hosts; a killed
    worker's trial is re-queued, and a restarted worker simply joins again."""
    from workbench.cli.fleet_run import work_shared
    from workbench.fleet.connection import open_database
    from workbench.fleet.joining import WorkerOptions, join_as_worker, wait_for_study
    from workbench.search.tuner import SearchStopReason

    if gpus is not None:
        with cli_errors(json_errors=as_json):
            code = _spawn_per_gpu(gpus)
        raise typer.Exit(code)
    with cli_errors(json_errors=as_json):
        if gpu is not None:
            _select_gpu(gpu)
        db, store = open_database(storage, Coordination(db_wait_s=db_wait))
        wait_for_study(db, study, seconds, lambda line: err_console.print(escape(line)))
        options = WorkerOptions(study, replay, replay_delay, seconds, cache_dir)
        result, stats = work_shared(db, store, join_as_worker(db, store, options), gpu)
        line = (
            f"worker {stats['worker']}: {stats['completed']} trials completed "
            f"({stats['measured']} measured, {stats['from_store']} from the store, "
            f"{stats['recovered']} recovered from dead workers); study: {result.evaluations} "
            f"evaluations, stopped: {result.stop.value}"
        )
        (err_console if as_json else console).print(line)
        if as_json:
            doc = {
                **stats,
                "study": study,
                "stop": result.stop.value,
                "evaluations": result.evaluations,
            }
            sys.stdout.write(strict_dumps(doc, default=str) + "\n")
        db.close()
        if result.stop is SearchStopReason.INTERRUPTED:
            raise typer.Exit(130)


def without_option(args: list[str], name: str) -> list[str]:
    """``args`` without ``name VALUE`` or ``name=VALUE`` (every occurrence)."""
    out: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(f"{name}="):
            out.append(a)
    return out


def _select_gpu(index: int) -> None:
    """Restrict this process (and its runner's subprocesses) to one GPU, before CUDA starts."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v for v in visible.split(",") if v] if visible else None
    if ids is not None and not 0 <= index < len(ids):
        raise ConfigError(f"--gpu {index}: CUDA_VISIBLE_DEVICES={visible} has {len(ids)} GPUs")
    os.environ["CUDA_VISIBLE_DEVICES"] = ids[index] if ids is not None else str(index)


def _spawn_per_gpu(which: str) -> int:
    """``--gpus all``: one ``workbench worker --gpu i`` per visible GPU; returns the worst exit.

    Raises:
        ConfigError: not ``all``.
        NoGpuError: no GPU here.
    """
    from workbench.gpu import probe_gpu

    if which != "all":
        raise ConfigError(f"--gpus {which}: expected 'all'")
    probe = probe_gpu()
    if not probe.available:
        raise NoGpuError(f"--gpus all: no CUDA GPU here ({probe.reason})")
    base = [sys.executable, "-m", "workbench.cli.main", *without_option(sys.argv[1:], "--gpus")]
    procs = [subprocess.Popen([*base, "--gpu", str(g)]) for g in range(probe.count)]
    try:
        return max(p.wait() for p in procs)
    except KeyboardInterrupt:
        for p in procs:
            p.send_signal(signal.SIGINT)
        return max(p.wait() for p in procs)


# -- workbench status ----------------------------------------------------------------------------
def status(
    storage: StorageArg,
    study: StudyArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
    db_wait: DbWaitOpt = 10.0,
) -> None:
    """A shared study: workers alive, trials running/complete/failed, best so far."""
    from workbench.fleet.connection import open_database
    from workbench.fleet.status import gather_status

    with cli_errors():
        db, store = open_database(storage, Coordination(db_wait_s=db_wait))
        report = gather_status(db, study, lambda: _best(store, study))
        db.close()
        if as_json:
            doc = {**vars(report), "alive": len(report.alive)}
            sys.stdout.write(strict_dumps(doc, indent=1, default=str) + "\n")
            return
        _print_status(report)


def _best(store: Store, name: str) -> dict[str, Any] | None:
    info = next((s for s in store.studies() if s.name == name), None)
    if info is None:
        return None
    best = store.best(info)  # the store's one rule (workbench.store.best)
    if best is None:
        return None
    return {
        "value": best.measurement.value,
        "unit": info.unit,
        "config": best.config,
        "evaluations": store.count_evaluations(info),
        "replayed_from": best.measurement.replayed_from,
    }


def _print_status(r: StudyStatus) -> None:
    c = r.counts
    console.print(f"[bold]{escape(r.name)}[/] on {escape(r.device_class or '?')}")
    console.print(
        f"trials: {c['complete']} complete of budget {r.budget}, {c['running']} running, "
        f"{c['waiting']} waiting (re-queued), {c['failed']} failed (dead workers), "
        f"{c['skipped']} skipped (duplicates/surplus)"
    )
    table = Table(title=f"workers: {len(r.alive)} alive")
    for col in ("worker", "state", "trials", "last seen"):
        table.add_column(col)
    for w in r.workers:
        state = (
            "alive"
            if w["alive"]
            else w.get("state", "?")
            if w.get("state") != "working"
            else "lost"
        )
        table.add_row(
            escape(w["key"]), state, str(w.get("completed", 0)), f"{w['seen_s_ago']:.0f} s ago"
        )
    console.print(table)
    if r.best is None:
        console.print("best so far: none")
    else:
        from workbench.spaces import config_label

        console.print(
            f"best so far: {r.best['value']:.5g} {escape(r.best['unit'])} "
            f"{escape(config_label(r.best['config']))}"
            + (
                f" (replayed from {escape(r.best['replayed_from'])})"
                if r.best["replayed_from"]
                else ""
            )
        )
