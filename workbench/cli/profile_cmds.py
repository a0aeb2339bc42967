"""``workbench profile``: Nsight Compute metrics of one config (GPU), or of a report made
elsewhere (``--import``, no GPU), into the store, with the roofline, divergence, memory-access
and occupancy figures derived from them."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from workbench.cli.common import (
    ArchOpt,
    BestStudyOpt,
    CacheOpt,
    DeviceOpt,
    OneConfigOpt,
    ShapeOpt,
    SpacesOpt,
    StorageOpt,
    cli_errors,
    console,
    err_console,
)
from workbench.errors import ConfigError
from workbench.jsontext import strict_dumps
from workbench.profile.errors import NcuUnavailable, NoGpuToProfile
from workbench.profile.metrics import MetricSet
from workbench.profile.ncu import NCU_TIMEOUT_S, find_ncu
from workbench.roofline import Ceilings, datasheet_ceilings, measured_ceilings
from workbench.units import si

if TYPE_CHECKING:  # (what the command uses is imported when it runs: --help stays light)
    from workbench.cli.config_request import ConfigRequest, ResolvedConfig
    from workbench.profile import profiler
    from workbench.profile.storage import ProfileRecord
    from workbench.profile.summary import Summary
    from workbench.spaces import Space
    from workbench.store import Store

SetOpt = Annotated[
    MetricSet,
    typer.Option(
        "--set",
        help="Metrics to collect: roofline (DRAM/L2/L1 bytes, FP32/FP64/FP16 and tensor-core "
        "work, peaks, clocks), divergence (threads per warp instruction, branch uniformity, "
        "stalls), memory (sectors per request, bytes per sector, hit rates, bank conflicts), "
        "occupancy, or full. Occupancy and launch metrics come with every set.",
    ),
]


def profile(
    kernel: Annotated[
        str | None,
        typer.Argument(
            help="A kernel name or space file; with --import, the kernel the report's "
            "launches belong to (optional).",
            show_default=False,
        ),
    ] = None,
    import_file: Annotated[
        Path | None,
        typer.Option("--import", help="Store the launches of a .ncu-rep made elsewhere."),
    ] = None,
    config: OneConfigOpt = None,
    metric_set: SetOpt = MetricSet.FULL,
    metrics: Annotated[
        list[str] | None,
        typer.Option("--metrics", help="More metric names, comma separated (repeatable)."),
    ] = None,
    select: Annotated[
        str | None,
        typer.Option(
            "--kernel-name",
            help="With --import: keep the launches whose mangled, demangled or short name "
            "matches (a substring of the demangled name is enough).",
            show_default=False,
        ),
    ] = None,
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    shape: ShapeOpt = None,
    storage: StorageOpt = None,
    study: BestStudyOpt = None,
    ceilings_file: Annotated[
        Path | None,
        typer.Option("--ceilings", help="Measured ceilings (JSON of scripts/ceilings.py)."),
    ] = None,
    ncu: Annotated[Path | None, typer.Option("--ncu", help="The ncu executable.")] = None,
    report_dir: Annotated[
        Path, typer.Option("--report-dir", help="Where the .ncu-rep files go.")
    ] = Path(".workbench/profiles"),
    timeout: Annotated[
        float, typer.Option(min=1, help="Longest time ncu may take, in seconds.")
    ] = NCU_TIMEOUT_S,
    launch_skip: Annotated[
        int,
        typer.Option(min=0, help="Launches of the config to let pass before the profiled one."),
    ] = 0,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random inputs.")] = 0,
    cache_dir: CacheOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Check the metric names, compile, print the ncu command; run nothing."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """Profile one config with Nsight Compute (on a GPU; falls back to event timing when ncu
    cannot read counters), or import a report (--import, no GPU), into the store."""
    from workbench.cli.config_request import DEFAULT_CONFIG, parse_config_options, wants_best
    from workbench.profile import profiler
    from workbench.spaces.targets import space_from_options
    from workbench.store.opening import open_store

    with cli_errors(json_errors=as_json):
        extra = tuple(n.strip() for item in metrics or [] for n in item.split(",") if n.strip())
        ceilings = _extra_ceilings(ceilings_file)
        requests = parse_config_options(config, merge=True)
        # a plain path is a SQLite file, as for every command (open_store)
        store = None if dry_run and not wants_best(requests) else open_store(storage)
        space = space_from_options(kernel, spaces, arch, device, shape) if kernel else None
        if import_file is not None:
            resolved = _resolve(space, requests[0], store, study) if space and requests else None
            stored = _import(import_file, space, resolved, store, select, metric_set)
            if space is not None:
                ceilings = ceilings.add(datasheet_ceilings(space.device))
            _emit(stored, ceilings, as_json)
            return
        if space is None:
            raise ConfigError("name a kernel to profile, or pass --import FILE.ncu-rep")
        resolved = _resolve(space, (requests or [DEFAULT_CONFIG])[0], store, study)
        request = profiler.ProfileRequest(
            space=space,
            config=resolved.config,
            metric_set=metric_set,
            extra_metrics=extra,
            device_preset=device,
            spaces=tuple(spaces or ()),
            cache_dir=cache_dir,
            seed=seed,
            ncu=ncu,
            report_dir=report_dir,
            timeout_s=timeout,
            launch_skip=launch_skip,
        )
        if dry_run:
            _dry_run(request, as_json)
            return
        outcome = _profile_config(request)
        ceilings = ceilings.add(datasheet_ceilings(space.device))
        record = _store(store, outcome.record, resolved.study.id if resolved.study else None)
        _emit([record], ceilings, as_json)


def _import(
    path: Path,
    space: Space | None,
    resolved: ResolvedConfig | None,
    store: Store | None,
    select: str | None,
    metric_set: MetricSet,
) -> list[ProfileRecord]:
    """``--import``: the launches of a report made elsewhere (those ``select`` names), of
    ``space``'s kernel at its shape and of the ``resolved`` config when they are given, kept in
    ``store`` (with the config's study, where it was a study's best)."""
    from workbench.profile import importing
    from workbench.spaces.model import shape_label

    _, records = importing.import_report(
        path,
        select=select,
        kernel=space.spec.name if space else None,
        config=resolved.config if resolved else None,
        shape=shape_label(space.shape) if space else None,
        metric_set=metric_set,
    )
    study_id = resolved.study.id if resolved and resolved.study else None
    return [_store(store, r, study_id, imported=True) for r in records]


def _profile_config(request: profiler.ProfileRequest) -> profiler.ProfileOutcome:
    """Profile the request's config on the GPU here, saying on stderr when ncu could not read
    counters (then the event-timing roofline stands in).

    Raises:
        NoGpuToProfile: no GPU here (with what the command can still do without one).
    """
    from workbench.profile import profiler

    try:
        outcome = profiler.profile_config(request)
    except NoGpuToProfile as exc:  # what this command can still do here, by its flags
        raise NoGpuToProfile(
            f"{exc.detail}; here, --dry-run checks the metrics and prints the ncu command "
            "and --import reads a report made elsewhere"
        ) from None
    if outcome.fallback:
        err_console.print(f"[yellow]no counters:[/] {escape(outcome.fallback)}")
        err_console.print("falling back to the event-timing roofline (work model / time)")
    return outcome


def _extra_ceilings(path: Path | None) -> Ceilings:
    return Ceilings(measured_ceilings(path)) if path is not None else Ceilings()


def _store(
    store: Store | None, record: ProfileRecord, study_id: int | None, *, imported: bool = False
) -> ProfileRecord:
    """Keep a profile in the store; an imported launch already there is not stored again."""
    if store is None:
        return record
    from dataclasses import replace

    from workbench.profile.storage import find_import, save_profile

    record = replace(record, study_id=study_id)
    if imported and (known := find_import(store, record)) is not None:
        err_console.print(
            f"launch {record.report_index} of {escape(str(record.source_file))} is already "
            f"in the store as profile #{known}: not stored again"
        )
        return replace(record, id=known)
    return replace(record, id=save_profile(store, record))


def _dry_run(request: profiler.ProfileRequest, as_json: bool) -> None:
    from workbench.profile import profiler

    try:
        ncu: Path | str = find_ncu(request.ncu)
    except NcuUnavailable:
        ncu = "ncu"
    the_plan = profiler.plan(request, nvtx_available=profiler.nvtx_available())
    command = the_plan.command(ncu)
    if as_json:
        doc = {
            "chip": the_plan.chip,
            "symbol": the_plan.symbol,
            "metrics": list(the_plan.resolved.collect),
            "skipped": list(the_plan.resolved.skipped),
            "checked_by": the_plan.resolved.checked_by,
            "report": str(the_plan.report),
            "command": command,
        }
        console.print_json(strict_dumps(doc))
        return
    r = the_plan.resolved
    console.print(
        f"{len(r.expected)} metrics of set {r.metric_set.value} checked against {r.checked_by}"
    )
    if r.skipped:
        console.print(f"not on {the_plan.chip} (skipped): {escape(', '.join(r.skipped))}")
    console.print(f"kernel symbol: {escape(the_plan.symbol)}")
    console.print(escape(shlex.join(command)), soft_wrap=True)


def _emit(records: list[ProfileRecord], ceilings: Ceilings, as_json: bool) -> None:
    from workbench.profile.summary import summarize, to_json

    summaries = [summarize(r, ceilings) for r in records]
    if as_json:
        console.print_json(strict_dumps({"profiles": [to_json(s) for s in summaries]}))
        return
    for s in summaries:
        _print(s)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def _print(s: Summary) -> None:
    r, a = s.record, s.achieved
    where = f"{r.device or 'unknown GPU'}" + (f" ({r.chip})" if r.chip else "")
    name = r.kernel + (f" {r.config_key}" if r.config_key else "")
    stored = f", stored as profile #{r.id}" if r.id is not None else ""
    console.print(f"[bold]{escape(name)}[/] on {escape(where)}: {r.source}{stored}")
    if r.report_index is not None:
        console.print(f"  launch #{r.report_index}: {escape((r.demangled_name or '')[:160])}")
    console.print(f"  duration {si(a.duration_s, 's', missing='n/a')}")
    for level, rate in a.bytes_per_s.items():
        frac = s.bandwidth_fraction.get(level)
        share = f" ({frac:.0%} of peak)" if frac is not None else ""
        console.print(f"  {level}: {si(rate, 'B/s', missing='n/a')}{share}")
    for p in s.points:
        console.print(
            f"  roofline {p.precision} @ {p.level}: {_num(p.intensity)} op/B, "
            f"{si(p.achieved, 'op/s', missing='n/a')} = {p.fraction:.0%} of attainable, "
            f"{p.bound}-bound "
            f"(ridge {_num(p.ridge)} op/B)"
        )
    _print_counters(s)
    if s.missing_by_set:
        counts = ", ".join(f"{k} {len(v)}" for k, v in s.missing_by_set.items())
        console.print(f"  metrics missing per set: {counts} (names: --json)")
        wanted = s.missing_by_set.get(r.metric_set) or []
        if wanted:
            more = ", ..." if len(wanted) > 4 else ""
            console.print(f"  missing for {r.metric_set}: {escape(', '.join(wanted[:4]))}{more}")
    for note in (*r.notes, *a.notes, *s.notes):
        console.print(f"  note: {escape(note)}")
    for c in s.ceilings:
        console.print(f"  ceiling {escape(c.label)}")


def _int(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _print_counters(s: Summary) -> None:
    d, m, o = s.divergence, s.memory, s.occupancy
    if d is not None and d.threads_per_inst is not None:
        flag = "; [red]flagged: fewer than 24 of 32 threads[/]" if d.flagged else ""
        console.print(
            f"  divergence: {_num(d.threads_per_inst)} threads/warp instruction "
            f"({_num(d.pred_on_threads_per_inst)} predicated on), branch uniformity "
            f"{_pct(d.branch_uniform_pct)}{flag}"
        )
    if d is not None and d.stalls:
        top = ", ".join(f"{k} {v:.2g}" for k, v in d.stalls[:3])
        console.print(f"  top stalls (warps per issue): {escape(top)}")
    if m is not None:
        for acc in (m.loads, m.stores):
            if acc.sectors_per_request is not None or acc.bytes_per_sector is not None:
                console.print(
                    f"  global {acc.op}: {_num(acc.sectors_per_request)} sectors/request, "
                    f"{_num(acc.bytes_per_sector)} B/sector used"
                )
        if m.l1_hit_rate_pct is not None or m.l2_hit_rate_pct is not None:
            console.print(
                f"  hit rates: L1 {_pct(m.l1_hit_rate_pct)}, L2 {_pct(m.l2_hit_rate_pct)}; "
                f"shared bank conflicts ld {_int(m.shared_bank_conflicts.get('ld'))}, "
                f"st {_int(m.shared_bank_conflicts.get('st'))}"
            )
    if o is not None and (o.achieved_pct is not None or o.registers_per_thread is not None):
        console.print(
            f"  occupancy: {_pct(o.achieved_pct)} achieved / {_pct(o.theoretical_pct)} "
            f"theoretical (limit: {o.limiter or 'n/a'}), {_int(o.registers_per_thread)} "
            f"registers/thread, block {_int(o.block_size)}, grid {_int(o.grid_size)}"
        )


def _resolve(
    space: Space, request: ConfigRequest, store: Store | None, study: str | None
) -> ResolvedConfig:
    """The config to profile, with what was chosen or filled in said on stderr."""
    from workbench.cli.config_request import resolve_config

    resolved = resolve_config(space, request, store=store, study=study)
    for note in resolved.notes():
        err_console.print(escape(note), soft_wrap=True)
    return resolved
