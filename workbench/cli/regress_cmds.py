"""``workbench regress``: record runs, check one against a baseline, show the history."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from workbench.cli.common import (
    ArchOpt,
    CacheOpt,
    DeviceOpt,
    JsonOpt,
    PinOpt,
    ShapeOpt,
    ShapesOpt,
    SpacesOpt,
    StorageOpt,
    cli_errors,
    console,
    err_console,
    flag_wording,
)
from workbench.errors import ConfigError
from workbench.jsontext import strict_dumps
from workbench.stats.rule import Verdict

if TYPE_CHECKING:  # (what a command uses is imported when it runs: --help stays light)
    from rich.console import Console

    from workbench.regress.check import CheckReport
    from workbench.regress.history import Series
    from workbench.regress.plan import RecordPlan
    from workbench.regress.recorder import Recorded
    from workbench.regress.records import MeasurementRecord
    from workbench.store import Store

app = typer.Typer(
    help="Regression tracking: record the tracked configs of a kernel, check a run against a "
    "baseline (exit 1 on a regression), show the history with change points.",
    no_args_is_help=True,
)

_STYLE = {
    Verdict.FASTER: "green",
    Verdict.SLOWER: "bold red",
    Verdict.BROKEN: "bold red",
    Verdict.FIXED: "green",
    Verdict.SAME: "",
    Verdict.NOT_COMPARABLE: "yellow",
    Verdict.DAMAGED: "bold red",
}


@app.command("record")
def record_command(
    kernel: Annotated[
        str | None,
        typer.Argument(
            help="A kernel name or space file; optional with --replay.", show_default=False
        ),
    ] = None,
    shapes: ShapesOpt = None,
    shape: ShapeOpt = None,
    label: Annotated[
        str | None,
        typer.Option("--label", help="A label for --baseline LABEL.", show_default=False),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            "--replay",
            help="Take the samples from this recording instead of the GPU (the run is marked "
            "as replayed).",
            show_default=False,
        ),
    ] = None,
    pin: PinOpt = None,
    previous: Annotated[
        bool,
        typer.Option(
            "--previous/--no-previous",
            help="Also measure the configs the previous run tracked (keeps series unbroken "
            "after a re-tune).",
        ),
    ] = True,
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    storage: StorageOpt = None,
    cache_dir: CacheOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure the best config(s) of K per shape (tune studies, else the default) and store the
    run with every raw sample and its environment (GPU, driver, CUDA, toolkit, clocks, commit).

    Needs a GPU, or --replay FILE. Exit status: 0 stored; 2 bad input or no GPU.
    """
    from workbench.regress.recorder import choose_targets, record
    from workbench.store.opening import open_store

    out = err_console if as_json else console
    with cli_errors(json_errors=as_json):
        if kernel is None and replay is None:
            raise ConfigError("name a kernel, or give --replay FILE to record a recorded space")
        store = open_store(storage)
        plan = _plan(store, kernel, replay, shapes, shape, pin, spaces, arch, device, cache_dir)
        try:
            if plan.banner:
                out.print(Panel(escape(plan.banner), style="bold yellow"))
            targets = choose_targets(
                store, plan.problems, plan.device.name, include_previous=previous
            )
            result = record(
                store,
                plan.runners,
                targets,
                kernel=plan.kernel,
                environment_id=plan.environment_id,
                label=label,
                shape_set=plan.shape_set,
                command=shlex.join(sys.argv),  # (quoted: the page shows a command that reruns)
                on_measure=lambda t, m: out.print(
                    f"  {escape(t.shape_label)} {escape(m.config_key)}: {_median(m)}"
                ),
            )
        finally:
            plan.close()
        _print_recorded(result, plan, store.shown_url, out)
        if as_json:
            doc = _recorded_json(result, plan, store.shown_url)
            sys.stdout.write(strict_dumps(doc, indent=1) + "\n")


def _plan(
    store: Store,
    kernel: str | None,
    replay: Path | None,
    shapes: str | None,
    shape: list[str] | None,
    pin: list[str] | None,
    spaces: list[Path] | None,
    arch: str | None,
    device: str | None,
    cache_dir: Path | None,
) -> RecordPlan:
    from workbench.regress.plan import kernel_spaces, plan_recording_file, plan_space
    from workbench.spaces import load_kernel
    from workbench.spaces.targets import parse_shape

    if kernel is None:
        return plan_recording_file(store, replay)  # type: ignore[arg-type]
    spec = load_kernel(kernel, spaces or [])
    spaces_ = kernel_spaces(
        spec,
        arch=arch,
        device=device,
        shape=parse_shape(shape, spec.default_shape) if shape else None,
        shapes=shapes,
    )
    pinned = spaces_[0].parse_pins(pin)
    return plan_space(
        store,
        spec,
        spaces_,
        pinned=pinned,
        replay=replay,
        shape_set=shapes,
        cache_dir=cache_dir,
    )


@app.command("check")
def check_command(
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline",
            help="previous (the latest earlier run of the kernel, same GPU first), a run id "
            "(17 or run:17), or a label (nightly, or label:NAME for a label that reads as an id "
            "or a keyword); a label no earlier run has yet is a missing baseline.",
        ),
    ] = "previous",
    candidate: Annotated[
        str,
        typer.Option(
            "--candidate", help="latest, a run id (17 or run:17), or a label (or label:NAME)."
        ),
    ] = "latest",
    kernel: Annotated[
        str | None,
        typer.Option(
            "--kernel", help="Only runs of this kernel (for latest and labels).", show_default=False
        ),
    ] = None,
    missing_ok: Annotated[
        bool,
        typer.Option(
            "--missing-ok",
            help="Exit 0 (with a note) when there is no baseline yet (first CI run).",
        ),
    ] = False,
    storage: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compare two runs config by config and shape by shape (decision rule: docs/regressions.md).

    Exit status: 0 no regression; 1 a config got slower (or broke); 2 error (no such run, no
    baseline, damaged store, or a measurement with too few samples that are times left).
    Samples that are not times (NaN, zero, negative) are dropped with a warning naming the run.
    """
    from workbench.regress.check import check
    from workbench.regress.records import MissingBaselineError
    from workbench.store.opening import open_store

    with cli_errors(json_errors=as_json):
        try:
            store = open_store(storage, read_only=True)
            report = check(store, baseline, candidate, kernel=kernel)
        except MissingBaselineError as exc:
            if not missing_ok:
                raise
            note = flag_wording(str(exc))
            err_console.print(f"note: {escape(note)}; nothing to compare (--missing-ok)")
            if as_json:
                sys.stdout.write(strict_dumps({"exit_status": 0, "note": note, "rows": []}) + "\n")
            return
        for warning in report.warnings:  # (stderr: --json's stdout stays one document)
            err_console.print(f"[yellow]warning:[/] {escape(warning)}")
        for row in report.rows:
            if row.verdict is Verdict.DAMAGED:  # exit 2: said where a CI log shows errors
                where = f"{row.shape_label} {row.config_key}"
                err_console.print(f"[red]error:[/] {escape(where)}: {escape(row.note)}")
        if as_json:
            sys.stdout.write(strict_dumps(report.to_json(), indent=1, default=str) + "\n")
        else:
            _print_report(report)
    if report.exit_status:
        raise typer.Exit(report.exit_status)


@app.command("history")
def history_command(
    kernel: Annotated[str, typer.Argument(help="The kernel (its pinned variants included).")],
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Write the timeline (self-contained HTML) here.", show_default=False
        ),
    ] = None,
    storage: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The series of runs per GPU, shape and config, with change points and what changed."""
    from workbench.regress.history import gather_history
    from workbench.regress.timeline import write_timeline
    from workbench.store.opening import open_store

    with cli_errors(json_errors=as_json):
        store = open_store(storage, read_only=True)
        series = gather_history(store, kernel)
        if html is not None:
            path = write_timeline(html, series, kernel=kernel, store_url=store.shown_url)
            (err_console if as_json else console).print(f"wrote {escape(str(path))}")
        if as_json:
            doc = [_series_json(s) for s in series]
            sys.stdout.write(strict_dumps({"kernel": kernel, "series": doc}, indent=1) + "\n")
            return
        table = Table(title=f"regression history: {escape(kernel)}")
        columns = ("GPU", "shape", "config", "runs", "first ms", "last ms", "change points")
        for col in (*columns, "broken"):
            table.add_column(col, overflow="fold")
        for s in series:
            cps = "; ".join(
                f"before {s.points[c.index].run.describe()}: {c.describe()}"
                for c in s.change_points
            )
            broken = (
                f"{len(s.broken)}, last {s.broken[-1].run.describe()}: {s.broken[-1].describe()}"
                if s.broken
                else "-"
            )
            table.add_row(
                escape(s.gpu),
                escape(s.shape_label),
                escape(s.config_key),
                str(len(s.points)),
                f"{s.points[0].median:.4g}" if s.points else "-",
                f"{s.points[-1].median:.4g}" if s.points else "-",
                escape(cps or "-"),
                f"[red]{escape(broken)}[/]" if s.broken else "-",
            )
        console.print(table)


@app.command("runs")
def runs_command(
    kernel: Annotated[
        str | None, typer.Argument(help="Only this kernel.", show_default=False)
    ] = None,
    storage: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The stored regression runs (ids and labels for --baseline/--candidate)."""
    from workbench.regress.check import run_json
    from workbench.regress.records import list_runs
    from workbench.store.opening import open_store

    with cli_errors(json_errors=as_json):
        store = open_store(storage, read_only=True)
        if as_json:
            runs = [run_json(r) for r in list_runs(store, kernel)]
            print(strict_dumps({"store": store.shown_url, "runs": runs}, indent=1))
            return
        table = Table(title=f"regression runs in {escape(store.shown_url)}")
        for col in ("id", "kernel", "label", "date", "environment", "source"):
            table.add_column(col, overflow="fold")
        for r in list_runs(store, kernel):
            table.add_row(
                str(r.id),
                escape(r.kernel),
                escape(r.label or "-"),
                f"{r.created_at:%Y-%m-%d %H:%M}",
                escape(r.environment.describe()),
                escape(f"replayed from {r.replayed_from}" if r.replayed_from else "measured"),
            )
        console.print(table)


def _print_report(report: CheckReport) -> None:
    for role, run in (("baseline", report.baseline), ("candidate", report.candidate)):
        console.print(f"{role}: {escape(run.describe())} on {escape(run.environment.describe())}")
    if report.changes:
        console.print("environment changes: " + escape(", ".join(c.text() for c in report.changes)))
    table = Table(title=f"regression check: {escape(report.candidate.kernel)}")
    for col in (
        "shape",
        "config",
        "verdict",
        "baseline ms",
        "candidate ms",
        "ratio",
        "95% CI",
        "p",
        "threshold",
        "note",
    ):
        table.add_column(col, overflow="fold")
    for row in report.rows:
        ev = row.comparison.time if row.comparison else None
        style = _STYLE[row.verdict]
        table.add_row(
            escape(row.shape_label),
            escape(row.config_key),
            f"[{style}]{row.verdict.value}[/]" if style else row.verdict.value,
            _median(row.baseline),
            _median(row.candidate),
            f"{ev.ratio:.4f}" if ev else "-",
            f"[{ev.ci_low:.4f}, {ev.ci_high:.4f}]" if ev else "-",
            f"{ev.p_value:.2g}" if ev else "-",
            f"{100 * ev.threshold:.1f}%" if ev else "-",
            escape(row.note),
        )
    console.print(table)
    counts = ", ".join(f"{report.count(v)} {v.value}" for v in Verdict if report.count(v))
    console.print(counts or "nothing to compare")
    if report.hint:
        console.print(Panel(escape(report.hint), title="re-tune?", style="yellow"))


def _median(m: MeasurementRecord | None) -> str:
    if m is None:
        return "-"
    return m.outcome.value if m.median is None else f"{m.median:.4g}"


def _print_recorded(result: Recorded, plan: RecordPlan, url: str, out: Console) -> None:
    where = f"{escape(result.kernel)} on {escape(plan.device.name)}"
    table = Table(title=f"regression run {result.run_id}: {where}")
    for col in ("shape", "config", "origin", "outcome", "median ms", "95% CI", "samples"):
        table.add_column(col, overflow="fold")
    for m in result.measurements:
        ci = f"[{m.ci_low:.4g}, {m.ci_high:.4g}]" if m.ci_low is not None else "-"
        table.add_row(
            escape(m.shape_label),
            escape(m.config_key),
            m.origin,
            m.outcome.value,
            _median(m),
            ci,
            str(len(m.samples)),
        )
    out.print(table)
    source = f"replayed from {escape(result.replayed_from)}" if result.replayed_from else "measured"
    out.print(f"stored run {result.run_id} ({source}) in {escape(url)}")


def _recorded_json(result: Recorded, plan: RecordPlan, url: str) -> dict[str, object]:
    return {
        "run_id": result.run_id,
        "kernel": result.kernel,
        "device": plan.device.name,
        "replayed_from": result.replayed_from,
        "store": url,
        "measurements": [
            {
                "shape": m.shape_label,
                "config": m.config_key,
                "origin": m.origin,
                "outcome": m.outcome.value,
                "median_ms": m.median,
                "ci": [m.ci_low, m.ci_high],
                "samples": len(m.samples),
            }
            for m in result.measurements
        ],
    }


def _series_json(s: Series) -> dict[str, object]:
    return {
        "kernel": s.kernel,
        "gpu": s.gpu,
        "shape": s.shape_label,
        "config": s.config_key,
        "runs": [
            {
                "run_id": p.run.id,
                "label": p.run.label,
                "created_at": p.run.created_at.isoformat(),
                "median_ms": p.median,
                "environment_id": p.run.environment.id,
                "replayed_from": p.run.replayed_from,
            }
            for p in s.points
        ],
        "change_points": [
            {
                "index": c.index,
                "run_id": s.points[c.index].run.id,
                "ratio": c.ratio,
                "before_ms": c.before,
                "after_ms": c.after,
                "changes": [
                    {"field": e.field, "before": e.before, "after": e.after} for e in c.changes
                ],
            }
            for c in s.change_points
        ],
        "broken": [
            {
                "run_id": b.run.id,
                "label": b.run.label,
                "created_at": b.run.created_at.isoformat(),
                "outcome": b.measurement.outcome.value,
                "reason": b.measurement.reason,
                "environment_id": b.run.environment.id,
            }
            for b in s.broken
        ],
    }
