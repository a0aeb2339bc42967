"""Theoretical occupancy from the per-architecture limits, without a GPU.

Follows the rules of the CUDA Occupancy Calculator and of ``cuda_occupancy.h``
(``cudaOccMaxActiveBlocksPerMultiprocessor``):

* warps per block = ceil(threads / 32);
* registers are allocated per warp in units of 256 (``ceil(regs * 32 / 256) * 256``), and each
  of the SM's 4 sub-partitions holds ``floor((65536 / 4) / regs_per_warp)`` warps; a block must
  also fit the 64 K per-block register file with its warps rounded up to a multiple of 4;
* shared memory per block = static + dynamic + the 1 KiB the driver reserves per block (sm_80+),
  rounded up to 128 bytes, against the largest carveout (or the one given);
* resident blocks per SM = min(block cap, warp limit, register limit, shared-memory limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.analysis.errors import AnalysisError
from workbench.arch_limits import WARP_SIZE, ArchLimits, arch_limits

#: Order in which a tie between equal limits is reported (hardware caps first).
LIMITING_FACTORS = ("threads", "blocks", "warps", "registers", "shared memory")


@dataclass(frozen=True)
class TheoreticalOccupancy:
    """Result of :func:`theoretical_occupancy`.

    ``block_limits`` gives the resident blocks each resource alone would allow (``None`` when the
    resource does not limit, e.g. no shared memory).
    """

    cc: int
    active_blocks: int
    active_warps: int
    max_warps: int
    limiting_factor: str
    warps_per_block: int
    registers_per_block: int
    shared_per_block: int
    block_limits: tuple[tuple[str, int | None], ...]

    @property
    def occupancy(self) -> float:
        """Active warps / max warps per SM, in [0, 1]."""
        return self.active_warps / self.max_warps if self.max_warps else 0.0

    def launch_blocker(self) -> str | None:
        """Why not one block fits on an SM (the launch would fail), or None."""
        if self.active_blocks:
            return None
        needs = {
            "registers": f"{self.registers_per_block} registers per block",
            "shared memory": f"{self.shared_per_block} bytes of shared memory per block",
            "threads": f"{self.warps_per_block} warps per block",
        }.get(self.limiting_factor, self.limiting_factor)
        return f"no block fits on an SM of cc {self.cc}: it needs {needs}"


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def theoretical_occupancy(
    cc: int,
    threads_per_block: int,
    registers_per_thread: int,
    shared_bytes_per_block: int,
    *,
    dynamic_shared_bytes: int = 0,
    shared_carveout_bytes: int | None = None,
    limits: ArchLimits | None = None,
) -> TheoreticalOccupancy:
    """Resident blocks and warps per SM for a launch configuration.

    Args:
        cc: compute capability (80, 89, 90...).
        threads_per_block: block size (x*y*z).
        registers_per_thread: registers per thread from ptxas/the cubin (0: not limiting).
        shared_bytes_per_block: static shared bytes (ptxas' ``bytes smem``, without the
            per-block reservation, which is added here).
        dynamic_shared_bytes: dynamic shared bytes of the launch, added to the static ones.
        shared_carveout_bytes: shared memory per SM the carveout gives (default: the maximum).
        limits: override the table entry (for a GPU the table does not list).

    Returns:
        The :class:`TheoreticalOccupancy`; an impossible configuration (block larger than 1024
        threads, more than 255 registers, more shared memory than a block may have) gives 0
        blocks and names the resource, it does not raise.

    Raises:
        ArchError: unknown compute capability and no ``limits``.
        AnalysisError: a negative or zero argument.
    """
    lim = limits or arch_limits(cc)
    _check_counts(
        threads_per_block, registers_per_thread, shared_bytes_per_block, dynamic_shared_bytes
    )
    smem_per_sm = _carveout(lim, shared_carveout_bytes)
    need = _footprint(
        lim, threads_per_block, registers_per_thread, shared_bytes_per_block + dynamic_shared_bytes
    )
    table = _block_limits(lim, need, smem_per_sm)
    blocks = min(v for v in table.values() if v is not None)
    factor = next(f for f in LIMITING_FACTORS if table[f] == blocks)
    return TheoreticalOccupancy(
        cc=lim.cc,
        active_blocks=blocks,
        active_warps=blocks * need.warps,
        max_warps=lim.max_warps_per_sm,
        limiting_factor=factor,
        warps_per_block=need.warps,
        registers_per_block=need.registers_per_warp * need.warps,
        shared_per_block=need.shared,
        block_limits=tuple(table.items()),
    )


@dataclass(frozen=True)
class _Footprint:
    """What one block takes of an SM, in the units the hardware allocates."""

    threads: int
    registers_per_thread: int
    warps: int
    registers_per_warp: int  #: rounded up to the allocation unit
    user_shared: int  #: static + dynamic bytes, as the kernel asks for them
    shared: int  #: with the driver's per-block reservation, rounded up to the allocation unit


def _footprint(
    lim: ArchLimits, threads: int, registers_per_thread: int, user_shared: int
) -> _Footprint:
    return _Footprint(
        threads=threads,
        registers_per_thread=registers_per_thread,
        warps=-(-threads // WARP_SIZE),
        registers_per_warp=_round_up(registers_per_thread * WARP_SIZE, lim.register_alloc_unit),
        user_shared=user_shared,
        shared=_round_up(user_shared + lim.reserved_shared_per_block, lim.shared_alloc_unit),
    )


def _check_counts(
    threads_per_block: int,
    registers_per_thread: int,
    shared_bytes_per_block: int,
    dynamic_shared_bytes: int,
) -> None:
    """Refuse counts no launch has.

    Raises:
        AnalysisError: a block of no threads, or a negative register or shared-memory count.
    """
    if threads_per_block <= 0:
        raise AnalysisError(f"threads_per_block must be positive, got {threads_per_block}")
    for label, value in (
        ("registers_per_thread", registers_per_thread),
        ("shared_bytes_per_block", shared_bytes_per_block),
        ("dynamic_shared_bytes", dynamic_shared_bytes),
    ):
        if value < 0:
            raise AnalysisError(f"{label} must not be negative, got {value}")


def _carveout(lim: ArchLimits, shared_carveout_bytes: int | None) -> int:
    """The shared memory per SM that resident blocks share: the carveout, else the maximum.

    Raises:
        AnalysisError: a carveout the SM has not.
    """
    smem_per_sm = lim.max_shared_per_sm if shared_carveout_bytes is None else shared_carveout_bytes
    if not 0 <= smem_per_sm <= lim.max_shared_per_sm:
        raise AnalysisError(
            f"shared_carveout_bytes {shared_carveout_bytes} outside 0..{lim.max_shared_per_sm}"
        )
    return smem_per_sm


def _block_limits(lim: ArchLimits, need: _Footprint, smem_per_sm: int) -> dict[str, int | None]:
    """The resident blocks each resource alone allows (None: it does not limit); a block over
    a hardware cap (threads, registers per thread) is 0 by that cap and nothing else is
    counted."""
    table: dict[str, int | None] = {
        "threads": None,
        "blocks": lim.max_blocks_per_sm,
        "warps": lim.max_warps_per_sm // need.warps,
        "registers": None,
        "shared memory": None,
    }
    if need.threads > lim.max_threads_per_block:
        table["threads"] = 0
        return table
    if need.registers_per_thread > lim.max_registers_per_thread:
        table["registers"] = 0
        return table
    if need.registers_per_warp:
        sub = lim.warp_alloc_granularity
        # the hardware's per-block check: warps rounded up to a multiple of the sub-partitions
        assumed = need.registers_per_warp * _round_up(need.warps, sub)
        if assumed > lim.max_registers_per_block:
            table["registers"] = 0
        else:
            warps_per_sub = (lim.registers_per_sm // sub) // need.registers_per_warp
            table["registers"] = (warps_per_sub * sub) // need.warps
    if need.user_shared > lim.max_shared_per_block:
        table["shared memory"] = 0
    elif need.user_shared or lim.reserved_shared_per_block:
        table["shared memory"] = smem_per_sm // need.shared if need.shared else None
    return table
