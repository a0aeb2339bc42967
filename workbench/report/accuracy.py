"""Error next to speed: the verification's largest error against the reference beside each
config's time, for kernels whose outputs are compared with a tolerance (quantization, FP8,
fp16 reductions). Integer kernels verify exactly and replayed numbers carry no error, so the
figure appears only where the store holds nonzero errors."""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.report.data import StudyData
from workbench.report.page import esc
from workbench.spaces.model import config_label


@dataclass(frozen=True)
class Accuracy:
    labels: tuple[str, ...]
    value: tuple[float, ...]
    max_error: tuple[float, ...]


def gather_accuracy(data: StudyData) -> Accuracy | None:
    pairs = [
        (config_label(e.config), e.measurement.value, e.measurement.verify_max_error)
        for e in data.ok
        if e.measurement.verify_max_error is not None and e.measurement.value is not None
    ]
    if not pairs or not any(err for _, _, err in pairs):
        return None
    return Accuracy(
        tuple(p[0] for p in pairs),
        tuple(float(p[1]) for p in pairs),
        tuple(float(p[2]) for p in pairs),
    )


def draw_accuracy(acc: Accuracy, unit: str) -> go.Figure:
    fig = go.Figure(
        go.Scatter(
            x=acc.value,
            y=acc.max_error,
            mode="markers",
            hovertext=[esc(label) for label in acc.labels],
            marker={"size": 8, "color": "#8e44ad"},
        )
    )
    fig.update_layout(
        title="largest error against the reference vs time (verification of each config)",
        xaxis_title=f"time ({esc(unit)})",
        yaxis_title="max |output - reference|",
        height=400,
    )
    return fig
