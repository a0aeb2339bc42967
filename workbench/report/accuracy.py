"""Error next to speed: the verification's largest error against the reference beside each
config's time, for kernels whose outputs are compared with a tolerance (quantization, FP8,
fp16 reductions). Integer kernels verify exactly and replayed numbers carry no error, so the
figure appears only where the store holds nonzero errors.

Beside it, the problem's own accuracy where the space file declares one (``accuracy:``, e.g.
what an 8-bit KV cache costs against the fp16 cache): computed on the CPU for the study's
problem variant at its shape (capped), from inputs drawn as the runner draws them, so it shows
for a study that was only compiled or replayed too.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.errors import WorkbenchError
from workbench.report.data import StudyData
from workbench.report.page import PageSection, esc, num, table
from workbench.runners.accuracy import AccuracyRows, compute_accuracy
from workbench.spaces.model import Config, config_label
from workbench.spaces.variants import label_values


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


@dataclass(frozen=True)
class ProblemAccuracy:
    """A study's problem accuracy figure, or why there is none (``rows`` None)."""

    title: str
    rows: AccuracyRows | None
    why_not: str = ""


def gather_problem_accuracy(data: StudyData) -> ProblemAccuracy | None:
    """The space's accuracy figure for the study's problem variant (None: the space declares
    none, or the study has no space to ask: a recorded space declares nothing)."""
    space, _ = data.space
    if space is None:
        return None
    figure = space.spec.accuracy
    if figure is None:
        return None
    title = figure.title or figure.target
    config = study_config(data)
    try:
        return ProblemAccuracy(title, compute_accuracy(space, config))
    except (WorkbenchError, OSError) as exc:
        return ProblemAccuracy(title, None, f"not computed: {exc}")


def study_config(data: StudyData) -> Config:
    """The config whose problem variant the study is: the best evaluation's (else the first's)
    over the space's defaults and the values the study's kernel label names."""
    space, _ = data.space
    assert space is not None
    config: Config = {**space.default_config(), **label_values(space.spec, data.study.kernel)}
    chosen = data.best or (data.evaluations[0] if data.evaluations else None)
    if chosen is not None:
        config.update({k: v for k, v in chosen.config.items() if k in config})
    return config


def add_problem_accuracy(sec: PageSection, acc: ProblemAccuracy, speed: str) -> None:
    """The figure's table, what it was computed on, and the study's speed beside it."""
    sec.html(f"<h3>{esc(acc.title)}</h3>")
    if acc.rows is None:
        sec.text(f"The space's accuracy figure was {acc.why_not}", "missing")
        return
    r = acc.rows
    numeric = [i for i, c in enumerate(r.columns) if isinstance(r.rows[0][c], int | float)]
    cells = [[num(v) if isinstance(v, float) else v for v in row.values()] for row in r.rows]
    sec.html(table(r.columns, cells, numeric=numeric))
    drawn = ", ".join(f"{k}={v}" for k, v in r.drawn.items())
    sec.note(
        f"Computed on the CPU by {r.target} at {r.shape_text}, from inputs drawn as the runner "
        f"draws them (seed {r.seed}{f', with {drawn}' if drawn else ''}): a property of the "
        "problem's formats, not of a config."
    )
    sec.note(speed)
