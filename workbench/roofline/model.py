"""Achieved work and bandwidth of one kernel, arithmetic intensity, and where it sits under
the roofs.

From Nsight Compute metrics (formulas of Nsight Compute's roofline sections for sm_80/sm_90):

- FP32 operations/s = (fadd + fmul + 2 x ffma) thread instructions per elapsed cycle
  (``smsp__sass_thread_inst_executed_op_*_pred_on.sum.per_cycle_elapsed``) x
  ``smsp__cycles_elapsed.avg.per_second``; FP64 (dadd, dmul, dfma) and FP16 (hadd, hmul, hfma)
  alike;
- tensor-core operations/s = ``sm__ops_path_tensor_src_<type>.sum.per_cycle_elapsed`` x
  ``sm__cycles_elapsed.avg.per_second`` (on Ampere, FP16 is the sum of the ``dst_fp16`` and
  ``dst_fp32`` paths); a precision whose 2:4-sparse counters (:data:`SPARSE_COUNTERS`) are
  above zero ran sparse MMA and is placed under the sparse roof, every other under the dense;
- bytes/s per level: DRAM ``dram__bytes.sum.per_second``; L2 ``lts__t_bytes.sum.per_second``
  (reports without it: ``lts__t_sectors.sum.per_second`` x 32); L1 ``l1tex__t_bytes.sum.per_second``
  (reports without it: the LSU global and local sectors x 32 over the kernel's duration).

From event timing (no profiler): operations and minimum bytes of the space's work model over
the measured time; the bytes are what the algorithm must move, a lower bound on DRAM traffic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from workbench.roofline.ceilings import (
    SECTOR_BYTES,
    SPARSE,
    Ceiling,
    Ceilings,
    Reached,
    attainable,
    ridge_point,
    share,
)

Metrics = Mapping[str, "float | None"]

_THREAD = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
#: precision -> (add, mul, fma) opcode names of the thread-instruction counters.
_SCALAR_OPS = {
    "fp32": ("fadd", "fmul", "ffma"),
    "fp64": ("dadd", "dmul", "dfma"),
    "fp16": ("hadd", "hmul", "hfma"),
}
#: precision -> tensor paths summed for it.
_TENSOR_PATHS = {
    "tensor_int8": ("int8",),
    "tensor_fp8": ("fp8",),
    "tensor_fp16": ("fp16",),
    "tensor_fp16_ampere": ("fp16_dst_fp16", "fp16_dst_fp32"),
    "tensor_bf16": ("bf16_dst_fp32",),
    "tensor_tf32": ("tf32_dst_fp32",),
}
_SPARSE_OPS = "sm__ops_path_tensor_{}_sparsity_on.sum"
#: precision -> the counters of its 2:4-sparse MMA operations: per source type on Ampere and
#: Ada, per instruction (wgmma ``*gmma``, mma.sync ``*mma``) on Hopper; a chip has some of them.
SPARSE_COUNTERS = {
    precision: tuple(_SPARSE_OPS.format(path) for path in paths)
    for precision, paths in {
        "tensor_int8": ("src_int8", "op_igmma_src_int8", "op_imma_src_int8"),
        "tensor_fp8": ("src_fp8",),
        "tensor_fp16": (
            "src_fp16_dst_fp16",
            "src_fp16_dst_fp32",
            "op_hgmma_src_fp16",
            "op_hmma_src_fp16_dst_fp16",
            "op_hmma_src_fp16_dst_fp32",
        ),
        "tensor_bf16": (
            "src_bf16_dst_fp32",
            "op_hgmma_src_bf16_dst_fp32",
            "op_hmma_src_bf16_dst_fp32",
        ),
        "tensor_tf32": (
            "src_tf32_dst_fp32",
            "op_hgmma_src_tf32_dst_fp32",
            "op_hmma_src_tf32_dst_fp32",
        ),
    }.items()
}
_L1_SECTORS = tuple(
    f"l1tex__t_sectors_pipe_lsu_mem_{space}_op_{op}.sum"
    for space, ops in (("global", ("ld", "st", "atom", "red")), ("local", ("ld", "st")))
    for op in ops
)


@dataclass(frozen=True)
class Achieved:
    """What one kernel launch did, per second.

    Attributes:
        source: ``ncu`` or ``event timing``.
        duration_s: the launch's duration.
        ops_per_s: operations per second by precision (``fp32``, ``tensor_int8``, ``work``).
        bytes_per_s: bytes per second by memory level (``dram``, ``l2``, ``l1``).
        missing: metrics that were needed for a figure and absent (or NaN).
        notes: how figures were obtained where a fallback was used.
        sparse: precisions that ran 2:4-sparse MMA (placed under the sparse roof).
    """

    source: str
    duration_s: float | None
    ops_per_s: dict[str, float] = field(default_factory=dict)
    bytes_per_s: dict[str, float] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    sparse: frozenset[str] = frozenset()

    def roof_name(self, precision: str) -> str:
        """The compute ceiling this launch's ``precision`` is placed under: the 2:4-sparse
        roof (``tensor_int8_sparse``) if it ran sparse MMA, else the dense one."""
        return precision + SPARSE if precision in self.sparse else precision

    def total_ops(self, precision: str) -> float | None:
        rate = self.ops_per_s.get(precision)
        return None if rate is None or self.duration_s is None else rate * self.duration_s

    def total_bytes(self, level: str) -> float | None:
        rate = self.bytes_per_s.get(level)
        return None if rate is None or self.duration_s is None else rate * self.duration_s

    def intensity(self, precision: str, level: str) -> float | None:
        """Operations per byte moved at ``level`` (None without traffic at that level)."""
        ops, nbytes = self.ops_per_s.get(precision), self.bytes_per_s.get(level)
        return None if ops is None or not nbytes else ops / nbytes

    def reached(self, who: str) -> list[Reached]:
        """Every rate of this launch, as :func:`~workbench.roofline.raise_to_reached` takes
        them: operations per precision, bytes per memory level."""
        rates = [*self.ops_per_s.items(), *self.bytes_per_s.items()]
        return [Reached(name, value, who) for name, value in rates]

    @property
    def main_precision(self) -> str | None:
        """The precision with the most operations per second (the kernel's work)."""
        busy = {p: v for p, v in self.ops_per_s.items() if v > 0}
        return max(busy, key=lambda p: busy[p]) if busy else None


def achieved_from_metrics(metrics: Metrics) -> Achieved:
    """Achieved rates of one kernel from its Nsight Compute metrics."""
    missing: list[str] = []
    notes: list[str] = []
    duration_ns = metrics.get("gpu__time_duration.sum")
    duration = duration_ns * 1e-9 if duration_ns else None
    if duration is None:
        missing.append("gpu__time_duration.sum")
    ops: dict[str, float] = {}
    smsp_hz = metrics.get("smsp__cycles_elapsed.avg.per_second")
    for precision, (add, mul, fma) in _SCALAR_OPS.items():
        names = [_THREAD.format(op) for op in (add, mul, fma)]
        values = [metrics.get(n) for n in names]
        if smsp_hz is None or any(v is None for v in values):
            missing.extend(n for n, v in zip(names, values, strict=True) if v is None)
            continue
        a, m, f = (float(v) for v in values)  # type: ignore[arg-type]
        ops[precision] = (a + m + 2.0 * f) * smsp_hz
    if smsp_hz is None:
        missing.append("smsp__cycles_elapsed.avg.per_second")
    sm_hz = metrics.get("sm__cycles_elapsed.avg.per_second")
    for precision, paths in _TENSOR_PATHS.items():
        names = [f"sm__ops_path_tensor_src_{p}.sum.per_cycle_elapsed" for p in paths]
        values = [metrics.get(n) for n in names]
        if sm_hz is None or any(v is None for v in values):
            continue  # tensor paths differ per chip: absence is not an error
        key = "tensor_fp16" if precision == "tensor_fp16_ampere" else precision
        ops[key] = ops.get(key, 0.0) + sum(float(v) for v in values if v is not None) * sm_hz
    sparse = frozenset(
        p for p, names in SPARSE_COUNTERS.items() if any((metrics.get(n) or 0) > 0 for n in names)
    )
    return Achieved(
        source="ncu",
        duration_s=duration,
        ops_per_s=ops,
        bytes_per_s=_bandwidths(metrics, duration, missing, notes),
        missing=tuple(dict.fromkeys(missing)),
        notes=tuple(notes),
        sparse=sparse,
    )


def sparse_by_rate(achieved: Achieved, ceilings: Ceilings) -> Achieved:
    """``achieved`` with every precision faster than its dense roof but within its 2:4-sparse
    one marked sparse, with a note: only sparse MMA runs there (for profiles that did not
    collect the sparse counters)."""
    found, notes = set(achieved.sparse), list(achieved.notes)
    for precision, rate in achieved.ops_per_s.items():
        dense, sparse = ceilings.best(precision), ceilings.best(precision + SPARSE)
        if precision in found or dense is None or sparse is None:
            continue
        if dense.value < rate <= sparse.value:
            found.add(precision)
            notes.append(
                f"{precision}: {dense.rate_text(rate)} is above the dense roof "
                f"({dense.rate_text()}): only 2:4-sparse MMA runs there, so it is placed under "
                "the sparse roof"
            )
    return replace(achieved, sparse=frozenset(found), notes=tuple(notes))


def _bandwidths(
    metrics: Metrics, duration: float | None, missing: list[str], notes: list[str]
) -> dict[str, float]:
    out: dict[str, float] = {}
    dram = metrics.get("dram__bytes.sum.per_second")
    if dram is None and duration:
        total = metrics.get("dram__bytes.sum")
        if total is None:
            read, write = metrics.get("dram__bytes_read.sum"), metrics.get("dram__bytes_write.sum")
            total = None if read is None or write is None else read + write
        dram = None if total is None else total / duration
    if dram is None:
        missing.append("dram__bytes.sum.per_second")
    else:
        out["dram"] = float(dram)
    l2 = metrics.get("lts__t_bytes.sum.per_second")
    if l2 is None:
        sectors = metrics.get("lts__t_sectors.sum.per_second")
        if sectors is None and duration and metrics.get("lts__t_sectors.sum") is not None:
            sectors = metrics["lts__t_sectors.sum"] / duration  # type: ignore[operator]
        if sectors is not None:
            l2 = sectors * SECTOR_BYTES
            notes.append("l2: lts__t_sectors x 32 bytes (no lts__t_bytes in the report)")
    if l2 is None:
        missing.append("lts__t_bytes.sum.per_second")
    else:
        out["l2"] = float(l2)
    l1 = metrics.get("l1tex__t_bytes.sum.per_second")
    if l1 is None and duration and metrics.get("l1tex__t_bytes.sum") is not None:
        l1 = metrics["l1tex__t_bytes.sum"] / duration  # type: ignore[operator]
    if l1 is None and duration:
        l1_sectors = [metrics.get(n) for n in _L1_SECTORS]
        if any(s is not None for s in l1_sectors):
            l1 = sum(s for s in l1_sectors if s is not None) * SECTOR_BYTES / duration
            notes.append("l1: LSU global+local sectors x 32 bytes (no l1tex__t_bytes)")
    if l1 is None:
        missing.append("l1tex__t_bytes.sum.per_second")
    else:
        out["l1"] = float(l1)
    return out


def achieved_from_timing(
    ops: float, min_bytes: float, seconds: float, precision: str = "work"
) -> Achieved:
    """Achieved rates from an event-timed launch and the space's work model.

    Raises:
        ValueError: ``seconds`` is not positive.
    """
    if not seconds > 0:
        raise ValueError(f"the launch time must be positive, got {seconds!r}")
    return Achieved(
        source="event timing",
        duration_s=seconds,
        ops_per_s={precision: ops / seconds} if ops > 0 else {},
        bytes_per_s={"dram": min_bytes / seconds} if min_bytes > 0 else {},
        notes=("bytes are the work model's minimum bytes: a lower bound on DRAM traffic",),
    )


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel against one pair of roofs (a precision and a memory level)."""

    precision: str
    level: str
    intensity: float  #: operations per byte at ``level``
    achieved: float  #: operations per second
    compute: Ceiling
    memory: Ceiling

    @property
    def ridge(self) -> float:
        return ridge_point(self.compute, self.memory)

    @property
    def attainable(self) -> float:
        return attainable(self.intensity, self.compute, self.memory)

    @property
    def bound(self) -> str:
        """``memory`` left of the ridge point, ``compute`` right of it."""
        return "memory" if self.intensity < self.ridge else "compute"

    @property
    def fraction(self) -> float:
        """Achieved / attainable (1.0 = on the roof).

        Raises:
            ShareAboveRoofError: above 1, a roof below the launch (not raised to it).
        """
        return share(self.achieved, self.attainable, f"{self.precision} at {self.level}")


def roofline_points(achieved: Achieved, ceilings: Ceilings) -> list[RooflinePoint]:
    """Every (precision, level) pair that has achieved work, traffic and both roofs (raise the
    roofs to the launches drawn first: :func:`~workbench.roofline.raise_to_reached`). A tensor
    precision is placed under its dense roof, or its 2:4-sparse one if it ran sparse MMA."""
    out = []
    for precision, rate in achieved.ops_per_s.items():
        compute = ceilings.best(achieved.roof_name(precision)) or ceilings.best(precision)
        if compute is None or rate <= 0:
            continue
        for level in achieved.bytes_per_s:
            memory = ceilings.best(level)
            ai = achieved.intensity(precision, level)
            if memory is not None and ai is not None:
                out.append(RooflinePoint(precision, level, ai, rate, compute, memory))
    return out


def bandwidth_fractions(achieved: Achieved, ceilings: Ceilings) -> dict[str, float]:
    """Achieved bandwidth / peak per memory level with a ceiling.

    Raises:
        ShareAboveRoofError: a level above its peak (the roofs were not raised to it).
    """
    out = {}
    for level, rate in achieved.bytes_per_s.items():
        roof = ceilings.best(level)
        if roof is not None:
            out[level] = share(rate, roof.value, f"{level} bandwidth")
    return out
