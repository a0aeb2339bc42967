"""Tuning history: every evaluation's value and the best so far, against the evaluation count
and against wall time."""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.report.data import StudyData
from workbench.report.page import esc
from workbench.runners.base import TrialOutcome
from workbench.spaces.model import config_label


@dataclass(frozen=True)
class History:
    """One point per evaluation, in commit order.

    ``elapsed_s`` is seconds since the evaluation's run started (None for imports); for a
    replay it is this machine's lookup time, not the recorded GPU's time.
    """

    trial: tuple[int, ...]
    value: tuple[float | None, ...]
    best_so_far: tuple[float | None, ...]
    elapsed_s: tuple[float | None, ...]
    outcome: tuple[str, ...]
    label: tuple[str, ...]
    unit: str
    replayed: bool

    @property
    def failed(self) -> int:
        return sum(1 for o in self.outcome if o != TrialOutcome.OK.value)


def gather_history(data: StudyData) -> History:
    best: float | None = None
    trial, value, best_so_far, elapsed, outcome, label = [], [], [], [], [], []
    for i, e in enumerate(data.evaluations, 1):
        m = e.measurement
        v = m.value if m.outcome is TrialOutcome.OK else None
        if v is not None and (best is None or v < best):
            best = v
        trial.append(i)
        value.append(v)
        best_so_far.append(best)
        elapsed.append(e.elapsed_s)
        outcome.append(m.outcome.value)
        label.append(config_label(e.config))
    return History(
        tuple(trial),
        tuple(value),
        tuple(best_so_far),
        tuple(elapsed),
        tuple(outcome),
        tuple(label),
        data.study.unit,
        data.replayed_count > 0,
    )


def draw_history(h: History, *, by_time: bool = False) -> go.Figure:
    """Values and the best so far against the evaluation number (or wall time)."""
    if by_time:
        keep = [i for i, t in enumerate(h.elapsed_s) if t is not None]
        x = [h.elapsed_s[i] for i in keep]
        xtitle = "seconds since the run started" + (
            " (replay: lookups on this machine, not GPU time)" if h.replayed else ""
        )
    else:
        keep = list(range(len(h.trial)))
        x = [h.trial[i] for i in keep]
        xtitle = "evaluation"
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
        # (with no correct value at all, at 1 on the log axis: 0 is not on it, nothing showed)
        floor = min((v for v in h.value if v is not None), default=1.0)
        fig.add_trace(
            go.Scatter(
                x=[x[pos[i]] for i in bad],
                y=[floor] * len(bad),
                mode="markers",
                marker={"symbol": "x", "color": "#888", "size": 7},
                name="failed (drawn at the floor)",
                hovertext=[esc(f"{h.outcome[i]}: {h.label[i]}") for i in bad],
            )
        )
    fig.update_layout(
        title=f"{'time' if by_time else 'evaluation'}: best so far",
        xaxis_title=xtitle,
        yaxis_title=f"value ({esc(h.unit)})",
        yaxis_type="log",
        height=380,
        margin={"t": 50, "b": 50},
    )
    return fig
