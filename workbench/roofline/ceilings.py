"""Roofline ceilings: peak compute rates and bandwidths, each labelled with where it came from.

Three sources, in order of trust for *this* GPU:

1. ``measured``: a JSON file written by ``scripts/ceilings.py`` on the GPU (device-to-device
   copy bandwidth; int8, fp8 and fp16 matrix-multiply throughput through every library it
   times, the fastest being the ceiling), or a kernel measured faster than every roof of its
   unit (:func:`raise_to_reached`: a roof is never below a measurement);
2. ``ncu``: Nsight Compute's ``peak_sustained`` metrics times the clock during the profile
   (``--clock-control none``: the clock the kernel really ran at). Tensor-core roofs are the
   dense rates: from compute capability 8.0 on, ``sm__ops_path_tensor_src_<type>`` peaks at the
   2:4-sparse rate, twice the dense one (:func:`tensor_ceilings`);
3. ``ncu report``: derived from what older reports hold instead of byte peaks: sectors per cycle
   per unit (``lts__t_sectors.avg.peak_sustained``) x units x 32 bytes x the unit's clock;
4. ``datasheet``: the device preset's NVIDIA datasheet numbers (:mod:`workbench.devices`).

Rates are per second: FLOP/s or OP/s for compute, bytes/s for memory; an ``ncu`` roof says the
clock it is at (:attr:`Ceiling.clock_hz`). A share of a roof above 100 % is a bug (a roof below
what was measured under it): :func:`share` refuses it.
"""

from __future__ import annotations

import enum
import json
import math
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
#: Ceilings counted in integer operations (``tensor_int8`` and its sparse roof); others FLOP/s.
INTEGER_CEILINGS = ("tensor_int8",)
#: Suffix of a 2:4-sparse tensor roof's name (``tensor_int8_sparse``), drawn only for kernels
#: that ran sparse MMA.
SPARSE = "_sparse"
#: Bytes per L1/L2 sector.
SECTOR_BYTES = 32


@dataclass(frozen=True)
class Ceiling:
    """One roof: ``name`` is a memory level (``dram``) or a precision (``tensor_int8``, or
    ``tensor_int8_sparse`` for the 2:4-sparse path); ``device`` is the GPU it was measured on or
    published for (None: the profiled GPU); ``clock_hz`` the clock its rate per second is at,
    where known (an Nsight Compute peak: the profile's); ``brief`` a short form of ``detail``
    for chart legends."""

    name: str
    kind: CeilingKind
    value: float
    source: CeilingSource
    detail: str
    device: str | None = None
    clock_hz: float | None = None
    brief: str | None = None

    @property
    def unit(self) -> str:
        if self.kind is CeilingKind.MEMORY:
            return "B/s"
        return "OP/s" if self.name.removesuffix(SPARSE) in INTEGER_CEILINGS else "FLOP/s"

    @property
    def label(self) -> str:
        """``dram 4.80 TB/s (datasheet: H200)``."""
        return f"{self.name} {si(self.value, self.unit)} ({self.source.value}: {self.detail})"

    @property
    def short(self) -> str:
        """``tensor_int8 1.83 POP/s (ncu)``."""
        return f"{self.name} {si(self.value, self.unit)} ({self.source.value})"

    @property
    def legend(self) -> str:
        """The label with the brief detail: ``tensor_int8 1.83 POP/s (ncu: dense int8, ncu
        peak / 2, at 1.69 GHz)``."""
        text = self.brief or self.detail
        return f"{self.name} {si(self.value, self.unit)} ({self.source.value}: {text})"

    def rate_text(self, value: float | None = None) -> str:
        """``value`` (default: the roof's) in this roof's unit (:func:`rate_text`)."""
        return rate_text(self.name, self.kind, self.value if value is None else value)


def rate_text(name: str, kind: CeilingKind, value: float) -> str:
    """A rate per second as the compare table writes it: ``1,516 TOPS``, ``748 TFLOP/s``,
    ``4,270 GB/s``; three significant digits below 100 (``0.963 TFLOP/s``: a memory-bound
    kernel's compute rate, not ``1``)."""
    if kind is CeilingKind.MEMORY:
        return f"{_digits(value / 1e9)} GB/s"
    integer = name.removesuffix(SPARSE) in INTEGER_CEILINGS
    return f"{_digits(value / 1e12)} {'TOPS' if integer else 'TFLOP/s'}"


def _digits(x: float) -> str:
    """``1,516``; below 100, three significant digits (``45.2``, ``0.963``), never an
    exponent."""
    if not math.isfinite(x) or x == 0:
        return f"{x:,.0f}"
    decimals = max(0, 2 - math.floor(math.log10(abs(x))))
    carried = round(x, decimals)  # (9.996 rounds to 10.0: one decimal fewer)
    if carried != 0:
        decimals = max(0, 2 - math.floor(math.log10(abs(carried))))
    return f"{x:,.{decimals}f}"


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


def datasheet_ceilings(spec: DeviceSpec, at_mhz: float | None = None) -> tuple[Ceiling, ...]:
    """The preset's datasheet peaks (zeros, i.e. unknown or absent, are left out).

    Compute peaks are quoted at an SM clock (``boost_clock_mhz`` for FP32, ``tensor_clock_mhz``
    for tensor cores); ``at_mhz``, the clock a timing ran at, scales them to it, so that a
    share of the roof is per cycle. DRAM does not run on the SM clock and is never scaled.
    """
    pairs = (
        ("dram", CeilingKind.MEMORY, spec.dram_bandwidth_gbs * 1e9, 0.0),
        ("fp32", CeilingKind.COMPUTE, spec.peak_fp32_tflops * 1e12, spec.boost_clock_mhz),
        ("tensor_fp16", CeilingKind.COMPUTE, spec.peak_fp16_tflops * 1e12, spec.tensor_clock_mhz),
        ("tensor_fp8", CeilingKind.COMPUTE, spec.peak_fp8_tflops * 1e12, spec.tensor_clock_mhz),
        ("tensor_int8", CeilingKind.COMPUTE, spec.peak_int8_tops * 1e12, spec.tensor_clock_mhz),
    )
    return tuple(
        _datasheet_roof(spec, name, kind, value, quoted, at_mhz)
        for name, kind, value, quoted in pairs
        if value > 0
    )


def _datasheet_roof(
    spec: DeviceSpec,
    name: str,
    kind: CeilingKind,
    value: float,
    quoted_mhz: float,
    at_mhz: float | None,
) -> Ceiling:
    """One datasheet peak, at the clock it is quoted at, or scaled to ``at_mhz``."""
    detail = f"{spec.source}, {spec.name}"
    if not quoted_mhz:  # DRAM, or a clock the preset does not know
        return Ceiling(name, kind, value, CeilingSource.DATASHEET, detail, spec.name)
    if not at_mhz or at_mhz == quoted_mhz:
        detail += f", at {quoted_mhz:,.0f} MHz"
        return Ceiling(
            name, kind, value, CeilingSource.DATASHEET, detail, spec.name, quoted_mhz * 1e6
        )
    unit = "OP/s" if name in INTEGER_CEILINGS else "FLOP/s"
    scaled = (
        f"{detail}: {si(value, unit)} at {quoted_mhz:,.0f} MHz x {at_mhz:,.0f} / "
        f"{quoted_mhz:,.0f} (the timed clock)"
    )
    brief = f"{detail}, scaled to {at_mhz:,.0f} MHz"
    value *= at_mhz / quoted_mhz
    return Ceiling(
        name, kind, value, CeilingSource.DATASHEET, scaled, spec.name, at_mhz * 1e6, brief
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
    ("dram", "dram__bytes.sum.peak_sustained", "dram", 1.0),
    ("l2", "lts__t_bytes.sum.peak_sustained", "lts", 1.0),
    ("l1", "l1tex__t_bytes.sum.peak_sustained", "l1tex", 1.0),
)

#: (ceiling, path): tensor roofs from ``sm__ops_path_tensor_src_<path>.sum.peak_sustained``
#: (FP16 is one path on Hopper, ``fp16_dst_fp32`` on Ampere and Ada, ``fp16_dst_fp16`` on
#: Turing: the first found is taken).
TENSOR_PEAK_PATHS = (
    ("tensor_int8", "int8"),
    ("tensor_fp8", "fp8"),
    ("tensor_fp16", "fp16"),
    ("tensor_fp16", "fp16_dst_fp32"),
    ("tensor_fp16", "fp16_dst_fp16"),
    ("tensor_bf16", "bf16_dst_fp32"),
    ("tensor_tf32", "tf32_dst_fp32"),
)
#: From compute capability 8.0 on (Ampere, Ada, Hopper, Blackwell) tensor cores run 2:4-sparse
#: MMA at twice the dense rate, and the path's ``peak_sustained`` is that sparse rate. NVIDIA's
#: metric model (libnvperf_host) says so per chip: per SM and cycle, int8 16,384 on GH100
#: against 8,192 for wgmma with sparsity off, 8,192 on GA100 against 4,096, 4,096 on AD102
#: against 2,048; the datasheets' dense peaks (H200 1,979 TOPS at 1.83 GHz x 132 SMs = 8,192)
#: are the halves. Turing (7.5) has no sparse path: its peak is dense.
SPARSE_TENSOR_FROM_CC = 80
SPARSE_SPEEDUP = 2.0


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


def ncu_ceilings(metrics: Mapping[str, float | None], cc: int | None = None) -> tuple[Ceiling, ...]:
    """Peaks from Nsight Compute metrics (``peak_sustained`` per cycle x cycles per second):
    scalar and memory peaks, dense and 2:4-sparse tensor peaks (:func:`tensor_ceilings`; ``cc``,
    the compute capability, default the report's), then, for memory levels still without one,
    peaks derived from sector counters (:func:`sector_ceilings`).

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
        brief = f"ncu peak at {unit} clock {hz / 1e9:.3g} GHz"
        value = peak * hz * factor
        out[name] = Ceiling(name, kind, value, CeilingSource.NCU, detail, None, hz, brief)
    for ceiling in [*tensor_ceilings(metrics, cc), *sector_ceilings(metrics)]:
        out.setdefault(ceiling.name, ceiling)
    return tuple(out.values())


def report_cc(metrics: Mapping[str, float | None]) -> int | None:
    """The compute capability a report's device attributes give (90), or None."""
    major = _positive(metrics, "device__attribute_compute_capability_major")
    minor = metrics.get("device__attribute_compute_capability_minor") or 0
    return None if major is None else int(major) * 10 + int(minor)


def tensor_ceilings(metrics: Mapping[str, float | None], cc: int | None = None) -> list[Ceiling]:
    """Dense tensor-core roofs per precision (``tensor_int8``) and, where the chip has a
    2:4-sparse path, the sparse roofs (``tensor_int8_sparse``), at the profile's SM clock.

    The dense roof is the path's ``_sparsity_off`` peak where the report holds it, else the
    path's peak halved from compute capability 8.0 on (:data:`SPARSE_TENSOR_FROM_CC`), each
    labelled so. Without a compute capability the peak is kept and said to be of unknown kind.
    """
    cc = cc if cc is not None else report_cc(metrics)
    clock = unit_clock(metrics, "sm")
    if clock is None:
        return []
    hz, how = clock
    at = f"sm clock {hz / 1e9:.3g} GHz" + (
        "" if how == "sm__cycles_elapsed.avg.per_second" else f" ({how})"
    )
    out: dict[str, Ceiling] = {}
    for name, path in TENSOR_PEAK_PATHS:
        metric = f"sm__ops_path_tensor_src_{path}.sum.peak_sustained"
        peak = _positive(metrics, metric)
        if name in out or peak is None:
            continue
        what = name.removeprefix("tensor_")
        dense, how_dense, brief, sparse = _dense_tensor_peak(metrics, path, peak, cc, what)
        out[name] = Ceiling(
            name,
            CeilingKind.COMPUTE,
            dense * hz,
            CeilingSource.NCU,
            f"{how_dense} x {at}",
            None,
            hz,
            f"{brief}, at {hz / 1e9:.3g} GHz",
        )
        if sparse:
            out[name + SPARSE] = Ceiling(
                name + SPARSE,
                CeilingKind.COMPUTE,
                peak * hz,
                CeilingSource.NCU,
                f"2:4-sparse {what}: {metric} {peak:,.0f}/cycle x {at}",
                None,
                hz,
                f"2:4-sparse {what}, ncu peak, at {hz / 1e9:.3g} GHz",
            )
    return list(out.values())


def _dense_tensor_peak(
    metrics: Mapping[str, float | None], path: str, peak: float, cc: int | None, what: str
) -> tuple[float, str, str, bool]:
    """(dense peak per cycle, how it was read, a brief of that, whether a sparse path exists)
    of the tensor path of ``what`` (``int8``) whose ``peak_sustained`` is ``peak``."""
    metric = f"sm__ops_path_tensor_src_{path}.sum.peak_sustained"
    off_metric = f"sm__ops_path_tensor_src_{path}_sparsity_off.sum.peak_sustained"
    off = _positive(metrics, off_metric)
    if off is not None:
        how = f"dense {what}: {off_metric} {off:,.0f}/cycle"
        return off, how, f"dense {what}, ncu sparsity-off peak", True
    if cc is not None and cc >= SPARSE_TENSOR_FROM_CC:
        how = (
            f"dense {what}: {metric} {peak:,.0f}/cycle / {SPARSE_SPEEDUP:g} (from sm_80 on, "
            "ncu's tensor peak is the 2:4-sparse rate)"
        )
        return peak / SPARSE_SPEEDUP, how, f"dense {what}, ncu peak / {SPARSE_SPEEDUP:g}", True
    kind = "dense" if cc is not None else "dense or 2:4-sparse unknown (no compute capability)"
    return peak, f"{kind} {what}: {metric} {peak:,.0f}/cycle", f"{kind} {what}, ncu peak", False


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
