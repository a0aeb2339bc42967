"""The regression timeline: a self-contained HTML page (plotly.js inlined once, works offline).

One figure per (kernel, GPU, shape): a line per tracked config, the median of every run with its
95 % interval, change points marked with a dashed line and a star whose hover text says what
changed in the environment (commit, driver, toolkit, ...), linked to the environment table below
the figures. A run in which a config broke (compile error, crash, hang, wrong result) is a
cross on that config's line at its last time before (its hover says why) and a row of the
table of broken runs. Replayed runs are drawn hollow, and the page says on its first screen which
numbers were replayed and from where.

For other pages (``workbench report``): :func:`timeline_figures` gives the figures,
:func:`timeline_fragment` the whole section as an HTML fragment (plotly.js not included unless
asked, so that a page inlines it once).
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence
from itertools import groupby
from pathlib import Path

import plotly.graph_objects as go

from workbench.regress.history import ChangePoint, Point, Series
from workbench.store.environments import EnvironmentInfo

#: Clicking a change point (its star or its note) scrolls to its environment's row.
FOLLOW_LINKS = """
var gd = document.getElementById('{plot_id}');
function follow(anchor) { if (anchor && document.getElementById(anchor)) location.hash = anchor; }
gd.on('plotly_click', function (e) { follow(e.points[0].customdata); });
gd.on('plotly_clickannotation', function (e) { follow(e.annotation.name); });
"""


def draw_timeline(series: Sequence[Series], title: str) -> go.Figure:
    """One figure: a trace per series (config), change points marked.

    Args:
        series: series of one (kernel, GPU, shape), one per config.
        title: the figure's title.

    Returns:
        The plotly figure.
    """
    fig = go.Figure()
    for s in series:
        _draw_medians(fig, s)
        _draw_broken(fig, s)
        for cp in s.change_points:
            _draw_change_point(fig, s, cp)
    fig.update_layout(
        title=title,
        xaxis_title="run date",
        yaxis_title="median time (ms), 95 % interval",
        hovermode="closest",
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 60, "b": 40},
    )
    return fig


def _draw_medians(fig: go.Figure, s: Series) -> None:
    """The series' line: each run's median with its interval, replayed runs hollow."""
    fig.add_trace(
        go.Scatter(
            x=[p.run.created_at for p in s.points],
            y=[p.median for p in s.points],
            mode="lines+markers",
            name=s.config_key,
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [_upper(p) for p in s.points],
                "arrayminus": [_lower(p) for p in s.points],
                "thickness": 1,
            },
            marker={
                "symbol": ["circle-open" if p.run.replayed_from else "circle" for p in s.points],
                "size": 8,
            },
            hovertext=[_point_text(p) for p in s.points],
            hoverinfo="text",
        )
    )


def _draw_change_point(fig: go.Figure, s: Series, cp: ChangePoint) -> None:
    """A dashed line, a note saying what changed in the environment and a star, both linked
    to the environment's row of the table."""
    point = s.points[cp.index]
    fig.add_vline(x=point.run.created_at, line_dash="dash", line_color="firebrick")
    env = point.run.environment
    anchor = f"env-{env.id}" if env.id is not None else ""
    what = ", ".join(c.text() for c in cp.changes[:2]) or "no environment change"
    where = f" (environment {env.id})" if anchor else ""
    # plotly.js drops relative hrefs on file:// pages: a click handler follows the link
    fig.add_annotation(
        x=point.run.created_at,
        y=point.median,
        text=f"{100 * (cp.ratio - 1):+.1f}%: {html.escape(what)}{where}",
        name=anchor,
        captureevents=bool(anchor),
        showarrow=True,
        arrowhead=2,
        font={"color": "firebrick"},
    )
    fig.add_trace(
        go.Scatter(
            x=[point.run.created_at],
            y=[point.median],
            mode="markers",
            marker={"symbol": "star", "size": 16, "color": "firebrick"},
            name=f"change point ({s.config_key})",
            hovertext=[f"<b>change point</b><br>{html.escape(cp.describe())}"],
            hoverinfo="text",
            customdata=[anchor],
            showlegend=False,
        )
    )


def _draw_broken(fig: go.Figure, s: Series) -> None:
    """Crosses for the runs where ``s`` broke, at the series' last time before each (the
    first after, when it broke before ever running); a config that never ran has no line to
    put them on and is in the table only."""
    marks = [(b, _time_near(s, b.run.created_at)) for b in s.broken]
    marks = [(b, y) for b, y in marks if y is not None]
    if not marks:
        return
    fig.add_trace(
        go.Scatter(
            x=[b.run.created_at for b, _ in marks],
            y=[y for _, y in marks],
            mode="markers",
            marker={"symbol": "x", "size": 12, "color": "black"},
            name=f"broken ({s.config_key})",
            hovertext=[
                f"<b>broken</b><br>{html.escape(b.run.describe())}<br>{html.escape(b.describe())}"
                for b, _ in marks
            ],
            hoverinfo="text",
        )
    )


def _time_near(s: Series, when: dt.datetime) -> float | None:
    before = [p.median for p in s.points if p.run.created_at <= when]
    if before:
        return before[-1]
    return s.points[0].median if s.points else None


def timeline_figures(series: Sequence[Series]) -> list[go.Figure]:
    """One figure per (kernel, GPU, shape), in the order of ``series``.

    Args:
        series: from :func:`~workbench.regress.history.gather_history` (sorted by kernel, GPU,
            shape and config).

    Returns:
        The figures, titled ``kernel [shape] on GPU``.
    """
    return [
        draw_timeline(list(group), f"{kern} [{shape}] on {gpu}")
        for (kern, gpu, shape), group in groupby(
            series, key=lambda s: (s.kernel, s.gpu, s.shape_label)
        )
    ]


def timeline_fragment(series: Sequence[Series], *, include_plotlyjs: bool | str = False) -> str:
    """The timeline section without ``<html>``: replay notice, figures, change points and
    environments (the targets of the figures' links).

    Args:
        series: from :func:`~workbench.regress.history.gather_history`.
        include_plotlyjs: inline plotly.js with the first figure (a page needs it once), or
            refer to this path (``plotly.min.js``) there.

    Returns:
        An HTML fragment.
    """
    parts = []
    replays = sorted({p.run.replayed_from for s in series for p in s.points if p.run.replayed_from})
    if replays:
        items = "".join(f"<li>{html.escape(r)}</li>" for r in replays)
        parts.append(
            "<div class='replay'><b>REPLAY:</b> some runs (hollow markers) were not measured "
            f"here; their samples were read from recordings:<ul>{items}</ul></div>"
        )
    for i, fig in enumerate(timeline_figures(series)):
        parts.append(
            fig.to_html(
                full_html=False,
                include_plotlyjs=include_plotlyjs if i == 0 else False,
                post_script=FOLLOW_LINKS,
            )
        )
    parts.append(_change_table(series))
    parts.append(_broken_table(series))
    parts.append(_environment_table(series))
    return "\n".join(parts)


def timeline_html(
    series: Sequence[Series], *, kernel: str, store_url: str, plotlyjs: bool | str = True
) -> str:
    """The whole page: replay notice, one figure per (kernel, GPU, shape), environments.

    Args:
        series: from :func:`~workbench.regress.history.gather_history`.
        kernel: the kernel named on the command line.
        store_url: where the runs come from (shown on the page).
        plotlyjs: True inlines plotly.js once; a path (``plotly.min.js``) refers to that file.

    Returns:
        A complete HTML document.
    """
    return "\n".join(
        [
            "<!DOCTYPE html><html><head><meta charset='utf-8'>",
            f"<title>regression timeline: {html.escape(kernel)}</title>",
            "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 8px}.replay{background:#fff3cd;"
            "padding:8px;border:1px solid #e0c060}</style></head><body>",
            f"<h1>Regression timeline: {html.escape(kernel)}</h1>",
            f"<p>Runs from {html.escape(store_url)}. Dashed lines and stars mark change points "
            "(PELT on run medians, confirmed on raw samples by the check's decision rule).</p>",
            timeline_fragment(series, include_plotlyjs=plotlyjs),
            "</body></html>",
        ]
    )


def write_timeline(
    path: Path | str,
    series: Sequence[Series],
    *,
    kernel: str,
    store_url: str,
    plotlyjs: bool | str = True,
) -> Path:
    """Write :func:`timeline_html` to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    page = timeline_html(series, kernel=kernel, store_url=store_url, plotlyjs=plotlyjs)
    path.write_text(page, encoding="utf-8")
    return path


def _change_table(series: Sequence[Series]) -> str:
    rows = []
    for s in series:
        for cp in s.change_points:
            run = s.points[cp.index].run
            env = run.environment
            rows.append(
                f"<tr><td>{html.escape(s.gpu)}</td><td>{html.escape(s.shape_label)}</td>"
                f"<td>{html.escape(s.config_key)}</td><td>{html.escape(run.describe())}</td>"
                f"<td>{100 * (cp.ratio - 1):+.1f}%</td>"
                f"<td>{html.escape(', '.join(c.text() for c in cp.changes) or '-')}</td>"
                f"<td><a href='#env-{env.id}'>{env.id}</a></td></tr>"
            )
    if not rows:
        return "<h2>Change points</h2><p>None found.</p>"
    head = (
        "<tr><th>GPU</th><th>shape</th><th>config</th><th>first run after</th><th>change</th>"
        "<th>what changed</th><th>environment</th></tr>"
    )
    return f"<h2>Change points</h2><table>{head}{''.join(rows)}</table>"


def _broken_table(series: Sequence[Series]) -> str:
    rows = [
        f"<tr><td>{html.escape(s.gpu)}</td><td>{html.escape(s.shape_label)}</td>"
        f"<td>{html.escape(s.config_key)}</td><td>{html.escape(b.run.describe())}</td>"
        f"<td>{html.escape(b.describe())}</td>"
        f"<td><a href='#env-{b.run.environment.id}'>{b.run.environment.id}</a></td></tr>"
        for s in series
        for b in s.broken
    ]
    if not rows:
        return ""
    head = (
        "<tr><th>GPU</th><th>shape</th><th>config</th><th>run</th><th>why</th>"
        "<th>environment</th></tr>"
    )
    return f"<h2>Broken runs</h2><table>{head}{''.join(rows)}</table>"


def _environment_table(series: Sequence[Series]) -> str:
    envs: dict[object, EnvironmentInfo] = {}
    for s in series:
        for env in s.environments:
            envs.setdefault(env.id, env)
    head = (
        "<tr><th>id</th><th>GPU</th><th>driver</th><th>CUDA</th><th>toolkit</th>"
        "<th>max SM clock</th><th>commit</th><th>host</th><th>recording</th></tr>"
    )
    rows = []
    for env in envs.values():
        commit = (env.git_commit or "-") + (" (dirty)" if env.git_dirty else "")
        cells = [
            env.gpu_name,
            env.driver,
            env.cuda,
            env.toolkit,
            env.sm_clock_max_mhz,
            commit,
            env.hostname,
            env.replay_source,
        ]
        tds = "".join(f"<td>{html.escape(str(c) if c is not None else '-')}</td>" for c in cells)
        rows.append(f"<tr id='env-{env.id}'><td>{env.id}</td>{tds}</tr>")
    return f"<h2>Environments</h2><table>{head}{''.join(rows)}</table>"


def _point_text(p: Point) -> str:
    m = p.measurement
    ci = f" [{m.ci_low:.4g}, {m.ci_high:.4g}]" if m.ci_low is not None else ""
    replay = f"<br>replayed from {html.escape(p.run.replayed_from)}" if p.run.replayed_from else ""
    return (
        f"{html.escape(p.run.describe())}<br>median {p.median:.4g} ms{ci}, "
        f"{len(m.samples)} samples<br>{html.escape(p.run.environment.describe())}{replay}"
    )


def _upper(p: Point) -> float:
    high = p.measurement.ci_high
    return max(high - p.median, 0.0) if high is not None else 0.0


def _lower(p: Point) -> float:
    low = p.measurement.ci_low
    return max(p.median - low, 0.0) if low is not None else 0.0
