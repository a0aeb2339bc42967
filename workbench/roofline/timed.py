"""Timing-only rooflines: a launch's work model (operations, minimum bytes) over its measured
time, in the space's unit and as a share of the roofline bound at the clock it ran at.

What ``tune``, ``compare`` and the report's event-timing roofline have in common:

- throughput in the space's unit: operations per second (TOPS, TFLOP/s) or the work model's
  minimum bytes per second (GB/s, TB/s) for bandwidth-bound kernels (:func:`rate_in_unit`);
- the roofs a timed launch is placed under (:func:`timed_roofs`): the given ones (measured) and
  the GPU preset's datasheet peaks, compute peaks scaled from the clock they are quoted at to
  the samples' median SM clock (:func:`median_clock_mhz`), so that the share is per cycle; a
  launch that recorded no clock is placed under the datasheet roofs as quoted;
- the share of the roofline bound (:func:`timed_bound`): achieved / attainable at the work
  model's arithmetic intensity (operations per minimum DRAM byte), attainable = min(compute
  roof, intensity x DRAM roof); with no operations, the bandwidth over the DRAM roof. A roof is
  never below a launch measured under it (:func:`~workbench.roofline.raise_to_reached`).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from workbench.devices import DeviceSpec
from workbench.roofline.ceilings import (
    Ceiling,
    Ceilings,
    Reached,
    datasheet_ceilings,
    raise_to_reached,
    share,
)
from workbench.roofline.model import RooflinePoint

#: Work units that mean "this kernel is judged by its bandwidth".
BANDWIDTH_UNITS = ("GB/s", "TB/s")


def rate_in_unit(ops: float, nbytes: float, seconds: float, unit: str) -> float:
    """Operations (TOPS, TFLOP/s: 1e12 per second) or bytes (GB/s: 1e9, TB/s: 1e12 per
    second) per second in ``unit``.

    Raises:
        ValueError: ``seconds`` is not positive.
    """
    if not seconds > 0:
        raise ValueError(f"a rate needs a positive time, got {seconds!r} s")
    work = nbytes if unit in BANDWIDTH_UNITS else ops
    return work / seconds / (1e9 if unit == "GB/s" else 1e12)


def median_clock_mhz(clocks: Iterable[float | None]) -> float | None:
    """The median SM clock of timed samples (NVML, per sample; None or NaN where a sample's
    was not read), or None when none was recorded (a replay of a recording without clocks)."""
    read = [float(c) for c in clocks if c and c == c]
    return float(statistics.median(read)) if read else None


@dataclass(frozen=True)
class Bound:
    """Where a timed launch sits under the roofline."""

    fraction: float  #: achieved / attainable
    limit: str  #: ``compute`` or ``memory``
    attainable: float  #: in the unit of the limiting roof (OP/s or B/s)
    ceilings: tuple[str, ...]  #: labels of the roofs used, with their source
    #: the SM clock of the compute roof a compute-bound share is of (None: memory-bound, or a
    #: roof of no stated clock, such as a measured one)
    clock_mhz: float | None = None
    #: whether that clock is the samples' own (the datasheet roof scaled to it), not the one
    #: the datasheet quotes
    clock_timed: bool = False

    @property
    def clock_text(self) -> str:
        """``at 1,980 MHz`` for a share at the samples' SM clock, else ""."""
        return f"at {self.clock_mhz:,.0f} MHz" if self.clock_timed and self.clock_mhz else ""


def timed_roofs(
    spec: DeviceSpec | None, clocks: Iterable[float | None], given: Ceilings | None = None
) -> tuple[Ceilings, float | None]:
    """The roofs a launch timed at ``clocks`` (its samples' SM clocks) is placed under:
    ``given`` (measured ceilings) and, with a preset, its datasheet peaks with compute scaled
    to the samples' median clock; and that clock (None: none recorded, peaks as quoted)."""
    at = median_clock_mhz(clocks)
    roofs = given if given is not None else Ceilings()
    return (roofs.add(datasheet_ceilings(spec, at)) if spec is not None else roofs), at


def timed_reached(
    ops: float, nbytes: float, seconds: float, precision: str, who: str
) -> list[Reached]:
    """The rates a correct launch reached: operations per second at ``precision`` and the work
    model's bytes per second at DRAM."""
    return [Reached(precision, ops / seconds, who), Reached("dram", nbytes / seconds, who)]


def timed_bound(
    ops: float,
    nbytes: float,
    seconds: float,
    precision: str,
    ceilings: Ceilings,
    who: str,
    at_mhz: float | None = None,
) -> Bound | None:
    """The share of the roofline bound a launch of ``ops`` operations and ``nbytes`` minimum
    bytes reaches in ``seconds`` under ``ceilings`` (None: no roofs for it); ``at_mhz``: the SM
    clock its samples ran at (see :attr:`Bound.clock_timed`).

    Raises:
        ShareAboveRoofError: the launch beats a roof (``ceilings`` were not raised to it).
    """
    memory = ceilings.best("dram")
    compute = ceilings.best(precision)
    if ops > 0 and nbytes > 0 and compute is not None and memory is not None:
        point = RooflinePoint(precision, "dram", ops / nbytes, ops / seconds, compute, memory)
        bound = Bound(point.fraction, point.bound, point.attainable, (compute.label, memory.label))
        return _clocked(bound, compute, at_mhz) if bound.limit == "compute" else bound
    if nbytes > 0 and memory is not None:
        fraction = share(nbytes / seconds, memory.value, f"{who} bandwidth")
        return Bound(fraction, "memory", memory.value, (memory.label,))
    return None


def _clocked(bound: Bound, compute: Ceiling, at_mhz: float | None) -> Bound:
    if compute.clock_hz is None:
        return bound
    mhz = compute.clock_hz / 1e6
    timed = at_mhz is not None and abs(mhz - at_mhz) < 0.5
    return Bound(bound.fraction, bound.limit, bound.attainable, bound.ceilings, mhz, timed)


def clocked_bound(
    ops: float,
    nbytes: float,
    seconds: float,
    precision: str,
    spec: DeviceSpec | None,
    clocks: Iterable[float | None],
    who: str,
    given: Ceilings | None = None,
    reached: Iterable[Reached] = (),
) -> tuple[Bound | None, tuple[str, ...]]:
    """The share of the roofline bound of one timed launch at the clock its samples ran at:
    :func:`timed_roofs`, raised to this launch and to the others ``reached`` (a roof is never
    below a measurement), then :func:`timed_bound`; and a note per roof raised. What ``tune``
    (each config) and ``compare`` (each contender) say."""
    roofs, at = timed_roofs(spec, clocks, given)
    mine = timed_reached(ops, nbytes, seconds, precision, who)
    roofs, notes = raise_to_reached(roofs, [*reached, *mine])
    return timed_bound(ops, nbytes, seconds, precision, roofs, who, at), notes
