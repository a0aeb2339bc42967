"""``workbench tune``: find the fastest correct config (live on a GPU, or from a recording)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from workbench.cli.common import (
    EXIT_FAILED,
    ArchOpt,
    DbWaitOpt,
    DeviceOpt,
    ShapeOpt,
    ShapesOpt,
    SpacesOpt,
    cli_errors,
    console,
    err_console,
)
from workbench.cli.compile_cmd import (
    CacheOpt,
    JobsOpt,
    compile_space,
    print_records,
    refuse_broken_space,
)
from workbench.cli.store_cmds import open_store
from workbench.compiler import CompileCache
from workbench.devices import device_for
from workbench.errors import ConfigError, WorkbenchError
from workbench.gpu import probe_gpu
from workbench.runners.base import TrialOutcome
from workbench.runners.recordings import load_recording
from workbench.search.problem import Problem, SpaceProblem
from workbench.search.samplers import DEFAULT_SAMPLER, SAMPLERS, check_sampler
from workbench.search.session import (
    TunePlan,
    plan_replay_file,
    plan_space_replay,
    recording_for_shape,
    recordings_dir,
    shipped_recordings,
)
from workbench.search.shared import Coordination, is_postgresql
from workbench.search.tuner import Budget, StopReason, Tuner, TuneResult
from workbench.search.warm_start import MAX_WARM_STARTS, best_elsewhere
from workbench.spaces import Space, config_label, load_kernel
from workbench.spaces.model import SpaceSpec
from workbench.spaces.space import parse_assignments
from workbench.spaces.targets import one_arch, parse_shape, resolve_arches, shape_spaces
from workbench.store import Store, StudyInfo
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
            f"{DEFAULT_BUDGET} unless --time or --patience is given).",
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
            help="Study name (default: kernel | shape | device).",
            show_default=False,
        ),
    ] = None,
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
    pin: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Fix a parameter for the whole search, NAME=VALUE (repeatable); problem "
            "variants (tunable: false in the space, e.g. a reduction's OP) are fixed to their "
            "default unless set here.",
            show_default=False,
        ),
    ] = None,
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
        store = open_store(storage)
        plans: list[TunePlan]
        if kernel is None:
            plans = [plan_replay_file(store, replay, study_name=study)]  # type: ignore[arg-type]
        else:
            spec = load_kernel(kernel, spaces or [])
            arches = resolve_arches(spec, arch)  # without a GPU, --arch all compiles each
            spaces_ = _spaces(spec, arches[0], device, shape, shapes)
            pinned = spaces_[0].parse_pins(pin)
            if replay is not None:
                one_arch(spec, arch)  # a recording is of one GPU
                recording = load_recording(replay)
                plans = [
                    plan_space_replay(store, sp, recording, pinned, study_name=study)
                    for sp in spaces_
                ]
            else:
                gpu = probe_gpu()
                if gpu.available:
                    from workbench.search.live import plan_live

                    one_arch(spec, arch)  # the GPU runs one
                    plans = [
                        plan_live(
                            store, sp, CompileCache(cache_dir), pinned=pinned, study_name=study
                        )
                        for sp in spaces_
                    ]
                else:
                    plans = _plans_without_gpu(store, spec, spaces_, gpu.reason, out, pinned)
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
        results = []
        for plan in plans:
            if replay_delay and plan.runner.replay_source is not None:
                plan.runner.delay_s = replay_delay  # type: ignore[attr-defined]
            if plan.banner:
                out.print(Panel(escape(plan.banner), style="bold yellow"))
            try:
                plan.problem.check_not_empty()  # (before the progress bar; the tuner checks too)
                queue = _enqueue(plan, enqueue, store, out)
            except WorkbenchError:  # refused: no empty study left behind
                for unused in plans:
                    store.discard_if_unused(unused.study)
                raise
            results.append(_run(plan, store, the_budget, sampler, seed, queue, out))
        summaries = [_summary(p, r, store.shown_url) for p, r in zip(plans, results, strict=True)]
        for plan, result in zip(plans, results, strict=True):
            _print_result(plan, result, store.shown_url, out)
        if as_json:
            doc = summaries[0] if len(summaries) == 1 else {"results": summaries}
            sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
        if any(r.stop is StopReason.INTERRUPTED for r in results):
            raise typer.Exit(130)
        if not any(r.best for r in results):
            raise typer.Exit(EXIT_FAILED)


def _spaces(
    spec: SpaceSpec, target: Arch, device: str | None, shape: list[str] | None, shapes: str | None
) -> list[Space]:
    """The spaces of ``--shape``/``--shapes`` (parsed from the command line)."""
    given = parse_shape(shape, spec.default_shape) if shape else None
    return shape_spaces(spec, target, device, given, shapes)


def _plans_without_gpu(
    store: Store,
    spec: SpaceSpec,
    spaces_: list[Space],
    reason: str,
    out: object,
    pinned: dict | None = None,
) -> list[TunePlan]:
    out.print(
        f"[bold]No CUDA GPU here[/] ({escape(reason)}): nothing can be timed on this "  # type: ignore[attr-defined]
        "machine."
    )
    recordings = shipped_recordings(spec)
    plans = []
    for sp in spaces_:
        recording = recording_for_shape(recordings, sp.shape)
        if recording is not None:
            plans.append(plan_space_replay(store, sp, recording, pinned))
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
    given = [i.split(",") for i in enqueue or [] if not _enqueue_keyword(i)]
    warm = [i for i in enqueue or [] if i == "best" or i.startswith("best:")]
    cache = CompileCache(stage.cache_dir)
    records: list[StaticRecord] = []
    for target in arches:
        for shape in shapes:
            sp = Space(spec, shape=shape, arch=target, device=device_for(target, device))
            problem = SpaceProblem(sp, sp.parse_pins(pin))
            fixed = problem.pinned
            configs = select_configs(sp, assignments=given, fixed=fixed) if given else []
            if warm:  # another study's best, as a tune on a GPU would evaluate it first
                study = compile_only_study(store, sp, problem.kernel)
                try:
                    for item in warm:
                        found = _warm_starts(problem, study, item, store, out)
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
        WorkbenchError: an unknown sampler, or --enqueue none with other --enqueue values.
    """
    check_sampler(sampler)
    if "none" in (enqueue or []) and len(enqueue or []) > 1:
        raise ConfigError("--enqueue none puts nothing first: it cannot go with other --enqueue")
    for item in enqueue or []:
        if not _enqueue_keyword(item) and not all("=" in part for part in item.split(",")):
            raise ConfigError(
                f"--enqueue {item!r}: expected default, none, best, best:STUDY or NAME=VALUE,..."
            )


def _enqueue_keyword(item: str) -> bool:
    """Whether an ``--enqueue`` item is a keyword (``default``, ``none``, ``best``,
    ``best:STUDY``) rather than a NAME=VALUE,... config."""
    return item in ("default", "none", "best") or item.startswith("best:")


def _enqueue(plan: TunePlan, items: list[str] | None, store: Store, out: object) -> list[dict]:
    """The configs ``--enqueue`` asks to evaluate first, without repeats, in order: the space's
    default, another study's best (``best``, ``best:STUDY``), or NAME=VALUE,..."""
    items = items or ["default"]
    queue: list[dict] = []
    for item in items:
        if item == "none":
            return []
        if item == "default":
            queue += plan.problem.defaults()
        elif item == "best" or item.startswith("best:"):
            queue += _warm_starts(plan.problem, plan.study, item, store, out)
        else:
            config = _parse_enqueued(plan, item)
            violations = plan.problem.violations(config)
            if violations:  # said, not silently skipped
                raise ConfigError(f"--enqueue {item}: invalid here: {'; '.join(violations)}")
            queue.append(config)
    unique: dict[str, dict] = {}
    for config in queue:  # in order, the first of equal configs
        unique.setdefault(plan.problem.key(config), config)
    return list(unique.values())


def _parse_enqueued(plan: TunePlan, item: str) -> dict:
    """``--enqueue NAME=VALUE,...``: over the space's defaults (and the --set values), or,
    for a bare recording (which has none), naming every parameter.

    Raises:
        ConfigError: malformed, an unknown name or value, or a recorded parameter left out.
    """
    space = getattr(plan.problem, "space", None)
    if space is not None:
        pinned = getattr(plan.problem, "pinned", {})
        return space.parse_config(item.split(","), {**space.spec.default_config(), **pinned})
    domains = {p.name: p.values for p in plan.problem.params}
    config = parse_assignments(domains, item.split(","), {})
    if missing := [n for n in domains if n not in config]:
        raise ConfigError(
            f"--enqueue {item}: a recorded space has no defaults; name {', '.join(missing)} too"
        )
    return config


def _warm_starts(
    problem: Problem, study: StudyInfo, item: str, store: Store, out: object
) -> list[dict]:
    """``--enqueue best``: the fastest config of each other study of this kernel in the store
    than ``study`` (those that fit ``problem``, at most MAX_WARM_STARTS; the others are named
    and skipped). ``--enqueue best:STUDY``: that study's, which must fit."""
    source = item.partition(":")[2] if ":" in item else None
    if source == "":
        raise ConfigError(
            "--enqueue best: takes a study, e.g. best:3 or 'best:NAME' (see store list)"
        )
    found = best_elsewhere(store, problem, study, source)
    if source is not None and found[0].config is None:
        raise ConfigError(f"--enqueue {item}: {found[0].describe()}")
    if not found:
        out.print(f"--enqueue best: no other study of {escape(study.kernel)} in the store")  # type: ignore[attr-defined]
    queue: list[dict] = []
    for start in found:
        if start.config is None:
            line = f"skipped {start.describe()}"
        elif start.config in queue:
            line = f"the same config as above, from {start.describe()}"
        elif len(queue) == MAX_WARM_STARTS:
            line = f"not used (at most {MAX_WARM_STARTS}; best:STUDY picks one) {start.describe()}"
        else:
            queue.append(start.config)
            line = f"first {start.describe()}"
        out.print(f"--enqueue best: {escape(line)}")  # type: ignore[attr-defined]
    return queue


def _run(
    plan: TunePlan,
    store: Store,
    budget: Budget,
    sampler: str,
    seed: int,
    queue: list[dict],
    out: object,
) -> TuneResult:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = budget.evaluations
    label = f"{plan.problem.kernel} [{plan.problem.shape_label}]"
    columns = [
        TextColumn(escape(label)),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[best]}"),
    ]
    with Progress(*columns, console=out, transient=False) as progress:  # type: ignore[arg-type]
        task = progress.add_task("tune", total=total, best="")

        def on_evaluation(stored, best) -> None:
            progress.update(task, completed=len(tuner.history), best=_best_text(plan, best))

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
            command=" ".join(sys.argv),
        )
        # a resumed study starts from what the store holds (even if nothing new is evaluated)
        best = _best_text(plan, store.best(plan.study))
        progress.update(task, completed=store.count_evaluations(plan.study), best=best)
        return tuner.run(budget)


def _best_text(plan: TunePlan, best: object) -> str:
    if best is None:
        return "best: -"
    m = best.measurement  # type: ignore[attr-defined]
    text = f"best {m.value:.4g} ms"
    if plan.throughput is not None:
        rate = plan.throughput(best.config, m.value)  # type: ignore[attr-defined]
        if rate is not None:
            text += f" ({rate:,.1f} {plan.unit}"
            share = _bound_share(plan, best.config, m.value)  # type: ignore[attr-defined]
            text += f", {share} of the roofline bound)" if share else ")"
    return text


def _bound_share(plan: TunePlan, config: dict, ms: float) -> str:
    """``"42%"`` of the roofline bound, or "" when the GPU's roofline is not known."""
    bound = plan.roofline(config, ms) if plan.roofline is not None else None
    if bound is None:
        return ""
    return f"{bound.fraction:.1%}" if bound.fraction < 0.1 else f"{bound.fraction:.0%}"


def _summary(plan: TunePlan, result: TuneResult, url: str) -> dict:
    best = result.best
    doc = {
        "kernel": plan.problem.kernel,
        "shape": plan.problem.shape_label,
        "study": result.study.name,
        "device": plan.runner.device.name,
        "replayed_from": plan.runner.replay_source,
        "objective": {"name": plan.runner.objective.name, "unit": plan.runner.objective.unit},
        "best_config": best.config if best else None,
        "best_value": best.measurement.value if best else None,
        "evaluations": result.evaluations,
        "new_evaluations": result.new_evaluations,
        "failed": sum(1 for e in result.history if e.measurement.outcome.failed),
        "stop": result.stop.value,
        "unanswered": result.unanswered,
        "store": url,
    }
    if plan.recorded_optimum is not None:
        doc["recorded_optimum"] = plan.recorded_optimum
    if result.moves is not None:
        doc["moves"] = result.moves
    if best and plan.throughput is not None:
        doc["throughput"] = {
            "value": plan.throughput(best.config, best.measurement.value),
            "unit": plan.unit,
        }
        bound = plan.roofline(best.config, best.measurement.value) if plan.roofline else None
        if bound is not None:  # the share of the roofline bound, and the roofs it is under
            doc["throughput"]["roofline"] = {
                "fraction": bound.fraction,
                "limit": bound.limit,
                "ceilings": list(bound.ceilings),
            }
    return doc


def _print_result(plan: TunePlan, result: TuneResult, url: str, out: object) -> None:
    problem, device = plan.problem, plan.runner.device.name
    # escaped whole: rich would take an unescaped "[n=1000]" for markup and drop it
    table = Table(
        title=escape(f"top configs: {problem.kernel} [{problem.shape_label}] on {device}")
    )
    table.add_column("#", justify="right")
    table.add_column("config", overflow="fold")
    table.add_column(
        f"{plan.runner.objective.name} ({plan.runner.objective.unit})", justify="right"
    )
    if plan.throughput is not None:
        table.add_column(plan.unit or "", justify="right")
    if plan.roofline is not None:
        table.add_column("roofline bound", justify="right")
    for i, e in enumerate(result.top(10), 1):
        cells = [str(i), escape(config_label(e.config)), f"{e.measurement.value:.5g}"]
        if plan.throughput is not None:
            rate = plan.throughput(e.config, e.measurement.value)  # type: ignore[arg-type]
            cells.append("" if rate is None else f"{rate:,.1f}")
        if plan.roofline is not None:
            cells.append(_bound_share(plan, e.config, e.measurement.value))  # type: ignore[arg-type]
        table.add_row(*cells)
    out.print(table)  # type: ignore[attr-defined]
    failed = sum(1 for e in result.history if e.measurement.outcome is not TrialOutcome.OK)
    line = (
        f"{result.evaluations} configs evaluated ({result.new_evaluations} new, {failed} "
        f"failed); stopped: {result.stop.value}."
    )
    if plan.recorded_optimum is not None and result.best is not None:
        gap = result.best.measurement.value / plan.recorded_optimum  # type: ignore[operator]
        line += f" Recorded optimum {plan.recorded_optimum:.5g} (best found is {gap:.3f}x)."
    if result.unanswered:
        line += f" {result.unanswered} valid configs could not be evaluated (not in the recording)."
    out.print(line)  # type: ignore[attr-defined]
    if result.moves:
        used = ", ".join(
            f"{move} {s['proposed']}/{s['improved']}" for move, s in result.moves.items()
        )
        out.print(f"Search moves (proposed/improved the best): {used}")  # type: ignore[attr-defined]
    out.print(f"Results: study {escape(result.study.name)!r} in {escape(url)}")  # type: ignore[attr-defined]
