"""Theoretical occupancy against hand-computed cases (CUDA Occupancy Calculator rules)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.analysis import ARCH_LIMITS, AnalysisError, arch_limits, theoretical_occupancy
from workbench.errors import ArchError

KB = 1024


def test_sm80_full_occupancy() -> None:
    # 256 threads = 8 warps; 64 warps/SM -> 8 blocks. 32 regs * 32 lanes = 1024 regs/warp;
    # 16384 regs per sub-partition / 1024 = 16 warps * 4 = 64 warps -> 8 blocks too (a tie,
    # reported as the hard warp cap). smem: 0 + 1 KB reserved -> 164 KB / 1 KB = 164 blocks.
    occ = theoretical_occupancy(80, 256, 32, 0)
    assert (occ.active_blocks, occ.active_warps, occ.occupancy) == (8, 64, 1.0)
    assert occ.limiting_factor == "warps"
    assert dict(occ.block_limits) == {
        "threads": None,
        "blocks": 32,
        "warps": 8,
        "registers": 8,
        "shared memory": 164,
    }


def test_sm80_register_limited() -> None:
    # 64 regs * 32 = 2048 regs/warp; 16384 / 2048 = 8 warps per sub-partition * 4 = 32 warps
    # -> 32 / 8 = 4 blocks of 256 threads = 32 warps = 50%.
    occ = theoretical_occupancy(80, 256, 64, 0)
    assert (occ.active_blocks, occ.active_warps, occ.occupancy) == (4, 32, 0.5)
    assert occ.limiting_factor == "registers"
    assert occ.registers_per_block == 2048 * 8


def test_sm90_shared_memory_limited() -> None:
    # 100 KB + 1 KB reserved = 103424 B (a multiple of 128); 228 KB = 233472 B per SM;
    # 233472 // 103424 = 2 blocks of 4 warps = 8 warps of 64 = 12.5%.
    occ = theoretical_occupancy(90, 128, 0, 100 * KB)
    assert (occ.active_blocks, occ.active_warps) == (2, 8)
    assert occ.occupancy == pytest.approx(0.125)
    assert occ.limiting_factor == "shared memory" and occ.shared_per_block == 103424


def test_sm89_warp_limited_big_block() -> None:
    # 1024 threads = 32 warps; 48 warps/SM -> 1 block (32/48 = 66.7%). Registers: 16 * 32 = 512
    # per warp -> 16384 / 512 = 32 warps per sub-partition -> 128 -> 4 blocks, not limiting.
    occ = theoretical_occupancy(89, 1024, 16, 0)
    assert (occ.active_blocks, occ.active_warps, occ.max_warps) == (1, 32, 48)
    assert occ.occupancy == pytest.approx(32 / 48)
    assert occ.limiting_factor == "warps"


def test_sm86_shared_memory_with_rounding() -> None:
    # 128 threads = 4 warps -> warp cap 48 / 4 = 12. Registers: 40 * 32 = 1280 (5 units of 256);
    # 16384 // 1280 = 12 warps per sub-partition -> 48 warps -> 12 blocks.
    # smem: 10 KB + 1 KB = 11264 B (88 * 128); 100 KB = 102400 // 11264 = 9 blocks -> 36 warps.
    occ = theoretical_occupancy(86, 128, 40, 10 * KB)
    assert (occ.active_blocks, occ.active_warps, occ.occupancy) == (9, 36, 0.75)
    assert occ.limiting_factor == "shared memory"


def test_sm86_register_granularity_rounds_up() -> None:
    # 33 regs * 32 = 1056 -> rounded to 1280 (5 * 256): 16384 // 1280 = 12 warps per
    # sub-partition -> 48 warps -> 256-thread blocks: 48 // 8 = 6 blocks = 48 warps = 100%.
    # With 41 regs: 1312 -> 1536; 16384 // 1536 = 10 -> 40 warps -> 5 blocks = 40/48.
    assert theoretical_occupancy(86, 256, 33, 0).active_blocks == 6
    occ = theoretical_occupancy(86, 256, 41, 0)
    assert (occ.active_blocks, occ.limiting_factor) == (5, "registers")


def test_sm75_max_registers() -> None:
    # 255 regs * 32 = 8160 -> 8192 per warp; 8 warps rounded to 8 -> 65536 fits the block.
    # 16384 // 8192 = 2 warps per sub-partition -> 8 warps -> 1 block = 8/32 = 25%.
    # sm_75 has no per-block reservation: 0 smem does not limit.
    occ = theoretical_occupancy(75, 256, 255, 0)
    assert (occ.active_blocks, occ.active_warps, occ.occupancy) == (1, 8, 0.25)
    assert occ.limiting_factor == "registers"
    assert dict(occ.block_limits)["shared memory"] is None


def test_sm90_warps_rounded_to_subpartitions() -> None:
    # 96 threads = 3 warps, 168 regs: 5376 per warp (21 * 256); 16384 // 5376 = 3 warps per
    # sub-partition -> 12 warps -> 12 // 3 = 4 blocks = 12 warps = 18.75%.
    occ = theoretical_occupancy(90, 96, 168, 0)
    assert (occ.active_blocks, occ.active_warps) == (4, 12)
    assert occ.occupancy == pytest.approx(12 / 64)


def test_block_cap() -> None:
    # 32 threads = 1 warp: warps allow 64 blocks, the SM holds 32 -> 32 warps = 50%.
    occ = theoretical_occupancy(80, 32, 16, 0)
    assert (occ.active_blocks, occ.occupancy, occ.limiting_factor) == (32, 0.5, "blocks")


def test_dynamic_shared_and_carveout() -> None:
    # 48 KB static + 16 KB dynamic + 1 KB = 66560 B; 164 KB = 167936 // 66560 = 2 blocks.
    assert (
        theoretical_occupancy(80, 128, 32, 48 * KB, dynamic_shared_bytes=16 * KB).active_blocks == 2
    )
    # carveout 100 KB: 102400 // (48 KB + 1 KB = 50176) = 2; carveout 64 KB: 65536 // 50176 = 1.
    assert (
        theoretical_occupancy(80, 128, 32, 48 * KB, shared_carveout_bytes=100 * KB).active_blocks
        == 2
    )
    assert (
        theoretical_occupancy(80, 128, 32, 48 * KB, shared_carveout_bytes=64 * KB).active_blocks
        == 1
    )


@pytest.mark.parametrize(
    ("cc", "threads", "regs", "smem", "factor"),
    [
        (80, 1025, 32, 0, "threads"),  # more than 1024 threads per block
        (90, 128, 256, 0, "registers"),  # more than 255 registers per thread
        (80, 1024, 255, 0, "registers"),  # 8192 regs/warp * 32 warps > 64 K per block
        (80, 128, 32, 164 * KB, "shared memory"),  # above the 163 KB opt-in maximum
        (89, 128, 32, 100 * KB, "shared memory"),  # above the 99 KB opt-in maximum
    ],
)
def test_impossible_configs_give_zero(
    cc: int, threads: int, regs: int, smem: int, factor: str
) -> None:
    occ = theoretical_occupancy(cc, threads, regs, smem)
    assert (occ.active_blocks, occ.active_warps, occ.occupancy) == (0, 0, 0.0)
    assert occ.limiting_factor == factor


def test_max_opt_in_shared_fits_once() -> None:
    # 227 KB + 1 KB = 228 KB = the whole SM: exactly one block.
    occ = theoretical_occupancy(90, 128, 32, 227 * KB)
    assert (occ.active_blocks, occ.limiting_factor) == (1, "shared memory")


def test_bad_arguments() -> None:
    with pytest.raises(ArchError):
        theoretical_occupancy(61, 128, 32, 0)
    with pytest.raises(AnalysisError):
        theoretical_occupancy(80, 0, 32, 0)
    with pytest.raises(AnalysisError):
        theoretical_occupancy(80, 128, -1, 0)
    with pytest.raises(AnalysisError):
        theoretical_occupancy(80, 128, 32, 0, shared_carveout_bytes=200 * KB)


def test_table_matches_programming_guide() -> None:
    expected = {  # cc: (threads/SM, blocks/SM, smem/SM KB, warps/SM)
        75: (1024, 16, 64, 32),
        80: (2048, 32, 164, 64),
        86: (1536, 16, 100, 48),
        89: (1536, 24, 100, 48),
        90: (2048, 32, 228, 64),
    }
    for cc, (threads, blocks, smem, warps) in expected.items():
        lim = arch_limits(cc)
        assert (lim.max_threads_per_sm, lim.max_blocks_per_sm) == (threads, blocks)
        assert (lim.max_shared_per_sm, lim.max_warps_per_sm) == (smem * KB, warps)
        assert lim.registers_per_sm == 65536 and lim.register_alloc_unit == 256
        assert lim.reserved_shared_per_block == (0 if cc == 75 else KB)


@given(
    cc=st.sampled_from(sorted(ARCH_LIMITS)),
    threads=st.integers(1, 1024),
    regs=st.integers(0, 255),
    smem=st.integers(0, 100 * KB),
)
def test_invariants(cc: int, threads: int, regs: int, smem: int) -> None:
    occ = theoretical_occupancy(cc, threads, regs, smem)
    lim = ARCH_LIMITS[cc]
    assert 0 <= occ.active_blocks <= lim.max_blocks_per_sm
    assert occ.active_warps <= lim.max_warps_per_sm and 0.0 <= occ.occupancy <= 1.0
    assert occ.active_blocks == min(v for _, v in occ.block_limits if v is not None)
    # more registers or more shared memory never raises occupancy
    assert (
        theoretical_occupancy(cc, threads, min(regs + 8, 255), smem).active_blocks
        <= occ.active_blocks
    )
    assert (
        theoretical_occupancy(cc, threads, regs, smem + 4 * KB).active_blocks <= occ.active_blocks
    )
