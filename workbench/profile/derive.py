"""Divergence, memory-access and occupancy figures from raw Nsight Compute metrics.

Every figure is computed from the metrics of one kernel (a name -> value mapping, None or
absent when not collected) and says where it came from: the metric Nsight Compute computed, or
a recomputation from raw counts when a report lacks the ratio. A figure that cannot be computed
is None, and the names it needed are listed in ``missing``; nothing is guessed.

Thresholds are NVIDIA's: a warp instruction executed by fewer than 24 of 32 threads on average
is flagged (Nsight Compute's divergence rule); a global load is coalesced when a warp's request
touches 4 sectors of 32 bytes for 4-byte elements (128 bytes per request).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.roofline.model import Metrics

#: Threads per warp.
WARP_SIZE = 32
#: Nsight Compute flags fewer active (or predicated-on) threads per warp instruction than this.
DIVERGENCE_THRESHOLD = 24.0
#: Bytes per L1/L2 sector.
SECTOR_BYTES = 32


def first(metrics: Metrics, *names: str) -> tuple[float | None, str | None]:
    """The first of ``names`` with a value, and its name; (None, None) if none has one."""
    for name in names:
        value = metrics.get(name)
        if value is not None:
            return float(value), name
    return None, None


def ratio(metrics: Metrics, numerator: str, denominator: str) -> float | None:
    """``numerator / denominator`` from raw counts; None if either is missing or the
    denominator is zero."""
    num, den = metrics.get(numerator), metrics.get(denominator)
    if num is None or den is None or den == 0:
        return None
    return float(num) / float(den)


@dataclass(frozen=True)
class Divergence:
    """How many of a warp's 32 threads do useful work.

    Attributes:
        threads_per_inst: active threads per executed warp instruction (32 = no divergence).
        pred_on_threads_per_inst: threads that were active *and* not predicated off.
        branch_uniform_pct: share of branch targets taken by all active threads of the warp;
            None when the kernel executed no branch with a target (Nsight Compute then
            reports 0, which would read as "every branch diverges").
        divergent_branch_targets: branch targets where the warp split.
        stalls: warp stall reasons, warps stalled per issued instruction, largest first.
        flagged: NVIDIA's rule fired (fewer than 24 active or predicated-on threads).
        notes: how values were obtained, and what fired.
        missing: metrics that would have been needed.
    """

    threads_per_inst: float | None
    pred_on_threads_per_inst: float | None
    branch_uniform_pct: float | None
    divergent_branch_targets: float | None
    stalls: tuple[tuple[str, float], ...] = ()
    flagged: bool = False
    notes: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def simt_efficiency(self) -> float | None:
        """Active threads per instruction / 32."""
        return None if self.threads_per_inst is None else self.threads_per_inst / WARP_SIZE


def divergence(metrics: Metrics) -> Divergence:
    """Divergence figures of one kernel."""
    notes: list[str] = []
    missing: list[str] = []
    threads, _ = first(metrics, "smsp__thread_inst_executed_per_inst_executed.ratio")
    if threads is None:
        threads = ratio(metrics, "smsp__thread_inst_executed.sum", "smsp__inst_executed.sum")
        if threads is not None:
            notes.append("threads per instruction recomputed from thread/warp instruction counts")
        else:
            missing.append("smsp__thread_inst_executed_per_inst_executed.ratio")
    pred_on, _ = first(metrics, "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio")
    if pred_on is None:
        pred_on = ratio(
            metrics, "smsp__thread_inst_executed_pred_on.sum", "smsp__inst_executed.sum"
        )
        if pred_on is None:
            missing.append("smsp__thread_inst_executed_pred_on_per_inst_executed.ratio")
    uniform, _ = first(metrics, "smsp__sass_average_branch_targets_threads_uniform.pct")
    if uniform is None:
        fraction = ratio(
            metrics,
            "smsp__sass_branch_targets_threads_uniform.sum",
            "smsp__sass_branch_targets.sum",
        )
        uniform = None if fraction is None else 100.0 * fraction
        if uniform is None:
            missing.append("smsp__sass_average_branch_targets_threads_uniform.pct")
    targets = metrics.get("smsp__sass_branch_targets.sum")
    if uniform == 0.0 and (
        targets == 0 or (targets is None and threads is not None and threads >= WARP_SIZE - 1e-6)
    ):
        uniform = None  # 0 of 0 targets: not "all divergent"
        notes.append("no branch targets recorded: branch uniformity does not apply")
    divergent, _ = first(
        metrics,
        "smsp__sass_branch_targets_threads_divergent.sum",
        "smsp__branch_targets_threads_divergent",
    )
    flagged = False
    for value, what in ((threads, "active"), (pred_on, "predicated-on")):
        if value is not None and value < DIVERGENCE_THRESHOLD:
            flagged = True
            notes.append(
                f"{value:.1f} {what} threads per warp instruction (< {DIVERGENCE_THRESHOLD:g} "
                "of 32: NVIDIA's divergence rule)"
            )
    return Divergence(
        threads_per_inst=threads,
        pred_on_threads_per_inst=pred_on,
        branch_uniform_pct=uniform,
        divergent_branch_targets=divergent,
        stalls=stall_reasons(metrics),
        flagged=flagged,
        notes=tuple(notes),
        missing=tuple(missing),
    )


def stall_reasons(metrics: Metrics) -> tuple[tuple[str, float], ...]:
    """Warp stall reasons (warps stalled per issued instruction), largest first."""
    prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    found = [
        (name[len(prefix) : -len(suffix)], float(value))
        for name, value in metrics.items()
        if name.startswith(prefix) and name.endswith(suffix) and value is not None
    ]
    return tuple(sorted(found, key=lambda item: -item[1]))


@dataclass(frozen=True)
class Access:
    """Global memory access of one direction (``ld`` or ``st``)."""

    op: str
    sectors_per_request: float | None
    bytes_per_sector: float | None  #: useful bytes of each 32-byte sector moved
    requests: float | None
    hit_rate_pct: float | None  #: L1 hit rate of this direction's global accesses

    @property
    def sector_efficiency(self) -> float | None:
        """Useful share of the sectors moved (bytes per sector / 32)."""
        return None if self.bytes_per_sector is None else self.bytes_per_sector / SECTOR_BYTES


@dataclass(frozen=True)
class MemoryAccess:
    """Access pattern and cache behaviour of one kernel."""

    loads: Access
    stores: Access
    l1_hit_rate_pct: float | None
    l2_hit_rate_pct: float | None
    shared_bank_conflicts: dict[str, float | None] = field(default_factory=dict)
    shared_conflicts_per_inst: dict[str, float | None] = field(default_factory=dict)
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    notes: tuple[str, ...] = ()


def _access(metrics: Metrics, op: str, notes: list[str]) -> Access:
    sectors = f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"
    requests = f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"
    per_request, _ = first(
        metrics, f"l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_{op}.ratio"
    )
    if per_request is None:
        per_request = ratio(metrics, sectors, requests)
        if per_request is not None:
            notes.append(f"{op}: sectors per request recomputed as sectors / requests")
    per_sector, _ = first(
        metrics, f"smsp__sass_average_data_bytes_per_sector_mem_global_op_{op}.ratio"
    )
    hit, _ = first(metrics, f"l1tex__t_sector_pipe_lsu_mem_global_op_{op}_hit_rate.pct")
    return Access(op, per_request, per_sector, metrics.get(requests), hit)


def memory_access(metrics: Metrics) -> MemoryAccess:
    """Memory-access figures of one kernel."""
    notes: list[str] = []
    conflicts: dict[str, float | None] = {}
    per_inst: dict[str, float | None] = {}
    for op in ("ld", "st"):
        name = f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum"
        conflicts[op] = metrics.get(name)
        per_inst[op] = ratio(metrics, name, f"smsp__sass_inst_executed_op_shared_{op}.sum")
    return MemoryAccess(
        loads=_access(metrics, "ld", notes),
        stores=_access(metrics, "st", notes),
        l1_hit_rate_pct=metrics.get("l1tex__t_sector_hit_rate.pct"),
        l2_hit_rate_pct=metrics.get("lts__t_sector_hit_rate.pct"),
        shared_bank_conflicts=conflicts,
        shared_conflicts_per_inst=per_inst,
        dram_read_bytes=metrics.get("dram__bytes_read.sum"),
        dram_write_bytes=metrics.get("dram__bytes_write.sum"),
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class ProfiledOccupancy:
    """Achieved and theoretical occupancy and the launch resources behind them."""

    achieved_pct: float | None
    theoretical_pct: float | None
    registers_per_thread: float | None
    block_size: float | None
    grid_size: float | None
    shared_static: float | None
    shared_dynamic: float | None
    waves: float | None
    limits: dict[str, float | None] = field(default_factory=dict)  #: blocks per SM, by limiter

    @property
    def limiter(self) -> str | None:
        """The resource allowing the fewest blocks per SM (ties: the first listed)."""
        known = {k: v for k, v in self.limits.items() if v is not None}
        return min(known, key=lambda k: known[k]) if known else None


def occupancy(metrics: Metrics) -> ProfiledOccupancy:
    """Occupancy figures of one kernel."""
    return ProfiledOccupancy(
        achieved_pct=metrics.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
        theoretical_pct=metrics.get("sm__maximum_warps_per_active_cycle_pct"),
        registers_per_thread=metrics.get("launch__registers_per_thread"),
        block_size=metrics.get("launch__block_size"),
        grid_size=metrics.get("launch__grid_size"),
        shared_static=metrics.get("launch__shared_mem_per_block_static"),
        shared_dynamic=metrics.get("launch__shared_mem_per_block_dynamic"),
        waves=metrics.get("launch__waves_per_multiprocessor"),
        limits={
            k: metrics.get(f"launch__occupancy_limit_{k}")
            for k in ("registers", "shared_mem", "warps", "blocks")
        },
    )
