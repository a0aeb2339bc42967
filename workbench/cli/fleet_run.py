"""Working on a shared study from the command line: what ``workbench tune --storage
postgresql://...`` and ``workbench worker`` both do."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import typer
from rich.markup import escape

from workbench.cli.common import (
    EXIT_FAILED,
    console,
    err_console,
)
from workbench.fleet.claims import WorkerId
from workbench.fleet.connection import Database, open_database
from workbench.fleet.joining import (
    SharedSetup,
    create_or_join,
)
from workbench.jsontext import strict_dumps
from workbench.search.request import TuneRequest
from workbench.search.tuner import SearchStopReason, TuneResult
from workbench.store import Store


def work_shared(
    db: Database, store: Store, setup: SharedSetup, gpu: int | None
) -> tuple[TuneResult, dict[str, Any]]:
    """Work on the study as one worker; its result and this worker's figures."""
    # (quoted: the page shows a command that reruns)
    tuner = setup.tuner(store, gpu, command=shlex.join(sys.argv))
    result = tuner.run(setup.request.strategy.budget)
    stats = dict(vars(tuner.stats), outages=db.outage.outages, worker=tuner.worker.key)
    return result, stats


def tune_shared(request: TuneRequest, as_json: bool) -> None:
    """``workbench tune ... --storage postgresql://...``: create or join the shared study of
    ``request`` (in its storage), then work on it as one worker. Running the same command on
    other hosts adds workers."""
    from workbench.cli.tune_output import print_result, summary

    out = err_console if as_json else console
    assert request.study.storage is not None  # (shared: a postgresql:// storage was given)
    db, store = open_database(request.study.storage, request.coordination)
    setup = create_or_join(db, store, request, lambda line: out.print(escape(line)))
    plan = setup.plan
    if plan.banner:
        out.print(escape(plan.banner), style="bold yellow")
    if setup.seeded:
        out.print(f"{setup.seeded} evaluations already in the store joined the shared study")
    out.print(
        f"worker {WorkerId.here(None).key} on shared study {escape(plan.study.name)!r} "
        f"(budget {setup.request.strategy.budget.evaluations}) in {escape(db.outage.where)}"
    )
    result, stats = work_shared(db, store, setup, None)
    print_result(plan, result, db.outage.where, out)
    if as_json:
        doc = summary(plan, result, db.outage.where)
        doc["worker"] = stats
        sys.stdout.write(strict_dumps(doc, indent=1, default=str) + "\n")
    db.close()
    if result.stop is SearchStopReason.INTERRUPTED:
        raise typer.Exit(130)
    if result.best is None:
        raise typer.Exit(EXIT_FAILED)
