"""The hierarchical roofline page: DRAM/L2/L1 and compute roofs, each labelled with its source
(measured, Nsight Compute, datasheet), and points for the best config and its runners-up.

Points come from stored Nsight Compute profiles when there are any (one point per memory
level the profile has traffic for), else from the event-timing roofline: the study's stored
time and the space's work model (operations and minimum bytes: a lower bound on DRAM
traffic). The math is :mod:`workbench.roofline`'s; this module only selects and draws.

Rates per second are at a clock, and the chart says which: a profile's own (its points and its
roofs alike), or the timed runs' SM clock. Tensor roofs are dense; a 2:4-sparse roof is drawn
only for a launch that ran sparse MMA. Launches are labelled by the parameters that differ
between them (:func:`launch_labels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.devices import preset_named
from workbench.errors import ConfigError
from workbench.profile.chips import chip_for_name
from workbench.profile.storage import ProfileRecord
from workbench.profile.summary import same_gpu, summarize
from workbench.report.data import StudyData
from workbench.report.labels import short_labels
from workbench.report.page import esc
from workbench.roofline import (
    Ceiling,
    CeilingKind,
    Ceilings,
    CeilingSource,
    RooflinePoint,
    achieved_from_timing,
    datasheet_ceilings,
    raise_to_reached,
    roofline_points,
)
from workbench.roofline.timed import median_clock_mhz
from workbench.spaces.model import config_label
from workbench.store.records import StoredEvaluation
from workbench.units import si

#: The best config and this many runners-up get event-timing points.
RUNNERS_UP = 4
_LEVEL_SYMBOL = {"dram": "circle", "l2": "square", "l1": "diamond"}
_COLOURS = ("#c0392b", "#2e86c1", "#27ae60", "#8e44ad", "#d68910", "#17a589", "#7f8c8d")


@dataclass(frozen=True)
class PointSet:
    """One kernel launch (a config, or a profiled kernel) on the roofline."""

    label: str
    role: str  #: "best", "runner-up 2", "profile", ...
    source: str  #: "ncu", "import", "event timing"
    precision: str | None
    points: tuple[RooflinePoint, ...]
    notes: tuple[str, ...] = ()
    kernel: str | None = None
    config: str | None = None  #: the config key, when the launch has one


@dataclass(frozen=True)
class Roofline:
    ceilings: tuple[Ceiling, ...]
    sets: tuple[PointSet, ...]
    source: str  #: what the points are (shown on the page)
    notes: tuple[str, ...] = ()
    clock: str = ""  #: the clock rates per second are at (``at the profiled SM clock, ...``)
    per_cycle: str = ""  #: why a share of a roof is per cycle, where it is


def launch_labels(roof: Roofline) -> tuple[list[str], str | None]:
    """A short label per point set (the parameters that differ between the launches drawn, the
    kernel where kernels differ) and a caption with what they all share."""
    short = short_labels([s.config for s in roof.sets])
    kernels = list(dict.fromkeys(s.kernel for s in roof.sets if s.kernel))
    labels = []
    for s, text in zip(roof.sets, short.labels, strict=True):
        text = text or (s.kernel if s.config else s.label) or s.label
        if len(kernels) > 1 and s.kernel and not text.startswith(s.kernel):
            text = f"{s.kernel}: {text}"
        labels.append(text)
    shared = [f"kernel {kernels[0]}"] if len(kernels) == 1 else []
    shared += [short.shared_text] if short.shared else []
    caption = f"The launches drawn share: {'; '.join(shared)}." if shared else None
    return labels, caption


def device_ceilings(
    gpu: str | None, measured: Ceilings | None, at_mhz: float | None = None
) -> tuple[Ceilings, list[str]]:
    """Datasheet ceilings of the GPU's preset (compute peaks scaled to ``at_mhz``, the SM clock
    of the timings drawn, when known) plus the measured ones of the same chip."""
    notes: list[str] = []
    found = Ceilings()
    spec = preset_named(gpu) if gpu else None
    if spec is not None:
        found = found.add(datasheet_ceilings(spec, at_mhz))
    elif gpu:
        notes.append(f"no datasheet preset for {gpu}: only measured or Nsight Compute roofs")
    if measured is not None:
        kept, dropped = same_gpu(measured, chip_for_name(gpu) if gpu else None)
        found = found.add(kept)
        notes += dropped
    return found, notes


def _rank(data: StudyData) -> dict[str, int]:
    return {config_label(e.config): i for i, e in enumerate(data.ok)}


def _role(rank: int | None) -> str:
    if rank is None:
        return "profile"
    return "best" if rank == 0 else f"runner-up {rank + 1}"


def from_profiles(
    profiles: list[ProfileRecord], data: StudyData | None, measured: Ceilings | None
) -> Roofline:
    """Points of stored profiles, ranked by the study's values when they belong to one."""
    ranks = _rank(data) if data is not None else {}
    sets, roofs, notes = [], Ceilings(), []
    ordered = sorted(profiles, key=lambda p: ranks.get(p.config_key or "", len(ranks)))
    for p in ordered:
        extra, more = device_ceilings(p.device, measured)
        notes += more
        summary = summarize(p, extra)
        roofs = roofs.add(summary.ceilings)
        main = summary.achieved.main_precision
        points = tuple(pt for pt in summary.points if pt.precision == main)
        rank = ranks.get(p.config_key) if p.config_key else None
        what = p.config_key or f"{p.function_name} #{p.report_index}"
        sets.append(
            PointSet(
                label=f"{p.kernel}: {what}",
                role=_role(rank),
                source=p.source,
                precision=main,
                points=points,
                notes=tuple(n for n in (*summary.achieved.notes, *summary.notes)),
                kernel=p.kernel,
                config=p.config_key,
            )
        )
    roofs, spread = highest_ncu_roofs(roofs)
    return Roofline(
        _shown(roofs, sets),
        tuple(sets),
        "Nsight Compute profiles in the store",
        tuple(dict.fromkeys([*notes, *spread])),
        _profile_clock(sets),
        "A launch's share of its compute roof is per cycle: the profile's own peak, at the clock "
        "the launch ran at (a measured roof, timed at another clock, is not used for it).",
    )


def _profile_clock(sets: list[PointSet]) -> str:
    """``at the profile's SM clock, 1.69 GHz``: the clock of the compute roofs the points are
    placed under (each a profile's own peak at the clock the profile ran at)."""
    hz = sorted({pt.compute.clock_hz for s in sets for pt in s.points if pt.compute.clock_hz})
    if not hz:
        return ""
    at = (
        f"{hz[0] / 1e9:.3g} GHz" if len(hz) == 1 else f"{hz[0] / 1e9:.3g} to {hz[-1] / 1e9:.3g} GHz"
    )
    return f"at the profiled SM clock, {at} (ncu --clock-control none)"


#: Launches whose Nsight Compute peaks differ by more than this get a note.
NCU_SPREAD_NOTED = 0.02


def highest_ncu_roofs(roofs: Ceilings) -> tuple[Ceilings, list[str]]:
    """One Nsight Compute roof per name: the highest of the launches', with a note on how far
    apart they were.

    Nsight Compute's peaks are per cycle times each launch's measured clock (cycles elapsed
    per second), so launches of one report differ by the clock they ran at: by up to 43 % in
    a public report whose clocks were not locked. A roof bounds every launch drawn under it,
    so the highest is drawn (not the first launch's); each point's share of attainable, in its
    hover, stays against its own launch's peak.
    """
    ncu: dict[str, list[Ceiling]] = {}
    kept = []
    for c in roofs:
        if c.source is CeilingSource.NCU:
            ncu.setdefault(c.name, []).append(c)
        else:
            kept.append(c)
    notes = []
    for name, found in ncu.items():
        low = min(found, key=lambda c: c.value)
        high = max(found, key=lambda c: c.value)
        kept.append(high)
        if high.value > low.value * (1 + NCU_SPREAD_NOTED):
            notes.append(
                f"Nsight Compute's {name} peak differs between the launches by "
                f"{high.value / low.value - 1:.0%} ({si(low.value, low.unit)} to "
                f"{si(high.value, high.unit)}: each launch's clock); the roof drawn is the "
                "highest, and each point's share of attainable is of its own launch's peak"
            )
    return Ceilings(kept), notes


def from_timing(data: StudyData, measured: Ceilings | None) -> Roofline | None:
    """The event-timing roofline of the best configs; None without a work model."""
    from workbench.spaces.launch import work_counts, work_precision

    space, why = data.space
    if space is None or not data.ok:
        return None if space is None else Roofline((), (), "event timing", (why or "",))
    gpu = data.devices[0]
    mhz = timed_clock_mhz(data.ok[: RUNNERS_UP + 1])
    ceilings, notes = device_ceilings(gpu, measured, mhz)
    precision = work_precision(space)
    launches = []
    for rank, e in enumerate(data.ok[: RUNNERS_UP + 1]):
        try:
            ops, nbytes = work_counts(space, e.config)
        except ConfigError as exc:
            notes.append(str(exc))
            continue
        seconds = (e.measurement.value or 0.0) * 1e-3
        launches.append((rank, e, achieved_from_timing(ops, nbytes, seconds, precision)))
    # a roof is never below a config drawn under it: the best's rate where it beats them
    reached = [r for rank, _, a in launches for r in a.reached(_role(rank))]
    ceilings, raised = raise_to_reached(ceilings, reached)
    notes += raised
    sets = [
        PointSet(
            label=config_label(e.config),
            role=_role(rank),
            source="event timing",
            precision=precision,
            points=tuple(roofline_points(achieved, ceilings)),
            notes=achieved.notes,
            kernel=data.study.kernel,
            config=config_label(e.config),
        )
        for rank, e, achieved in launches
    ]
    return Roofline(
        _shown(ceilings, sets),
        tuple(sets),
        f"event timing: the stored median time and the work model of {space.spec.name} "
        f"({precision} work; bytes are the minimum the algorithm moves, a lower bound on DRAM "
        "traffic)",
        tuple(notes),
        (
            f"as timed, at the samples' median SM clock, {mhz:,.0f} MHz; datasheet compute roofs "
            "scaled to it"
            if mhz
            else "as timed (no SM clock recorded); datasheet roofs at the clock they are quoted at"
        ),
        (
            "A launch's share of a datasheet compute roof is per cycle: the roof is scaled from "
            "the clock it is quoted at to the timed one."
            if mhz
            else ""
        ),
    )


def timed_clock_mhz(evaluations: list[StoredEvaluation]) -> float | None:
    """The median SM clock of these evaluations' timed samples (None: none recorded)."""
    return median_clock_mhz(c for e in evaluations for c in e.measurement.sm_clock_mhz)


def _shown(ceilings: Ceilings, sets: list[PointSet]) -> tuple[Ceiling, ...]:
    """One roof per name (the most trusted; the highest launch's among ncu peaks): every
    memory level, and the compute roofs the points are placed under (a 2:4-sparse roof only
    for a launch that ran sparse MMA)."""
    used = {pt.compute.name for s in sets for pt in s.points}
    return tuple(
        c
        for name in ceilings.names()
        if (c := ceilings.best(name)) is not None and (c.kind is CeilingKind.MEMORY or name in used)
    )


def draw_roofline(roof: Roofline, title: str) -> go.Figure:
    """Log-log roofline: memory roofs up to the highest compute roof, compute roofs from the
    fastest memory roof's ridge, and one marker per (launch, memory level)."""
    memory = [c for c in roof.ceilings if c.kind is CeilingKind.MEMORY]
    compute = [c for c in roof.ceilings if c.kind is CeilingKind.COMPUTE]
    xs = [pt.intensity for s in roof.sets for pt in s.points]
    ridges = [c.value / m.value for c in compute for m in memory]
    # a decade either side of every point and ridge (and of 1 op/B, for a lone point)
    lo = min([*xs, *ridges, 1.0]) / 10
    hi = max([*xs, *ridges, 1.0]) * 10
    fig = go.Figure()
    _add_roofs(fig, memory, compute, lo, hi)
    _add_points(fig, roof)
    clock = f"<br><sup>rates per second {esc(roof.clock)}</sup>" if roof.clock else ""
    fig.update_layout(
        title=title + clock,
        xaxis={"type": "log", "title": "arithmetic intensity (operations per byte)"},
        yaxis={"type": "log", "title": "operations per second"},
        height=640,
        legend={"font": {"size": 10}, "orientation": "h", "y": -0.2},
    )
    return fig


def _add_roofs(
    fig: go.Figure, memory: list[Ceiling], compute: list[Ceiling], lo: float, hi: float
) -> None:
    """Memory roofs as slopes up to the highest compute roof, compute roofs as flat lines from
    the fastest memory roof's ridge (DRAM solid, the caches dotted)."""
    top = max((c.value for c in compute), default=None)
    fastest = max((m.value for m in memory), default=None)
    for m in memory:
        end = top / m.value if top else hi
        fig.add_trace(
            go.Scatter(
                x=[lo, end],
                y=[lo * m.value, end * m.value],
                mode="lines",
                line={"dash": "dot" if m.name != "dram" else "solid", "color": "#555"},
                name=esc(m.legend),
            )
        )
    for c in compute:
        start = c.value / fastest if fastest else lo
        fig.add_trace(
            go.Scatter(
                x=[start, hi],
                y=[c.value, c.value],
                mode="lines",
                line={"color": "#999", "width": 2},
                name=esc(c.legend),
            )
        )


def _add_points(fig: go.Figure, roof: Roofline) -> None:
    """One trace per launch, a colour each, a marker symbol per memory level (the best config
    drawn larger)."""
    labels, _ = launch_labels(roof)
    for i, s in enumerate(roof.sets):
        if not s.points:
            continue
        colour = _COLOURS[i % len(_COLOURS)]
        fig.add_trace(
            go.Scatter(
                x=[pt.intensity for pt in s.points],
                y=[pt.achieved for pt in s.points],
                mode="markers",
                marker={
                    "size": 12 if s.role == "best" else 9,
                    "color": colour,
                    "symbol": [_LEVEL_SYMBOL.get(pt.level, "circle") for pt in s.points],
                    "line": {"width": 1, "color": "#222"},
                },
                name=esc(f"{s.role}: {labels[i]}"),
                hovertext=[esc(_hover(s, pt)).replace("\n", "<br>") for pt in s.points],
                hoverinfo="text",
            )
        )


def _hover(s: PointSet, pt: RooflinePoint) -> str:
    return (
        f"{s.role}: {s.label} ({s.source})\n{pt.precision} at {pt.level}: "
        f"{pt.intensity:.3g} op/B, {pt.compute.rate_text(pt.achieved)}, {pt.fraction:.0%} of "
        "attainable, "
        f"{pt.bound}-bound (ridge {pt.ridge:.3g})"
    )
