"""Parallel coordinates: one line per correct evaluation across the varying parameters, with
the objective as the last axis and the line colour."""

from __future__ import annotations

import math
from typing import Any

import plotly.graph_objects as go

from workbench.report.data import StudyData
from workbench.report.page import esc

#: More lines than this hide each other; the fastest ones are kept.
MAX_LINES = 2000


def draw_parallel(data: StudyData) -> go.Figure | None:
    """None when fewer than two correct evaluations or no parameter varies."""
    ok = data.ok[:MAX_LINES]
    names = data.varying_parameters
    if len(ok) < 2 or not names:
        return None
    declared = dict(data.study.parameters)
    dims = []
    for n in names:
        values = [e.config.get(n) for e in ok]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            dims.append({"label": esc(n), "values": values})
            continue
        # categorical axis: declared order, ticks named by value
        order: list[Any] = [v for v in declared.get(n, ()) if v in values]
        order += sorted({v for v in values if v not in order}, key=str)
        index = {str(v): i for i, v in enumerate(order)}
        dims.append(
            {
                "label": esc(n),
                "values": [index[str(v)] for v in values],
                "tickvals": list(range(len(order))),
                "ticktext": [esc(v) for v in order],
            }
        )
    unit = esc(data.study.unit)
    objective = [e.measurement.value or 0.0 for e in ok]
    dims.append({"label": f"{esc(data.study.objective)} ({unit})", "values": objective})
    colour = [math.log10(v) if v > 0 else 0.0 for v in objective]
    total = len(data.ok)
    shown = (
        f"{total} correct evaluations"
        if total == len(ok)
        else f"the fastest {len(ok)} of {total} correct evaluations"
    )
    fig = go.Figure(
        go.Parcoords(
            dimensions=dims,
            line={
                "color": colour,
                "colorscale": "Viridis_r",
                "showscale": True,
                "colorbar": {"title": f"log10 {unit}"},
            },
        )
    )
    fig.update_layout(
        title=f"parallel coordinates ({shown}; yellow = fastest)",
        height=460,
        margin={"l": 60, "r": 60, "t": 80},
    )
    return fig
