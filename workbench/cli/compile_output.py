"""``workbench compile``'s output: the resource table, the diffs of two configs' binaries, and
the JSON/CSV files of the records."""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from workbench.cli.common import console
from workbench.spaces.model import shape_label
from workbench.static_diff import StaticDiff, static_diff
from workbench.sweep import StaticRecord

#: Above this many rows the table shows the first ones and says where the rest are.
MAX_TABLE_ROWS = 40
#: Beyond this many differing parameters the table shows them in one folded column.
MAX_PARAM_COLUMNS = 6


def print_records(
    records: Sequence[StaticRecord], *, show_log: bool = False, out: Console = console
) -> None:
    """A resource table, one row per config and arch. Parameters that differ between rows get
    a column each (one folded ``config`` column when there are many); those equal in every row
    go to the caption, so a wide space stays readable."""
    names = list(dict.fromkeys(k for r in records for k in r.config))
    values = {n: {_show(r.config.get(n, "")) for r in records} for n in names}
    params = [n for n in names if len(values[n]) > 1] if len(records) > 1 else names
    same = [f"{n}={next(iter(values[n]))}" for n in names if n not in params]
    one_column = len(params) > MAX_PARAM_COLUMNS
    arches = {r.arch for r in records}
    shapes = {shape_label(r.shape) for r in records}
    table = Table(
        title="static resources (no GPU needed)",
        caption=escape("in every row: " + " ".join(same)) if same else None,
    )
    if len(arches) > 1:
        table.add_column("arch")
    if len(shapes) > 1:
        table.add_column("shape")
    if one_column:
        table.add_column("config", overflow="fold", min_width=24)
    else:
        for name in params:
            table.add_column(name, justify="right")
    for col in (
        "regs",
        "smem",
        "stack",
        "spill st/ld",
        "occupancy",
        "SASS",
        "top opcodes",
        "global memory ops",
        "compile",
        "lints",
    ):
        table.add_column(col, overflow="fold")
    for r in records[:MAX_TABLE_ROWS]:
        cells = [r.arch] if len(arches) > 1 else []
        cells += [escape(shape_label(r.shape))] if len(shapes) > 1 else []
        if one_column:
            cells.append(escape(" ".join(f"{n}={_show(r.config.get(n, ''))}" for n in params)))
        else:
            cells += [escape(_show(r.config.get(name, ""))) for name in params]
        if not r.ok:
            table.add_row(
                *cells, "", "", "", "", "", "", "", "", "[red]failed[/]", escape(r.error or "")
            )
            continue
        smem = f"{r.static_smem}+{r.dynamic_smem}" if r.dynamic_smem else str(r.static_smem)
        occ = f"{r.occupancy:.0%} ({r.limiting_factor})" if r.occupancy is not None else "?"
        top = " ".join(f"{k}:{v}" for k, v in list(r.opcodes.items())[:4])
        when = "cached" if r.cached else f"{r.compile_seconds:.2f}s"
        lints = "; ".join(r.lints)
        table.add_row(
            *cells,
            str(r.registers),
            smem,
            str(r.stack_frame),
            f"{r.spill_stores}/{r.spill_loads}",
            occ,
            str(r.sass_instructions),
            top,
            " ".join(r.global_memory_ops),
            when,
            f"[yellow]{escape(lints)}[/]" if lints else "",
        )
    out.print(table)
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
        for name, a, b in d.resources:
            table.add_row(name, escape(a), escape(b), "")
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


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


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
        text = json.dumps([r.to_dict() for r in records], indent=1)
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
            row["lints"] = "; ".join(r.lints)
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
