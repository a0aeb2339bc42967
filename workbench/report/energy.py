"""Time next to energy: each correct config's time per launch and joules per launch, with the
Pareto front (no other config is both faster and leaner), for studies whose evaluations carry
an energy reading (NVML's counter on a live GPU, or a recording's energy)."""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.report.data import StudyData
from workbench.report.page import esc
from workbench.runners.objectives import energy_of
from workbench.spaces.model import config_label


@dataclass(frozen=True)
class TimeEnergy:
    labels: tuple[str, ...]
    time_ms: tuple[float, ...]
    energy_j: tuple[float, ...]
    front: tuple[int, ...]  #: indices of the Pareto-optimal points, fastest first


def pareto_front(time_ms: list[float], energy_j: list[float]) -> list[int]:
    """Indices of the points no other point beats on both (ties on one: the better on the
    other wins), in order of time."""
    order = sorted(range(len(time_ms)), key=lambda i: (time_ms[i], energy_j[i]))
    front, lowest = [], float("inf")
    for i in order:
        if energy_j[i] < lowest:
            front.append(i)
            lowest = energy_j[i]
    return front


def gather_time_energy(data: StudyData) -> TimeEnergy | None:
    """The study's correct evaluations with an energy reading (None: fewer than two)."""
    points = []
    for e in data.ok:
        energy = energy_of(e.measurement)
        time = e.measurement.metrics.get("time_ms", e.measurement.value)
        if energy is not None and isinstance(time, int | float):
            points.append((config_label(e.config), float(time), energy))
    if len(points) < 2:
        return None
    times, energies = [p[1] for p in points], [p[2] for p in points]
    return TimeEnergy(
        tuple(p[0] for p in points),
        tuple(times),
        tuple(energies),
        tuple(pareto_front(times, energies)),
    )


def draw_time_energy(te: TimeEnergy) -> go.Figure:
    labels = [esc(label) for label in te.labels]
    fig = go.Figure(
        go.Scatter(
            x=te.time_ms,
            y=te.energy_j,
            mode="markers",
            name="configs",
            hovertext=labels,
            marker={"size": 7, "color": "#95a5a6"},
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[te.time_ms[i] for i in te.front],
            y=[te.energy_j[i] for i in te.front],
            mode="lines+markers",
            name="Pareto front",
            hovertext=[labels[i] for i in te.front],
            marker={"size": 9, "color": "#27ae60"},
        )
    )
    fig.update_layout(
        title="energy vs time per launch (no config left of and below the front)",
        xaxis_title="time per launch (ms)",
        yaxis_title="energy per launch (J)",
        height=420,
    )
    return fig
