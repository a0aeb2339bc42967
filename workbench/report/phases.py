"""Where each run's time went: its phases (compile, verification, timing, idle...) as a stacked
bar per run and a table, from ``runs.phases`` (runs stored before schema 5 have none)."""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.report.data import StudyData
from workbench.report.page import table
from workbench.runners.phases import Phase, PhaseTimes

#: one colour per phase; the GPU's phases in greens, the host's in other hues, idle grey
COLOURS = {
    Phase.COMPILE: "#e67e22",
    Phase.MODULE_LOAD: "#f1c40f",
    Phase.INPUTS: "#9b59b6",
    Phase.VERIFICATION: "#e74c3c",
    Phase.WARMUP: "#82e0aa",
    Phase.TIMING: "#27ae60",
    Phase.ENERGY: "#145a32",
    Phase.WORKER: "#5dade2",
    Phase.SEARCH: "#2e86c1",
    Phase.STORE: "#1b4f72",
    Phase.IDLE: "#bdc3c7",
}


@dataclass(frozen=True)
class RunPhases:
    run_id: int
    evaluations: int
    phases: PhaseTimes
    live: bool  #: measured on a GPU (else replayed: no GPU was busy)


def gather_phases(data: StudyData) -> list[RunPhases]:
    """The study's runs that stored their phases, in order."""
    replayed = data.study.replay_source is not None
    return [
        RunPhases(r.id, r.evaluations, PhaseTimes.from_json(r.phases), not replayed)
        for r in data.runs
        if r.phases
    ]


def draw_phases(runs: list[RunPhases]) -> go.Figure:
    """A horizontal bar per run, stacked by phase (seconds)."""
    fig = go.Figure()
    labels = [f"run {r.run_id}" for r in runs]
    for phase in Phase:
        seconds = [r.phases.get(phase) for r in runs]
        if any(seconds):
            fig.add_trace(
                go.Bar(
                    y=labels,
                    x=seconds,
                    name=phase.value,
                    orientation="h",
                    marker_color=COLOURS[phase],
                )
            )
    fig.update_layout(
        barmode="stack",
        title="where each run's wall time went",
        xaxis_title="seconds",
        height=160 + 40 * len(runs),
    )
    return fig


def phases_table(runs: list[RunPhases]) -> str:
    """Per run: wall time, evaluations per minute, GPU busy, and each phase's seconds (share)."""
    shown = [p for p in Phase if any(r.phases.get(p) for r in runs)]
    header = ["run", "wall (s)", "evaluations/min", "GPU busy", *(p.value for p in shown)]
    rows = []
    for r in runs:
        total = r.phases.total
        busy = r.phases.gpu_busy if r.live else None
        rate = 60 * r.evaluations / total if total > 0 else None
        cells = [
            str(r.run_id),
            f"{total:.1f}",
            "-" if rate is None else f"{rate:.1f}",
            "-" if busy is None else f"{busy:.0%}",
        ]
        cells += [f"{r.phases.get(p):.2f} ({r.phases.get(p) / total:.0%})" for p in shown]
        rows.append(cells)
    return table(header, rows, numeric=range(1, len(header)))


def replayed_text(runs: list[RunPhases]) -> str | None:
    """The sentence that stands in for the chart of replayed runs, or None for none: a replay's
    time is lookups in a recording and the search's own (tens of thousands of evaluations a
    minute), which says nothing about where a tune's time goes on a GPU."""
    replayed = [r for r in runs if not r.live]
    if not replayed:
        return None
    seconds = sum(r.phases.total for r in replayed)
    evaluations = sum(r.evaluations for r in replayed)
    which = ", ".join(str(r.run_id) for r in replayed)
    return (
        f"Not charted: run{'s' * (len(replayed) > 1)} {which} replayed a recording "
        f"({evaluations} evaluations in {seconds:.2g} s of lookups and search, no GPU busy), "
        "which says nothing about where a tune's time goes on a GPU."
    )


def phases_note(runs: list[RunPhases]) -> str:
    live = any(r.live for r in runs)
    note = (
        "GPU busy: the share of the wall time spent in warm-up, timed and energy launches of "
        "candidate kernels."
    )
    if not live:
        note = "Replayed runs: no GPU was busy; the runner's time is the replay's (worker)."
    return note
