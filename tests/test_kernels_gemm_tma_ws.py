"""The warp-specialized TMA paths of the int8 GEMMs (PATH=tma_coop and tma_pingpong of gemm_int8
and gemm_w8a8), compiled for sm_90a and inspected without a GPU: every sampled point compiles
cleanly or is refused by a constraint that names its reason (and the kernel's static_assert backs
it up), the SASS holds the TMA loads, mbarrier waits, warpgroup MMA and register reallocation
each schedule needs, and the launch is one persistent CTA per SM at most. Split-K and stream-K
(SCHED=streamk) meet in the workspace with plain vector stores and one release/acquire flag per
unit, not per-accumulator atomics (tests/test_gemm_schedule.py checks the schedule itself)."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import Counter

import pytest
from gpu_checks import gpu

from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.spaces import Space, load_kernel
from workbench.spaces.launch import launch_geometry
from workbench.spaces.model import Config
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

SM90A = Arch.parse("sm_90a")
#: the paths (one per schedule) and their knobs; the others stay at the space's defaults
PATHS = ("tma_coop", "tma_pingpong")
KNOBS = ("PATH", "BM", "BN", "BK", "STAGES", "GROUP_M")
COOPERATIVE = {"PATH": "tma_coop", "BM": 128, "BN": 256, "BK": 128, "STAGES": 4}
PINGPONG = {"PATH": "tma_pingpong", "BM": 128, "BN": 128, "BK": 128, "STAGES": 5}
COOPERATIVE_TALL = {"PATH": "tma_coop", "BM": 256, "BN": 128, "BK": 128, "STAGES": 3}


@pytest.fixture(scope="module")
def space() -> Space:
    return Space(load_kernel("gemm_int8"), arch=SM90A)


def point(space: Space, **knobs: object) -> Config:
    return dict(space.spec.default_config(), **knobs)


def knob_domains(space: Space) -> dict[str, tuple]:
    return {k: PATHS if k == "PATH" else space.spec.parameter(k).values for k in KNOBS}


def tma_ws_points(space: Space) -> list[Config]:
    """Every valid point of the two TMA paths (their knobs over their domains)."""
    domains = knob_domains(space)
    configs = (
        point(space, **dict(zip(KNOBS, values, strict=True)))
        for values in itertools.product(*domains.values())
    )
    return [c for c in configs if space.is_valid(c)]


def test_the_path_has_points_of_both_schedules(space: Space) -> None:
    points = tma_ws_points(space)
    assert len(points) > 400  # (456 with 3 to 6 stages)
    assert {(c["PATH"], c["BM"]) for c in points} == {
        ("tma_coop", 128),
        ("tma_coop", 256),
        ("tma_pingpong", 64),
        ("tma_pingpong", 128),
    }
    assert {c["BK"] for c in points} == {128}  # whole 128-byte swizzle atoms
    assert all(c in points for c in (point(space, **COOPERATIVE), point(space, **PINGPONG)))


def test_a_sample_of_points_compiles_clean(space: Space, cache: CompileCache) -> None:
    """24 valid points drawn with a fixed seed, and the two schedules' examples: each compiles
    for sm_90a with the SASS the space expects (UTMALDG, SYNCS, IGMMA, USETMAXREG), no spills,
    no local memory, 168 registers at launch (65536 / 384) and the space's shared memory."""
    points = tma_ws_points(space)
    sample = random.Random(90).sample(points, 24)
    configs = [point(space, **COOPERATIVE), point(space, **PINGPONG), *sample]
    for record in static_sweep(space, configs, cache=cache):
        config = record.config
        assert record.ok, (config, record.log[-2000:])
        assert record.lints == [], (config, record.lints)
        assert record.spill_stores == 0 and record.stack_frame == 0, config
        assert record.registers == 168 and record.threads_per_block == 384, config
        stage = (config["BM"] + config["BN"]) * config["BK"]
        assert record.dynamic_smem == config["STAGES"] * (stage + 16) + 1024, config
        assert record.static_smem == 0
        assert "serialized" not in record.log  # ptxas keeps the wgmma asynchronous


def test_random_points_compile_or_are_refused_with_a_reason(
    space: Space, cache: CompileCache
) -> None:
    """Points drawn from the whole product of the path's knobs (BM 16..256, BK 32..128, ...):
    a valid one compiles, an invalid one names each constraint it breaks and why."""
    rng = random.Random(7)
    domains = knob_domains(space)
    drawn = [point(space, **{k: rng.choice(v) for k, v in domains.items()}) for _ in range(60)]
    valid = [c for c in drawn if space.is_valid(c)]
    for config in drawn:
        for violation in space.explain(config):
            assert violation.constraint is not None and violation.constraint.reason, violation
    assert 0 < len(valid) < len(drawn)
    results = compile_jobs([make_job(space, c) for c in valid], cache)
    assert all(r.ok for r in results), [r.log[-600:] for r in results if not r.ok]


# Each constraint of the path with a kernel precondition: a point breaking it alone, and the
# static_assert (or #error) that stops its compile.
BACKSTOPS = [
    ({"BK": 64}, "BK % SWIZZLE == 0", "BK: whole swizzle atoms"),
    ({"BM": 64}, "BM in ((128, 256)", "BM: cooperative 128 or 256"),
    ({"BM": 256, "BN": 64, "PATH": "tma_pingpong"}, "BM in ((128, 256)", "ping-pong 64 or 128"),
    ({"BN": 224, "PATH": "tma_pingpong"}, "regs_needed <= regs_cap", "the accumulators plus"),
    ({"SCHED": "streamk", "SPLIT_K": 2}, "SCHED == 'static' or SPLIT_K == 1", "SCHED=streamk"),
    # thread-block clusters (CLUSTER_M x CLUSTER_N)
    ({"CLUSTER_M": 2, "CLUSTER_N": 2}, "CLUSTER_M * CLUSTER_N <= 2", "1x1, 2x1 or 1x2"),
    ({"CLUSTER_M": 2, "SCHED": "streamk"}, "CLUSTER_M * CLUSTER_N == 1 or",
     "clusters need SPLIT_K=1"),
    ({"CLUSTER_N": 2, "PATH": "mma", "BM": 128, "BN": 128, "BK": 64},
     "ws or (CLUSTER_M == 1 and CLUSTER_N == 1)", "only the TMA paths"),
]  # fmt: skip


@pytest.mark.parametrize(("knobs", "constraint", "message"), BACKSTOPS)
def test_kernel_preconditions_back_up_the_constraints(
    space: Space, cache: CompileCache, knobs: dict, constraint: str, message: str
) -> None:
    config = point(space, **{**COOPERATIVE, **knobs})
    problems = [v.message for v in space.explain(config)]
    assert problems and all(constraint in p for p in problems), problems
    result = compile_job(make_job(space, config), cache)
    assert not result.ok and message in result.log, result.log[-1500:]


def opcode_counts(space: Space, config: Config, cache: CompileCache) -> Counter[str]:
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.entry is not None, result.log[-1500:]
    return Counter(i.opcode for i in sass_of(result, cache)[result.entry])


#: split-K and stream-K points whose fixup SASS is counted: (kernel, knobs, fixup instances,
#: partial-tile vectors per thread). One instance per consumer warpgroup that may run it
#: (cooperative: both together; ping-pong: each has its own named barrier).
FIXUP_POINTS = [
    ("gemm_int8", {**COOPERATIVE, "BN": 128, "SPLIT_K": 4}, 1, 16),
    ("gemm_int8", {**PINGPONG, "BM": 64, "SPLIT_K": 4, "STAGES": 6}, 2, 16),
    ("gemm_int8", {**COOPERATIVE, "SCHED": "streamk"}, 1, 32),
    ("gemm_int8", {**PINGPONG, "SCHED": "streamk", "RASTER": "n"}, 2, 32),
    ("gemm_fp8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "SPLIT_K": 2}, 1, 16),
    (
        "gemm_fp8",
        {"PATH": "tma_pingpong", "BM": 64, "BN": 128, "BK": 128, "SCHED": "streamk"},
        2,
        16,
    ),
]


@pytest.mark.parametrize(
    ("kernel", "knobs", "instances", "vectors"),
    FIXUP_POINTS,
    ids=[f"{k}-{'-'.join(f'{v}' for v in kn.values())}" for k, kn, _, _ in FIXUP_POINTS],
)
def test_the_fixup_stores_tiles_and_fences_once_per_unit(
    cache: CompileCache, kernel: str, knobs: dict, instances: int, vectors: int
) -> None:
    """Units that share a tile meet in the workspace with plain 16-byte stores and loads of
    whole partial tiles (STG.E.128 / LDG.E.128: BM x BN / 4 / threads vectors per thread) and
    one release reduction on the tile's counter per unit (REDG behind MEMBAR.ALL.GPU, by one
    thread); the finisher's leader spins on an acquire load (LDG.E.STRONG.GPU + CCTL.IVALL).
    Before, split-K added every accumulator with a global atomic (ATOMG.E.ADD: 65 of them at
    128 x 128) after a __threadfence in every thread (MEMBAR.SC.GPU), and took the sums back
    in a third pass over an M x N buffer."""
    spec = load_kernel(kernel)
    decode = Space(spec, shape={"M": 16, "N": 4096, "K": 4096}, arch=SM90A)
    config = dict(spec.default_config(), **knobs)
    assert decode.is_valid(config), decode.explain(config)
    ops = opcode_counts(decode, config, cache)
    assert not [op for op in ops if op.startswith(("ATOM", "MEMBAR.SC"))], ops
    assert ops["REDG.E.ADD.S32.STRONG.GPU"] == instances  # one arrival per unit
    assert ops["MEMBAR.ALL.GPU"] == instances  # its release, once per unit
    assert ops["STG.E.128.STRONG.GPU"] == vectors * instances  # the partial tile, published
    assert ops["LDG.E.128.STRONG.GPU"] == vectors * instances  # a peer's, added (a loop)
    assert ops["CCTL.IVALL"] == instances  # the acquire of the counter


@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8"])
def test_without_shared_tiles_there_is_no_fixup(cache: CompileCache, kernel: str) -> None:
    spec = load_kernel(kernel)
    space = Space(spec, arch=SM90A)
    config = dict(spec.default_config(), PATH="tma_coop", BM=128, BN=128, BK=128, RASTER="n")
    ops = opcode_counts(space, config, cache)
    assert not [op for op in ops if op.startswith(("ATOM", "RED", "MEMBAR", "CCTL"))], ops


def test_split_k_and_stream_k_grids(space: Space) -> None:
    """SPLIT_K > 1: one CTA per K slice of a tile (min(tiles * SPLIT_K, SMs) in all); stream-K:
    every SM as soon as the tiles have as many k-iterations (the M=128, N=11008 layer: 43 tiles
    of 128 x 256 for 132 SMs, each CTA about 10.4 of the 1376 k-iterations)."""
    decode = Space(space.spec, shape={"M": 16, "N": 4096, "K": 4096}, arch=SM90A)
    config = point(space, **{**PINGPONG, "BM": 64, "SPLIT_K": 4})
    assert launch_geometry(decode, config).grid == (128, 1, 1)  # 32 tiles x 4 slices, 1-D
    assert not decode.explain(config)
    layer = Space(space.spec, shape={"M": 128, "N": 11008, "K": 4096}, arch=SM90A)
    static = point(space, **COOPERATIVE)
    assert launch_geometry(layer, static).grid == (43, 1, 1)
    assert launch_geometry(layer, {**static, "SCHED": "streamk"}).grid == (132, 1, 1)
    tiny = Space(space.spec, shape={"M": 1, "N": 1, "K": 16}, arch=SM90A)
    assert launch_geometry(tiny, {**static, "SCHED": "streamk"}).grid == (1, 1, 1)
    # every slice needs a k-tile: K = 256 has two of 128 bytes, so no third slice
    short = Space(space.spec, shape={"M": 16, "N": 4096, "K": 256}, arch=SM90A)
    assert short.explain(point(space, **{**PINGPONG, "SPLIT_K": 4}))
    assert not short.explain(point(space, **{**PINGPONG, "SPLIT_K": 2}))
    # static split-K of many tiles: the partial tiles would not fit in L2 (stream-K does)
    problems = [v.message for v in space.explain(point(space, **{**PINGPONG, "SPLIT_K": 2}))]
    assert len(problems) == 1 and "device.l2_bytes" in problems[0], problems
    assert not space.explain(point(space, **{**PINGPONG, "SCHED": "streamk"}))


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8"])
def test_sampled_scheduler_points_compile_clean(cache: CompileCache, kernel: str) -> None:
    """Valid points of the TMA paths with SPLIT_K > 1 or SCHED=streamk (both rasters), drawn at
    a decode shape where split-K is valid: each compiles for sm_90a without spills or local
    memory, 168 registers at launch, the space's expected SASS."""
    spec = load_kernel(kernel)
    decode = Space(spec, shape={"M": 16, "N": 4096, "K": 4096}, arch=SM90A)
    # (drawn per schedule: these points are a sliver of the 2.7e11-point product)
    kinds = [
        {"SCHED": "streamk"},
        {"SCHED": "static", "SPLIT_K": 2},
        {"SCHED": "static", "SPLIT_K": 4},
    ]
    sample = [
        c
        for path in PATHS
        for kind in kinds
        for c in decode.sample(2, seed=54, fixed={"PATH": path, **kind})
    ]
    assert {c["SCHED"] for c in sample} == {"static", "streamk"}, sample
    assert {c["RASTER"] for c in sample} == {"m", "n"} and {c["PATH"] for c in sample} == set(PATHS)
    # and the named ones: the SASS counts' points, the GPU checks' (at this shape)
    named = [dict(spec.default_config(), **k) for n, k, _, _ in FIXUP_POINTS if n == kernel]
    if kernel == "gemm_int8":
        named += [point(decode, **k) for k in GPU_CONFIGS if "SCHED" in k or "SPLIT_K" in k]
    assert named and all(decode.is_valid(c) for c in named)
    for record in static_sweep(decode, [*named, *sample], cache=cache):
        assert record.ok, (record.config, record.log[-1500:])
        assert record.lints == [], (record.config, record.lints)
        assert record.spill_stores == 0 and record.stack_frame == 0, record.config
        assert record.registers == 168, record.config


def test_the_path_is_refused_on_plain_sm_90(cache: CompileCache) -> None:
    spec = load_kernel("gemm_int8")
    sm90 = Space(spec, arch=Arch.parse("sm_90"))
    config = dict(spec.default_config(), **COOPERATIVE)
    assert any("arch.specific" in v.message for v in sm90.explain(config))
    result = compile_job(make_job(sm90, config), cache)
    assert not result.ok and "sm_90a" in result.log


@pytest.mark.parametrize(
    ("knobs", "wgmma_per_stage", "named_barriers"),
    [(COOPERATIVE, 4, 1), (PINGPONG, 8, 3), (COOPERATIVE_TALL, 8, 1)],
    ids=["cooperative-128x256", "pingpong-128x128", "cooperative-256x128"],
)
def test_sass_of_each_schedule(
    space: Space, cache: CompileCache, knobs: dict, wgmma_per_stage: int, named_barriers: int
) -> None:
    """One TMA box per operand per stage (BK = the 128-byte swizzle), issued by the producer;
    BK / 32 wgmma per m64 block of a consumer's rows; mbarrier init, expect-tx arrival, waits
    and releases; setmaxnreg down for the producer and up for the consumers; no cp.async, no
    mma.sync, no local memory. Ping-pong also uses two named barriers for its turns."""
    config = point(space, **knobs)
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.entry is not None, result.log
    sass = sass_of(result, cache)[result.entry]
    ops = [i.opcode for i in sass]

    def count(opcode: str) -> int:
        return sum(op == opcode for op in ops)

    assert count("UTMALDG.2D") == 2  # A box and B box, in the producer's k-tile loop
    assert count(f"IGMMA.64x{config['BN']}x32.S8.S8") == wgmma_per_stage
    assert count("UTMACCTL.PF") == 2  # the two descriptors prefetched
    assert count("USETMAXREG.DEALLOC.CTAPOOL") == 1  # producer: down to 40
    assert count("USETMAXREG.TRY_ALLOC.CTAPOOL") == 1  # consumers: up to 232
    assert count("SYNCS.EXCH.64") == 2 * config["STAGES"]  # full and empty barrier per stage
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in ops  # mbarrier.try_wait.parity
    assert "SYNCS.ARRIVE.TRANS64" in ops  # the producer's arrive.expect_tx
    assert "SYNCS.ARRIVE.TRANS64.A1T0" in ops  # a consumer warp releasing a stage
    assert "WARPGROUP.ARRIVE" in ops and "WARPGROUP.DEPBAR.LE" in ops
    assert ("BAR.ARV" in ops) == (config["PATH"] == "tma_pingpong")
    assert f"used {named_barriers} barriers" in result.log
    assert not any(op.startswith(("LDGSTS", "IMMA", "LDL", "STL")) for op in ops)


# -- thread-block clusters with TMA multicast (CLUSTER_M x CLUSTER_N) --------------------------
#: cluster points of both schedules, raw and W8A8, direct and staged epilogue, both rasters
CLUSTER_POINTS = [
    ("gemm_int8", {**COOPERATIVE, "CLUSTER_M": 2}),
    ("gemm_int8", {**PINGPONG, "CLUSTER_N": 2, "RASTER": "n"}),
    ("gemm_int8", {**COOPERATIVE_TALL, "CLUSTER_N": 2, "GROUP_M": 1}),
    ("gemm_int8", {"PATH": "tma_pingpong", "BM": 64, "BN": 128, "BK": 128, "STAGES": 4,
                   "CLUSTER_M": 2, "EPILOGUE": "tma"}),
    ("gemm_w8a8", {**COOPERATIVE, "CLUSTER_N": 2, "OUT": "float16"}),
    ("gemm_w8a8", {**PINGPONG, "CLUSTER_M": 2, "OUT": "bfloat16", "EPILOGUE": "tma"}),
    ("gemm_fp8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4,
                  "CLUSTER_M": 2}),
    ("gemm_fp8", {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 128, "CLUSTER_N": 2,
                  "PROMOTE": False}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("kernel", "knobs"),
    CLUSTER_POINTS,
    ids=[f"{k}-{'-'.join(f'{v}' for v in kn.values())}" for k, kn in CLUSTER_POINTS],
)
def test_clusters_multicast_the_shared_operand(
    cache: CompileCache, kernel: str, knobs: dict
) -> None:
    """In a 2x1 or 1x2 cluster the producer loads its own operand's box whole (UTMALDG.2D) and
    its half of the shared one multicast (UTMALDG.2D.MULTICAST); the cluster meets at
    barrier.cluster once, after the barriers' init (UCGABAR_ARV / UCGABAR_WAIT); every stage
    release is a remote arrival through mapa (SYNCS.ARRIVE.TRANS64.RED, no local one left); a
    launch without the cluster traps (BPT.TRAP). It still compiles clean: 168 registers at
    launch, no spills, no local memory, the space's shared memory, and a launch of whole
    clusters of two."""
    spec = load_kernel(kernel)
    space = Space(spec, arch=SM90A)
    config = dict(spec.default_config(), **knobs)
    assert space.is_valid(config), space.explain(config)
    (record,) = static_sweep(space, [config], cache=cache)
    assert record.ok and record.lints == [], (record.lints, record.log[-1500:])
    assert record.spill_stores == 0 and record.stack_frame == 0
    assert record.registers == 168 and record.threads_per_block == 384
    launch = launch_geometry(space, config)
    assert launch.cluster == (2, 1, 1) and launch.grid == (132, 1, 1)
    ops = opcode_counts(space, config, cache)
    assert ops["UTMALDG.2D.MULTICAST"] == 1 and ops["UTMALDG.2D"] == 1, ops
    assert ops["UCGABAR_ARV"] == 1 and ops["UCGABAR_WAIT"] == 1, ops
    assert ops["SYNCS.ARRIVE.TRANS64.RED.A1T0"] >= 2, ops  # in the main loop and after it
    assert ops["SYNCS.ARRIVE.TRANS64.A1T0"] == 0, ops
    assert ops["BPT.TRAP"] == 1, ops
    assert ops["MEMBAR.ALL.GPU"] <= 1, ops  # once, at the start: none per stage release


@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8"])
def test_without_a_cluster_there_is_no_multicast(cache: CompileCache, kernel: str) -> None:
    spec = load_kernel(kernel)
    space = Space(spec, arch=SM90A)
    config = dict(spec.default_config(), PATH="tma_coop", BM=128, BN=128, BK=128)
    assert launch_geometry(space, config).cluster == (1, 1, 1)  # a plain launch
    ops = opcode_counts(space, config, cache)
    assert ops["UTMALDG.2D"] == 2 and ops["SYNCS.ARRIVE.TRANS64.A1T0"] >= 2, ops
    assert not [op for op in ops if "MULTICAST" in op or "CGA" in op or ".RED" in op], ops
    assert "BPT.TRAP" not in ops


def test_cluster_grids(space: Space) -> None:
    """Whole clusters of two, at most 66 of them on 132 SMs: 2x1 at 4096^3 has 16 x 16 cluster
    tiles of 128 x 256 tiles (256 > 66); the decode shape M=16 (one tile row) only 1x2 (a 2x1
    cluster's second tile would lie wholly past C), 8 clusters of 128 x 256 for N=4096; an odd
    tile count (3 tile columns at N=300, BN 128) rounds the cluster tiles up."""
    config = point(space, **COOPERATIVE)
    assert launch_geometry(space, {**config, "CLUSTER_M": 2}).grid == (132, 1, 1)
    decode = Space(space.spec, shape={"M": 16, "N": 4096, "K": 4096}, arch=SM90A)
    problems = [v.message for v in decode.explain({**config, "CLUSTER_M": 2})]
    assert len(problems) == 1 and "cdiv(M, BM) >= CLUSTER_M" in problems[0], problems
    assert launch_geometry(decode, {**config, "CLUSTER_N": 2}).grid == (16, 1, 1)
    odd = Space(space.spec, shape={"M": 77, "N": 300, "K": 160}, arch=SM90A)
    launch = launch_geometry(odd, point(space, **{**PINGPONG, "CLUSTER_N": 2}))
    assert launch.grid == (4, 1, 1) and launch.cluster == (2, 1, 1)  # 1 x 2 cluster tiles
    small = dataclasses.replace(space.device, sm_count=7)  # 3 clusters of 2 fit
    seven = Space(space.spec, arch=SM90A, device=small)
    assert launch_geometry(seven, {**config, "CLUSTER_M": 2}).grid == (6, 1, 1)


def test_persistent_grid(space: Space) -> None:
    """At most one CTA per SM (132 on an H200), fewer when there are fewer tiles."""
    config = point(space, **COOPERATIVE)
    for shape, ctas in [
        ({"M": 4096, "N": 4096, "K": 4096}, 132),  # 32 x 16 tiles
        ({"M": 16, "N": 4096, "K": 4096}, 16),  # 1 x 16
        ({"M": 1, "N": 1, "K": 16}, 1),
    ]:
        launch = launch_geometry(Space(space.spec, shape=shape, arch=SM90A), config)
        assert launch.grid == (ctas, 1, 1) and launch.block == (384, 1, 1), shape


@pytest.mark.parametrize("out", ["float16", "bfloat16", "float32"])
def test_w8a8_fuses_its_scaling_into_the_tma_ws_epilogue(cache: CompileCache, out: str) -> None:
    spec = load_kernel("gemm_w8a8")
    w8a8 = Space(spec, arch=SM90A)
    config = dict(spec.default_config(), **PINGPONG, OUT=out)
    (record,) = static_sweep(w8a8, [config], cache=cache)
    assert record.ok and record.lints == [], (record.lints, record.log[-1500:])
    assert record.spill_stores == 0 and record.registers == 168


# -- on a GPU: bit-exact at the odd and compare shapes (the device check runs these) ---------
#: both schedules, one and two m64 blocks per consumer (PINGPONG: 128 rows), the measured best
#: wgmma tiles as TMA tiles (128 x 256 at 4096^3 and 8192^3, 128 x 96 with 5 stages at M=128);
#: stream-K (SCHED=streamk: units starting and ending inside tiles, the workspace fixup) on a
#: 3-stage ring (the fewest the space allows) that wraps every third k-tile, and on a 64-row
#: ping-pong tile along N (the finisher in either warpgroup); static split-K through the same
#: fixup
GPU_CONFIGS = [
    COOPERATIVE,
    PINGPONG,
    {"PATH": "tma_coop", "BM": 128, "BN": 96, "BK": 128, "STAGES": 5, "GROUP_M": 1},
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 3, "GROUP_M": 1,
     "SCHED": "streamk"},
    {"PATH": "tma_pingpong", "BM": 64, "BN": 256, "BK": 128, "STAGES": 4, "GROUP_M": 16,
     "SCHED": "streamk", "RASTER": "n"},
    # split-K (where K has a k-tile for every slice and the partial tiles fit L2): the decode
    # shapes' tiles over more SMs
    {"PATH": "tma_pingpong", "BM": 64, "BN": 128, "BK": 128, "STAGES": 6, "SPLIT_K": 4,
     "RASTER": "n"},
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4, "SPLIT_K": 2},
    # thread-block clusters with TMA multicast (where C has two tiles along the cluster): 2x1
    # sharing B on the measured best tile, 1x2 sharing A on a ping-pong tile along N, and 1x2
    # on a 3-stage ring with GROUP_M 1
    {**COOPERATIVE, "CLUSTER_M": 2},
    {**PINGPONG, "CLUSTER_N": 2, "RASTER": "n"},
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 3, "GROUP_M": 1,
     "CLUSTER_N": 2},
]  # fmt: skip
#: the shape rules a config of GPU_CONFIGS may break at a small shape (then it is skipped there):
#: a K slice per split-K slice, two tiles along a cluster
SHAPE_RULES = (
    "SPLIT_K == 1 or (SPLIT_K - 1) * cdiv(k_tiles, SPLIT_K) < k_tiles",
    "cdiv(M, BM) >= CLUSTER_M and cdiv(N, BN) >= CLUSTER_N",
)


def verify_tma_paths(
    kernel: str, shape: dict[str, int], configs: list[dict], cache: CompileCache
) -> None:
    """Every config at ``shape``, verified against the reference on the GPU."""
    from gpu_checks import BRIEF, GPU

    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda import CudaRunner

    if GPU.cc != 90:
        pytest.skip(f"the TMA paths are built for sm_90a; the GPU is sm_{GPU.cc}")
    spec = load_kernel(kernel)
    space = Space(spec, shape=shape, arch=SM90A)
    failures = []
    with CudaRunner(space, cache, timing=BRIEF) as runner:
        for knobs in configs:
            config = dict(spec.default_config(), **knobs)
            assert all(v in spec.parameter(k).values for k, v in knobs.items()), knobs
            broken = {v.constraint.expr.text for v in space.explain(config) if v.constraint}
            if broken and broken <= set(SHAPE_RULES):
                continue  # too few k-tiles for every slice, or tiles for the cluster, here
            assert space.is_valid(config), (shape, knobs, space.explain(config))
            m = runner.evaluate(config)
            if m.outcome is not TrialOutcome.OK:
                failures.append(f"{knobs}: {m.outcome.value}: {m.reason[:300]}")
    assert not failures, "\n".join(failures)


def shapes_of(kernel: str, *sets: str) -> list:
    spec = load_kernel(kernel)
    return [
        pytest.param(shape, id=f"{name}-{'x'.join(map(str, shape.values()))}")
        for name in sets
        for shape in spec.shapes(name)
    ]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", shapes_of("gemm_int8", "odd", "compare"))
def test_tma_paths_are_bit_exact_on_the_gpu(shape: dict[str, int], cache: CompileCache) -> None:
    verify_tma_paths("gemm_int8", shape, GPU_CONFIGS, cache)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", shapes_of("gemm_w8a8", "odd"))
def test_w8a8_tma_paths_match_the_reference_on_the_gpu(
    shape: dict[str, int], cache: CompileCache
) -> None:
    configs = [COOPERATIVE, PINGPONG, {**COOPERATIVE, "CLUSTER_N": 2}, {**PINGPONG, "CLUSTER_M": 2}]
    verify_tma_paths("gemm_w8a8", shape, configs, cache)


# -- FP8 (gemm_fp8, gemm_fp8_e5m2): the same pipeline with QGMMA and fp32 accumulators --------
FP8_COOPERATIVE = {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4}
FP8_PINGPONG = {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 128}
FP8_FAST = {"PATH": "tma_coop", "BM": 128, "BN": 256, "BK": 128, "PROMOTE": False}


@pytest.mark.parametrize(
    ("kernel", "fmt"), [("gemm_fp8", "E4M3"), ("gemm_fp8_e5m2", "E5M2")], ids=["e4m3", "e5m2"]
)
def test_fp8_sample_compiles_clean(kernel: str, fmt: str, cache: CompileCache) -> None:
    """12 valid points of the two TMA paths (with and without PROMOTE; 128-byte swizzle only)
    and the three examples: clean, with the expected SASS; QGMMA of the format."""
    spec = load_kernel(kernel)
    fp8 = Space(spec, arch=SM90A)
    points = [c for c in fp8.sample(400, seed=42) if c["PATH"] in PATHS][:12]
    examples = [dict(spec.default_config(), **k) for k in (FP8_COOPERATIVE, FP8_PINGPONG, FP8_FAST)]
    configs = [*examples, *points]
    assert len(points) == 12 and {c["PROMOTE"] for c in points} == {True, False}
    for record in static_sweep(fp8, configs, cache=cache):
        assert record.ok and record.lints == [], (record.config, record.lints)
        assert record.spill_stores == 0 and record.registers == 168, record.config
    for config in examples:
        result = compile_job(make_job(fp8, config), cache)
        ops = [i.opcode for i in sass_of(result, cache)[result.entry or ""]]
        rows = config["BM"] // (2 if config["PATH"] == "tma_coop" else 1)
        qgmma = f"QGMMA.64x{config['BN']}x32.F32.{fmt}.{fmt}"
        assert sum(op == qgmma for op in ops) == config["BK"] // 32 * rows // 64, config
        assert sum(op == "UTMALDG.2D" for op in ops) == 2
        assert ("BAR.ARV" in ops) == (config["PATH"] == "tma_pingpong")


def test_fp8_promotion_doubles_the_accumulators(cache: CompileCache) -> None:
    """PROMOTE keeps a second set of fp32 registers: 128 x 256 fits only with fast accumulation,
    and the kernel's static_assert backs the space's register constraint up."""
    spec = load_kernel("gemm_fp8")
    fp8 = Space(spec, arch=SM90A)
    config = dict(spec.default_config(), **{**FP8_FAST, "PROMOTE": True})
    assert [v.constraint.expr.text for v in fp8.explain(config) if v.constraint] == [
        "not ws or acc_regs + 40 <= 232"
    ]
    result = compile_job(make_job(fp8, config), cache)
    assert not result.ok and "the accumulators plus ~40 registers" in result.log


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", shapes_of("gemm_fp8", "odd"))
def test_fp8_tma_paths_match_the_reference_on_the_gpu(
    shape: dict[str, int], cache: CompileCache
) -> None:
    """The three FP8 examples, the ping-pong one with stream-K and the fast-accumulation one
    with split-K (fp32 partial tiles through the workspace, added in a fixed order), and a 2x1
    and a 1x2 cluster (multicast B, multicast A)."""
    configs = [
        FP8_COOPERATIVE,
        {**FP8_PINGPONG, "SCHED": "streamk", "RASTER": "n"},
        {**FP8_FAST, "SPLIT_K": 2},
        {**FP8_COOPERATIVE, "CLUSTER_M": 2},
        {**FP8_PINGPONG, "CLUSTER_N": 2, "RASTER": "n"},
    ]
    verify_tma_paths("gemm_fp8", shape, configs, cache)
