"""What a stored profile says: roofline position, divergence, memory access, occupancy, and
which metrics each set misses. Read from a :class:`ProfileRecord` only (reports and the CLI
never re-run a kernel).

A launch profiled with hardware counters is placed under the profile's own compute peaks: at
the clock it ran at, so its share of a roof is per cycle. A measured or datasheet compute roof
is at another clock (the timing's, the datasheet's boost) and is left out for it, with a note.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from workbench.profile.chips import chip_for_name
from workbench.profile.derive import (
    Divergence,
    MemoryAccess,
    ProfiledOccupancy,
    divergence,
    memory_access,
    occupancy,
)
from workbench.profile.metrics import missing_by_set
from workbench.profile.storage import ProfileRecord
from workbench.roofline import (
    Achieved,
    Ceiling,
    CeilingKind,
    Ceilings,
    CeilingSource,
    RooflinePoint,
    achieved_from_metrics,
    achieved_from_timing,
    bandwidth_fractions,
    ncu_ceilings,
    raise_to_reached,
    roofline_points,
    sparse_by_rate,
)


@dataclass(frozen=True)
class Summary:
    """Derived figures of one profile."""

    record: ProfileRecord
    achieved: Achieved
    ceilings: tuple[Ceiling, ...]
    points: tuple[RooflinePoint, ...]
    bandwidth_fraction: dict[str, float]
    divergence: Divergence | None
    memory: MemoryAccess | None
    occupancy: ProfiledOccupancy | None
    missing_by_set: dict[str, list[str]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def same_gpu(ceilings: Ceilings, chip: str | None) -> tuple[Ceilings, list[str]]:
    """The ceilings that belong to a GPU of ``chip`` (measured or published for another chip
    are left out, and a note says so); all of them when a chip is unknown."""
    kept, notes = [], []
    for c in ceilings:
        other = chip_for_name(c.device) if c.device else None
        if chip and other and other != chip:
            notes.append(f"ceiling {c.name} of {c.device} ({other}) left out: profiled on {chip}")
        else:
            kept.append(c)
    return Ceilings(kept), notes


def at_the_profile_clock(
    ceilings: Ceilings, own: Ceilings, used: set[str]
) -> tuple[Ceilings, list[str]]:
    """``ceilings`` without the compute roofs that the profile has a peak of its own for (at
    its clock), and a note per measured one of a precision in ``used`` left out: it was timed
    at another clock."""
    kept, notes = [], []
    for c in ceilings:
        mine = own.best(c.name)
        if c.kind is not CeilingKind.COMPUTE or mine is None or mine.clock_hz is None:
            kept.append(c)
        elif c.source is CeilingSource.MEASURED and c.name in used:
            notes.append(
                f"{c.name}: the measured roof ({c.label}) is not drawn for this launch: it was "
                f"timed at its own clock, the profile ran at {mine.clock_hz / 1e9:.3g} GHz; the "
                "launch's share is per cycle of the profile's own peak"
            )
    return Ceilings(kept), notes


def summarize(record: ProfileRecord, extra: Ceilings | None = None) -> Summary:
    """Figures of one profile; ``extra`` adds measured or datasheet ceilings (the most
    trusted source wins per ceiling; a roof the launch beats is raised to it, with a note)."""
    ceilings, notes = same_gpu(Ceilings(extra or ()), record.chip)
    if record.source == "event-timing":
        m = record.metrics
        precision = record.strings.get("work_precision", "work")
        achieved = achieved_from_timing(
            float(m.get("work_ops") or 0.0),
            float(m.get("work_min_bytes") or 0.0),
            float(m["event_time_ms"] or 0.0) * 1e-3,
            precision,
        )
        counters = None
    else:
        achieved = achieved_from_metrics(record.metrics)
        own = Ceilings(ncu_ceilings(record.metrics, record.cc))
        used = {p for p, rate in achieved.ops_per_s.items() if rate > 0}
        ceilings, other_clocks = at_the_profile_clock(ceilings, own, used)
        notes += other_clocks
        ceilings = ceilings.add(own)
        achieved = sparse_by_rate(achieved, ceilings)
        counters = record.metrics
    ceilings, raised = raise_to_reached(
        ceilings, achieved.reached(f"the profiled launch of {record.kernel}")
    )
    notes += raised
    best = tuple(c for name in ceilings.names() if (c := ceilings.best(name)) is not None)
    return Summary(
        record=record,
        achieved=achieved,
        ceilings=best,
        points=tuple(roofline_points(achieved, ceilings)),
        bandwidth_fraction=bandwidth_fractions(achieved, ceilings),
        divergence=divergence(counters) if counters is not None else None,
        memory=memory_access(counters) if counters is not None else None,
        occupancy=occupancy(counters) if counters is not None else None,
        missing_by_set=(
            missing_by_set(k for k, v in record.metrics.items() if v is not None)
            if counters is not None
            else {}
        ),
        notes=tuple(notes),
    )


def to_json(summary: Summary) -> dict[str, Any]:
    """A JSON-ready dict of a summary (no raw metrics: those are in the store)."""
    r = summary.record
    a = summary.achieved
    return {
        "id": r.id,
        "kernel": r.kernel,
        "config": r.config_key,
        "shape": r.shape_label,
        "source": r.source,
        "source_file": r.source_file,
        "function_name": r.function_name,
        "mangled_name": r.mangled_name,
        "device": r.device,
        "chip": r.chip,
        "cc": r.cc,
        "metric_set": r.metric_set,
        "duration_s": a.duration_s,
        "ops_per_s": a.ops_per_s,
        "bytes_per_s": a.bytes_per_s,
        "bandwidth_fraction": summary.bandwidth_fraction,
        "ceilings": [
            {
                "name": c.name,
                "value": c.value,
                "unit": c.unit,
                "source": c.source.value,
                "label": c.legend,
                "detail": c.detail,
                "clock_hz": c.clock_hz,
            }
            for c in summary.ceilings
        ],
        "roofline": [
            {
                "precision": p.precision,
                "level": p.level,
                "intensity": p.intensity,
                "achieved": p.achieved,
                "attainable": p.attainable,
                "ridge": p.ridge,
                "bound": p.bound,
                "fraction": p.fraction,
                "compute_roof": p.compute.legend,
                "memory_roof": p.memory.legend,
            }
            for p in summary.points
        ],
        "divergence": _plain(summary.divergence),
        "memory": _plain(summary.memory),
        "occupancy": _plain(summary.occupancy),
        "missing_by_set": summary.missing_by_set,
        "missing": list(r.missing),
        "notes": [*r.notes, *a.notes, *summary.notes],
    }


def _plain(value: object) -> Any:
    return None if value is None else asdict(value)  # type: ignore[call-overload]
