"""``workbench compile``'s work and output, shared with tune's compile stage: the compile of a
selection with a progress bar, the resource table, the diffs of two configs' binaries, and the
JSON/CSV files of the records."""

from __future__ import annotations

import csv
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from workbench.analysis.signature import args_error
from workbench.cli.common import console
from workbench.cli.tables import Column, config_cells, print_table
from workbench.compiler import CompileCache
from workbench.jsontext import strict_dumps
from workbench.search.configs import CompileSelection, compile_batches, store_sweep
from workbench.spaces import Space
from workbench.spaces.model import Config, SpaceSpec, shape_label
from workbench.static.artifacts import ArtifactDir
from workbench.static.diff import StaticDiff, static_diff
from workbench.static.sweep import StaticRecord, static_sweep
from workbench.store import Store

#: Above this many rows the table shows the first ones and says where the rest are.
MAX_TABLE_ROWS = 40
#: The resource columns, after the config's.
RESOURCE_COLUMNS = (
    Column("regs", "right"),
    Column("smem", "right"),
    Column("stack", "right"),
    Column("spill st/ld", "right"),
    Column("occupancy"),
    Column("SASS", "right"),
    Column("top opcodes"),
    Column("global memory ops"),
    Column("compile", "right"),
    Column("lints"),
)


def print_records(
    records: Sequence[StaticRecord],
    *,
    show_log: bool = False,
    out: Console = console,
    defaults: Mapping[str, Mapping[str, object]] | None = None,
) -> None:
    """A resource table, one row per config and arch. Parameters that differ between rows get
    a column each (one ``config`` column of NAME=VALUE tokens when there are many); those equal
    in every row go to the caption, so a wide space stays readable. On a narrow terminal the
    columns that do not fit go to a second table, keyed by the row number."""
    shown = records[:MAX_TABLE_ROWS]
    arches = {r.arch for r in shown}
    shapes = {shape_label(r.shape) for r in shown}
    configs = config_cells([r.config for r in shown])
    columns = [Column("#", "right")]
    columns += [Column("arch")] if len(arches) > 1 else []
    columns += [Column("shape")] if len(shapes) > 1 else []
    columns += [*configs.columns, *RESOURCE_COLUMNS]
    rows = []
    marked = 0
    for i, (r, config) in enumerate(zip(shown, configs.rows, strict=True), 1):
        is_default = defaults is not None and dict(defaults.get(r.arch, {})) == dict(r.config)
        marked += is_default
        cells = [f"{i}*" if is_default else str(i)]
        cells += [r.arch] if len(arches) > 1 else []
        cells += [escape(shape_label(r.shape))] if len(shapes) > 1 else []
        rows.append(cells + config + _resource_cells(r))
    title = "static resources (no GPU needed)"
    print_table(out, columns, rows, title=title, caption=configs.caption)
    if marked:
        out.print("* the space's default config")
    failed = sum(1 for r in records if not r.ok)
    more = f"; first {MAX_TABLE_ROWS} shown" if len(records) > MAX_TABLE_ROWS else ""
    hint = "; `workbench compile ... --log` shows why" if failed and not show_log else ""
    out.print(
        f"{len(records)} configs, {len(records) - failed} compiled, {failed} failed{more}{hint}"
    )
    if show_log:
        for r in records:
            if not r.ok and r.log:
                out.rule(f"{escape(r.label)} ({r.arch})")
                out.print(escape(r.log), soft_wrap=True)


def _resource_cells(r: StaticRecord) -> list[str]:
    """One record's cells under :data:`RESOURCE_COLUMNS` (rich markup)."""
    if not r.ok:
        return [""] * (len(RESOURCE_COLUMNS) - 2) + ["[red]failed[/]", escape(r.error or "")]
    smem = f"{r.static_smem}+{r.dynamic_smem}" if r.dynamic_smem else str(r.static_smem)
    occ = f"{r.occupancy:.0%} ({r.limiting_factor})" if r.occupancy is not None else "?"
    lints = "; ".join(x.text for x in r.lints)
    return [
        str(r.registers),
        smem,
        str(r.stack_frame),
        f"{r.spill_stores}/{r.spill_loads}",
        occ,
        str(r.sass_instructions),
        " ".join(f"{k}:{v}" for k, v in list(r.opcodes.items())[:4]),
        " ".join(r.global_memory_ops),
        "cached" if r.cached else f"{r.compile_seconds:.2f}s",
        f"[yellow]{escape(lints)}[/]" if lints else "",
    ]


def print_diffs(records: Sequence[StaticRecord], *, out: Console = console) -> None:
    """Per arch, what changed between the two configs' binaries (see ``static_diff``)."""
    for arch in dict.fromkeys(r.arch for r in records):
        pair = [r for r in records if r.arch == arch]
        failed = [r.label for r in pair if not r.ok]
        if len(pair) != 2:  # (the two options named one config)
            out.print(f"{arch}: no diff: both are {escape(pair[0].label)}")
        elif failed:
            out.print(f"{arch}: no diff: {escape(', '.join(failed))} did not compile")
        else:
            print_diff(arch, static_diff(*pair), out=out)


def print_diff(arch: str, d: StaticDiff, *, out: Console = console) -> None:
    """One arch's diff: a table of what changed, then the memory-op forms only one side has."""
    change = f"{escape(d.a_label)} -> {escape(d.b_label)}"
    if d.same_code:
        out.print(f"{arch}: {change}: the same resources, opcode counts and memory ops")
        return
    if d.resources or d.opcodes:
        table = Table(title=f"A: {escape(d.a_label)} -> B: {escape(d.b_label)} ({arch})")
        for col, justify in (("", "left"), ("A", "right"), ("B", "right"), ("change", "right")):
            table.add_column(col, justify=justify)  # type: ignore[arg-type]
        for name, a, b, delta in d.resources:
            table.add_row(name, escape(a), escape(b), delta)
        if d.resources and d.opcodes:
            table.add_section()
        for op, a_count, b_count in d.opcodes[:MAX_TABLE_ROWS]:
            table.add_row(op, str(a_count), str(b_count), f"{b_count - a_count:+d}")
        out.print(table)
        if len(d.opcodes) > MAX_TABLE_ROWS:
            out.print(f"{len(d.opcodes)} opcodes changed; first {MAX_TABLE_ROWS} shown")
    else:
        out.print(f"{arch}: {change}: the same resources and opcode counts")
    for who, ops in ((d.a_label, d.memory_only_a), (d.b_label, d.memory_only_b)):
        if ops:
            out.print(f"global memory ops only in {escape(who)}: {escape(' '.join(ops))}")


def write_records(
    records: Sequence[StaticRecord],
    json_out: Path | None,
    csv_out: Path | None,
    *,
    out: Console = console,
) -> None:
    """JSON keeps everything (``-``: on stdout); CSV flattens config values into ``cfg.NAME``
    columns. Where they went is said on ``out``."""
    if json_out is not None:
        text = strict_dumps([r.to_dict() for r in records], indent=1)
        if str(json_out) == "-":
            sys.stdout.write(text + "\n")
        else:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(text)
            out.print(f"wrote {json_out}")
    if csv_out is not None:
        csv_out.parent.mkdir(parents=True, exist_ok=True)
        rows = []
        for r in records:
            row = {k: v for k, v in r.to_dict().items() if k not in ("config", "opcodes", "log")}
            row["lints"] = "; ".join(x.text for x in r.lints)
            row["args_problems"] = "; ".join(r.args_problems)
            row["shape"] = shape_label(r.shape)
            row["opcodes"] = " ".join(f"{k}:{v}" for k, v in r.opcodes.items())
            row["global_memory_ops"] = " ".join(r.global_memory_ops)
            row.update({f"cfg.{k}": v for k, v in r.config.items()})
            rows.append(row)
        fields = list(dict.fromkeys(k for row in rows for k in row))
        with csv_out.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)
        out.print(f"wrote {csv_out}")


def refuse_broken_space(spec: SpaceSpec, records: Sequence[StaticRecord]) -> None:
    """What would stop a GPU run before its first measurement, found without one: ``args``
    that do not fit the kernel (every launch would pass garbage) and a ``reference`` that
    cannot be found (nothing could be verified). Called after the records are shown and
    written, so nothing is lost.

    Raises:
        SpaceFileError: a record found an args mismatch (the first one's findings are named),
            or the reference's module, file or function does not exist.
    """
    bad = next((r for r in records if r.args_problems), None)
    if bad is not None:
        raise spec.error("args", args_error(bad.args_problems))
    if spec.reference is not None:
        from workbench.runners.reference import ReferenceNotFoundError, check_reference

        try:
            check_reference(spec)
        except ReferenceNotFoundError as exc:
            raise spec.error("reference", str(exc)) from None


def compile_space(
    sp: Space,
    configs: Sequence[Config],
    *,
    jobs: int | None = None,
    cache: CompileCache | None = None,
    store: Store | None = None,
    kernel: str | None = None,
    emit: ArtifactDir | None = None,
    out: Console = console,
) -> list[StaticRecord]:
    """Compile ``configs`` of one space with a progress bar (on ``out``); with a ``store``,
    keep the results in the space's compile-only study there (``kernel`` names a problem
    variant, as tune's studies do); with ``emit``, write each compile's files there."""
    columns = (
        TextColumn("{task.description}"),  # (a name may hold braces: not a format string)
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=out, transient=True) as progress:
        label = f"compiling {escape(kernel or sp.spec.name)} for {sp.arch.sm}"
        task = progress.add_task(label, total=len(configs))
        records = static_sweep(
            sp,
            configs,
            cache=cache,
            workers=jobs,
            on_compiled=lambda _r: progress.advance(task),
            emit=emit,
        )
    if store is not None:
        study = store_sweep(store, sp, records, kernel)
        out.print(f"compile results kept in study {escape(study.name)!r} of {store.shown_url}")
    return records


@dataclass(frozen=True)
class CompiledSweep:
    """What :func:`compile_selection` compiled."""

    records: list[StaticRecord]
    #: per arch (``sm_90``), the space's default config with the fixed values (the table's ``*``)
    defaults: dict[str, Config]


def compile_selection(
    selection: CompileSelection,
    *,
    jobs: int | None = None,
    cache: CompileCache | None = None,
    store: Store | None = None,
    emit: ArtifactDir | None = None,
    out: Console = console,
) -> CompiledSweep:
    """Compile what ``selection`` selects, one batch (arch and shape) at a time, each before
    the next is chosen (see :func:`compile_space`; ``store`` also answers the selection's
    warm-start items, and what is said of them goes to ``out``).

    Raises:
        WorkbenchError: as :func:`~workbench.search.configs.compile_batches`.
    """
    records: list[StaticRecord] = []
    defaults: dict[str, Config] = {}
    for batch in compile_batches(selection, store=store, say=lambda line: out.print(escape(line))):
        defaults[batch.space.arch.sm] = batch.default
        records += compile_space(
            batch.space,
            batch.configs,
            jobs=jobs,
            cache=cache,
            store=store,
            kernel=batch.kernel,
            emit=emit,
            out=out,
        )
    return CompiledSweep(records, defaults)
