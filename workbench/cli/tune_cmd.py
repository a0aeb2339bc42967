"""``workbench tune``: find the fastest correct config (live on a GPU, or from a recording)."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from workbench.cli.common import (
    EXIT_FAILED,
    ArchOpt,
    DbWaitOpt,
    DeviceOpt,
    PinOpt,
    ShapeOpt,
    ShapesOpt,
    SpacesOpt,
    cli_errors,
    console,
    err_console,
    shown,
)
from workbench.cli.compile_cmd import CacheOpt, JobsOpt, compile_space, refuse_broken_space
from workbench.cli.compile_output import print_records
from workbench.cli.enqueue import (
    check_enqueue,
    enqueued_configs,
    is_keyword,
    is_warm_start,
    warm_starts,
)
from workbench.cli.store_cmds import open_store
from workbench.cli.tune_output import (
    best_text,
    print_result,
    resume_note,
    resumed_json,
    summary,
)
from workbench.compiler import CompileCache
from workbench.devices import device_for
from workbench.errors import ConfigError, WorkbenchError
from workbench.gpu import probe_gpu
from workbench.runners.recordings import load_recording
from workbench.search.drift import DEFAULT_EVERY, DriftCheck
from workbench.search.problem import SpaceProblem
from workbench.search.samplers import DEFAULT_SAMPLER, SAMPLERS, check_sampler
from workbench.search.session import (
    Resumption,
    TunePlan,
    plan_replay_file,
    plan_space_replay,
    recording_for_shape,
    recordings_dir,
    shipped_recordings,
)
from workbench.search.shared import Coordination, is_postgresql
from workbench.search.tuner import Budget, StopReason, Tuner, TuneResult
from workbench.search.warm_start import MAX_WARM_STARTS
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import SpaceSpec
from workbench.spaces.targets import one_arch, option_spaces, resolve_arches
from workbench.store import Store
from workbench.sweep import StaticRecord, compile_only_study, select_configs
from workbench.toolchain import Arch

#: Sampled configs compiled by the no-GPU path besides the default (seconds, not minutes).
NO_GPU_SAMPLE = 8
DEFAULT_BUDGET = 100


def tune(
    kernel: Annotated[
        str | None,
        typer.Argument(
            help="A kernel name or space file; optional with --replay (then the recorded space "
            "is tuned).",
            show_default=False,
        ),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            help="Answer every evaluation from this recording (Kernel Tuner cache, T4 "
            "or workbench recording) instead of a GPU.",
            show_default=False,
        ),
    ] = None,
    spaces: SpacesOpt = None,
    shape: ShapeOpt = None,
    shapes: ShapesOpt = None,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget",
            help=f"Unique configs to evaluate, failed ones included (default "
            f"{DEFAULT_BUDGET} unless --time or --patience is given). The default sampler "
            "plans with it: its last evaluations go to its model's best guesses.",
            show_default=False,
        ),
    ] = None,
    seconds: Annotated[
        float | None,
        typer.Option("--time", help="Wall-time budget in seconds.", show_default=False),
    ] = None,
    patience: Annotated[
        int | None,
        typer.Option(
            "--patience", help="Stop after N evaluations without improvement.", show_default=False
        ),
    ] = None,
    drift_every: Annotated[
        int,
        typer.Option(
            "--drift-every",
            min=0,
            help="On a GPU: time the run's first correct config again every N correct "
            "evaluations and report drift (0: never).",
        ),
    ] = DEFAULT_EVERY,
    sampler: Annotated[
        str, typer.Option("--sampler", help="Search strategy: " + ", ".join(SAMPLERS) + ".")
    ] = DEFAULT_SAMPLER,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of the sampler.")] = 0,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Store URL or SQLite path (default $WORKBENCH_STORE or .workbench/store.sqlite). "
            "A postgresql:// URL makes the study shared: run the command on several hosts, or "
            "start `workbench worker`s, and they split one budget.",
            show_default=False,
        ),
    ] = None,
    study: Annotated[
        str | None,
        typer.Option(
            "--study",
            help="Study name (default: kernel | shape | device). A study that holds "
            "evaluations is resumed: the budget counts them.",
            show_default=False,
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Search a new study, independent of the stored ones (named 'NAME #2', ... "
            "when NAME is taken; the existing study is kept).",
        ),
    ] = False,
    heartbeat: Annotated[
        int, typer.Option("--heartbeat", help="PostgreSQL: seconds between trial heartbeats.")
    ] = 10,
    grace: Annotated[
        int,
        typer.Option(
            "--grace",
            help="PostgreSQL: seconds without a heartbeat before a trial is re-queued (longer "
            "than the database outages to ride out).",
        ),
    ] = 60,
    db_wait: DbWaitOpt = 300.0,
    enqueue: Annotated[
        list[str] | None,
        typer.Option(
            "--enqueue",
            help="Configs to evaluate first: 'default' (the space's default, the "
            "default behaviour), 'none', 'best' (the fastest config of each other study of "
            f"this kernel in the store, other GPUs, shapes, variants: at most {MAX_WARM_STARTS}, "
            "this GPU's first), 'best:STUDY' (one study's: name, id or a unique part of the "
            "name), or NAME=VALUE,... (repeatable).",
            show_default=False,
        ),
    ] = None,
    pin: PinOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON summary on stdout (progress goes to stderr)."),
    ] = False,
    replay_delay: Annotated[
        float,
        typer.Option(
            "--replay-delay",
            min=0,
            help="With --replay: simulated measurement time per config, in seconds (rehearse "
            "a fleet at a GPU's pace).",
        ),
    ] = 0.0,
    all_configs: Annotated[
        bool,
        typer.Option(
            "--all", help="Without a GPU or recording: compile every valid config of the space."
        ),
    ] = False,
    sample: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Without a GPU or recording: configs to compile besides the default "
            f"(default {NO_GPU_SAMPLE}).",
            show_default=False,
        ),
    ] = None,
    jobs: JobsOpt = None,
    cache_dir: CacheOpt = None,
) -> None:
    """Tune a kernel: search its space for the fastest correct config.

    Measurements come from the GPU, from --replay FILE, or (no GPU) from a recording kept in
    recordings/KERNEL/ beside the space file, with a banner naming the device and date.
    Without a GPU and without a recording, the compile stage runs instead (registers, shared
    memory, spills, SASS). Exit status: 0 done; 1 no config succeeded; 2 bad input; 130 interrupted.
    """
    out = err_console if as_json else console
    with cli_errors(json_errors=as_json):
        if kernel is None and replay is None:
            raise ConfigError("name a kernel, or give --replay FILE to tune a recorded space")
        _check_options(sampler, enqueue)
        if all_configs and sample is not None:
            raise ConfigError("--all compiles every valid config: it cannot go with --sample")
        the_budget = Budget(
            evaluations=budget if budget is not None or seconds or patience else DEFAULT_BUDGET,
            seconds=seconds,
            patience=patience,
        )
        if storage is not None and is_postgresql(storage):
            from workbench.cli.scale_cmds import tune_shared

            if fresh:  # every host runs the same command: each would make a study of its own
                raise ConfigError(
                    "--fresh makes a study of this process's own; a shared study is joined by "
                    "name: give a new one with --study NAME"
                )

            if shapes is not None:
                raise ConfigError("a shared study tunes one shape: use --shape, not --shapes")
            spec = {
                "kernel": kernel,
                "replay": str(replay.absolute()) if replay is not None else None,
                "spaces": [str(p.absolute()) for p in spaces or []],
                "shape": shape,
                "arch": arch,
                "device": device,
                "pin": pin,
                "sampler": sampler,
                "seed": seed,
                "budget": the_budget.as_dict() | {"seconds": None},
                "drift_every": drift_every,
                "coordination": {"heartbeat_s": heartbeat, "grace_s": grace},
            }
            settings = Coordination(heartbeat_s=heartbeat, grace_s=grace, db_wait_s=db_wait)
            tune_shared(
                storage,
                study,
                spec,
                budget is not None,
                seconds,
                enqueue,
                as_json,
                settings,
                replay_delay,
            )
            return
        # a recording that cannot be read is refused before a store is opened (or created)
        recording = load_recording(replay) if replay is not None else None
        store = open_store(storage)
        plans: list[TunePlan]
        if kernel is None:
            plans = [plan_replay_file(store, recording, study_name=study, fresh=fresh)]  # type: ignore[arg-type]
        else:
            spec = load_kernel(kernel, spaces or [])
            arches = resolve_arches(spec, arch)  # without a GPU, --arch all compiles each
            spaces_ = option_spaces(spec, arches[0], device, shape, shapes)
            pinned = spaces_[0].parse_pins(pin)
            if recording is not None:
                one_arch(spec, arch)  # a recording is of one GPU
                plans = [
                    plan_space_replay(store, sp, recording, pinned, study_name=study, fresh=fresh)
                    for sp in spaces_
                ]
            else:
                gpu = probe_gpu()
                if gpu.available:
                    from workbench.search.live import plan_live

                    one_arch(spec, arch)  # the GPU runs one
                    plans = [
                        plan_live(
                            store,
                            sp,
                            CompileCache(cache_dir),
                            pinned=pinned,
                            study_name=study,
                            fresh=fresh,
                        )
                        for sp in spaces_
                    ]
                else:
                    plans = _plans_without_gpu(
                        store, spec, spaces_, gpu.reason, out, pinned, fresh=fresh
                    )
                    if not plans:
                        stage = CompileStage(
                            all_configs,
                            NO_GPU_SAMPLE if sample is None else sample,
                            seed,
                            jobs,
                            cache_dir,
                        )
                        shapes_ = [sp.shape for sp in spaces_]
                        records = _compile_stage(
                            store, spec, arches, shapes_, device, pin, enqueue, stage, out
                        )
                        if as_json:
                            doc = _compile_summary(spec, records, gpu.reason, store.shown_url)
                            sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
                        if not any(r.ok for r in records):
                            raise typer.Exit(EXIT_FAILED)
                        return
        results, summaries = [], []
        for plan in plans:
            if replay_delay and plan.runner.replay_source is not None:
                plan.runner.delay_s = replay_delay  # type: ignore[attr-defined]
            if plan.banner:
                out.print(Panel(shown(plan.banner), style="bold yellow"))
            try:
                plan.problem.check_not_empty()  # (before the progress bar; the tuner checks too)
                queue = enqueued_configs(plan, enqueue, store, out)
            except WorkbenchError:  # refused: no empty study left behind
                for unused in plans:
                    store.discard_if_unused(unused.study)
                raise
            resumed = Resumption.of(store, plan.study)
            if fresh:
                out.print(f"--fresh: new study {escape(repr(plan.study.name))}; others are kept")
            elif resumed is not None:  # never silently: the budget counts what it holds
                note = resume_note(
                    plan.study.name,
                    resumed,
                    the_budget,
                    budget_given=budget is not None,
                    sampler=sampler,
                    seed=seed,
                )
                out.print(f"[yellow]{escape(note)}[/]")
            result = _run(plan, store, the_budget, sampler, seed, queue, out, drift_every)
            results.append(result)
            summaries.append(
                summary(plan, result, store.shown_url)
                | {"resumed": resumed_json(resumed, the_budget, seed)}
            )
        for plan, result in zip(plans, results, strict=True):
            print_result(plan, result, store.shown_url, out)
        if as_json:
            doc = summaries[0] if len(summaries) == 1 else {"results": summaries}
            sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
        if any(r.stop is StopReason.INTERRUPTED for r in results):
            raise typer.Exit(130)
        if not any(r.best for r in results):
            raise typer.Exit(EXIT_FAILED)


def _plans_without_gpu(
    store: Store,
    spec: SpaceSpec,
    spaces_: list[Space],
    reason: str,
    out: object,
    pinned: dict | None = None,
    *,
    fresh: bool = False,
) -> list[TunePlan]:
    out.print(
        f"[bold]No CUDA GPU here[/] ({escape(reason)}): nothing can be timed on this "  # type: ignore[attr-defined]
        "machine."
    )
    recordings = shipped_recordings(spec)
    plans = []
    for sp in spaces_:
        variant = SpaceProblem(sp, pinned).kernel  # the variant tune searches (--set or defaults)
        recording = recording_for_shape(recordings, sp.shape, variant)
        if recording is not None:
            plans.append(plan_space_replay(store, sp, recording, pinned, fresh=fresh))
    if plans:
        folder = escape(str(recordings_dir(spec)))
        out.print(f"Replaying the recording of {escape(spec.name)} in {folder} instead.")  # type: ignore[attr-defined]
    return plans


@dataclass(frozen=True)
class CompileStage:
    """What the no-GPU compile stage compiles: every valid config, or the default and a
    sample (``--all``, ``--sample``, ``--seed``), and with which compile processes and cache."""

    all_configs: bool
    sample: int
    seed: int
    jobs: int | None
    cache_dir: Path | None


def _compile_stage(
    store: Store,
    spec: SpaceSpec,
    arches: list[Arch],
    shapes: list[dict[str, int]],
    device: str | None,
    pin: list[str] | None,
    enqueue: list[str] | None,
    stage: CompileStage,
    out: Console,
) -> list[StaticRecord]:
    """No GPU and no recording: compile what the search would start from, per arch and
    shape, for the problem variant tune would search (``--set``, else the variants'
    defaults), the ``--enqueue NAME=VALUE`` configs first, and print the resource table."""
    what = (
        "every valid config"
        if stage.all_configs
        else f"the default config and {stage.sample} sampled configs"
    )
    out.print(
        f"No recording of {escape(spec.name)} at the shape(s) asked in "
        f"{escape(str(recordings_dir(spec)))} either: running the "
        f"compile stage: {what} for {', '.join(a.sm for a in arches)} with NVRTC."
    )
    given = [i for i in enqueue or [] if not is_keyword(i)]
    warm = [i for i in enqueue or [] if is_warm_start(i)]
    cache = CompileCache(stage.cache_dir)
    records: list[StaticRecord] = []
    for target in arches:
        for shape in shapes:
            sp = Space(spec, shape=shape, arch=target, device=device_for(target, device))
            problem = SpaceProblem(sp, sp.parse_pins(pin))
            fixed = problem.pinned
            base = {**sp.default_config(), **fixed}
            named = [sp.parse_config(i.split(","), base) for i in given]
            configs = select_configs(sp, given=named, fixed=fixed) if given else []
            if warm:  # another study's best, as a tune on a GPU would evaluate it first
                study = compile_only_study(store, sp, problem.kernel)
                try:
                    for item in warm:
                        found = warm_starts(problem, study, item, store, out)
                        configs += [c for c in found if c not in configs]
                except WorkbenchError:  # refused: no empty study left behind
                    store.discard_if_unused(study)
                    raise
            more = select_configs(
                sp,
                all_configs=stage.all_configs,
                sample=stage.sample,
                seed=stage.seed,
                fixed=fixed,
            )
            configs += [c for c in more if c not in configs]
            records += compile_space(
                sp,
                configs,
                jobs=stage.jobs,
                cache=cache,
                store=store,
                kernel=problem.kernel,
                out=out,
            )
    print_records(records, out=out)
    refuse_broken_space(spec, records)
    out.print(
        "To tune: run on a machine with a CUDA GPU, or replay measurements with "
        "--replay FILE (e.g. a Kernel Tuner cache file)."
    )
    return records


def _compile_summary(
    spec: SpaceSpec, records: list[StaticRecord], reason: str, url: str
) -> dict[str, object]:
    """``--json`` of the no-GPU compile stage: nothing was timed, so no best config."""
    return {
        "kernel": spec.name,
        "device": None,
        "no_gpu_reason": reason,
        "stage": "compile",
        "objective": {"name": "time", "unit": "ms"},
        "best_config": None,
        "best_value": None,
        "evaluations": 0,
        "compiled": sum(r.ok for r in records),
        "failed": sum(not r.ok for r in records),
        "store": url,
        "records": [r.to_dict() for r in records],
    }


def _check_options(sampler: str, enqueue: list[str] | None) -> None:
    """Refuse what no path of tune can take, before anything is opened or written.

    Raises:
        WorkbenchError: an unknown sampler, or a malformed --enqueue.
    """
    check_sampler(sampler)
    check_enqueue(enqueue)


def _run(
    plan: TunePlan,
    store: Store,
    budget: Budget,
    sampler: str,
    seed: int,
    queue: list[dict],
    out: object,
    drift_every: int = 0,
) -> TuneResult:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = budget.evaluations
    label = f"{plan.problem.kernel} [{plan.problem.shape_label}]"
    columns = [
        TextColumn("{task.description}"),  # (the label may hold braces: not a format string)
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[best]}"),
    ]
    with Progress(*columns, console=out, transient=False) as progress:  # type: ignore[arg-type]
        task = progress.add_task(shown(label), total=total, best="")

        def on_evaluation(stored, best) -> None:
            progress.update(task, completed=len(tuner.history), best=best_text(plan, best))

        def on_drift(check: DriftCheck) -> None:
            if check.drifted:
                progress.console.print(f"[yellow]drift:[/] {escape(check.describe())}")

        tuner = Tuner(
            plan.problem,
            plan.runner,
            store,
            plan.study,
            environment_id=plan.environment_id,
            sampler=sampler,
            seed=seed,
            enqueue=queue,
            on_evaluation=on_evaluation,
            command=shlex.join(sys.argv),  # (quoted: the page shows a command that reruns)
            drift_every=drift_every,
            on_drift=on_drift,
        )
        # a resumed study starts from what the store holds (even if nothing new is evaluated)
        best = best_text(plan, store.best(plan.study))
        progress.update(task, completed=store.count_evaluations(plan.study), best=best)
        return tuner.run(budget)
