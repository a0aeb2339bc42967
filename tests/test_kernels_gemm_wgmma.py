"""The Hopper (wgmma) path of gemm_int8, compiled and inspected for sm_90a (no GPU needed).

Runs on the development space tests/data/gemm_int8_wgmma.yaml (the wgmma knobs alone); the
same parameters and constraints go into tuning_spaces/gemm_int8.yaml under PATH == 'wgmma'.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.search.configs import select_configs
from workbench.spaces import Space, load_space
from workbench.spaces.launch import launch_geometry
from workbench.spaces.model import Config
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

SPACE_FILE = Path(__file__).parent / "data" / "gemm_int8_wgmma.yaml"
ARCH = Arch.parse("sm_90a")


@pytest.fixture(scope="module")
def space() -> Space:
    return Space(load_space(SPACE_FILE), arch=ARCH)


def full_opcodes(space: Space, config: Config, cache: CompileCache) -> set[str]:
    """Every SASS opcode with its modifiers (IGMMA.64x256x32.S8.S8) of one compiled config."""
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.entry is not None, result.log
    return {i.opcode for i in sass_of(result, cache)[result.entry]}


@pytest.mark.slow
def test_sample_of_valid_points_compiles(space: Space, cache: CompileCache) -> None:
    """A fixed-seed sample of 50 valid points (plus the default) all compile for sm_90a."""
    configs = select_configs(space, sample=50, seed=2024)
    assert len(configs) >= 50
    results = compile_jobs([make_job(space, c) for c in configs], cache)
    failed = [(c, r.log[-600:]) for c, r in zip(configs, results, strict=True) if not r.ok]
    assert not failed, failed[:2]


def test_default_and_corners_issue_igmma_without_spills(space: Space, cache: CompileCache) -> None:
    corners = [
        [],  # default: 2 warpgroups, 128 x 256 x 128, 4 stages, 128-byte swizzle
        ["BM=64", "BN=64", "BK=64", "SWIZZLE=32", "STAGES=3", "GROUP_M=1"],
        ["BM=256", "BN=160", "BK=128", "SWIZZLE=64", "STAGES=3"],
    ]
    configs = [space.parse_config(a) for a in corners]
    assert all(space.is_valid(c) for c in configs)
    for record in static_sweep(space, configs, cache=cache):
        cfg = record.config
        assert record.ok, record.log[-2000:]
        assert record.lints == [], record.lints  # expect_sass IGMMA found, no spills, no local
        assert record.spill_stores == 0 and record.stack_frame == 0
        assert record.threads_per_block == 2 * cfg["BM"]
        assert record.dynamic_smem == cfg["STAGES"] * (cfg["BM"] + cfg["BN"]) * cfg["BK"] + 1024
        assert record.registers is not None and record.registers <= 255
        # ptxas keeps the wgmma pipelined (it reports "wgmma.mma_async instructions are
        # serialized" when accumulators leave registers or a fence is missing)
        assert "serialized" not in record.log
        ops = full_opcodes(space, cfg, cache)
        # one instruction covers the whole block-tile width: m64 n<BN> k32, s8 x s8
        assert f"IGMMA.64x{cfg['BN']}x32.S8.S8" in ops, sorted(ops)
        assert "WARPGROUP.ARRIVE" in ops  # wgmma.fence
        assert "WARPGROUP.DEPBAR.LE" in ops  # wgmma.wait_group
        assert "LDGSTS.E.BYPASS.128" in ops  # cp.async.cg 16 bytes
        assert "FENCE.VIEW.ASYNC.S" in ops  # fence.proxy.async before wgmma reads the copies
        assert not any(op.startswith("IMMA") for op in ops)  # no mma.sync fallback


def test_default_resources(space: Space, cache: CompileCache) -> None:
    (record,) = static_sweep(space, [space.spec.default_config()], cache=cache)
    assert record.ok
    assert record.threads_per_block == 256 and record.dynamic_smem == 197632
    assert record.static_smem == 0 and record.spill_stores == 0
    assert record.active_blocks == 1  # 193 KB of shared memory: one block per SM


def test_launch_geometry_covers_odd_shapes() -> None:
    spec = load_space(SPACE_FILE)
    space = Space(spec, arch=ARCH, shape={"M": 1000, "N": 1000, "K": 1008})
    launch = launch_geometry(space, spec.default_config())
    assert launch.grid == (8 * 4, 1, 1)  # cdiv(1000, 128) * cdiv(1000, 256) tiles, 1-D
    assert launch.block == (256, 1, 1)


@pytest.mark.parametrize(
    "assignment,message",
    [
        ("BK=64,SWIZZLE=128", "BK: whole swizzle atoms"),
    ],
)
def test_kernel_preconditions_back_up_the_constraints(
    space: Space, cache: CompileCache, assignment: str, message: str
) -> None:
    config = space.parse_config(assignment.split(","))
    assert space.explain(config)
    result = compile_job(make_job(space, config), cache)
    assert not result.ok and message in result.log


def test_register_constraint_rejects_what_ptxas_cannot_fit(
    space: Space, cache: CompileCache
) -> None:
    """BM=256 (512 threads, at most 128 registers each) cannot hold a 64 x 256 int32
    accumulator (128 registers) plus descriptors: the space rejects it and ptxas agrees."""
    config = space.parse_config(["BM=256", "BN=256", "STAGES=3"])
    reasons = [v.message for v in space.explain(config)]
    assert len(reasons) == 1 and "register" in reasons[0]
    result = compile_job(make_job(space, config), cache)
    assert not result.ok and "Insufficient registers" in result.log


def test_wgmma_is_refused_on_plain_sm_90(cache: CompileCache) -> None:
    """The constraint (arch.specific) and the kernel's #error say the same thing."""
    spec = load_space(SPACE_FILE)
    space90 = Space(spec, arch=Arch.parse("sm_90"))
    config = spec.default_config()
    assert any("arch.specific" in v.message for v in space90.explain(config))
    result = compile_job(make_job(space90, config), cache)
    assert not result.ok and "sm_90a" in result.log
