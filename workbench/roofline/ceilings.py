"""Roofline ceilings: peak compute rates and bandwidths, each labelled with where it came from.

Three sources, in order of trust for *this* GPU:

1. ``measured``: a JSON file written by ``scripts/ceilings.py`` on the GPU (device-to-device
   copy bandwidth; int8, fp8 and fp16 matrix-multiply throughput through every library it
   times, the fastest being the ceiling), or a kernel measured faster than every roof of its
   unit (:func:`raise_to_reached`: a roof is never below a measurement);
2. ``ncu``: Nsight Compute's ``peak_sustained`` metrics times the clock during the profile
   (``--clock-control none``: the clock the kernel really ran at);
3. ``ncu report``: derived from what older reports hold instead of byte peaks: sectors per cycle
   per unit (``lts__t_sectors.avg.peak_sustained``) x units x 32 bytes x the unit's clock;
4. ``datasheet``: the device preset's NVIDIA datasheet numbers (:mod:`workbench.devices`).

Rates are per second: FLOP/s or OP/s for compute, bytes/s for memory. A share of a roof above
100 % is a bug (a roof below what was measured under it): :func:`share` refuses it.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.devices import DeviceSpec
from workbench.errors import InternalError, WorkbenchError
from workbench.units import si


class CeilingFileError(WorkbenchError):
    """A measured-ceilings file is missing, not JSON, or lacks a field."""


class ShareAboveRoofError(InternalError):
    """A share of a roof came out above 100 %: the roof is below a rate measured under it,
    which :func:`raise_to_reached` exists to prevent."""


class CeilingKind(enum.Enum):
    COMPUTE = "compute"
    MEMORY = "memory"


class CeilingSource(enum.Enum):
    """Where a ceiling comes from, most trusted first."""

    MEASURED = "measured"
    NCU = "ncu"
    NCU_DERIVED = "ncu report"
    DATASHEET = "datasheet"


#: Memory levels a ceiling can be named after.
MEMORY_LEVELS = ("dram", "l2", "l1")
UNITS = {"tensor_int8": "OP/s"}
#: Bytes per L1/L2 sector.
SECTOR_BYTES = 32


@dataclass(frozen=True)
class Ceiling:
    """One roof: ``name`` is a memory level (``dram``) or a precision (``tensor_int8``);
    ``device`` is the GPU it was measured on or published for (None: the profiled GPU)."""

    name: str
    kind: CeilingKind
    value: float
    source: CeilingSource
    detail: str
    device: str | None = None

    @property
    def unit(self) -> str:
        return "B/s" if self.kind is CeilingKind.MEMORY else UNITS.get(self.name, "FLOP/s")

    @property
    def label(self) -> str:
        """``dram 4.80 TB/s (datasheet: H200)``."""
        return f"{self.name} {si(self.value, self.unit)} ({self.source.value}: {self.detail})"

    def rate_text(self, value: float | None = None) -> str:
        """``value`` (default: the roof's) in this roof's unit (:func:`rate_text`)."""
        return rate_text(self.name, self.kind, self.value if value is None else value)


def rate_text(name: str, kind: CeilingKind, value: float) -> str:
    """A rate per second as the compare table writes it: ``1,516 TOPS``, ``748 TFLOP/s``,
    ``4,270 GB/s``."""
    if kind is CeilingKind.MEMORY:
        return f"{value / 1e9:,.0f} GB/s"
    return f"{value / 1e12:,.0f} {'TOPS' if UNITS.get(name) == 'OP/s' else 'TFLOP/s'}"


#: A share this little above 1 is the rounding of a roof raised to exactly the rate reached.
SHARE_ROUNDING = 1e-9


def checked_share(fraction: float, what: str) -> float:
    """``fraction`` of a roof, refused above 100 % (beyond rounding, which is cut to 1).

    Raises:
        ShareAboveRoofError: ``fraction`` is above 1: a roof below a measurement.
    """
    if fraction > 1 + SHARE_ROUNDING:
        raise ShareAboveRoofError(
            f"internal error: {what} came out above 100 % of its roof ({fraction:.4g}); a roof "
            "must be raised to the fastest rate measured under it before shares are taken"
        )
    return min(fraction, 1.0)


def share(achieved: float, roof: float, what: str) -> float:
    """``achieved / roof``, refused above 100 % (:func:`checked_share`)."""
    return checked_share(achieved / roof, what)


def datasheet_ceilings(spec: DeviceSpec) -> tuple[Ceiling, ...]:
    """The preset's datasheet peaks (zeros, i.e. unknown or absent, are left out)."""
    detail = f"{spec.source}, {spec.name}"
    pairs = (
        ("dram", CeilingKind.MEMORY, spec.dram_bandwidth_gbs * 1e9),
        ("fp32", CeilingKind.COMPUTE, spec.peak_fp32_tflops * 1e12),
        ("tensor_fp16", CeilingKind.COMPUTE, spec.peak_fp16_tflops * 1e12),
        ("tensor_fp8", CeilingKind.COMPUTE, spec.peak_fp8_tflops * 1e12),
        ("tensor_int8", CeilingKind.COMPUTE, spec.peak_int8_tops * 1e12),
    )
    return tuple(
        Ceiling(name, kind, value, CeilingSource.DATASHEET, detail, spec.name)
        for name, kind, value in pairs
        if value > 0
    )


#: (ceiling, section, key, scale, what) of ``scripts/ceilings.py``'s JSON.
MEASURED_FIELDS = (
    ("dram", CeilingKind.MEMORY, "copy", "gbs_read_plus_write", 1e9, "copy"),
    ("tensor_int8", CeilingKind.COMPUTE, "int8_matmul", "tops", 1e12, "int8 matmul"),
    ("tensor_fp8", CeilingKind.COMPUTE, "fp8_matmul", "tflops", 1e12, "fp8 matmul"),
    ("tensor_fp16", CeilingKind.COMPUTE, "fp16_matmul", "tflops", 1e12, "fp16 matmul"),
)


def measured_ceilings(path: Path | str) -> tuple[Ceiling, ...]:
    """Ceilings from a ``scripts/ceilings.py`` JSON file: per unit, the fastest of the
    libraries the section times (its ``libraries`` list; a file without one: the section's
    own figure).

    Raises:
        CeilingFileError: the file is unreadable, not JSON, or misses a field.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CeilingFileError(f"{path}: cannot read measured ceilings: {exc}") from exc
    if not isinstance(doc, dict):
        raise CeilingFileError(f"{path}: expected a JSON object")
    where = f"{path.name}, {doc.get('gpu', 'unknown GPU')}, {doc.get('date', 'undated')}"
    device = doc.get("gpu") if isinstance(doc.get("gpu"), str) else None
    out = []
    for name, kind, section, key, scale, what in MEASURED_FIELDS:
        block = doc.get(section)
        if block is None:
            continue
        runs = _library_runs(path, block, section, key)
        best_value, best_via = max(runs, key=lambda r: r[0])
        detail = f"{what}{' via ' + best_via if best_via else ''}"
        if len(runs) > 1:  # say what it was the fastest of
            each = ", ".join(f"{via} {rate_text(name, kind, v * scale)}" for v, via in runs)
            detail += f", the fastest of {each}"
        value = best_value * scale
        out.append(Ceiling(name, kind, value, CeilingSource.MEASURED, f"{detail}; {where}", device))
    if not out:
        sections = ", ".join(f[2] for f in MEASURED_FIELDS)
        raise CeilingFileError(f"{path}: no ceiling in it ({sections})")
    return tuple(out)


def _library_runs(path: Path, block: object, section: str, key: str) -> list[tuple[float, str]]:
    """(figure, via) of every library in the section's ``libraries`` list; a file written
    before there was one: of the section itself."""
    if not isinstance(block, dict):
        raise CeilingFileError(f"{path} [{section}]: expected an object")
    libraries = block.get("libraries", [])
    if not isinstance(libraries, list):
        raise CeilingFileError(f"{path} [{section}.libraries]: expected a list")
    items = [(f"{section}.libraries[{i}]", x) for i, x in enumerate(libraries)]
    runs = []
    for where, item in items or [(section, block)]:
        value = item.get(key) if isinstance(item, dict) else None
        if not isinstance(value, (int, float)) or not value > 0:
            raise CeilingFileError(f"{path} [{where}.{key}]: expected a positive number")
        runs.append((float(value), str(item.get("via", ""))))
    return runs


#: (ceiling, peak metric, clock metric, factor): peak = metric x clock x factor. The factor 2
#: counts a fused multiply-add as two operations, as Nsight Compute's roofline does.
_NCU_PEAKS = (
    ("fp32", "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained", "sm", 2.0),
    ("fp64", "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained", "sm", 2.0),
    ("fp16", "sm__sass_thread_inst_executed_op_hfma_pred_on.sum.peak_sustained", "sm", 2.0),
    ("tensor_int8", "sm__ops_path_tensor_src_int8.sum.peak_sustained", "sm", 1.0),
    ("tensor_fp8", "sm__ops_path_tensor_src_fp8.sum.peak_sustained", "sm", 1.0),
    ("tensor_fp16", "sm__ops_path_tensor_src_fp16.sum.peak_sustained", "sm", 1.0),
    ("tensor_fp16", "sm__ops_path_tensor_src_fp16_dst_fp32.sum.peak_sustained", "sm", 1.0),
    ("dram", "dram__bytes.sum.peak_sustained", "dram", 1.0),
    ("l2", "lts__t_bytes.sum.peak_sustained", "lts", 1.0),
    ("l1", "l1tex__t_bytes.sum.peak_sustained", "l1tex", 1.0),
)


#: (level, sector counter, unit, unit-count attribute, what a unit is): reports without byte
#: peaks still hold the sector counter's peak per unit (``lts__t_sectors.avg.peak_sustained``,
#: sectors per cycle per L2 slice). One L1TEX unit per SM, as ncu counts ``l1tex__`` units.
_SECTOR_PEAKS = (
    ("l2", "lts__t_sectors", "lts", "device__attribute_l2s_count", "L2 slices"),
    ("l1", "l1tex__t_sectors", "l1tex", "device__attribute_multiprocessor_count", "SMs"),
)


def _positive(metrics: Mapping[str, float | None], name: str) -> float | None:
    value = metrics.get(name)
    return float(value) if value is not None and value > 0 else None  # NaN > 0 is False


def unit_clock(
    metrics: Mapping[str, float | None],
    unit: str,
    units: float | None = None,
    counter: str | None = None,
) -> tuple[float, str] | None:
    """The clock of ``unit`` (``sm``, ``lts``, ...) during the profile in Hz, and how it was
    read; None if the report holds nothing to read it from.

    Older reports lack ``lts__cycles_elapsed.avg.per_second``, so the clock is also read as
    cycles over ``gpu__time_duration.sum`` (the denominator of ncu's ``.per_second``), or, with
    no cycle count at all, from ``counter``'s rate over its per-cycle rate per unit.
    """
    direct = f"{unit}__cycles_elapsed.avg.per_second"
    if (hz := _positive(metrics, direct)) is not None:
        return hz, direct
    ns = _positive(metrics, "gpu__time_duration.sum")
    cycles = _positive(metrics, f"{unit}__cycles_elapsed.avg")
    if ns is not None and cycles is not None:
        return cycles / (ns * 1e-9), f"{unit}__cycles_elapsed.avg / gpu__time_duration.sum"
    total = _positive(metrics, f"{unit}__cycles_elapsed.sum")
    if ns is not None and total is not None and units:
        how = f"{unit}__cycles_elapsed.sum / {units:g} / gpu__time_duration.sum"
        return total / units / (ns * 1e-9), how
    if counter is not None and units:
        rate = _positive(metrics, f"{counter}.sum.per_second")
        per_cycle = _positive(metrics, f"{counter}.avg.per_cycle_elapsed")
        if rate is not None and per_cycle is not None:
            how = f"{counter}.sum.per_second / {counter}.avg.per_cycle_elapsed / {units:g}"
            return rate / per_cycle / units, how
    return None


def ncu_ceilings(metrics: Mapping[str, float | None]) -> tuple[Ceiling, ...]:
    """Peaks from Nsight Compute metrics (``peak_sustained`` per cycle x cycles per second),
    then, for memory levels still without one, peaks derived from sector counters
    (:func:`sector_ceilings`).

    A peak of zero (left by an incomplete profile) or a missing clock gives no ceiling.
    """
    out: dict[str, Ceiling] = {}
    for name, peak_name, unit, factor in _NCU_PEAKS:
        peak = _positive(metrics, peak_name)
        clock = unit_clock(metrics, unit)
        if name in out or peak is None or clock is None:
            continue
        hz, how = clock
        kind = CeilingKind.MEMORY if name in MEMORY_LEVELS else CeilingKind.COMPUTE
        via = "" if how == f"{unit}__cycles_elapsed.avg.per_second" else f" ({how})"
        detail = f"{peak_name} x {unit} clock {hz / 1e9:.3g} GHz{via}"
        out[name] = Ceiling(name, kind, peak * hz * factor, CeilingSource.NCU, detail)
    for ceiling in sector_ceilings(metrics):
        out.setdefault(ceiling.name, ceiling)
    return tuple(out.values())


def sector_ceilings(metrics: Mapping[str, float | None]) -> tuple[Ceiling, ...]:
    """L2/L1 bandwidth peaks derived from sector counters: sectors per cycle per unit x units
    x 32 bytes x the unit's clock (``ncu report`` source; the detail names every factor)."""
    out = []
    for level, counter, unit, count_name, what in _SECTOR_PEAKS:
        total = _positive(metrics, f"{counter}.sum.peak_sustained")
        per_unit = _positive(metrics, f"{counter}.avg.peak_sustained")
        units = _positive(metrics, count_name)
        clock = unit_clock(metrics, unit, units, counter)
        if clock is None or (total is None and (per_unit is None or units is None)):
            continue
        hz, how = clock
        if total is not None:
            sectors, factors = total, f"{counter}.sum.peak_sustained {total:g} sectors/cycle"
        else:
            sectors = per_unit * units  # type: ignore[operator]
            factors = f"{counter}.avg.peak_sustained {per_unit:g} sectors/cycle x {units:g} {what}"
        clock_text = f"{unit} clock {hz / 1e9:.3g} GHz ({how})"
        detail = f"derived from {factors} x {SECTOR_BYTES} B x {clock_text}"
        value = sectors * SECTOR_BYTES * hz
        out.append(Ceiling(level, CeilingKind.MEMORY, value, CeilingSource.NCU_DERIVED, detail))
    return tuple(out)


class Ceilings:
    """A set of ceilings from any sources; :meth:`best` picks the most trusted per name."""

    def __init__(self, ceilings: Iterable[Ceiling] = ()) -> None:
        self._all = list(ceilings)

    def __iter__(self) -> Iterator[Ceiling]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def add(self, ceilings: Iterable[Ceiling]) -> Ceilings:
        """A new set with ``ceilings`` added."""
        return Ceilings([*self._all, *ceilings])

    def best(self, name: str) -> Ceiling | None:
        """The ceiling named ``name`` from the most trusted source (the highest of that
        source's: a roof is the best measured for its unit), or None."""
        order = list(CeilingSource)
        found = [c for c in self._all if c.name == name]
        return min(found, key=lambda c: (order.index(c.source), -c.value)) if found else None

    def names(self) -> list[str]:
        return list(dict.fromkeys(c.name for c in self._all))


@dataclass(frozen=True)
class Reached:
    """A rate a kernel was measured at, named as ceilings are (a precision or a memory
    level); ``who`` says which kernel, where (``cuBLAS ... at M=8192,N=8192,K=8192``)."""

    name: str
    value: float
    who: str


def raise_to_reached(
    ceilings: Ceilings, reached: Iterable[Reached]
) -> tuple[Ceilings, tuple[str, ...]]:
    """The ceilings with every roof at least the fastest rate reached under it, and a note per
    roof raised.

    A roof is the best that was measured for its unit: when a kernel beats the most trusted
    ceiling of a name (a library that the ceilings script did not time, a datasheet figure
    below the silicon), a measured ceiling at its rate is added, which :meth:`Ceilings.best`
    then picks. Names without any ceiling stay without one.
    """
    fastest: dict[str, Reached] = {}
    for r in reached:
        if r.value > 0 and (r.name not in fastest or r.value > fastest[r.name].value):
            fastest[r.name] = r
    added, notes = [], []
    for name, r in fastest.items():
        roof = ceilings.best(name)
        if roof is None or r.value <= roof.value:
            continue
        detail = f"raised to the fastest measured, {r.who}"
        added.append(Ceiling(name, roof.kind, r.value, CeilingSource.MEASURED, detail, roof.device))
        notes.append(
            f"{name} ceiling raised to the fastest measured: {r.who}, {roof.rate_text(r.value)} "
            f"(above {roof.label})"
        )
    return ceilings.add(added), tuple(notes)


def ridge_point(compute: Ceiling, memory: Ceiling) -> float:
    """Arithmetic intensity (operations per byte) where the two roofs meet."""
    return compute.value / memory.value


def attainable(intensity: float, compute: Ceiling, memory: Ceiling) -> float:
    """The roofline: ``min(compute peak, intensity x bandwidth)``."""
    return min(compute.value, intensity * memory.value)
