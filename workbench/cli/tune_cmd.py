"""``workbench tune``: find the fastest correct config (live on a GPU, or from a recording).

The command parses its options into a :class:`~workbench.search.request.TuneRequest`, starts it
as :mod:`workbench.search.start` says (checked, planned, each search's settings) and shows what
the search does; a shared study (``--storage postgresql://...``) goes to
:func:`workbench.cli.fleet_run.tune_shared`.

The options are made of light names (the request's defaults, the samplers' names); the search,
the store and the compiler are imported when the command runs.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.panel import Panel

from workbench.cli.common import (
    EXIT_FAILED,
    EXIT_NO_GPU,
    ArchOpt,
    CacheOpt,
    DbWaitOpt,
    DeviceOpt,
    JobsOpt,
    PinOpt,
    ShapeOpt,
    ShapesOpt,
    SpacesOpt,
    cli_errors,
    console,
    err_console,
    shown,
)
from workbench.jsontext import strict_dumps
from workbench.runners.objective_kind import ObjectiveKind
from workbench.search.request import (
    DEFAULT_BUDGET,
    DEFAULT_DB_WAIT_S,
    DEFAULT_EVERY,
    DEFAULT_GRACE_S,
    DEFAULT_HEARTBEAT_S,
    DEFAULT_SAMPLER,
    NO_GPU_SAMPLE,
    CompileStage,
    Coordination,
    Measuring,
    Pipeline,
    SearchStrategy,
    StudyChoice,
    TuneRequest,
    TuneTarget,
    requested_budget,
)
from workbench.search.samplers import SAMPLERS
from workbench.search.warm_start import MAX_WARM_STARTS

if TYPE_CHECKING:
    from rich.console import Console

    from workbench.search.drift import DriftCheck
    from workbench.search.start import TuneSetup
    from workbench.search.tune_plan import TunePlan
    from workbench.search.tuner import TuneResult

KernelOpt = Annotated[
    str | None,
    typer.Argument(
        help="A kernel name or space file; optional with --replay (then the recorded space "
        "is tuned).",
        show_default=False,
    ),
]
ReplayOpt = Annotated[
    Path | None,
    typer.Option(
        "--replay",
        help="Answer every evaluation from this recording (Kernel Tuner cache, T4 "
        "or workbench recording) instead of a GPU.",
        show_default=False,
    ),
]
BudgetOpt = Annotated[
    int | None,
    typer.Option(
        "--budget",
        help=f"Unique configs to evaluate, failed ones included (default "
        f"{DEFAULT_BUDGET} unless --time or --patience is given). The default sampler "
        "plans with it: its last evaluations go to its model's best guesses.",
        show_default=False,
    ),
]
TimeOpt = Annotated[
    float | None, typer.Option("--time", help="Wall-time budget in seconds.", show_default=False)
]
PatienceOpt = Annotated[
    int | None,
    typer.Option(
        "--patience", help="Stop after N evaluations without improvement.", show_default=False
    ),
]
DriftOpt = Annotated[
    int,
    typer.Option(
        "--drift-every",
        min=0,
        help="On a GPU: time the run's first correct config again every N correct "
        "evaluations and report drift (0: never).",
    ),
]
SamplerOpt = Annotated[
    str, typer.Option("--sampler", help="Search strategy: " + ", ".join(SAMPLERS) + ".")
]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Seed of the sampler.")]
TuneStorageOpt = Annotated[
    str | None,
    typer.Option(
        "--storage",
        help="Store URL or SQLite path (default $WORKBENCH_STORE or .workbench/store.sqlite). "
        "A postgresql:// URL makes the study shared: run the command on several hosts, or "
        "start `workbench worker`s, and they split one budget.",
        show_default=False,
    ),
]
StudyOpt = Annotated[
    str | None,
    typer.Option(
        "--study",
        help="Study name (default: kernel | shape | device). A study that holds "
        "evaluations is resumed: the budget counts them.",
        show_default=False,
    ),
]
FreshOpt = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Search a new study, independent of the stored ones (named 'NAME #2', ... "
        "when NAME is taken; the existing study is kept).",
    ),
]
HeartbeatOpt = Annotated[
    int, typer.Option("--heartbeat", help="PostgreSQL: seconds between trial heartbeats.")
]
GraceOpt = Annotated[
    int,
    typer.Option(
        "--grace",
        help="PostgreSQL: seconds without a heartbeat before a trial is re-queued (longer "
        "than the database outages to ride out).",
    ),
]
EnqueueOpt = Annotated[
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
]
TuneJsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON summary on stdout (progress goes to stderr)."),
]
ReplayDelayOpt = Annotated[
    float,
    typer.Option(
        "--replay-delay",
        min=0,
        help="With --replay: simulated measurement time per config, in seconds (rehearse "
        "a fleet at a GPU's pace).",
    ),
]
TuneAllOpt = Annotated[
    bool,
    typer.Option(
        "--all", help="Without a GPU or recording: compile every valid config of the space."
    ),
]
TuneSampleOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Without a GPU or recording: configs to compile besides the default "
        f"(default {NO_GPU_SAMPLE}).",
        show_default=False,
    ),
]
PipelineOpt = Annotated[
    Pipeline,
    typer.Option(
        help="On a GPU: 'old' compiles, verifies on the host and times one config at a time; "
        "'new' compiles the next proposals on every core while one is timed and compares "
        "outputs on the GPU (experimental until measured on a GPU: "
        "benchmarks/gpu_throughput.py).",
        case_sensitive=False,
    ),
]

ObjectiveOpt = Annotated[
    ObjectiveKind,
    typer.Option(
        help="What the search minimises: 'time' per launch; 'energy' per launch (joules from "
        "NVML's energy counter, or a recording's energy); 'edp' energy x time. Energy and edp "
        "tune a study of their own (NAME | energy).",
        case_sensitive=False,
    ),
]


def tune(
    kernel: KernelOpt = None,
    replay: ReplayOpt = None,
    spaces: SpacesOpt = None,
    shape: ShapeOpt = None,
    shapes: ShapesOpt = None,
    budget: BudgetOpt = None,
    seconds: TimeOpt = None,
    patience: PatienceOpt = None,
    drift_every: DriftOpt = DEFAULT_EVERY,
    sampler: SamplerOpt = DEFAULT_SAMPLER,
    seed: SeedOpt = 0,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    storage: TuneStorageOpt = None,
    study: StudyOpt = None,
    fresh: FreshOpt = False,
    heartbeat: HeartbeatOpt = DEFAULT_HEARTBEAT_S,
    grace: GraceOpt = DEFAULT_GRACE_S,
    db_wait: DbWaitOpt = DEFAULT_DB_WAIT_S,
    enqueue: EnqueueOpt = None,
    pin: PinOpt = None,
    as_json: TuneJsonOpt = False,
    replay_delay: ReplayDelayOpt = 0.0,
    all_configs: TuneAllOpt = False,
    sample: TuneSampleOpt = None,
    jobs: JobsOpt = None,
    cache_dir: CacheOpt = None,
    pipeline: PipelineOpt = Pipeline.OLD,
    objective: ObjectiveOpt = ObjectiveKind.TIME,
) -> None:
    """Tune a kernel: search its space for the fastest correct config.

    Measurements come from the GPU, from --replay FILE, or (no GPU) from a recording kept in
    recordings/KERNEL/ beside the space file, with a banner naming the device and date.
    Without a GPU and without a recording, the compile stage runs instead (registers, shared
    memory, spills, SASS). Exit status: 0 done; 1 no config succeeded; 2 bad input; 3 no GPU
    and nothing to replay (the compile stage ran); 130 interrupted.
    """
    from workbench.search.start import check_request
    from workbench.store.opening import is_postgresql

    with cli_errors(json_errors=as_json):
        target = TuneTarget(
            kernel=kernel,
            spaces=tuple(spaces or ()),
            shape=tuple(shape) if shape is not None else None,
            shapes=shapes,
            arch=arch,
            device=device,
            pin=tuple(pin) if pin is not None else None,
        )
        strategy = SearchStrategy(
            budget=requested_budget(budget, seconds, patience),
            budget_given=budget is not None,
            sampler=sampler,
            seed=seed,
            enqueue=tuple(enqueue) if enqueue is not None else None,
            drift_every=drift_every,
            objective=objective,
        )
        request = TuneRequest(
            target=target,
            measuring=Measuring(replay=replay, replay_delay=replay_delay, pipeline=pipeline),
            strategy=strategy,
            study=StudyChoice(name=study, fresh=fresh, storage=storage),
            coordination=Coordination(heartbeat_s=heartbeat, grace_s=grace, db_wait_s=db_wait),
            compile=CompileStage(
                all_configs=all_configs, sample=sample, jobs=jobs, cache_dir=cache_dir
            ),
        )
        shared = storage is not None and is_postgresql(storage)
        check_request(request, shared=shared)
        if shared:
            from workbench.cli.fleet_run import tune_shared

            tune_shared(request, as_json)
            return
        _tune_here(request, as_json)


def _tune_here(request: TuneRequest, as_json: bool) -> None:
    """Tune in this process, into a SQLite store (or one on a database server)."""
    from workbench.cli.tune_output import print_result
    from workbench.search.start import Source, plan_tune
    from workbench.search.tuner import SearchStopReason

    out = err_console if as_json else console
    setup = plan_tune(request)
    _announce_source(setup, out)
    if setup.source is Source.SHIPPED:
        _store_kept_results(setup, out)
    if setup.source is Source.COMPILE:
        _compile_stage(setup, request, out, as_json)
        return
    results, summaries = [], []
    for plan in setup.plans:
        result, doc = _tune_study(setup, plan, request, out)
        results.append(result)
        summaries.append(doc)
    for plan, result in zip(setup.plans, results, strict=True):
        print_result(plan, result, setup.store.shown_url, out)
    if as_json:
        doc = summaries[0] if len(summaries) == 1 else {"results": summaries}
        sys.stdout.write(strict_dumps(doc, indent=1, default=str) + "\n")
    if any(r.stop is SearchStopReason.INTERRUPTED for r in results):
        raise typer.Exit(130)
    if not any(r.best for r in results):
        raise typer.Exit(EXIT_FAILED)


def _announce_source(setup: TuneSetup, out: Console) -> None:
    """Without a GPU: say so, and which recording answers instead (if one does)."""
    from workbench.search.kept_recordings import recordings_dir
    from workbench.search.start import Source

    if setup.no_gpu is None:
        return
    out.print(
        f"[bold]No CUDA GPU here[/] ({escape(setup.no_gpu)}): nothing can be timed on this machine."
    )
    if setup.source is Source.SHIPPED:
        assert setup.spec is not None
        folder = escape(str(recordings_dir(setup.spec)))
        out.print(f"Replaying the recording of {escape(setup.spec.name)} in {folder} instead.")


def _store_kept_results(setup: TuneSetup, out: Console) -> None:
    """A replay of a kept recording stores what the same GPU run kept beside it, as that run
    stored it: its comparison with the libraries, and its Nsight Compute profiles of the
    shapes replayed (and says so)."""
    from workbench.compare.replayed import kept_comparisons, store_kept_comparison
    from workbench.profile.replayed import import_kept_profile, kept_profiles, study_of
    from workbench.search.kept_recordings import recordings_dir

    assert setup.spec is not None
    folder = recordings_dir(setup.spec)
    for kept in kept_comparisons(folder):
        if store_kept_comparison(setup.store, kept, setup.spec) is not None:
            out.print(
                f"Stored the comparison with the libraries that run kept: {escape(str(kept.path))}"
            )
    studies = [plan.study for plan in setup.plans]
    for profile in kept_profiles(folder):
        study = study_of(profile, studies)
        if study is not None and import_kept_profile(setup.store, profile, study) is not None:
            out.print(
                f"Stored the Nsight Compute profile that run kept: {escape(str(profile.report))}"
            )


def _tune_study(
    setup: TuneSetup, plan: TunePlan, request: TuneRequest, out: Console
) -> tuple[TuneResult, dict]:
    """Search one study of the tune (one shape), saying first what it starts from."""
    from workbench.cli.tune_output import resume_note, resumed_json, summary
    from workbench.search.start import first_configs
    from workbench.search.tune_plan import Resumption

    store = setup.store
    if plan.banner:
        out.print(Panel(shown(plan.banner), style="bold yellow"))
    queue = first_configs(setup, plan, request, lambda line: out.print(escape(line)))
    resumed = Resumption.of(store, plan.study)
    strategy = request.strategy
    if request.study.fresh:
        out.print(f"--fresh: new study {escape(repr(plan.study.name))}; others are kept")
    elif resumed is not None:  # never silently: the budget counts what it holds
        note = resume_note(
            plan.study.name,
            resumed,
            strategy.budget,
            budget_given=strategy.budget_given,
            sampler=strategy.sampler,
            seed=strategy.seed,
        )
        out.print(f"[yellow]{escape(note)}[/]")
    result = _run(plan, setup, request, queue, out)
    resumed_doc = resumed_json(resumed, strategy.budget, strategy.seed)
    return result, summary(plan, result, store.shown_url) | {"resumed": resumed_doc}


def _compile_stage(setup: TuneSetup, request: TuneRequest, out: Console, as_json: bool) -> None:
    """No GPU and no recording: compile what the search would start from (the ``--enqueue``
    configs, as a tune on a GPU would evaluate them first, then every valid config with --all,
    else the default and a sample) for the problem variant tune would search, print the
    resource table (and with --json the records), and say how to tune."""
    from workbench.cli.compile_output import compile_selection, print_records, refuse_broken_space
    from workbench.cli.tune_output import compile_summary
    from workbench.compiler import CompileCache
    from workbench.search.configs import Assignments, CompileSelection
    from workbench.search.enqueue import is_keyword, is_warm_start
    from workbench.search.kept_recordings import recordings_dir

    spec = setup.spec
    assert spec is not None
    what = (
        "every valid config"
        if request.compile.all_configs
        else f"the default config and {request.compile.sample_size} sampled configs"
    )
    out.print(
        f"No recording of {escape(spec.name)} at the shape(s) asked in "
        f"{escape(str(recordings_dir(spec)))} either: running the "
        f"compile stage: {what} for {', '.join(a.sm for a in setup.arches)} with NVRTC."
    )
    items = request.strategy.enqueue or ()
    selection = CompileSelection(
        spec,
        tuple(setup.arches),
        tuple(sp.shape for sp in setup.spaces),
        device=request.target.device,
        pin=request.target.pin or (),
        given=Assignments(tuple(i for i in items if not is_keyword(i))),
        warm=tuple(i for i in items if is_warm_start(i)),
        all_configs=request.compile.all_configs,
        sample=request.compile.sample_size,
        seed=request.strategy.seed,
        one_variant=True,
        then_sweep=True,
    )
    cache = CompileCache(request.compile.cache_dir)
    jobs = request.compile.jobs
    swept = compile_selection(selection, jobs=jobs, cache=cache, store=setup.store, out=out)
    print_records(swept.records, out=out, defaults=swept.defaults)
    refuse_broken_space(spec, swept.records)
    out.print(
        "To tune: run on a machine with a CUDA GPU, or replay measurements with "
        "--replay FILE (e.g. a Kernel Tuner cache file)."
    )
    if as_json:
        doc = compile_summary(spec, swept.records, setup.no_gpu or "", setup.store.shown_url)
        sys.stdout.write(strict_dumps(doc, indent=1, default=str) + "\n")
    if not any(r.ok for r in swept.records):
        raise typer.Exit(EXIT_FAILED)
    raise typer.Exit(EXIT_NO_GPU)  # (compiled and inspected; nothing was tuned)


def _run(
    plan: TunePlan, setup: TuneSetup, request: TuneRequest, queue: list[dict], out: Console
) -> TuneResult:
    """One study's search, with a progress bar (the best so far, drift when it shows)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from workbench.cli.tune_output import best_text
    from workbench.search.start import search_settings
    from workbench.search.tuner import Tuner

    store = setup.store
    label = f"{plan.problem.kernel} [{plan.problem.shape_label}]"
    columns = [
        TextColumn("{task.description}"),  # (the label may hold braces: not a format string)
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[best]}"),
    ]
    with Progress(*columns, console=out, transient=False) as progress:
        budget = request.strategy.budget
        task = progress.add_task(shown(label), total=budget.evaluations, best="")

        def on_evaluation(stored, best) -> None:
            progress.update(task, completed=len(tuner.history), best=best_text(plan, best))

        def on_drift(check: DriftCheck) -> None:
            if check.drifted:
                progress.console.print(f"[yellow]drift:[/] {escape(check.describe())}")

        settings = search_settings(
            request,
            plan,
            queue,
            command=shlex.join(sys.argv),  # (quoted: the page shows a command that reruns)
            on_evaluation=on_evaluation,
            on_drift=on_drift,
        )
        env = plan.environment_id
        tuner = Tuner(plan.problem, plan.runner, store, plan.study, settings, environment_id=env)
        # a resumed study starts from what the store holds (even if nothing new is evaluated)
        best = best_text(plan, store.best(plan.study))
        progress.update(task, completed=store.count_evaluations(plan.study), best=best)
        return tuner.run(budget)
