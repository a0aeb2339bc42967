"""Scale-out commands: ``tune`` on PostgreSQL, ``worker`` and ``status`` (shared studies)."""

from __future__ import annotations

import json
import math
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from workbench.cli.common import EXIT_FAILED, DbWaitOpt, cli_errors, console, err_console
from workbench.cli.store_cmds import open_store
from workbench.errors import ConfigError, WorkbenchError
from workbench.search.drift import DEFAULT_EVERY
from workbench.search.session import TunePlan
from workbench.search.shared import (
    SETUP_LOCK,
    Coordination,
    Database,
    SharedStudy,
    StudyStatus,
    WorkerId,
    gather_status,
    is_postgresql,
)
from workbench.search.tuner import Budget, StopReason, TuneResult
from workbench.search.worker import SharedTuner, enqueue_first, seed_from_store
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


# -- plans from a study's spec ------------------------------------------------------------------
def plan_from_spec(
    store: Store,
    spec: dict[str, Any],
    *,
    study_name: str | None,
    replay: Path | None = None,
    cache_dir: Path | None = None,
) -> TunePlan:
    """The plan a shared study's spec describes, on this machine (its GPU, or ``replay``).

    Raises:
        WorkbenchError: the kernel, recording or GPU the spec needs is not here.
    """
    from workbench.gpu import probe_gpu
    from workbench.runners.recordings import load_recording
    from workbench.search.session import plan_replay_file, plan_space_replay
    from workbench.spaces import load_kernel
    from workbench.spaces.targets import one_arch, option_spaces

    source = str(replay) if replay is not None else spec.get("replay")
    if source is not None and not Path(source).exists():
        raise ConfigError(
            f"the study replays {source}, which is not on this machine: --replay FILE"
        )
    kernel = spec.get("kernel")
    if kernel is None:
        if source is None:
            raise ConfigError("the study's spec names no kernel and no recording")
        return plan_replay_file(store, source, study_name=study_name)
    space_spec = load_kernel(kernel, [Path(p) for p in spec.get("spaces") or []])
    target = one_arch(space_spec, spec.get("arch"))
    spaces_ = option_spaces(space_spec, target, spec.get("device"), spec.get("shape"), None)
    pinned = spaces_[0].parse_pins(spec.get("pin"))
    if source is not None:
        return plan_space_replay(
            store, spaces_[0], load_recording(source), pinned, study_name=study_name
        )
    gpu = probe_gpu()
    if not gpu.available:
        raise WorkbenchError(
            f"no CUDA GPU here ({gpu.reason}): a worker of a live study needs one (or rehearse "
            "the fleet with --replay FILE)"
        )
    from workbench.compiler import CompileCache
    from workbench.search.live import plan_live

    return plan_live(
        store, spaces_[0], CompileCache(cache_dir), pinned=pinned, study_name=study_name
    )


def _open(storage: str, settings: Coordination) -> tuple[Database, Store]:
    if not is_postgresql(storage):
        raise ConfigError(
            f"{storage}: shared studies need PostgreSQL (--storage postgresql://USER@HOST/DB); "
            "a SQLite store serves one process per study (README, Scale-out)"
        )
    db = Database(storage, settings)
    return db, db.outage.call(open_store, storage)


def _work(
    db: Database,
    store: Store,
    plan: TunePlan,
    shared: SharedStudy,
    budget: Budget,
    gpu: int | None,
) -> tuple[TuneResult, dict[str, Any]]:
    spec = shared.spec()
    tuner = SharedTuner(
        plan,
        store,
        shared,
        WorkerId.here(gpu),
        sampler=spec.get("sampler", "portfolio"),
        seed=spec.get("seed", 0),
        command=shlex.join(sys.argv),  # (quoted: the page shows a command that reruns)
        drift_every=spec.get("drift_every", DEFAULT_EVERY),
    )
    result = tuner.run(budget)
    stats = dict(vars(tuner.stats), outages=db.outage.outages, worker=tuner.worker.key)
    return result, stats


def tune_shared(
    storage: str,
    study: str | None,
    spec: dict[str, Any],
    budget_given: bool,
    seconds: float | None,
    enqueue: list[str] | None,
    as_json: bool,
    settings: Coordination,
    replay_delay: float = 0.0,
) -> None:
    """``workbench tune ... --storage postgresql://...``: create or join the shared study, then
    work on it as one worker. Running the same command on other hosts adds workers."""
    from workbench.cli.enqueue import enqueued_configs
    from workbench.cli.tune_output import print_result, summary

    out = err_console if as_json else console
    db, store = _open(storage, settings)
    with db.lock(SETUP_LOCK):
        plan = plan_from_spec(store, spec, study_name=study, replay=None)
        if replay_delay and plan.runner.replay_source is not None:
            plan.runner.delay_s = replay_delay  # type: ignore[attr-defined]
        name = plan.study.name
        device_class = plan.runner.device.device_class()
        if SharedStudy.exists(db, name):
            shared = SharedStudy(db, name)
            shared.check_device_class(device_class)
            old = shared.spec()
            if not budget_given and old.get("budget"):
                spec = dict(spec, budget=old["budget"])  # joining: keep the study's budget
            # joining does not change how the study searches for its other workers
            kept = {k: old[k] for k in ("sampler", "seed", "coordination") if k in old}
            if changed := [k for k, v in kept.items() if spec.get(k) != v]:
                out.print(
                    f"joining study {escape(name)!r}: its {', '.join(changed)} "
                    f"({escape(', '.join(str(kept[k]) for k in changed))}) are kept; "
                    "a new --study to search otherwise"
                )
            spec = dict(spec, **kept)
        shared = SharedStudy.create(db, name, spec, device_class)
        seeded = seed_from_store(shared, store, plan)
        enqueue_first(shared, plan, enqueued_configs(plan, enqueue, store, out))
    if plan.banner:
        out.print(escape(plan.banner), style="bold yellow")
    if seeded:
        out.print(f"{seeded} evaluations already in the store joined the shared study")
    b = spec["budget"]
    budget = Budget(evaluations=b.get("evaluations"), seconds=seconds, patience=b.get("patience"))
    out.print(
        f"worker {WorkerId.here(None).key} on shared study {escape(name)!r} "
        f"(budget {budget.evaluations}) in {escape(db.outage.where)}"
    )
    result, stats = _work(db, store, plan, shared, budget, None)
    print_result(plan, result, db.outage.where, out)
    if as_json:
        doc = summary(plan, result, db.outage.where)
        doc["worker"] = stats
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
    db.close()
    if result.stop is StopReason.INTERRUPTED:
        raise typer.Exit(130)
    if result.best is None:
        raise typer.Exit(EXIT_FAILED)


# -- workbench worker ----------------------------------------------------------------------------
def worker(
    storage: StorageArg,
    study: StudyArg,
    gpu: Annotated[
        int | None,
        typer.Option(
            "--gpu", help="The GPU this worker measures on (index among the visible ones)."
        ),
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option("--gpus", help="'all': one worker process per visible GPU."),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            help="Answer from this recording instead of a GPU (rehearse a fleet, test).",
            show_default=False,
        ),
    ] = None,
    replay_delay: Annotated[
        float,
        typer.Option(
            "--replay-delay",
            min=0,
            help="With --replay: simulated measurement time per config, in seconds.",
        ),
    ] = 0.0,
    seconds: Annotated[
        float | None,
        typer.Option(
            "--time", help="Stop this worker after this many seconds.", show_default=False
        ),
    ] = None,
    db_wait: DbWaitOpt = 300.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print this worker's summary as JSON.")
    ] = False,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", hidden=True)] = None,
) -> None:
    """Work on a shared study (created by `workbench tune K --storage postgresql://... --study
    NAME`) until its budget is complete. Start one per GPU, on any number of hosts; a killed
    worker's trial is re-queued, and a restarted worker simply joins again."""
    if gpus is not None:
        with cli_errors(json_errors=as_json):
            code = _spawn_per_gpu(gpus)
        raise typer.Exit(code)
    with cli_errors(json_errors=as_json):
        if gpu is not None:
            _select_gpu(gpu)
        db, store = _open(storage, Coordination(db_wait_s=db_wait))
        _wait_for_study(db, study, seconds)
        timing = SharedStudy(db, study).spec().get("coordination") or {}
        db.configure(timing.get("heartbeat_s", 10), timing.get("grace_s", 60))
        with db.lock(SETUP_LOCK):
            shared = SharedStudy(db, study)
            spec = shared.spec()
            plan = plan_from_spec(store, spec, study_name=study, replay=replay, cache_dir=cache_dir)
            if replay_delay:
                plan.runner.delay_s = replay_delay  # type: ignore[attr-defined]
            shared.check_device_class(plan.runner.device.device_class())
            seed_from_store(shared, store, plan)
        b = spec.get("budget") or {}
        budget = Budget(
            evaluations=b.get("evaluations"), seconds=seconds, patience=b.get("patience")
        )
        result, stats = _work(db, store, plan, shared, budget, gpu)
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
            sys.stdout.write(json.dumps(doc, default=str) + "\n")
        db.close()
        if result.stop is StopReason.INTERRUPTED:
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
        ConfigError: not ``all``, or no GPU here.
    """
    from workbench.gpu import probe_gpu

    if which != "all":
        raise ConfigError(f"--gpus {which}: expected 'all'")
    probe = probe_gpu()
    if not probe.available:
        raise ConfigError(f"--gpus all: no CUDA GPU here ({probe.reason})")
    base = [sys.executable, "-m", "workbench.cli.main", *without_option(sys.argv[1:], "--gpus")]
    procs = [subprocess.Popen([*base, "--gpu", str(g)]) for g in range(probe.count)]
    try:
        return max(p.wait() for p in procs)
    except KeyboardInterrupt:
        for p in procs:
            p.send_signal(signal.SIGINT)
        return max(p.wait() for p in procs)


def _wait_for_study(db: Database, name: str, seconds: float | None = None) -> None:
    """Wait until the study exists: up to --db-wait seconds, or the worker's --time."""
    import time

    wait = min(db.settings.db_wait_s, seconds if seconds is not None else math.inf)
    deadline = time.monotonic() + wait
    told = False
    while not SharedStudy.exists(db, name):
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"no shared study {name!r} in {db.outage.where} after {wait:.0f} s: create it "
                f"with workbench tune K --storage URL --study {shlex.quote(name)} (which also "
                "works as the "
                "first worker)"
            )
        if not told:
            err_console.print(
                f"waiting for study {escape(name)!r} to be created (up to {wait:.0f} s: "
                "--db-wait, or --time) ..."
            )
            told = True
        time.sleep(db.settings.poll_s)


# -- workbench status ----------------------------------------------------------------------------
def status(
    storage: StorageArg,
    study: StudyArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
    db_wait: DbWaitOpt = 10.0,
) -> None:
    """A shared study: workers alive, trials running/complete/failed, best so far."""
    with cli_errors():
        db, store = _open(storage, Coordination(db_wait_s=db_wait))
        report = gather_status(db, study, lambda: _best(store, study))
        db.close()
        if as_json:
            doc = {**vars(report), "alive": len(report.alive)}
            sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
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
