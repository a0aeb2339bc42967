"""The reduce family (kernels_cu/reduce.cu): references, spaces, compiles, SASS, preconditions.

Four space files share one source: reduce (float32, whole tensor, the headline), reduce_f16,
reduce_rows and reduce_rows_f16 (one value per row of a [rows, cols] matrix).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from gpu_checks import gpu, verify_on_gpu

from workbench.analysis import kernel_resources
from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.references import ReferenceCall
from workbench.references.reduce import reduce_1d, reduce_all, reduce_rows, sum_all
from workbench.runners.verify import tolerance_for
from workbench.spaces import Space, load_kernel
from workbench.spaces.launch import launch_geometry
from workbench.spaces.model import Config
from workbench.static.sweep import StaticRecord, static_sweep
from workbench.toolchain import Arch

ARCHES = ["sm_80", "sm_89", "sm_90"]
SPACES = ["reduce", "reduce_f16", "reduce_rows", "reduce_rows_f16"]
#: 16-byte loads of x per cache hint, as ptxas 13 lowers them (reduce.yaml passes -dlcm=ca)
HINT_LOAD = {
    "plain": "LDG.E.128.STRONG.SM",
    "cs": "LDG.E.EF.128",
    "ldg": "LDG.E.128.CONSTANT",
    "lu": "LDG.E.LU.128",
}


def call(x: np.ndarray, config: Mapping[str, object], **shape: int) -> ReferenceCall:
    return ReferenceCall(inputs={"x": x}, scalars={}, shape=shape, config=config)


# -- references ----------------------------------------------------------------------------
def fsum_op(values: list[float], op: str) -> float:
    """The reduction in exact arithmetic (math.fsum) or by plain comparison: independent."""
    if op == "max":
        return max(values)
    if op == "sumsq":
        return math.fsum(v * v for v in values)  # v * v is exact in float64 for float32 v
    return math.fsum(values)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("n", [1, 3, 4099, 100_003])
@pytest.mark.parametrize("op", ["sum", "max", "sumsq"])
def test_reduce_all_reference(op: str, n: int, dtype: type) -> None:
    rng = np.random.default_rng(n)
    x = rng.uniform(-1, 1, n).astype(dtype)
    if op == "max":
        x = -np.abs(x) - dtype(0.25)  # all negative: a max that starts from 0 would be wrong
    got = reduce_all(call(x, {"OP": op}, n=n))["total"]
    assert got.dtype == np.float32 and got.shape == (1,)
    want = fsum_op([float(v) for v in x], op)
    assert got[0] == np.float32(want)  # float64 accumulation, then one rounding


def test_sum_all_is_reduce_all_with_sum() -> None:
    x = np.random.default_rng(0).uniform(-1, 1, 1001).astype(np.float32)
    by_op = reduce_all(call(x, {"OP": "sum"}, n=1001))["total"]
    assert sum_all(call(x, {}, n=1001))["total"] == by_op
    with pytest.raises(ValueError, match="unknown reduction 'mean'"):
        reduce_1d(x, "mean")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize(("rows", "cols"), [(1, 4096), (7, 5), (3, 4097), (13, 1003)])
@pytest.mark.parametrize("op", ["sum", "max", "sumsq"])
def test_reduce_rows_reference(op: str, rows: int, cols: int, dtype: type) -> None:
    x = np.random.default_rng(rows * cols).uniform(-1, 1, (rows, cols)).astype(dtype)
    got = reduce_rows(call(x, {"OP": op}, rows=rows, cols=cols))["out"]
    assert got.dtype == np.float32 and got.shape == (rows,)
    for r in range(rows):
        assert got[r] == np.float32(fsum_op([float(v) for v in x[r]], op)), r


def test_tolerance_accepts_float32_accumulation_in_kernel_order() -> None:
    """The space's tolerance admits what a float32 kernel computes (per-thread partial sums,
    then a tree over the partials) and is exact for max."""
    spec = load_kernel("reduce")
    n = 1_000_003
    space = Space(spec, shape={"n": n}, arch=Arch.parse("sm_90"))
    x = np.random.default_rng(7).uniform(-1, 1, n).astype(np.float32)
    threads = 528 * 256  # the default grid and block
    for op in ("sum", "sumsq", "max"):
        tol = tolerance_for(spec.reference, space.env({**spec.default_config(), "OP": op}))
        want = reduce_all(call(x, {"OP": op}, n=n))["total"][0]
        vals = x * x if op == "sumsq" else x
        padded = np.concatenate([vals, np.zeros(-n % threads, np.float32)])
        if op == "max":
            padded[n:] = -np.inf
            got = padded.reshape(-1, threads).max(axis=0).max()
            assert tol.rtol == 0 and tol.atol == 0 and got == want
            continue
        per_thread = np.zeros(threads, np.float32)
        for row in padded.reshape(-1, threads):  # float32, one element at a time per thread
            per_thread += row
        got = np.float32(0)
        for v in np.random.default_rng(1).permutation(per_thread):  # atomics: any order
            got = np.float32(got + v)
        assert abs(float(got) - float(want)) <= tol.atol + tol.rtol * abs(float(want))


@pytest.mark.parametrize("n", [4099, 1_000_003, 16_777_216])
def test_tolerance_of_a_sum_refuses_a_kernel_that_skips_a_block(n: int) -> None:
    """A sum that leaves out one block's elements (1,024 of them, a bounds bug) fails
    verification at every shape (here, at eight places each): the tolerance grows like the
    sum's error, sqrt(n), not like n (1e-6 * n let such a kernel pass from n = 10^6 on, and
    it is faster, so the search would pick it)."""
    spec = load_kernel("reduce")
    space = Space(spec, shape={"n": n}, arch=Arch.parse("sm_90"))
    x = np.random.default_rng(3).uniform(-1, 1, n).astype(np.float32)
    tol = tolerance_for(spec.reference, space.env({**spec.default_config(), "OP": "sum"}))
    want = float(reduce_all(call(x, {"OP": "sum"}, n=n))["total"][0])
    for start in range(0, n - 1024, max(1, (n - 1024) // 7)):
        skipped = float(np.sum(x[start : start + 1024], dtype=np.float64))
        assert abs(skipped) > tol.atol + tol.rtol * abs(want), (start, skipped, tol)


# -- spaces --------------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", SPACES)
def test_defaults_valid_on_every_arch(kernel: str) -> None:
    spec = load_kernel(kernel)
    assert tuple(spec.arches) == tuple(ARCHES)
    for arch in spec.arches:
        assert Space(spec, arch=Arch.parse(arch)).explain(spec.default_config()) == [], arch


@pytest.mark.parametrize(("kernel", "vec8_ok"), [("reduce", False), ("reduce_f16", True)])
def test_sixteen_byte_loads_at_most(kernel: str, vec8_ok: bool) -> None:
    spec = load_kernel(kernel)
    space = Space(spec, arch=Arch.parse("sm_90"))
    config = {**spec.default_config(), "VEC": 8, "ITEMS": 16}
    assert space.is_valid(config) is vec8_ok
    if not vec8_ok:
        assert "VEC * elem_bytes <= 16" in space.explain(config)[0].message


def test_headline_launch_and_scratch_buffers() -> None:
    spec = load_kernel("reduce")
    space = Space(spec, arch=Arch.parse("sm_90"))
    launch = launch_geometry(space, spec.default_config())
    # n = 2^24, tile = 256 * 8 = 2048 -> 8192 tiles; capped at 132 SMs * 4 blocks
    assert launch.grid == (528, 1, 1) and launch.block == (256, 1, 1)
    env = space.env(spec.default_config())
    outputs = {o.name: o for o in spec.outputs}
    assert outputs["partials"].scratch and outputs["state"].scratch
    assert not outputs["total"].scratch and outputs["total"].init == 0
    assert outputs["partials"].shape[0].evaluate(env) == 528  # one partial per block
    assert [a if isinstance(a, str) else a.dtype for a in spec.args] == [
        "x",
        "total",
        "partials",
        "state",
        "int64",
    ]


@pytest.mark.parametrize(("mapping", "grid"), [("warp", 4096 // 4), ("block", 4096)])
def test_rows_grid_follows_the_mapping(mapping: str, grid: int) -> None:
    spec = load_kernel("reduce_rows")
    space = Space(spec, arch=Arch.parse("sm_90"))
    launch = launch_geometry(space, {**spec.default_config(), "MAP": mapping})
    assert launch.grid == (grid, 1, 1) and launch.block == (128, 1, 1)  # 4096 rows


# -- every point compiles ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kernel", SPACES)
def test_fixed_sample_compiles_for_every_arch(kernel: str, cache: CompileCache) -> None:
    """A fixed-seed sample of 51 valid configs per space, 17 drawn for each arch, compiles
    without spills (a sample per arch: sm_89 fits fewer threads per SM, so the valid sets
    differ)."""
    spec = load_kernel(kernel)
    jobs = []
    for i, arch in enumerate(ARCHES):
        space = Space(spec, arch=Arch.parse(arch))
        configs = space.sample(17, seed=2024 + i)
        assert len(configs) == 17
        jobs += [make_job(space, c) for c in configs]
    results = compile_jobs(jobs, cache, workers=2)
    for job, result in zip(jobs, results, strict=True):
        assert result.ok, (job.name_expression, job.arch.sm, result.log[-2000:])
        (res,) = kernel_resources(result.cubin or b"", result.log).values()
        assert res.spill_stores == 0 and res.stack_frame == 0, (job.name_expression, res)


@pytest.mark.parametrize(
    ("kernel", "assignment", "message"),
    [
        ("reduce", "ITEMS=2,VEC=4", "ITEMS: a whole number of VEC-wide loads"),
        ("reduce", "ITEMS=8,VEC=8", "VEC * sizeof(T) <= 16"),
        ("reduce_f16", "ITEMS=4,VEC=8", "ITEMS: a whole number of VEC-wide loads"),
        ("reduce_rows", "ITEMS=16,VEC=8", "VEC * sizeof(T) <= 16"),
        ("reduce_rows_f16", "ITEMS=2,VEC=4", "ITEMS: a whole number of VEC-wide loads"),
    ],
)
def test_preconditions_back_up_the_constraints(kernel: str, assignment: str, message: str) -> None:
    """A config the space rejects also fails to compile, with the kernel's static_assert."""
    space = Space(load_kernel(kernel), arch=Arch.parse("sm_90"))
    config = space.parse_config(assignment.split(","))
    assert space.explain(config)  # the space rejects it ...
    result = compile_job(make_job(space, config))  # ... and so does the compiler
    assert not result.ok and message in result.log


# -- SASS ----------------------------------------------------------------------------------
def sweep(
    kernel: str, arch: str, assignments: list[str], cache: CompileCache
) -> dict[str, StaticRecord]:
    space = Space(load_kernel(kernel), arch=Arch.parse(arch))
    configs: list[Config] = [space.parse_config(a.split(",") if a else []) for a in assignments]
    records = static_sweep(space, configs, cache=cache, workers=2)
    for r in records:
        assert r.ok, r.error
        assert "SHFL" in r.opcodes, r.opcodes  # warp-shuffle reductions
        assert r.spill_stores == 0 and r.stack_frame == 0 and r.lints == [], r.lints
    return dict(zip(assignments, records, strict=True))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_headline_sass(arch: str, cache: CompileCache) -> None:
    hints = [f"HINT={h}" for h in HINT_LOAD]
    r = sweep("reduce", arch, [*hints, "FINISH=twopass", "OP=max", "OP=sumsq"], cache)
    # the cache hints differ in their 16-byte loads, one opcode each
    wide = {}
    for h, want in HINT_LOAD.items():
        ops = r[f"HINT={h}"].global_memory_ops
        loads = [op for op in ops if op.startswith("LDG") and ".128" in op]
        assert loads == [want], (h, ops)
        wide[h] = loads[0]
    assert len(set(wide.values())) == len(HINT_LOAD)
    # FINISH=atomic, sum: one float atomic add per block, no ticket
    default = r["HINT=plain"]
    assert any(
        op.startswith(("RED", "REDG")) and "ADD.F32" in op for op in default.global_memory_ops
    )
    assert "ATOMG" not in default.opcodes and default.opcodes.get("BAR") == 1
    # FINISH=twopass: partials stored, a ticket (atomic add with return), fences, .cg reads
    two = r["FINISH=twopass"]
    assert "ATOMG.E.ADD.STRONG.GPU" in two.global_memory_ops and "MEMBAR" in two.opcodes
    assert "STG.E" in two.global_memory_ops and "LDG.E.STRONG.GPU" in two.global_memory_ops
    assert not any("F32" in op for op in two.global_memory_ops)  # no float atomics
    assert two.opcodes["SHFL"] >= 2 * default.opcodes["SHFL"] - 1  # a second block reduction
    # OP=max with atomics: an integer atomicMax on the ordered key, FMNMX instead of FADD
    mx = r["OP=max"]
    assert "ATOMG.E.MAX.STRONG.GPU" in mx.global_memory_ops and "FMNMX" in mx.opcodes
    assert "FFMA" in r["OP=sumsq"].opcodes  # v * v + acc
    # one float per warp in shared memory, whatever the finish
    for record in r.values():
        assert record.static_smem == 4 * record.config["BLOCK"] // 32


def test_f16_and_rows_sass(cache: CompileCache) -> None:
    f16 = sweep("reduce_f16", "sm_90", [""], cache)[""]
    assert "LDG.E.128.STRONG.SM" in f16.global_memory_ops  # 8 halves per load
    assert any(".U16" in op for op in f16.global_memory_ops)  # the scalar tail
    rows = sweep("reduce_rows", "sm_90", ["MAP=warp", "MAP=block,BLOCK=256", "HINT=ldg"], cache)
    warp, block = rows["MAP=warp"], rows["MAP=block,BLOCK=256"]
    assert "BAR" not in warp.opcodes and warp.static_smem == 0  # a warp per row: shuffles only
    assert "BAR" in block.opcodes and block.static_smem == 4 * 256 // 32
    assert "LDG.E.128" in warp.global_memory_ops  # plain: no read-only path chosen for us
    assert "LDG.E.128.CONSTANT" in rows["HINT=ldg"].global_memory_ops


# -- on a GPU (-m gpu; skipped cleanly without one) ----------------------------------------


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize(
    ("kernel", "shape"),
    [("reduce", {"n": 1_000_003}), ("reduce_f16", {"n": 4099}), ("reduce_f16", {"n": 1 << 24})],
)
def test_whole_tensor_configs_verify_on_the_gpu(
    kernel: str, shape: dict[str, int], tmp_path: Path
) -> None:
    ops = [f"OP={op},FINISH={f}" for op in ("sum", "max", "sumsq") for f in ("atomic", "twopass")]
    hints = [f"HINT={h},VEC=1,ITEMS=1,UNROLL=4" for h in HINT_LOAD]
    verify_on_gpu(kernel, shape, ["", *ops, *hints, "BLOCK=1024,BLOCKS_PER_SM=1"], tmp_path)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["reduce_rows", "reduce_rows_f16"])
@pytest.mark.parametrize(
    "shape", [{"rows": 1000, "cols": 1003}, {"rows": 3, "cols": 4097}, {"rows": 8192, "cols": 4096}]
)
def test_row_configs_verify_on_the_gpu(kernel: str, shape: dict[str, int], tmp_path: Path) -> None:
    configs = [
        f"OP={op},MAP={m},BLOCK={b}"
        for op in ("sum", "max", "sumsq")
        for m, b in (("warp", 128), ("block", 256))
    ]
    verify_on_gpu(kernel, shape, ["", *configs, "VEC=1,ITEMS=4,UNROLL=4,HINT=cs"], tmp_path)
