"""Per-SM resource limits of each compute capability: what occupancy, the device presets and
the space's launch limits all read."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import ArchError

WARP_SIZE = 32
KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM resource limits of one compute capability."""

    cc: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_shared_per_sm: int
    max_shared_per_block: int
    reserved_shared_per_block: int
    max_threads_per_block: int = 1024
    registers_per_sm: int = 65536
    max_registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256
    warp_alloc_granularity: int = 4
    shared_alloc_unit: int = 128

    @property
    def max_warps_per_sm(self) -> int:
        """Resident warps per SM (threads / 32)."""
        return self.max_threads_per_sm // WARP_SIZE


# Source: CUDA C++ Programming Guide, "Compute Capabilities" -> "Technical Specifications per
# Compute Capability" (max resident blocks/warps/threads per SM, 32-bit registers per SM and per
# block, max registers per thread, shared memory per SM and max per block with opt-in), and the
# CUDA Occupancy Calculator for the allocation units. max_shared_per_block is the opt-in maximum
# (227 KB on sm_90 = 228 KB - 1 KB reserved). 10.0 and 12.0 are from the same table, unmeasured.
ARCH_LIMITS: dict[int, ArchLimits] = {
    75: ArchLimits(75, 1024, 16, 64 * KB, 64 * KB, 0),
    80: ArchLimits(80, 2048, 32, 164 * KB, 163 * KB, 1 * KB),
    86: ArchLimits(86, 1536, 16, 100 * KB, 99 * KB, 1 * KB),
    87: ArchLimits(87, 1536, 16, 164 * KB, 163 * KB, 1 * KB),
    89: ArchLimits(89, 1536, 24, 100 * KB, 99 * KB, 1 * KB),
    90: ArchLimits(90, 2048, 32, 228 * KB, 227 * KB, 1 * KB),
    100: ArchLimits(100, 2048, 32, 228 * KB, 227 * KB, 1 * KB),
    120: ArchLimits(120, 1536, 32, 128 * KB, 99 * KB, 1 * KB),
}


def arch_limits(cc: int) -> ArchLimits:
    """Limits for a compute capability (90 for sm_90 and sm_90a).

    Raises:
        ArchError: the capability is not in :data:`ARCH_LIMITS`.
    """
    try:
        return ARCH_LIMITS[cc]
    except KeyError:
        known = ", ".join(str(k) for k in sorted(ARCH_LIMITS))
        message = f"no occupancy limits for compute capability {cc}; known: {known}"
        raise ArchError(message) from None
