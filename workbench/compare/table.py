"""The comparison table's numbers: time, throughput, share of the roofline bound, speedup.

Definitions (each row is one contender on one shape; times are medians of one call):

- throughput: the work model's operations over the time (TOPS or TFLOP/s, as the space's unit
  says), or its minimum bytes over the time (GB/s) for bandwidth-bound kernels; the copy
  baseline's bytes are what it reads plus what it writes;
- % of roofline bound: achieved / attainable at the work model's arithmetic intensity
  (operations per minimum DRAM byte), under the best ceilings known (measured, else the
  datasheet's, compute scaled to the SM clock the contender's samples ran at; each named with
  its source), raised to the fastest contender measured under them (:func:`fit_ceilings`: a
  roof is never below a measurement, so no share is above 100 %); attainable = min(compute
  roof, intensity x DRAM roof); with no operations, the bandwidth over the DRAM roof. The math
  is :mod:`workbench.roofline.timed`'s, shared with ``tune``;
- speedup vs a baseline: the baseline's median over the tuned config's median (above 1: the
  tuned config is faster).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.compare.problems import BaselineProblem
from workbench.devices import DeviceSpec
from workbench.roofline import Ceiling, Ceilings, Reached, raise_to_reached
from workbench.roofline.timed import (
    Bound,
    rate_in_unit,
    timed_bound,
    timed_reached,
    timed_roofs,
)

#: The contender name of the tuned config in tables, JSON and the store.
TUNED = "tuned"


class Status(enum.Enum):
    OK = "ok"  #: timed, and its outputs match the reference
    WRONG = "wrong"  #: ran, outputs differ from the reference: no speedup is given against it
    FAILED = "failed"  #: crashed, hung or raised
    SKIPPED = "skipped"  #: not run: absent library, unsupported shape, dtype or arch


@dataclass(frozen=True)
class VariantResult:
    """One configuration of a baseline that offers several (a CUTLASS operator) on one shape:
    its time, or why it has none; ``chosen``: the fastest correct one, the baseline's row."""

    name: str
    label: str
    config: Mapping[str, Any]
    status: Status
    reason: str = ""
    median_ms: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    samples: tuple[float, ...] = ()
    compile_s: float | None = None
    compile_note: str = ""
    chosen: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "config": dict(self.config),
            "status": self.status.value,
            "reason": self.reason,
            "median_ms": self.median_ms,
            "ci_ms": [self.ci_low_ms, self.ci_high_ms] if self.median_ms is not None else None,
            "samples": len(self.samples),
            "compile_s": self.compile_s,
            "compile_note": self.compile_note,
            "chosen": self.chosen,
        }


@dataclass(frozen=True)
class ContenderEntry:
    """One contender (the tuned config or a baseline) on one shape."""

    contender: str
    title: str
    status: Status
    reason: str = ""
    median_ms: float | None = None
    ci_low_ms: float | None = None
    ci_high_ms: float | None = None
    samples: tuple[float, ...] = ()
    sm_clock_mhz: tuple[float, ...] = ()
    throttled: tuple[bool, ...] = ()
    verify_max_error: float | None = None
    library: str | None = None
    ops: float = 0.0  #: operations of one call
    nbytes: float = 0.0  #: minimum bytes one call moves
    #: seconds the library compiled before it ran at this shape (all its variants), if at all
    compile_s: float | None = None
    compile_note: str = ""  #: how it had its compiled code (JIT, loaded from a cache)
    #: every configuration timed, for a baseline that offers several (the row is the fastest)
    variants: tuple[VariantResult, ...] = ()

    @property
    def timed(self) -> bool:
        return self.status is Status.OK and self.median_ms is not None and self.median_ms > 0

    @property
    def seconds(self) -> float | None:
        """The median time of one call in seconds (None: not timed)."""
        return self.median_ms * 1e-3 if self.timed else None  # type: ignore[operator]


def throughput(entry: ContenderEntry, unit: str) -> float | None:
    """Operations (TOPS / TFLOP/s) or bytes (GB/s) per second in the space's unit
    (:func:`~workbench.roofline.timed.rate_in_unit`; None for an entry not timed)."""
    if not entry.timed:
        return None
    return rate_in_unit(entry.ops, entry.nbytes, entry.seconds, unit)  # type: ignore[arg-type]


def roofline_bound(
    entry: ContenderEntry, precision: str, ceilings: Ceilings, at_mhz: float | None = None
) -> Bound | None:
    """The share of the roofline bound ``entry`` reaches under ``ceilings`` (None: not timed,
    or no roofs; :func:`~workbench.roofline.timed.timed_bound`).

    Raises:
        ShareAboveRoofError: ``entry`` beats a roof (``ceilings`` were not raised to it:
            :func:`fit_ceilings`).
    """
    if not entry.timed or entry.seconds is None:
        return None
    return timed_bound(
        entry.ops,
        entry.nbytes,
        entry.seconds,
        precision,
        ceilings,
        entry.contender,
        at_mhz,
    )


def reached(entry: ContenderEntry, precision: str, who: str) -> list[Reached]:
    """The rates a correct, timed ``entry`` reached: operations per second at ``precision``
    and the work model's bytes per second at DRAM (none for an entry not timed)."""
    if not entry.timed:
        return []
    return timed_reached(entry.ops, entry.nbytes, entry.seconds, precision, who)  # type: ignore[arg-type]


def speedup(tuned: ContenderEntry, other: ContenderEntry) -> float | None:
    """``other``'s median over the tuned config's (None unless both are timed and correct)."""
    if not tuned.timed or not other.timed:
        return None
    return other.median_ms / tuned.median_ms  # type: ignore[operator]


@dataclass(frozen=True)
class ShapeComparison:
    """The tuned config and every baseline on one shape."""

    problem: BaselineProblem
    precision: str  #: the compute roof the work is compared with (``tensor_int8``, ``fp32``)
    config: Mapping[str, Any]
    config_origin: str  #: ``best of study NAME``, ``given``, ``default (...)``
    tuned: ContenderEntry
    baselines: tuple[ContenderEntry, ...]
    notes: tuple[str, ...] = ()
    #: roofs of no clock of their own (measured), raised by :func:`fit_ceilings`
    ceilings: Ceilings = field(default_factory=Ceilings)
    #: the roofs :func:`fit_ceilings` raised to a contender, and to whom
    ceiling_notes: tuple[str, ...] = ()
    #: the GPU's preset, whose datasheet roofs each contender is placed under at the SM clock
    #: its samples ran at (:func:`~workbench.roofline.timed.timed_roofs`)
    datasheet: DeviceSpec | None = None
    #: every contender's rates (of all shapes of the run), which no roof may be below
    reached: tuple[Reached, ...] = ()

    @property
    def shape_label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.problem.shape.items())

    @property
    def entries(self) -> tuple[ContenderEntry, ...]:
        return (self.tuned, *self.baselines)

    def roofs(self, entry: ContenderEntry) -> tuple[Ceilings, float | None]:
        """The roofs ``entry`` is placed under, and the SM clock its samples ran at: the
        measured ones and the datasheet's at that clock, raised to every contender."""
        roofs, at = timed_roofs(self.datasheet, entry.sm_clock_mhz, self.ceilings)
        return raise_to_reached(roofs, self.reached)[0], at

    def bound(self, entry: ContenderEntry) -> Bound | None:
        """``entry``'s share of the roofline bound at the clock its samples ran at (None: not
        timed, or no roofs).

        Raises:
            ShareAboveRoofError: ``entry`` beats a roof (not raised to it: :func:`fit_ceilings`).
        """
        roofs, at = self.roofs(entry)
        return roofline_bound(entry, self.precision, roofs, at)

    def all_roofs(self) -> list[Ceiling]:
        """Every roof a timed contender is placed under (each clock's datasheet roofs), once."""
        timed = [e for e in self.entries if e.timed] or [self.tuned]
        found = {c.label: c for e in timed for c in self.roofs(e)[0]}
        return list(found.values())

    def row(self, entry: ContenderEntry) -> dict[str, Any]:
        """One contender as plain data (JSON, the store)."""
        b = self.bound(entry)
        is_tuned = entry.contender == TUNED
        return {
            "name": entry.contender,
            "title": entry.title,
            "status": entry.status.value,
            "reason": entry.reason,
            "median_ms": entry.median_ms,
            "ci_ms": [entry.ci_low_ms, entry.ci_high_ms] if entry.median_ms is not None else None,
            "samples": len(entry.samples),
            "throughput": throughput(entry, self.unit_of(entry)),
            "unit": self.unit_of(entry),
            "bound_fraction": b.fraction if b else None,
            "bound": b.limit if b else None,
            "bound_clock_mhz": b.clock_mhz if b and b.clock_timed else None,
            "speedup": None if is_tuned else speedup(self.tuned, entry),
            "verify_max_error": entry.verify_max_error,
            "library": entry.library,
            "compile_s": entry.compile_s,
            "variants": [v.to_json() for v in entry.variants],
        }

    def unit_of(self, entry: ContenderEntry) -> str:
        """The space's unit; a copy has no operations, so it is always in GB/s."""
        return self.problem.unit if entry.ops > 0 or entry.contender == TUNED else "GB/s"

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": dict(self.problem.shape),
            "label": self.shape_label,
            "family": self.problem.family.value if self.problem.family else None,
            "unit": self.problem.unit,
            "precision": self.precision,
            "work": {"ops": self.problem.ops, "min_bytes": self.problem.min_bytes},
            "config": dict(self.config),
            "config_origin": self.config_origin,
            "results": [self.row(e) for e in self.entries],
            "notes": list(self.notes),
        }


def fit_ceilings(comparisons: Sequence[ShapeComparison]) -> list[ShapeComparison]:
    """``comparisons`` with every roof raised to the fastest contender measured under it in
    any of them (same GPU, same run): a roof is the best measured for its unit, and a
    library the ceilings script did not time (cuBLAS beside cuBLASLt) may be it. Each
    comparison carries a note per roof raised."""
    found = [
        r
        for c in comparisons
        for e in c.entries
        for r in reached(e, c.precision, _who(e, c.shape_label))
    ]
    out = []
    for c in comparisons:
        ceilings, notes = raise_to_reached(c.ceilings, found)
        for e in c.entries:  # the datasheet's roofs at each contender's clock
            roofs, _ = timed_roofs(c.datasheet, e.sm_clock_mhz, ceilings)
            notes += raise_to_reached(roofs, found)[1]
        notes = tuple(dict.fromkeys(notes))
        out.append(replace(c, ceilings=ceilings, ceiling_notes=notes, reached=tuple(found)))
    return out


def _who(entry: ContenderEntry, shape_label: str) -> str:
    name = "the tuned config" if entry.contender == TUNED else entry.title
    return f"{name} at {shape_label}"


def format_rows(comparisons: Sequence[ShapeComparison]) -> list[list[str]]:
    """The printed table: shape, contender, status, time, throughput, % of bound, speedup."""
    rows = []
    for c in comparisons:
        for e in c.entries:
            r = c.row(e)
            ci = r["ci_ms"]
            time = "" if r["median_ms"] is None else f"{r['median_ms']:.4g}"
            if ci and ci[0] is not None and time:
                time += f" [{ci[0]:.4g}, {ci[1]:.4g}]"
            tp = "" if r["throughput"] is None else f"{r['throughput']:.4g} {r['unit']}"
            at = f" at {r['bound_clock_mhz']:,.0f} MHz" if r["bound_clock_mhz"] else ""
            bound = (
                ""
                if r["bound_fraction"] is None
                else (f"{100 * r['bound_fraction']:.1f}% ({r['bound']}{at})")
            )
            sp = "" if r["speedup"] is None else f"{r['speedup']:.2f}x"
            status = e.status.value + (f": {e.reason}" if e.reason and not e.timed else "")
            rows.append([c.shape_label, e.contender, status, time, tp, bound, sp])
    return rows
