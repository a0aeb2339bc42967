"""Speedup against the vendor libraries: the rows ``workbench compare`` stored, read with
:func:`workbench.compare.storage.load_comparisons`; the latest comparison per (shape, device)
of a kernel and its variants."""

from __future__ import annotations

import plotly.graph_objects as go

from workbench.compare.storage import ComparisonRecord, load_comparisons
from workbench.report.data import kernel_matches
from workbench.report.page import esc
from workbench.store import Store


def gather_baselines(store: Store, kernel: str) -> list[ComparisonRecord]:
    """Rows of the latest ``workbench compare`` of ``kernel`` per (shape, device).

    Raises:
        StoreError: the database failed.
    """
    rows = [r for r in load_comparisons(store) if kernel_matches(r.kernel, kernel)]
    latest: dict[tuple[str, str | None], str] = {}
    for r in rows:  # oldest first: the last batch seen wins
        latest[(r.shape_label, r.device)] = r.batch
    return [r for r in rows if latest[(r.shape_label, r.device)] == r.batch]


def draw_speedups(rows: list[ComparisonRecord]) -> go.Figure | None:
    """Speedup of the tuned config over each baseline, per shape (above 1: tuned is faster)."""
    timed = [r for r in rows if r.speedup is not None]
    if not timed:
        return None
    fig = go.Figure()
    for contender in dict.fromkeys(r.contender for r in timed):
        mine = [r for r in timed if r.contender == contender]
        fig.add_trace(
            go.Bar(
                name=esc(contender),
                x=[esc(r.shape_label) for r in mine],
                y=[r.speedup for r in mine],
            )
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color="#555")
    fig.update_layout(
        barmode="group",
        title="speedup of the tuned config over each baseline (baseline time / tuned time)",
        yaxis_title="speedup",
        height=420,
    )
    return fig
