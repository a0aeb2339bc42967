"""Speedup against the vendor libraries: the rows ``workbench compare`` stored (table
``comparisons``), the latest comparison per (kernel, shape, device).

Read through table reflection, so a store written before that table existed reports "no
baselines" instead of failing.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
from sqlalchemy import MetaData, Table, inspect, select

from workbench.report.data import kernel_matches
from workbench.report.page import esc
from workbench.store import Store

TABLE = "comparisons"


@dataclass(frozen=True)
class BaselineRow:
    kernel: str
    shape: str
    device: str | None
    contender: str
    title: str
    library: str | None
    status: str
    reason: str
    median_ms: float | None
    throughput: float | None
    unit: str | None
    bound_fraction: float | None
    speedup: float | None
    batch: str


def gather_baselines(store: Store, kernel: str) -> list[BaselineRow]:
    """Rows of the latest ``workbench compare`` of ``kernel`` per (shape, device).

    Raises:
        StoreError: the database failed.
    """
    if not inspect(store.engine).has_table(TABLE):
        return []
    table = Table(TABLE, MetaData(), autoload_with=store.engine)
    c = table.c
    with store.session() as s:
        rows = s.execute(select(table).order_by(c.created_at, c.id)).mappings().all()
    rows = [r for r in rows if kernel_matches(str(r["kernel"]), kernel)]
    latest: dict[tuple[str, str | None], str] = {}
    for r in rows:  # ordered oldest first: the last batch seen wins
        latest[(r["shape_label"], r.get("device"))] = r["batch"]
    return [
        BaselineRow(
            kernel=r["kernel"],
            shape=r["shape_label"],
            device=r.get("device"),
            contender=r["contender"],
            title=r.get("title") or r["contender"],
            library=r.get("library"),
            status=r["status"],
            reason=r.get("reason") or "",
            median_ms=r.get("median_ms"),
            throughput=r.get("throughput"),
            unit=r.get("unit"),
            bound_fraction=r.get("bound_fraction"),
            speedup=r.get("speedup"),
            batch=r["batch"],
        )
        for r in rows
        if latest[(r["shape_label"], r.get("device"))] == r["batch"]
    ]


def draw_speedups(rows: list[BaselineRow]) -> go.Figure | None:
    """Speedup of the tuned config over each baseline, per shape (above 1: tuned is faster)."""
    timed = [r for r in rows if r.speedup is not None]
    if not timed:
        return None
    fig = go.Figure()
    for contender in dict.fromkeys(r.contender for r in timed):
        mine = [r for r in timed if r.contender == contender]
        fig.add_trace(
            go.Bar(name=esc(contender), x=[esc(r.shape) for r in mine], y=[r.speedup for r in mine])
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color="#555")
    fig.update_layout(
        barmode="group",
        title="speedup of the tuned config over each baseline (baseline time / tuned time)",
        yaxis_title="speedup",
        height=420,
    )
    return fig
