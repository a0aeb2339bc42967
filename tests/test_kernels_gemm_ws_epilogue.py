"""The epilogue of the warp-specialized TMA paths (kernels_cu/gemm_ws_epilogue.cuh, issue 54) of
gemm_int8 (raw int32), gemm_w8a8 (float16, bfloat16, float32) and gemm_fp8, compiled for sm_90a
and inspected without a GPU:

* W8A8 scales: a thread loads its row scales and column scales once per tile, so its global
  loads are bounded by the rows plus the columns of its accumulator fragment, not by its
  outputs (before: two scale loads per output, 576 LDG for a 128 x 256 cooperative tile);
* EPILOGUE=tma: each consumer warpgroup stages its tile in shared memory (STSM for 16-bit
  outputs, STS.64 for 32-bit ones), fences, meets at its named barrier, and one thread stores
  the tile with TMA (UTMASTG), with no global store left in the kernel; every constraint of
  the knob has a kernel backstop, and C's tensor map encodes wherever the space lets it run;
* on a GPU (the device check's on-request step pytest_tma_epilogue): the staged epilogue
  verified against the reference at the odd and compare shapes.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from gpu_checks import gpu
from test_kernels_gemm_tma_ws import shapes_of, verify_tma_paths

from workbench.analysis.resources import parse_ptxas_log
from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.runners.buffers import kernel_arguments
from workbench.runners.tensor_maps import TensorMapValue, tensor_map_problem
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config
from workbench.spaces.schema import DType
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

SM90A = Arch.parse("sm_90a")
PATHS = ("tma_coop", "tma_pingpong")
#: the knobs that shape a TMA path's code (GROUP_M only changes a constant)
TILE_KNOBS = {
    "gemm_int8": ("PATH", "BM", "BN", "BK", "STAGES"),
    "gemm_w8a8": ("PATH", "BM", "BN", "BK", "STAGES"),
    "gemm_fp8": ("PATH", "BM", "BN", "BK", "STAGES", "SWIZZLE", "PROMOTE"),
    "gemm_fp8_e5m2": ("PATH", "BM", "BN", "BK", "STAGES", "SWIZZLE", "PROMOTE"),
}
#: each problem variant with an output of its own: (kernel, fixed knobs)
VARIANTS = [
    ("gemm_int8", {}),
    ("gemm_w8a8", {"OUT": "float16"}),
    ("gemm_w8a8", {"OUT": "bfloat16"}),
    ("gemm_w8a8", {"OUT": "float32"}),
    ("gemm_fp8", {}),
    ("gemm_fp8_e5m2", {"OUT": "float16"}),
]


def point(kernel: str, shape: dict | None = None, **knobs: object) -> tuple[Space, Config]:
    spec = load_kernel(kernel)
    return Space(spec, shape=shape, arch=SM90A), dict(spec.default_config(), **knobs)


def out_bytes(config: Config) -> int:
    return 2 if config.get("OUT", "bfloat16") in ("float16", "bfloat16") else 4


def wg_rows(config: Config) -> int:
    """Rows of the tile one consumer warpgroup holds (and stages)."""
    return config["BM"] // 2 if config["PATH"] == "tma_coop" else config["BM"]


def tile_points(kernel: str, epilogue: str, **fixed: object) -> list[Config]:
    """Every valid point of the TMA paths with this EPILOGUE, over the knobs of TILE_KNOBS."""
    spec = load_kernel(kernel)
    space = Space(spec, arch=SM90A)
    knobs = TILE_KNOBS[kernel]
    domains = [PATHS if k == "PATH" else spec.parameter(k).values for k in knobs]
    configs = (
        dict(spec.default_config(), **fixed, EPILOGUE=epilogue, **dict(zip(knobs, v, strict=True)))
        for v in itertools.product(*domains)
    )
    return [c for c in configs if space.is_valid(c)]


def opcodes(space: Space, config: Config, cache: CompileCache) -> Counter[str]:
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.entry is not None, result.log[-1500:]
    return Counter(i.opcode for i in sass_of(result, cache)[result.entry])


# -- 1. W8A8: each thread loads its scales once per tile ---------------------------------------
COOP_WIDE = {"PATH": "tma_coop", "BM": 128, "BN": 256, "BK": 128}
W8A8_POINTS = [
    # the example: 576 LDG per thread before, for 2 rows x 64 columns
    {**COOP_WIDE, "STAGES": 4, "OUT": "float16"},
    {**COOP_WIDE, "STAGES": 3, "OUT": "float16", "EPILOGUE": "tma"},
    {"PATH": "tma_pingpong", "BM": 128, "BN": 128, "BK": 128, "STAGES": 5, "OUT": "bfloat16"},
    {
        "PATH": "tma_pingpong",
        "BM": 128,
        "BN": 128,
        "BK": 128,
        "STAGES": 5,
        "OUT": "bfloat16",
        "EPILOGUE": "tma",
    },
    {"PATH": "tma_coop", "BM": 256, "BN": 128, "BK": 128, "STAGES": 3, "OUT": "float32"},
    # (128 x 128 float32 staging tiles leave room for 2 stages only, under the 3 the TMA paths need)
    {
        "PATH": "tma_coop",
        "BM": 256,
        "BN": 64,
        "BK": 128,
        "STAGES": 3,
        "OUT": "float32",
        "EPILOGUE": "tma",
    },
    # 64- and 32-byte swizzle spans of the staging tile (rows of 192 and 32 bytes)
    {"PATH": "tma_pingpong", "BM": 64, "BN": 96, "BK": 128, "STAGES": 4, "EPILOGUE": "tma"},
    {"PATH": "tma_pingpong", "BM": 64, "BN": 16, "BK": 128, "STAGES": 4, "EPILOGUE": "tma"},
]


def w8a8_sample() -> list[Config]:
    """Six more valid W8A8 points of the TMA paths, both epilogues, drawn with a fixed seed."""
    rng = random.Random(54)
    points = []
    for out, epilogue in itertools.product(("float16", "bfloat16", "float32"), ("direct", "tma")):
        points.append(rng.choice(tile_points("gemm_w8a8", epilogue, OUT=out)))
    return rng.sample(points, 6)


@pytest.mark.parametrize(
    "knobs",
    [*W8A8_POINTS, *w8a8_sample()],
    ids=lambda k: "-".join(str(k.get(n, "")) for n in ("PATH", "BM", "BN", "OUT", "EPILOGUE")),
)
def test_w8a8_loads_each_scale_once_per_tile(knobs: dict, cache: CompileCache) -> None:
    """The LDGs of a W8A8 TMA kernel are its scale loads: at most one per row and one per
    column of the thread's fragment (2 rows per m64 block, BN / 4 columns), and no spills."""
    space, config = point("gemm_w8a8", **knobs)
    assert space.is_valid(config), space.explain(config)
    (record,) = static_sweep(space, [config], cache=cache)
    assert record.ok and record.lints == [], (record.lints, record.log[-1500:])
    assert record.spill_stores == 0 and record.stack_frame == 0, config
    ops = opcodes(space, config, cache)
    loads = sum(n for op, n in ops.items() if op.startswith("LDG"))
    rows, cols = 2 * (wg_rows(config) // 64), config["BN"] // 4
    assert 0 < loads <= rows + cols, (config, loads, rows, cols)


def test_raw_and_fp8_epilogues_load_nothing_per_output(cache: CompileCache) -> None:
    """Without per-row or per-column scales: no LDG in gemm_int8's TMA kernel, and gemm_fp8's
    two are its tensor-wise scales."""
    for kernel, knobs, expected in [
        ("gemm_int8", {**COOP_WIDE, "STAGES": 4}, 0),
        ("gemm_fp8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128}, 2),
    ]:
        for epilogue in ("direct", "tma"):
            space, config = point(kernel, **knobs, EPILOGUE=epilogue)
            if epilogue == "tma" and kernel == "gemm_int8":
                config["BN"] = 128  # 128 x 256 int32 staging tiles leave no room for 4 stages
            assert space.is_valid(config), space.explain(config)
            ops = opcodes(space, config, cache)
            assert sum(n for op, n in ops.items() if op.startswith("LDG")) == expected, config


# -- 2. EPILOGUE=tma: stmatrix / st.shared, a proxy fence, a named barrier, TMA stores --------
STAGED = [
    ("gemm_int8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4}),
    ("gemm_int8", {"PATH": "tma_pingpong", "BM": 64, "BN": 96, "BK": 128, "STAGES": 4}),
    ("gemm_w8a8", {**COOP_WIDE, "STAGES": 3, "OUT": "float16"}),
    ("gemm_w8a8", {"PATH": "tma_coop", "BM": 256, "BN": 64, "BK": 128, "OUT": "bfloat16"}),
    ("gemm_w8a8", {"PATH": "tma_pingpong", "BM": 64, "BN": 16, "BK": 128, "OUT": "float16"}),
    ("gemm_w8a8", {"PATH": "tma_pingpong", "BM": 128, "BN": 64, "BK": 128, "OUT": "float32"}),
    ("gemm_fp8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4}),
    ("gemm_fp8", {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 128, "SWIZZLE": 128}),
]


@pytest.mark.parametrize(
    ("kernel", "knobs"),
    STAGED,
    ids=[f"{k}-{c['PATH']}-{c['BM']}x{c['BN']}-{c.get('OUT', '')}" for k, c in STAGED],
)
def test_sass_of_the_staged_epilogue(kernel: str, knobs: dict, cache: CompileCache) -> None:
    """Per consumer thread and tile: one stmatrix .x2 per 8 columns of each m64 block (16-bit
    outputs) or one 8-byte st.shared per pair (32-bit); the proxy fence; the warpgroup's named
    barriers 5 and 6 (ptxas counts ids 0..6); one TMA store per column atom of the tile, a
    commit, the wait for the reads; no global store at all, no local memory."""
    space, config = point(kernel, **knobs, EPILOGUE="tma")
    assert space.is_valid(config), space.explain(config)
    (record,) = static_sweep(space, [config], cache=cache)
    assert record.ok and record.lints == [], (record.lints, record.log[-1500:])
    assert record.spill_stores == 0 and record.stack_frame == 0 and record.registers == 168
    assert "used 7 barriers" in record.log
    ops = opcodes(space, config, cache)
    blocks, bn, size = wg_rows(config) // 64, config["BN"], out_bytes(config)
    row_bytes = bn * size
    span = 128 if row_bytes % 128 == 0 else 64 if row_bytes % 64 == 0 else 32
    if size == 2:
        assert ops["STSM.16.M88.2"] == blocks * bn // 8 and ops["STS.64"] == 0
    else:
        assert ops["STS.64"] == blocks * bn // 4 and not any(op.startswith("STSM") for op in ops)
    assert ops["UTMASTG.2D"] == row_bytes // span, (row_bytes, span)
    assert ops["UTMACMDFLUSH"] == 1  # cp.async.bulk.commit_group
    assert ops["FENCE.VIEW.ASYNC.S"] == 2  # the barriers' init fence and the staging fence
    assert ops["UTMACCTL.PF"] == 3  # A's, B's and C's descriptors prefetched
    assert not any(op.startswith(("STG", "LDL", "STL")) for op in ops), sorted(ops)


#: the staged epilogue run by the finisher of a stream-K tile, after the workspace fixup, and
#: the fixup's instances (one per consumer code path: 1 cooperative, 2 ping-pong)
STAGED_STREAM_K = [
    ("gemm_int8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4}, 1),
    ("gemm_w8a8", {"PATH": "tma_pingpong", "BM": 128, "BN": 128, "BK": 128, "OUT": "bfloat16"}, 2),
    ("gemm_fp8", {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 128, "SWIZZLE": 128}, 2),
]


@pytest.mark.parametrize(
    ("kernel", "knobs", "instances"),
    STAGED_STREAM_K,
    ids=[f"{k}-{c['PATH']}-{c['BM']}x{c['BN']}" for k, c, _ in STAGED_STREAM_K],
)
def test_the_staged_epilogue_follows_the_stream_k_fixup(
    kernel: str, knobs: dict, instances: int, cache: CompileCache
) -> None:
    """SCHED=streamk with EPILOGUE=tma: the fixup as without it (the partial tile in 16-byte
    stores, one release reduction and one fence per unit, no atomics), then the same staged
    store as a whole tile's (stmatrix or st.shared, one TMA store per column atom); the only
    other global stores are the counter resets. Barriers 0 to 6: the turns (1, 2), the fixup
    (3, 4) and the staging (5, 6) never share an id. No spills at 168 registers."""
    space, config = point(kernel, **knobs, SCHED="streamk", EPILOGUE="tma")
    assert space.is_valid(config), space.explain(config)
    (record,) = static_sweep(space, [config], cache=cache)
    assert record.ok and record.lints == [], (record.lints, record.log[-1500:])
    assert record.spill_stores == 0 and record.stack_frame == 0 and record.registers == 168
    assert "used 7 barriers" in record.log
    ops = opcodes(space, config, cache)
    assert not [op for op in ops if op.startswith(("ATOM", "MEMBAR.SC"))], ops
    assert ops["REDG.E.ADD.S32.STRONG.GPU"] == ops["MEMBAR.ALL.GPU"] == instances
    assert ops["STG.E.128.STRONG.GPU"] == ops["LDG.E.128.STRONG.GPU"] > 0  # partial tiles
    stores = {op: n for op, n in ops.items() if op.startswith("STG")}
    assert stores == {"STG.E.128.STRONG.GPU": ops["STG.E.128.STRONG.GPU"], "STG.E": instances}
    static = opcodes(space, {**config, "SCHED": "static"}, cache)
    for op in ("UTMASTG.2D", "STSM.16.M88.2", "STS.64", "UTMACMDFLUSH"):
        assert ops[op] == static[op], (op, ops[op], static[op])
    assert ops["UTMASTG.2D"] > 0


def test_the_space_expects_the_staged_epilogue_in_the_sass() -> None:
    """expect_sass: UTMASTG wherever EPILOGUE=tma, STSM where the output is 16-bit, nothing of
    the kind with the direct epilogue (the lint fires for a binary that lacks them; the sweeps
    above see no lint, so the binaries have them)."""
    for kernel, fixed, wanted in [
        ("gemm_int8", {}, {"UTMASTG"}),
        ("gemm_w8a8", {"OUT": "float32"}, {"UTMASTG"}),
        ("gemm_w8a8", {"OUT": "bfloat16"}, {"UTMASTG", "STSM"}),
        ("gemm_fp8", {}, {"UTMASTG", "STSM"}),
    ]:
        space, config = point(kernel, **{**STAGED[0][1], **fixed})
        for epilogue, expected in (("direct", set()), ("tma", wanted)):
            env = space.env({**config, "EPILOGUE": epilogue})
            rules = [r for r in space.spec.expect_sass if bool(r.when.evaluate(env))]
            staged = {op for r in rules for op in r.opcodes} & {"UTMASTG", "STSM"}
            assert staged == expected, (kernel, fixed, epilogue, staged)


def staged_smem(config: Config) -> int:
    stage = (config["BM"] + config["BN"]) * config["BK"]
    staging = 2 * wg_rows(config) * config["BN"] * out_bytes(config)
    return config["STAGES"] * (stage + 16) + 1024 + staging


def test_a_sample_of_staged_points_compiles_clean(cache: CompileCache) -> None:
    """Three valid EPILOGUE=tma points of each output variant, drawn with a fixed seed: clean
    (the expected SASS, no lint), no spills or local memory, 168 registers at launch, and the
    dynamic shared memory of the stages plus two staging tiles."""
    rng = random.Random(2054)
    failures = []
    for kernel, fixed in VARIANTS:
        space = Space(load_kernel(kernel), arch=SM90A)
        configs = rng.sample(tile_points(kernel, "tma", **fixed), 3)
        for record in static_sweep(space, configs, cache=cache):
            c = record.config
            if not (
                record.ok
                and record.lints == []
                and record.spill_stores == 0
                and record.stack_frame == 0
                and record.registers == 168
                and record.dynamic_smem == staged_smem(c)
            ):
                failures.append((kernel, c, record.lints, record.dynamic_smem, record.log[-800:]))
    assert not failures, failures


@pytest.mark.slow
@pytest.mark.parametrize(("kernel", "fixed"), VARIANTS, ids=[f"{k}-{f}" for k, f in VARIANTS])
def test_every_staged_tile_compiles(kernel: str, fixed: dict, cache: CompileCache) -> None:
    """Every valid EPILOGUE=tma point over the knobs that shape the code (GROUP_M at its
    default) compiles for sm_90a without spills (gemm_int8 100, each W8A8 output 100 to 124,
    each FP8 format 286 points with its swizzles and PROMOTE: 1,020 compiles in all, about a
    quarter of an hour on two cores)."""
    space = Space(load_kernel(kernel), arch=SM90A)
    configs = tile_points(kernel, "tma", **fixed)
    results = compile_jobs([make_job(space, c) for c in configs], cache)
    bad = [(c, r.log[-400:]) for c, r in zip(configs, results, strict=True) if not r.ok]
    assert not bad, bad
    spills = [
        (c, k.stack_frame, k.spill_stores)
        for c, r in zip(configs, results, strict=True)
        for k in parse_ptxas_log(r.log).values()
        if k.stack_frame or k.spill_stores or k.spill_loads
    ]
    assert not spills, spills


# -- 3. the knob's constraints, each backed up by the kernel ------------------------------------
#: a shape of few tiles, where static split-K's partial tiles fit L2 (at the default 4096^2 they
#: do not: the scheduler's constraint)
SKINNY = {"M": 128, "N": 4096, "K": 4096}
BACKSTOPS = [
    (
        "gemm_int8",
        {"PATH": "wgmma", "BM": 128, "BN": 256, "BK": 128},
        "EPILOGUE == 'direct' or ws",
        "only the TMA paths (tma_coop, tma_pingpong) stage their tile",
    ),
    (
        "gemm_int8",
        {"shape": SKINNY, "PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "SPLIT_K": 2},
        "EPILOGUE == 'direct' or SPLIT_K == 1",
        "EPILOGUE=tma: not combined with SPLIT_K slices yet",
    ),
    (
        "gemm_int8",  # 4 stages of 128 x 256 x 128 and two 64 x 256 int32 staging tiles
        {**COOP_WIDE, "STAGES": 4},
        "smem_bytes",
        "the stages and staging tiles fit the shared memory",
    ),
    (
        "gemm_fp8",
        {"PATH": "wgmma"},
        "EPILOGUE == 'direct' or ws",
        "only the TMA paths (tma_coop, tma_pingpong) stage their tile",
    ),
    (
        "gemm_fp8",
        {"PATH": "tma_coop", "BM": 256, "BN": 128, "BK": 128, "STAGES": 4, "PROMOTE": False},
        "smem_bytes",
        "the stages and staging tiles fit the shared memory",
    ),
    (
        "gemm_fp8",
        {"shape": SKINNY, "PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "SPLIT_K": 4},
        "EPILOGUE == 'direct' or SPLIT_K == 1",
        "EPILOGUE=tma: not combined with SPLIT_K slices yet",
    ),
]


@pytest.mark.parametrize(
    ("kernel", "knobs", "constraint", "message"),
    BACKSTOPS,
    ids=["pin", "split-k", "smem", "fp8-pin", "fp8-smem", "fp8-split-k"],
)
def test_kernel_preconditions_back_up_the_constraints(
    kernel: str, knobs: dict, constraint: str, message: str, cache: CompileCache
) -> None:
    """The point is valid with the direct epilogue; with EPILOGUE=tma it breaks only this
    constraint (which says why), and the kernel's static_assert or #error stops its compile."""
    space, config = point(kernel, **knobs)
    assert space.is_valid(config), space.explain(config)
    staged = {**config, "EPILOGUE": "tma"}
    problems = space.explain(staged)
    assert problems and all(constraint in v.message for v in problems), problems
    assert all(v.constraint is not None and v.constraint.reason for v in problems)
    result = compile_job(make_job(space, staged), cache)
    assert not result.ok and message in result.log, result.log[-1500:]


@pytest.mark.parametrize(
    ("kernel", "fixed", "n", "ok"),
    [
        ("gemm_int8", {}, 300, True),  # 1200-byte rows of int32
        ("gemm_int8", {}, 4095, False),
        ("gemm_w8a8", {"OUT": "float16"}, 300, False),  # 600-byte rows
        ("gemm_w8a8", {"OUT": "float16"}, 1000, True),
        ("gemm_w8a8", {"OUT": "float32"}, 300, True),
        ("gemm_fp8", {}, 200, True),
        ("gemm_fp8", {}, 4095, False),
    ],
)
def test_the_staged_epilogue_needs_16_byte_rows_of_c(
    kernel: str, fixed: dict, n: int, ok: bool
) -> None:
    """A tensor map of C needs N * sizeof(OUT) % 16 == 0 (the encoder's stride rule): the
    space refuses the other N with that reason (the direct epilogue still takes them), rather
    than the runner's tensor-map check refusing the launch."""
    spec = load_kernel(kernel)
    space = Space(spec, shape={"M": 77, "N": n, "K": 4112}, arch=SM90A)
    config = dict(
        spec.default_config(),
        **fixed,
        **{"PATH": "tma_pingpong", "BM": 64, "BN": 128, "BK": 128, "STAGES": 4},
    )
    assert space.is_valid(config), space.explain(config)
    staged = {**config, "EPILOGUE": "tma"}
    problems = [v.message for v in space.explain(staged)]
    if ok:
        assert not problems, problems
        return
    rule = "N % 8 == 0" if kernel == "gemm_fp8" else "N * out_bytes % 16 == 0"
    assert len(problems) == 1 and rule in problems[0], problems
    # the encoder's own rule, which the constraint states ahead of the launch
    dtype = DType(staged.get("OUT", "bfloat16"))
    box = (64, 128 // out_bytes(staged))
    stride = tensor_map_problem(dtype, (77, n), box, 128, 256)
    assert stride is not None and "global strides must be multiples of 16" in stride


# -- 4. C's tensor map at the default, odd and compare shapes ------------------------------------
MAP_POINTS = [
    ("gemm_int8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4}),
    ("gemm_w8a8", {"PATH": "tma_pingpong", "BM": 64, "BN": 96, "BK": 128, "STAGES": 4}),
    ("gemm_fp8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4}),
]


@pytest.mark.parametrize(("kernel", "knobs"), MAP_POINTS, ids=[k for k, _ in MAP_POINTS])
def test_c_tensor_map_at_every_shape(kernel: str, knobs: dict) -> None:
    """At the default, odd and compare shapes: with EPILOGUE=tma, C's map is [M, N] of OUT with
    boxes of a warpgroup's rows x one swizzle span and that swizzle, and the encoder's rules
    accept it wherever the space lets the config run (where it does not, the one reason is the
    16-byte rows); with the direct epilogue C's map is 128 zero bytes."""
    spec = load_kernel(kernel)
    shapes = [dict(spec.default_shape), *spec.shapes("odd"), *spec.shapes("compare")]
    ran = 0
    for shape in shapes:
        space = Space(spec, shape=shape, arch=SM90A)
        direct = dict(spec.default_config(), **knobs)
        staged = {**direct, "EPILOGUE": "tma"}
        assert space.is_valid(direct), (shape, space.explain(direct))
        (zeroed,) = [a for a in kernel_arguments(space, direct) if _is_c_map(a)]
        assert zeroed.zeroed
        if not space.is_valid(staged):
            problems = [v.message for v in space.explain(staged)]
            assert len(problems) == 1 and ("% 16 == 0" in problems[0] or "% 8 == 0" in problems[0])
            continue
        maps = [a for a in kernel_arguments(space, staged) if isinstance(a, TensorMapValue)]
        assert [m.buffer for m in maps] == ["A", "B", "C"]
        c = maps[2]
        size = out_bytes(staged)
        row_bytes = staged["BN"] * size
        span = 128 if row_bytes % 128 == 0 else 64 if row_bytes % 64 == 0 else 32
        assert not c.zeroed and c.shape == (shape["M"], shape["N"]), c
        assert c.box == (wg_rows(staged), span // size) and c.swizzle == span, c
        assert c.element_bytes == size
        ran += 1
    assert ran >= len(shapes) // 2, ran


def _is_c_map(arg: object) -> bool:
    return isinstance(arg, TensorMapValue) and arg.buffer == "C"


# -- on a GPU: the staged epilogue against the reference (device check: pytest_tma_epilogue) --
#: int32: 4 boxes of 32 columns; 96 columns (3 boxes of 128 bytes, and a 64-byte span in
#: 16-bit outputs); two m64 blocks per consumer; 16 columns (64- and 32-byte spans), many tiles
STAGED_GPU = [
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4, "EPILOGUE": "tma"},
    {"PATH": "tma_pingpong", "BM": 64, "BN": 96, "BK": 128, "STAGES": 4, "EPILOGUE": "tma"},
    {"PATH": "tma_coop", "BM": 256, "BN": 64, "BK": 128, "STAGES": 4, "EPILOGUE": "tma"},
    {
        "PATH": "tma_pingpong",
        "BM": 128,
        "BN": 16,
        "BK": 128,
        "STAGES": 4,
        "GROUP_M": 1,
        "EPILOGUE": "tma",
    },
    # staged by the finisher of each stream-K tile, after the workspace fixup
    {"PATH": "tma_pingpong", "BM": 64, "BN": 96, "BK": 128, "SCHED": "streamk", "EPILOGUE": "tma"},
    # in thread-block clusters (multicast A, multicast B): tiles of a cluster past the edge of C
    # store nothing
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 3, "GROUP_M": 1,
     "CLUSTER_N": 2, "EPILOGUE": "tma"},
    {"PATH": "tma_pingpong", "BM": 64, "BN": 96, "BK": 128, "CLUSTER_M": 2, "EPILOGUE": "tma"},
]  # fmt: skip
FP8_STAGED_GPU = [
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4, "EPILOGUE": "tma"},
    {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 64, "SWIZZLE": 64, "EPILOGUE": "tma"},
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "SCHED": "streamk", "EPILOGUE": "tma"},
    {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "CLUSTER_M": 2, "EPILOGUE": "tma"},
]


def verify_staged(kernel: str, shape: dict, configs: list[dict], cache: CompileCache) -> None:
    """The configs the space allows at ``shape`` (16-byte rows of C), verified on the GPU."""
    spec = load_kernel(kernel)
    space = Space(spec, shape=shape, arch=SM90A)
    valid = [k for k in configs if space.is_valid(dict(spec.default_config(), **k))]
    if not valid:
        pytest.skip(f"no row of C starts 16-byte aligned at N={shape['N']}")
    verify_tma_paths(kernel, shape, valid, cache)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", shapes_of("gemm_int8", "odd", "compare"))
def test_staged_epilogue_is_bit_exact_on_the_gpu(shape: dict, cache: CompileCache) -> None:
    verify_staged("gemm_int8", shape, STAGED_GPU, cache)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("out", ["float16", "float32"])
@pytest.mark.parametrize("shape", shapes_of("gemm_w8a8", "odd", "compare"))
def test_staged_w8a8_matches_the_reference_on_the_gpu(
    shape: dict, out: str, cache: CompileCache
) -> None:
    verify_staged("gemm_w8a8", shape, [{**k, "OUT": out} for k in STAGED_GPU[:3]], cache)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", shapes_of("gemm_fp8", "odd", "compare"))
def test_staged_fp8_matches_the_reference_on_the_gpu(shape: dict, cache: CompileCache) -> None:
    verify_staged("gemm_fp8", shape, FP8_STAGED_GPU, cache)
