"""Tuning history: every evaluation's value and the best so far, against the evaluation count
and against tuning time."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.report.data import StudyData
from workbench.report.page import esc
from workbench.runners.base import TrialOutcome
from workbench.spaces.model import config_label


@dataclass(frozen=True)
class History:
    """One point per evaluation, in commit order.

    ``tuning_s`` is the study's tuning time when the evaluation was committed (None for
    imports; see :func:`tuning_seconds`); for a replay it is this machine's lookup time, not
    the recorded GPU's time. ``resumed_s``: where a later run of the study took over.
    """

    trial: tuple[int, ...]
    value: tuple[float | None, ...]
    best_so_far: tuple[float | None, ...]
    tuning_s: tuple[float | None, ...]
    outcome: tuple[str, ...]
    label: tuple[str, ...]
    unit: str
    replayed: bool
    resumed_s: tuple[float, ...] = ()
    #: drift checks that found the reference config slower or faster: (the evaluation they
    #: followed, its tuning time, what they found)
    drifts: tuple[tuple[int, float | None, str], ...] = ()

    @property
    def failed(self) -> int:
        return sum(1 for o in self.outcome if o != TrialOutcome.OK.value)


def tuning_seconds(data: StudyData) -> tuple[tuple[float | None, ...], tuple[float, ...]]:
    """Each evaluation's time on the study's clock, and where later runs took over.

    The clock runs while any run of the study runs (from its start to its last evaluation):
    a resumed study goes on where its last run stopped (the days between runs left out) and
    concurrent workers share one axis. An evaluation's moment is its run's start plus its
    ``elapsed_s``. Runs take over only when they follow one another; concurrent workers
    (overlapping runs) have no such point.
    """
    starts = {r.id: r.started_at for r in data.runs}
    moments: list[dt.datetime | None] = []
    spans: dict[int, tuple[dt.datetime, dt.datetime]] = {}
    for e in data.evaluations:
        start = starts.get(e.run_id)
        if start is None or e.elapsed_s is None:
            moments.append(None)
            continue
        t = start + dt.timedelta(seconds=e.elapsed_s)
        moments.append(t)
        first, last = spans.get(e.run_id, (start, start))
        spans[e.run_id] = (first, max(last, t))
    merged: list[list[dt.datetime]] = []
    for first, last in sorted(spans.values()):
        if merged and first <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])

    def clock(t: dt.datetime) -> float:
        return sum((min(t, b) - a).total_seconds() for a, b in merged if a < t)

    resumed = tuple(clock(a) for a, _ in merged[1:]) if len(merged) == len(spans) else ()
    return tuple(clock(t) if t is not None else None for t in moments), resumed


def gather_history(data: StudyData) -> History:
    best: float | None = None
    trial, value, best_so_far, outcome, label = [], [], [], [], []
    for i, e in enumerate(data.evaluations, 1):
        m = e.measurement
        v = m.value if m.outcome is TrialOutcome.OK else None
        if v is not None and (best is None or v < best):
            best = v
        trial.append(i)
        value.append(v)
        best_so_far.append(best)
        outcome.append(m.outcome.value)
        label.append(config_label(e.config))
    tuning, resumed = tuning_seconds(data)
    return History(
        tuple(trial),
        tuple(value),
        tuple(best_so_far),
        tuning,
        tuple(outcome),
        tuple(label),
        data.study.unit,
        data.replayed_count > 0,
        resumed,
        drift_points(data, tuning),
    )


def drift_points(
    data: StudyData, tuning_s: tuple[float | None, ...]
) -> tuple[tuple[int, float | None, str], ...]:
    """Where the drift checks that found a change happened on the study's axes: a check
    after a run's n-th correct evaluation sits at that evaluation."""
    correct_at: dict[int, list[int]] = {}  # run id -> study positions of its correct ones
    for i, e in enumerate(data.evaluations):
        if e.measurement.outcome is TrialOutcome.OK:
            correct_at.setdefault(e.run_id, []).append(i)
    points = []
    for run in data.runs:
        for check in run.drift:
            at = correct_at.get(run.id, [])
            if not check.drifted or not 0 < check.after <= len(at):
                continue
            i = at[check.after - 1]
            assert check.ratio is not None  # a drift has a ratio
            how = "slower" if check.ratio > 1 else "faster"
            points.append((i + 1, tuning_s[i], f"drift: {100 * abs(check.ratio - 1):.1f}% {how}"))
    return tuple(points)


def draw_history(h: History, *, by_time: bool = False) -> go.Figure:
    """Values and the best so far against the evaluation number (or wall time)."""
    keep, x, xtitle = _history_axis(h, by_time)
    ok = [i for i in keep if h.value[i] is not None]
    bad = [i for i in keep if h.value[i] is None]
    pos = {i: n for n, i in enumerate(keep)}
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[x[pos[i]] for i in ok],
            y=[h.value[i] for i in ok],
            mode="markers",
            name="evaluation",
            marker={"size": 6, "color": "#7f9fbf"},
            hovertext=[esc(h.label[i]) for i in ok],
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[h.best_so_far[i] for i in keep],
            mode="lines",
            line={"shape": "hv", "color": "#c0392b", "width": 2},
            name="best so far",
        )
    )
    if bad:
        _add_failed(fig, h, [x[pos[i]] for i in bad], bad)
    _add_run_events(fig, h, by_time)
    fig.update_layout(
        title=f"{'time' if by_time else 'evaluation'}: best so far",
        xaxis_title=xtitle,
        yaxis_title=f"value ({esc(h.unit)})",
        yaxis_type="log",
        height=380,
        margin={"t": 50, "b": 50},
    )
    return fig


def _history_axis(h: History, by_time: bool) -> tuple[list[int], list[float | None], str]:
    """The evaluations that have a place on the x axis, their places, and the axis title (by
    time: imports have no tuning time and are left out)."""
    if not by_time:
        keep = list(range(len(h.trial)))
        return keep, [h.trial[i] for i in keep], "evaluation"
    keep = [i for i, t in enumerate(h.tuning_s) if t is not None]
    xtitle = (
        "seconds of tuning"
        + (" (runs laid end to end)" if h.resumed_s else "")
        + (" (replay: lookups on this machine, not GPU time)" if h.replayed else "")
    )
    return keep, [h.tuning_s[i] for i in keep], xtitle


def _add_failed(fig: go.Figure, h: History, x: list[float | None], bad: list[int]) -> None:
    """Failed evaluations as x markers at the floor of the correct values."""
    # (with no correct value at all, at 1 on the log axis: 0 is not on it, nothing showed)
    floor = min((v for v in h.value if v is not None), default=1.0)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[floor] * len(bad),
            mode="markers",
            marker={"symbol": "x", "color": "#888", "size": 7},
            name="failed (drawn at the floor)",
            hovertext=[esc(f"{h.outcome[i]}: {h.label[i]}") for i in bad],
        )
    )


def _add_run_events(fig: go.Figure, h: History, by_time: bool) -> None:
    """Vertical lines where a later run took over (on the time axis) and where a drift check
    found the reference config changed."""
    for at in h.resumed_s if by_time else ():
        fig.add_vline(
            x=at, line_dash="dot", line_color="#888", annotation_text="resumed", opacity=0.7
        )
    for trial, seconds, text in h.drifts:
        drift_at = seconds if by_time else trial
        if drift_at is not None:
            fig.add_vline(x=drift_at, line_dash="dash", line_color="#e67e22", annotation_text=text)
