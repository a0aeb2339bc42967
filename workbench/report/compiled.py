"""Compile resources of a study's configs against the search's progress: registers, spills
and theoretical occupancy of each evaluated config, in evaluation order (a study with compile
results and no evaluation, such as the no-GPU compile stage of ``workbench tune``: each
compiled config, in compile order).

Where the numbers come from, in order: the store's ``compile_results`` rows of the study; else
the compile cache of this machine, looked up (never filled) by each config's compile key, so
only configs compiled here before (by a live tune, ``workbench compile`` or a profile) appear.
The page says which, and how many configs had no compile result.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.analysis import AnalysisError, kernel_resources, theoretical_occupancy
from workbench.compiler import CompileCache, make_job
from workbench.errors import WorkbenchError
from workbench.report.data import StudyData
from workbench.report.page import esc
from workbench.spaces.launch import launch_geometry
from workbench.spaces.model import config_label
from workbench.store import Store
from workbench.store.compiles import load_compiles
from workbench.store.models import CompileRecord


@dataclass(frozen=True)
class CompiledPoint:
    trial: int
    label: str
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    occupancy: float | None
    value: float | None


@dataclass(frozen=True)
class CompiledSeries:
    source: str
    points: tuple[CompiledPoint, ...]
    without: int  #: evaluations with no compile result
    axis: str = "evaluation"  #: what the x axis counts (``compiled config`` without evaluations)


def gather_compiled(
    store: Store, data: StudyData, cache: CompileCache | None = None
) -> CompiledSeries | None:
    """None when neither the store nor the compile cache has anything for this study."""
    rows = _store_rows(store, data)
    if rows and not data.evaluations:
        points = [
            CompiledPoint(
                i, r.config_key, r.registers, r.spill_stores, r.spill_loads, r.occupancy, None
            )
            for i, r in enumerate(rows.values(), 1)
        ]
        return CompiledSeries(
            "the store's compile results (nothing evaluated: every compiled config, in compile "
            "order)",
            tuple(points),
            0,
            "compiled config",
        )
    if rows:
        points = []
        for i, e in enumerate(data.evaluations, 1):
            r = rows.get(config_label(e.config))
            if r is not None:
                points.append(
                    CompiledPoint(
                        i,
                        config_label(e.config),
                        r.registers,
                        r.spill_stores,
                        r.spill_loads,
                        r.occupancy,
                        e.measurement.value,
                    )
                )
        return CompiledSeries(
            "the store's compile results", tuple(points), len(data.evaluations) - len(points)
        )
    space, _ = data.space
    if space is None:
        return None
    cache = cache or CompileCache()
    points = []
    for i, e in enumerate(data.evaluations, 1):
        point = _from_cache(space, cache, i, e.config, e.measurement.value)
        if point is not None:
            points.append(point)
    if not points:
        return None
    return CompiledSeries(
        f"this machine's compile cache ({cache.root})",
        tuple(points),
        len(data.evaluations) - len(points),
    )


#: Fewer points than this make no chart: plotly draws axes around the one value (189 to 191
#: registers), which says nothing the numbers themselves do not.
MIN_POINTS = 2


def too_few_text(series: CompiledSeries) -> str | None:
    """The sentence that stands in for a chart of fewer than :data:`MIN_POINTS` points (the
    point's own figures), or None when the chart has something to say."""
    if len(series.points) >= MIN_POINTS:
        return None
    if not series.points:
        return f"No {series.axis} has a compile result in {series.source}."
    p = series.points[0]
    spilled = (p.spill_stores or 0) + (p.spill_loads or 0)
    occupancy = "unknown" if p.occupancy is None else f"{p.occupancy:.0%}"
    others = f"; the other {series.without} have none there" if series.without else ""
    return (
        f"One {series.axis} has a compile result in {series.source}, so there is no chart: "
        f"{series.axis} {p.trial} ({p.label}) uses {p.registers} registers per thread, "
        f"{spilled} spilled bytes, theoretical occupancy {occupancy}{others}."
    )


def _store_rows(store: Store, data: StudyData) -> dict[str, CompileRecord]:
    return {r.config_key: r for r in load_compiles(store, data.study.id) if r.ok}


def _from_cache(
    space: object, cache: CompileCache, trial: int, config: dict, value: float | None
) -> CompiledPoint | None:
    try:
        job = make_job(space, config)  # type: ignore[arg-type]
    except WorkbenchError:
        return None
    result = cache.get(job.key())
    if result is None or not result.ok or result.cubin is None:
        return None
    try:
        res = kernel_resources(result.cubin, result.log).get(result.entry or "")
    except AnalysisError:
        return None
    if res is None:
        return None
    occupancy = None
    try:
        launch = launch_geometry(space, config)  # type: ignore[arg-type]
        occupancy = theoretical_occupancy(
            space.arch.cc,  # type: ignore[attr-defined]
            launch.threads_per_block,
            res.registers,
            res.smem,
            dynamic_shared_bytes=launch.shared_bytes,
        ).occupancy
    except WorkbenchError:
        pass  # geometry of this config does not evaluate: occupancy stays unknown
    return CompiledPoint(
        trial,
        config_label(config),
        res.registers,
        res.spill_stores,
        res.spill_loads,
        occupancy,
        value,
    )


def draw_compiled(series: CompiledSeries) -> go.Figure:
    """Registers, spills and occupancy of each evaluated config, in evaluation order."""
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=(
            "registers per thread",
            "spilled bytes (stores + loads)",
            "theoretical occupancy",
        ),
    )
    pts = series.points
    x = [p.trial for p in pts]
    hover = [esc(p.label) for p in pts]
    fig.add_trace(
        go.Scatter(
            x=x, y=[p.registers for p in pts], mode="markers", name="registers", hovertext=hover
        ),
        row=1,
        col=1,
    )
    spills = [(p.spill_stores or 0) + (p.spill_loads or 0) for p in pts]
    fig.add_trace(
        go.Scatter(x=x, y=spills, mode="markers", name="spill bytes", hovertext=hover), row=2, col=1
    )
    fig.add_trace(
        go.Scatter(
            x=x, y=[p.occupancy for p in pts], mode="markers", name="occupancy", hovertext=hover
        ),
        row=3,
        col=1,
    )
    fig.update_xaxes(title_text=series.axis, row=3, col=1)
    what = "evaluated" if series.axis == "evaluation" else "compiled"
    fig.update_layout(
        height=620, showlegend=False, title=f"compile resources of each {what} config"
    )
    return fig
