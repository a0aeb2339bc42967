"""gemm_w4a16: the reference, the space file, compiles, resources and SASS (CPU only).

The kernel cannot run here; what can be checked without a GPU is checked: the reference against
an independent float64 dequantization (element by element from the layout's description), that
the space's tolerance covers what the kernel and the torch baselines round and catches a wrong
nibble or group, that the inputs are drawn as packed words, that the constraints leave only
points that compile without spills on sm_80, sm_89 and sm_90 (a fixed sample, slow), that every
static_assert fires for a point its constraint rejects, and that the binaries hold what each
knob is about: HMMA.16816.F32[.BF16], no I2F at all with CVT=lop3 and I2F.F16 with CVT=i2f,
FFMA of the group scales, the L2 policy of HINT=evict_first, split-K's atomics. PATH=wgmma
(sm_90a): HGMMA.64xWMx16 from register fragments, four per k16 step, pipelined (ptxas does not
serialize them), no spills, no I2F with CVT=lop3; its index math is checked on the host by
tests/test_w4a16_wgmma_map.py.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from cli_helpers import invoke
from gpu_checks import gpu

from workbench.analysis import kernel_resources
from workbench.analysis.sass import SassInstruction, find_opcode, has_opcode
from workbench.compare.baselines import REGISTRY, Baseline, Choice, select
from workbench.compare.problems import Family, classify
from workbench.compare.w4a16_baselines import inner_k_tiles, tinygemm_operands
from workbench.compiler import CompileCache, compile_jobs, make_job
from workbench.quant.int4 import Int4Weights, from_tiled, padded_columns, to_tiled
from workbench.references import ReferenceCall
from workbench.references.w4a16 import DTYPES, gemm_w4a16, tiled_from_inputs, w4a16_matmul
from workbench.runners.buffers import make_inputs
from workbench.runners.verify import tolerance_for
from workbench.spaces import Space, load_kernel
from workbench.spaces.launch import launch_geometry, work_counts
from workbench.spaces.model import Config
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

ROOT = Path(__file__).resolve().parents[1]
ARCHES = ["sm_80", "sm_89", "sm_90"]  #: where the mma path's SASS is read
SM90A = "sm_90a"  #: the wgmma path's arch (the mma path builds there too)
LAYERS = {(4096, 4096), (11008, 4096), (4096, 11008), (8192, 8192), (28672, 8192)}


def _space(arch: str = "sm_90", **shape: int) -> Space:
    spec = load_kernel("gemm_w4a16")
    return Space(spec, arch=Arch.parse(arch), shape={**spec.default_shape, **shape})


def _config(**change: object) -> Config:
    return dict(load_kernel("gemm_w4a16").default_config(), **change)


def _sass(space: Space, config: Config, cache: CompileCache) -> list[SassInstruction]:
    (result,) = compile_jobs([make_job(space, config)], cache)
    assert result.ok and result.entry is not None, result.log[-2000:]
    return sass_of(result, cache)[result.entry]


# --------------------------------------------------------------------------------------------
# the reference


def decode_by_hand(
    qweight: np.ndarray, scales: np.ndarray, zeros: np.ndarray | None, n: int, group: int
) -> np.ndarray:
    """float64 W[K, N] from the kernel layout, element by element, from the description in
    kernels_cu/gemm_w4a16.cu (not from workbench.quant's tables): the unit of (k, n) is (k // 16,
    n // 64); in it, column c = n % 64 is n8 tile c // 8 at column g = c % 8, row r = k % 16 is
    t = (r % 8) // 2, rows 8..15 the fragment's second register, odd rows its high half; lane
    4g + t, word (tile // 2), nibble 2 * (tile % 2) + (r >= 8) + 4 * (r % 2). Scales and zeros:
    position 8 * g + tile of the unit."""
    k = qweight.shape[0] * 16
    units = padded_columns(n) // 64
    words = qweight.view(np.uint32).reshape(-1)
    w = np.empty((k, n))
    for kk in range(k):
        r = kk % 16
        t, upper, high = (r % 8) // 2, int(r >= 8), r % 2
        for nn in range(n):
            c = nn % 64
            tile, g = c // 8, c % 8
            lane = 4 * g + t
            index = ((kk // 16) * units + nn // 64) * 128 + 4 * lane + tile // 2
            nibble = 2 * (tile % 2) + upper + 4 * high
            q = int(words[index] >> np.uint32(4 * nibble)) & 15
            pos = 64 * (nn // 64) + 8 * g + tile
            z = 8 if zeros is None else int(zeros[kk // group, pos])
            w[kk, nn] = float(scales[kk // group, pos]) * (q - z)
    return w


@pytest.mark.parametrize(
    "dtype,symmetric,group,shape",
    [
        ("float16", True, 128, {"M": 5, "N": 73, "K": 256}),
        ("bfloat16", False, 32, {"M": 3, "N": 130, "K": 96}),
        ("float16", False, 64, {"M": 17, "N": 64, "K": 192}),
    ],
)
def test_reference_matches_an_independent_float64_dequantization(
    dtype: str, symmetric: bool, group: int, shape: dict[str, int]
) -> None:
    """The space's own inputs (drawn as the runner draws them), the reference's result against
    float64 arithmetic on a by-hand decode of the same words: one rounding apart."""
    space = _space(**shape)
    config = _config(DTYPE=dtype, SYMMETRIC=symmetric, G=group)
    inputs = make_inputs(space, 7, config)
    call = ReferenceCall(inputs, {}, shape, config)
    got = gemm_w4a16(call)["C"]
    assert got.dtype == DTYPES[dtype] and got.shape == (shape["M"], shape["N"])
    zeros = None if symmetric else inputs["zeros"]
    w = decode_by_hand(inputs["qweight"], inputs["scales"], zeros, shape["N"], group)
    exact = inputs["A"].astype(np.float64) @ w
    ulp = 2.0**-10 if dtype == "float16" else 2.0**-7
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= ulp * np.abs(exact) + 1e-6), float(err.max())
    # the same words through workbench.quant agree element for element
    tiled_w = from_tiled(to_tiled(from_tiled_inputs(inputs, shape["N"], group, symmetric)))
    np.testing.assert_array_equal(tiled_w.dequantize().astype(np.float64), w)


def from_tiled_inputs(
    inputs: Mapping[str, np.ndarray], n: int, group: int, symmetric: bool
) -> Int4Weights:
    """The logical weights of the space's input arrays."""
    return from_tiled(
        tiled_from_inputs(
            inputs["qweight"],
            inputs["scales"],
            inputs["zeros"],
            n=n,
            group=group,
            symmetric=symmetric,
        )
    )


def test_inputs_are_packed_words_of_the_whole_int32_range() -> None:
    """qweight: every 32-bit pattern can occur (randint over [-2^31, 2^31)), so every nibble
    value at every position; scales positive fp16; zero points 0..15, or one unread byte."""
    shape = {"M": 4, "N": 100, "K": 512}
    space = _space(**shape)
    inputs = make_inputs(space, 3, _config(SYMMETRIC=False, G=64))
    q = inputs["qweight"]
    assert q.dtype == np.int32 and q.shape == (512 // 16, 2 * 128)
    assert q.min() < -(2**30) and q.max() > 2**30  # both signs, high bits set
    nibbles = (q.view(np.uint32)[..., None] >> np.arange(0, 32, 4, dtype=np.uint32)) & 15
    for position in range(8):
        assert set(np.unique(nibbles[..., position])) == set(range(16))
    s = inputs["scales"]
    assert s.dtype == np.float16 and s.shape == (512 // 64, 128) and (s > 0).all()
    z = inputs["zeros"]
    assert z.dtype == np.uint8 and z.shape == (8, 128) and set(np.unique(z)) == set(range(16))
    sym = make_inputs(space, 3, _config(SYMMETRIC=True))
    assert sym["zeros"].shape == (1, 1) and sym["A"].dtype == np.float16
    # the same seed and shape give the same words whatever the tunables
    again = make_inputs(space, 3, _config(SYMMETRIC=False, G=64, BN=256, CVT="i2f"))
    np.testing.assert_array_equal(again["qweight"], q)


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    return x.astype(DTYPES[dtype]).astype(np.float64)


def kernel_like(a: np.ndarray, w: Int4Weights, dtype: str, scale: str) -> np.ndarray:
    """What the kernel rounds: SCALE=element makes each weight (q - z) * s in DTYPE (bf16
    rounds the fp16 scale to bf16 first), SCALE=group sums a * (q - z) exactly and scales in
    fp32; both sum in fp32 and round once to DTYPE."""
    rows = np.arange(w.k) // w.group
    codes = w.q.astype(np.float64) - w.zero_points()[rows].astype(np.float64)
    s = w.scales[rows].astype(np.float64)
    if scale == "element":
        wk = _round(codes * _round(s, dtype), dtype)
        acc = a.astype(np.float32) @ wk.astype(np.float32)
    else:
        acc = np.zeros((a.shape[0], w.n), np.float32)
        for g0 in range(0, w.k, w.group):
            part = a[:, g0 : g0 + w.group].astype(np.float32) @ codes[g0 : g0 + w.group].astype(
                np.float32
            )
            acc += part * w.scales[g0 // w.group].astype(np.float32)
    return _round(acc, dtype)


def tinygemm_like(a: np.ndarray, w: Int4Weights) -> np.ndarray:
    """torch._weight_int4pack_mm's arithmetic as far as its format fixes it: bf16 scale and
    zero, w = (q - 8) * scale + zero in bf16, fp32 sums, bf16 output."""
    _, _, sz = tinygemm_operands(w)
    scale, zero = _round(sz[..., 0], "bfloat16"), _round(sz[..., 1], "bfloat16")
    rows = np.arange(w.k) // w.group
    product = _round((w.q.astype(np.float64) - 8) * scale[rows], "bfloat16")
    wq = _round(product + zero[rows], "bfloat16")
    return _round(a.astype(np.float32) @ wq.astype(np.float32), "bfloat16")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("k", [4096, 11008])
def test_the_tolerance_covers_the_kernels_roundings_and_catches_wrong_weights(
    dtype: str, k: int
) -> None:
    """On the space's own inputs: the emulated kernel (both SCALE modes) and tinygemm stay well
    inside atol + rtol * |C|, while a swapped nibble pair, a neighbouring group's scales or a
    wrong zero point fall far outside."""
    shape = {"M": 64, "N": 256, "K": k}
    space = _space(**shape)
    config = _config(DTYPE=dtype, SYMMETRIC=False, G=128)
    inputs = make_inputs(space, 11, config)
    w = from_tiled_inputs(inputs, shape["N"], 128, symmetric=False)
    a = inputs["A"]
    want = w4a16_matmul(a, to_tiled(w), DTYPES[dtype]).astype(np.float64)
    tol = tolerance_for(space.spec.reference, space.env(config))  # type: ignore[arg-type]
    allowed = tol.atol + tol.rtol * np.abs(want)

    def worst(got: np.ndarray) -> float:
        return float((np.abs(got - want) / allowed).max())

    for scale in ("element", "group"):
        assert worst(kernel_like(a, w, dtype, scale)) < 0.5, scale
    if dtype == "bfloat16":
        assert worst(tinygemm_like(a, w)) < 0.6
    # wrong weights: far outside, at most outputs
    swapped = w.q.copy()
    swapped[0::2], swapped[1::2] = w.q[1::2], w.q[0::2]  # rows 2i and 2i+1 (a nibble pair)
    shifted = np.roll(w.scales, 1, axis=0)  # the previous group's scales
    zeros = (w.zero_points() + 1) % 16
    for bad in (
        Int4Weights(swapped, w.scales, w.zeros, w.group),
        Int4Weights(w.q, shifted, w.zeros, w.group),
        Int4Weights(w.q, w.scales, zeros.astype(np.uint8), w.group),
    ):
        got = kernel_like(a, bad, dtype, "element")
        outside = np.abs(got - want) > allowed
        assert outside.mean() > 0.5 and worst(got) > 20


def test_reference_follows_the_runner_convention() -> None:
    shape = {"M": 2, "N": 65, "K": 128}
    inputs = make_inputs(_space(**shape), 1, _config(DTYPE="bfloat16"))
    out = gemm_w4a16(ReferenceCall(inputs, {}, shape, {"DTYPE": "bfloat16", "G": 128}))
    assert set(out) == {"C"} and out["C"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert out["C"].shape == (2, 65)
    with pytest.raises(ValueError, match=r"A\[M, 128\]"):
        w4a16_matmul(inputs["A"][:, :64], to_tiled(from_tiled_inputs(inputs, 65, 128, True)),
                     np.dtype(np.float16))  # fmt: skip


# --------------------------------------------------------------------------------------------
# the space file


def test_the_space_declares_the_problem_and_its_knobs() -> None:
    spec = load_kernel("gemm_w4a16")
    assert list(spec.arches) == [*ARCHES, SM90A]
    for c in spec.constraints:
        assert c.reason, f"constraint `{c.expr.text}` has no reason"
    variants = {p.name: p for p in spec.parameters if not p.tunable}
    assert set(variants) == {"DTYPE", "G", "SYMMETRIC"}
    assert variants["G"].values == (32, 64, 128)
    knobs = {p.name for p in spec.parameters if p.tunable}
    assert {"BM", "BN", "BK", "STAGES", "SPLIT_K", "CVT", "SCALE", "HINT", "WARPS_K"} <= knobs
    assert spec.parameter("PATH").values == ("mma", "wgmma") and "PATH" in knobs
    assert spec.parameter("BM").values[0] == 16  # decode tiles
    assert set(spec.shape_sets) == {"llm_decode", "llm_prefill", "compare", "odd"}
    for name, ms in (("llm_decode", {1, 16, 32, 64}), ("llm_prefill", {512, 2048})):
        shapes = spec.shape_sets[name]
        assert {(s["M"], s["N"], s["K"]) for s in shapes} == {
            (m, n, k) for m in ms for n, k in LAYERS
        }
    odd = spec.shape_sets["odd"]
    assert all(s["K"] % 128 == 0 for s in odd)  # K % G: the format's groups
    assert any(s["K"] % 256 for s in odd)  # a partial k-tile at BK = 256
    assert any(s["N"] % 2 for s in odd) and any(s["N"] % 64 and s["N"] > 64 for s in odd)
    for arch in [*ARCHES, SM90A]:
        for shape in odd + spec.shape_sets["llm_decode"]:
            assert Space(spec, arch=Arch.parse(arch), shape=shape).is_valid(
                spec.default_config()
            ), (arch, shape)
            wg = Space(spec, arch=Arch.parse(arch), shape=shape).is_valid(_wgmma())
            assert wg == (arch == SM90A), (arch, shape)


def test_default_launch_and_work_model() -> None:
    space = _space()
    default = space.spec.default_config()
    launch = launch_geometry(space, default)
    # M = 16, N = K = 4096: 64 column tiles of 64, one row; one warp along N x WARPS_K 2
    assert launch.grid == (64, 1, 1) and launch.block == (64, 1, 1)
    # 4 stages of A (16 x 128 fp16) + W (128 x 64 int4) + one row of 64 fp16 scales
    assert launch.shared_bytes == 4 * (16 * 128 * 2 + 128 * 64 // 2 + 64 * 2)
    flops, nbytes = work_counts(space, default)
    assert flops == 2 * 16 * 4096 * 4096
    assert nbytes == 2 * 16 * 4096 + 4096 * 4096 // 2 + 2 * 32 * 4096 + 2 * 16 * 4096
    asym = dict(default, SYMMETRIC=False)
    assert work_counts(space, asym)[1] == nbytes + 32 * 4096
    assert launch_geometry(space, dict(default, SPLIT_K=4)).grid == (64, 1, 4)
    prefill = _space(M=2048)
    big = dict(default, BM=128, WM=64, BN=128, WN=64, WARPS_K=1)
    assert launch_geometry(prefill, big).grid == (32, 16, 1)


def _reasons(space: Space, config: Config) -> list[str]:
    return [v.message for v in space.explain(config)]


def _wgmma(**change: object) -> Config:
    """The wgmma path's decode tile: one warpgroup of 16 tokens x 256 columns, WARPS_K = 1."""
    return _config(**{"PATH": "wgmma", "BN": 256, "WN": 64, "WARPS_K": 1, **change})


def test_wgmma_constraints_reject_with_reasons() -> None:
    space = _space(SM90A, M=64)
    assert space.is_valid(_wgmma())
    cases: list[tuple[str, Mapping[str, object], str]] = [
        ("sm_90", {}, "architecture-specific target sm_90a"),
        (SM90A, {"BN": 128}, "BN = 256, WN = 64"),
        (SM90A, {"WN": 128, "BN": 256}, "BN = 256, WN = 64"),
        (SM90A, {"STAGES": 2}, "STAGES >= 3"),
        (SM90A, {"WM": 64, "BM": 64}, "spill"),  # 128 accumulators + 8 k16 steps ahead
        (SM90A, {"WM": 32, "BM": 32, "SCALE": "group"}, "spill"),  # and the group's sums
        (SM90A, {"WM": 16, "BM": 64, "WARPS_K": 2}, "spill"),  # 1024 threads: 64 registers
    ]
    for arch, change, reason in cases:
        config = _wgmma(**change)
        got = _reasons(_space(arch, M=64), config)
        assert any(reason in r for r in got), (arch, change, got)
    # what the register fit keeps: WM = 32 at BK = 128, SCALE=group at WM = 16, WARPS_K = 4
    for change in ({"WM": 32, "BM": 64}, {"SCALE": "group"}, {"WARPS_K": 4}):
        assert space.is_valid(_wgmma(**change)), (change, _reasons(space, _wgmma(**change)))


def test_constraints_reject_with_reasons() -> None:
    space = _space("sm_90", M=64)
    d = _config()
    cases: list[tuple[Mapping[str, object], str]] = [
        ({"BM": 32, "WM": 64}, "BM % WM == 0"),
        ({"BN": 64, "WN": 128}, "BN % WN == 0"),
        ({"SCALE": "group", "BK": 256}, "must not straddle two groups"),
        ({"G": 32, "BK": 32, "WARPS_K": 4}, "dealt evenly"),
        ({"BM": 128, "WM": 16}, "rows of zeros"),  # M = 64
        ({"GROUP_M": 8, "BM": 64}, "only reorders blocks"),  # one tile row
        ({"BM": 64, "WM": 16, "BN": 256, "WN": 64, "WARPS_K": 4}, "threads per block"),
        ({"BM": 64, "WM": 64, "WN": 128, "BN": 128, "WARPS_K": 1}, "spill"),
    ]
    for change, reason in cases:
        config = dict(d, **change)
        assert any(reason in r for r in _reasons(space, config)), (change, _reasons(space, config))
    short = _space("sm_90", M=16, K=512)
    assert any("at least one k-tile" in r for r in _reasons(short, dict(d, SPLIT_K=4, BK=256)))
    assert space.is_valid(dict(d, SPLIT_K=8, BK=256))
    odd_k = _space("sm_90", K=4160)  # 32.5 groups of 128
    assert any("whole number of groups" in r for r in _reasons(odd_k, d))
    assert odd_k.is_valid(dict(d, G=64, BK=64))
    # sm_89 (99 KB per block) rejects what sm_90 (227 KB) takes
    big = dict(d, BM=64, WM=32, BN=256, BK=256, STAGES=3, WARPS_K=1)  # 195 KB
    assert space.is_valid(big)
    assert any("shared memory" in r for r in _reasons(_space("sm_89", M=64), big))


def test_random_points_are_valid_or_rejected_with_a_reason() -> None:
    spec = load_kernel("gemm_w4a16")
    rng = random.Random(5)
    for arch in [*ARCHES, SM90A]:
        space = Space(spec, arch=Arch.parse(arch))
        for _ in range(300):
            config = {p.name: rng.choice(p.values) for p in spec.parameters}
            for v in space.explain(config):
                assert v.constraint is not None and v.constraint.reason, v.message


# --------------------------------------------------------------------------------------------
# compiles and SASS


#: configs whose SASS the tests read: the default (fp16, lop3, per-element scales), and one
#: knob changed each
NAMED = {
    "default": {},
    "i2f": {"CVT": "i2f"},
    "group": {"SCALE": "group"},
    "bf16": {"DTYPE": "bfloat16"},
    "bf16_i2f": {"DTYPE": "bfloat16", "CVT": "i2f"},
    "awq": {"SYMMETRIC": False},
}


@pytest.mark.parametrize("arch", ARCHES)
def test_named_configs_issue_hmma_and_convert_as_asked(arch: str, cache: CompileCache) -> None:
    space = _space(arch)
    configs = {name: _config(**change) for name, change in NAMED.items()}
    assert all(space.is_valid(c) for c in configs.values())
    records = dict(
        zip(configs, static_sweep(space, list(configs.values()), cache=cache), strict=True)
    )
    for name, r in records.items():
        assert r.ok, (name, r.error)
        assert r.lints == [], (name, r.lints)  # expect_sass satisfied, no spills, no local memory
        assert r.spill_stores == 0 and r.stack_frame == 0, name
    sass = {name: _sass(space, c, cache) for name, c in configs.items()}
    # BK/16 = 8 k16 steps per k-tile, 4 per warp (WARPS_K = 2), 8 n8 tiles each: 32 mma.sync
    for name in ("default", "i2f", "group", "awq"):
        assert len(find_opcode(sass[name], "HMMA.16816.F32")) == 32, name
        assert not find_opcode(sass[name], "HMMA.16816.F32.BF16"), name
    for name in ("bf16", "bf16_i2f"):
        assert len(find_opcode(sass[name], "HMMA.16816.F32.BF16")) == 32, name
    # CVT=lop3: no I2F of any kind (GROUP_M = 1 has no runtime division either)
    for name in ("default", "group", "bf16", "awq"):
        assert not has_opcode(sass[name], "I2F"), (name, records[name].opcodes)
        assert has_opcode(sass[name], "LOP3")
    # fp16 lop3: per word 2 hsub2 + 2 hfma2 (the magic numbers), then 4 hmul2 (the scales)
    assert len(find_opcode(sass["default"], "HMUL2")) == 4 * 4 * 4
    # CVT=i2f: 8 I2F.F16 per word, 4 words per k16 step, 4 steps
    assert len(find_opcode(sass["i2f"], "I2F.F16")) == 8 * 4 * 4
    assert has_opcode(sass["bf16_i2f"], "I2F")
    # SCALE=group: no hmul2; fp32 fma of each group's sums (4 per n8 tile per k-tile)
    assert not has_opcode(sass["group"], "HMUL2")
    assert len(find_opcode(sass["group"], "FFMA")) >= 4 * 8
    # the pipeline: cp.async 16 bytes, ldmatrix of A, 16-byte shared loads of the weights
    for name in NAMED:
        assert has_opcode(sass[name], "LDGSTS.E.BYPASS.128") and has_opcode(sass[name], "LDSM")
        assert has_opcode(sass[name], "LDS.128")
    assert has_opcode(sass["awq"], "LDS.64")  # the zero points of a unit: 8 bytes


def test_split_k_and_the_in_block_k_split(cache: CompileCache) -> None:
    space = _space("sm_90")
    split = _config(SPLIT_K=4)
    single = _config(WARPS_K=1)
    rs, r1 = static_sweep(space, [split, single], cache=cache)
    assert rs.ok and rs.lints == [] and r1.ok and r1.lints == []
    assert any(op.startswith(("RED.E.ADD.F32", "ATOMG.E.ADD.F32")) for op in rs.global_memory_ops)
    assert any(op.startswith("LDG.E.STRONG.GPU") for op in rs.global_memory_ops)  # __ldcg
    assert rs.opcodes.get("MEMBAR", 0) >= 1  # __threadfence
    # WARPS_K = 2 sums through shared memory (STS of the second k-group), WARPS_K = 1 does not
    assert has_opcode(_sass(space, _config(), cache), "STS")
    assert not has_opcode(_sass(space, single, cache), "STS")


#: wgmma configs whose SASS the test reads (sm_90a, M = 64): the decode tile (16 tokens, BK =
#: 128: 8 k16 steps of 4 wgmma each), and one knob changed each
WGMMA_NAMED: dict[str, dict[str, object]] = {
    "wgmma": {},
    "i2f": {"CVT": "i2f"},
    "group": {"SCALE": "group"},
    "bf16": {"DTYPE": "bfloat16"},
    "awq": {"SYMMETRIC": False},
    "split_k": {"SPLIT_K": 4},
    "warps_k": {"WARPS_K": 4, "HINT": "evict_first"},
    "wm32": {"WM": 32, "BM": 64},
}


def test_wgmma_issues_hgmma_from_registers_pipelined(cache: CompileCache) -> None:
    """PATH=wgmma on sm_90a: four HGMMA.64xWMx16 per k16 step, one warpgroup arrive (wgmma.fence)
    per step, never serialized by ptxas (its C7515 warning), no spills, no mma.sync and no
    ldmatrix (the weights come from registers, the activations through the descriptor); CVT=lop3
    without any I2F, CVT=i2f with 8 I2F.F16 per word; SCALE=group's fp32 fma per group."""
    space = _space(SM90A, M=64)
    configs = {name: _wgmma(**change) for name, change in WGMMA_NAMED.items()}
    assert all(space.is_valid(c) for c in configs.values()), [
        (n, _reasons(space, c)) for n, c in configs.items() if not space.is_valid(c)
    ]
    records = dict(
        zip(configs, static_sweep(space, list(configs.values()), cache=cache), strict=True)
    )
    for name, r in records.items():
        assert r.ok, (name, r.error)
        assert r.lints == [], (name, r.lints)  # expect_sass (HGMMA) satisfied, no spills
        assert r.spill_stores == 0 and r.stack_frame == 0, name
        assert "serialized" not in r.log, (name, r.log[-1500:])
        assert (
            r.threads_per_block
            == 128 * (configs[name]["BM"] // configs[name]["WM"]) * (configs[name]["WARPS_K"])
        ), name
    sass = {name: _sass(space, c, cache) for name, c in configs.items()}
    for name, ops in sass.items():
        steps = 8 // int(configs[name]["WARPS_K"])  # k16 steps per warpgroup and k-tile
        wm, bf16 = configs[name]["WM"], configs[name]["DTYPE"] == "bfloat16"
        hgmma = find_opcode(ops, f"HGMMA.64x{wm}x16.F32" + (".BF16" if bf16 else ""))
        assert len(hgmma) == 4 * steps, name
        assert len(find_opcode(ops, "HGMMA")) == 4 * steps, name  # no other shape or type
        assert len(find_opcode(ops, "WARPGROUP.ARRIVE")) == steps, name
        assert not has_opcode(ops, "HMMA") and not has_opcode(ops, "LDSM"), name
        if configs[name]["CVT"] == "lop3":
            assert not has_opcode(ops, "I2F"), name  # GROUP_M = 1: no runtime division either
    assert len(find_opcode(sass["i2f"], "I2F.F16")) == 8 * 4 * 8
    assert len(find_opcode(sass["wgmma"], "HMUL2")) == 4 * 4 * 8  # SCALE=element: 4 per word
    assert not has_opcode(sass["group"], "HMUL2")
    assert len(find_opcode(sass["group"], "FFMA")) == 4 * 8  # 4 wgmma x 8 sums, one group
    assert any(op.startswith("ATOMG.E.ADD.F32") for op in records["split_k"].global_memory_ops)


def test_the_weight_stream_carries_an_evict_first_policy(cache: CompileCache) -> None:
    """HINT=evict_first: createpolicy + cp.async ... .L2::cache_hint; on sm_80 the weights'
    LDGSTS take the policy as a memory descriptor (desc[UR]), the other copies none."""
    space = _space("sm_80")
    # the default's copies per thread and stage: A 16 x 16 chunks, W 8 units x 32 chunks, one
    # row of 8 scale chunks, over 64 threads; 3 stages in the prologue, 1 in the loop
    a, w, s = 16 * 16 // 64, 8 * 32 // 64, 1
    for hint, described in (("none", 0), ("evict_first", 4 * w)):
        sass = _sass(space, _config(HINT=hint), cache)
        copies = find_opcode(sass, "LDGSTS")
        assert len(copies) == 4 * (a + w + s)
        assert sum("desc[" in str(i) for i in copies) == described, hint
    for arch in ARCHES:
        (result,) = compile_jobs([make_job(_space(arch), _config(HINT="evict_first"))], cache)
        assert result.ok and result.ptx is not None
        assert "createpolicy.fractional.L2::evict_first" in result.ptx
        assert "cp.async.cg.shared.global.L2::cache_hint" in result.ptx


@pytest.mark.parametrize(
    "arch,change,message",
    [
        ("sm_90", {"BM": 32, "WM": 64, "M": 64}, "BM % WM == 0"),
        ("sm_90", {"BN": 64, "WN": 128}, "BN % WN == 0"),
        ("sm_90", {"SCALE": "group", "BK": 256}, "SCALE=group needs G % BK == 0"),
        ("sm_90", {"G": 32, "BK": 32, "WARPS_K": 4}, "dealt evenly to the WARPS_K warps"),
        ("sm_90", {"BM": 64, "WM": 16, "BN": 256, "WARPS_K": 4, "M": 64}, "at most 1024 threads"),
        ("sm_89", {"BM": 64, "WM": 32, "BN": 256, "BK": 256, "STAGES": 3, "WARPS_K": 1, "M": 64},
         "shared memory per block"),
        # outside the domains (the domains guarantee these relations)
        ("sm_90", {"WN": 32, "BN": 64}, "WN % 64 == 0"),
        ("sm_90", {"WM": 24, "BM": 48}, "WM % 16 == 0"),
        ("sm_90", {"G": 16}, "G in {32, 64, 128}"),
        ("sm_90", {"BK": 48}, "BK in {32, 64, 128, 256}"),
        ("sm_90", {"BK": 192, "G": 128}, "a k-tile holds whole groups"),
        ("sm_90", {"STAGES": 1}, "STAGES >= 2"),
        ("sm_90", {"CVT": "cvt"}, "CVT must be lop3 or i2f"),
        ("sm_90", {"SCALE": "column"}, "SCALE must be element or group"),
        ("sm_90", {"HINT": "evict_last"}, "HINT must be none or evict_first"),
        ("sm_90", {"DTYPE": "float32"}, "DTYPE must be float16 or bfloat16"),
        ("sm_90", {"PATH": "tensor"}, "PATH must be mma or wgmma"),
        # the wgmma path (its knobs: BN = 256, WN = 64, WARPS_K = 1 unless changed)
        ("sm_90", {"PATH": "wgmma", "BN": 256, "WARPS_K": 1}, "specific target sm_90a"),
        ("sm_90a", {"PATH": "wgmma", "BN": 128, "WARPS_K": 1}, "wgmma: BN == 256 and WN == 64"),
        ("sm_90a", {"PATH": "wgmma", "BN": 256, "WARPS_K": 1, "STAGES": 2}, "wgmma: STAGES >= 3"),
    ],
)  # fmt: skip
def test_kernel_preconditions_back_up_the_constraints(
    arch: str, change: dict[str, object], message: str, cache: CompileCache
) -> None:
    change = dict(change)
    m = int(change.pop("M", 16))  # type: ignore[call-overload]
    space = _space(arch, M=m)
    config = _config(**change)
    assert space.explain(config), f"{change} should be rejected by the space"
    (result,) = compile_jobs([make_job(space, config)], cache)
    assert not result.ok
    assert message in result.log, result.log[-1500:]


#: valid configs per arch compiled by the sweep (besides the named ones): 3 x 14
SAMPLE = 14


@pytest.mark.slow
@pytest.mark.parametrize("arch", [*ARCHES, SM90A])
def test_sampled_configs_compile_without_spills(arch: str, cache: CompileCache) -> None:
    """A fixed-seed uniform sample of the valid configs at two shapes (decode M = 16, prefill
    M = 2048), problem variants drawn too: every one compiles, without spills, within the
    launch-bounds cap (what the register constraint promises). On sm_90a every other draw is a
    wgmma point (its tile pinned to BN = 256, WN = 64, the rest drawn), which a uniform draw
    would rarely hit; those must also not be serialized by ptxas."""
    spec = load_kernel("gemm_w4a16")
    rng = random.Random([*ARCHES, SM90A].index(arch) + 55)
    configs: list[tuple[Space, Config]] = []
    for m in (16, 2048):
        space = _space(arch, M=m)
        found: list[Config] = []
        while len(found) < SAMPLE // 2:
            config = {p.name: rng.choice(p.values) for p in spec.parameters}
            if arch == SM90A:
                path = "wgmma" if len(found) % 2 == 0 else "mma"
                config["PATH"] = path
                config.update({"BN": 256, "WN": 64} if path == "wgmma" else {})
            if config not in found and space.is_valid(config):
                found.append(config)
        configs += [(space, c) for c in found]
    results = compile_jobs([make_job(s, c) for s, c in configs], cache)
    for (_, config), result in zip(configs, results, strict=True):
        assert result.ok, (config, result.log[-2000:])
        assert "serialized" not in result.log, (config, result.log[-2000:])
        res = kernel_resources(result.cubin, result.log)[result.entry]
        assert res.spill_stores == 0 and res.spill_loads == 0, (config, res)
        assert res.stack_frame == 0, (config, res)
        assert res.max_reg_count is None or res.registers <= res.max_reg_count


# --------------------------------------------------------------------------------------------
# baselines (their selection; they run only on a GPU) and the CLI


def _installed(b: Baseline, p: object, cc: int | None) -> str | None:
    """Baseline.check on a machine where PyTorch is installed (the lent GPU's image)."""
    saved = type(b).modules
    try:
        type(b).modules = ()
        return b.check(p, cc)  # type: ignore[arg-type]
    finally:
        type(b).modules = saved


def test_baselines_are_torch_dense_and_int4pack_mm() -> None:
    space = _space("sm_90")
    fp16 = classify(space, _config())
    assert fp16.family is Family.GEMM_W4A16
    sel, notes = select(space.spec.baselines, fp16, 90, check=_installed)
    by = {s.name: s for s in sel}
    assert list(by) == ["torch_dense", "torch_int4mm"] and notes == []
    assert by["torch_dense"].choice is Choice.RUN
    assert by["torch_int4mm"].choice is Choice.SKIP
    assert "takes bfloat16 inputs" in by["torch_int4mm"].reason
    bf16 = classify(space, _config(DTYPE="bfloat16", SYMMETRIC=False, G=64))
    by = {s.name: s for s in select(space.spec.baselines, bf16, 90, check=_installed)[0]}
    assert {s.choice for s in by.values()} == {Choice.RUN}
    odd = classify(_space("sm_90", M=77, N=1001, K=4224), _config(DTYPE="bfloat16"))
    by = {s.name: s for s in select(space.spec.baselines, odd, 90, check=_installed)[0]}
    assert "N a multiple of 8 (N = 1001)" in by["torch_int4mm"].reason
    assert by["torch_dense"].choice is Choice.RUN
    by = {s.name: s for s in select(space.spec.baselines, bf16, 75, check=_installed)[0]}
    assert "8.0+" in by["torch_int4mm"].reason and by["torch_dense"].choice is Choice.RUN
    only = select(space.spec.baselines, bf16, 90, only=["torch_int4mm"], check=_installed)[0]
    assert [s.name for s in only] == ["torch_int4mm"]
    # without PyTorch (this machine): skipped, saying so
    if REGISTRY["torch_dense"].missing():
        assert "not installed: no Python module 'torch'" in (
            REGISTRY["torch_dense"].check(fp16, 90) or ""
        )
    # the int8 GEMM keeps its libraries: torch is not a gemm_int8 baseline
    int8 = _gemm_int8()
    assert "solves gemm_w4a16" in (
        REGISTRY["torch_dense"].check(classify(int8, int8.spec.default_config()), 90) or ""
    )


def _gemm_int8() -> Space:
    spec = load_kernel("gemm_int8")
    return Space(spec, arch=Arch.parse("sm_90"), shape={"M": 64, "N": 64, "K": 64})


def test_tinygemm_operands_give_the_same_weights() -> None:
    """uint8 [N, K/2] with the even k in the high nibble; (q - 8) * scale + zero with scale = s
    and zero = s * (8 - z) is s * (q - z)."""
    rng = np.random.default_rng(2)
    k, n, group = 128, 24, 32
    w = Int4Weights(
        rng.integers(0, 16, (k, n), dtype=np.uint8),
        rng.uniform(0.001, 0.01, (k // group, n)).astype(np.float16),
        rng.integers(0, 16, (k // group, n), dtype=np.uint8),
        group,
    )
    packed, codes, sz = tinygemm_operands(w)
    assert packed.shape == (n, k // 2) and packed.dtype == np.uint8
    np.testing.assert_array_equal(packed >> 4, w.q.T[:, 0::2])
    np.testing.assert_array_equal(packed & 15, w.q.T[:, 1::2])
    np.testing.assert_array_equal(codes, w.q.T.astype(np.int32))
    assert sz.shape == (k // group, n, 2)
    rows = np.arange(k) // group
    tiny = (w.q.astype(np.float64) - 8) * sz[rows, :, 0] + sz[rows, :, 1]
    np.testing.assert_allclose(tiny, w.dequantize(), rtol=0, atol=1e-7)
    assert (inner_k_tiles(4096), inner_k_tiles(4160), inner_k_tiles(96), inner_k_tiles(40)) == (
        8,
        4,
        2,
        0,
    )


def test_the_cli_lists_the_kernel_and_checks_its_reference() -> None:
    code, out, _ = invoke("kernels", env={"COLUMNS": "200"})
    assert code == 0 and "gemm_w4a16" in out
    code, out, err = invoke("space", "gemm_w4a16", "--check-reference", "--sample", "0")
    assert code == 0, out + err
    assert "reference ok" in out and "C float16" in out
    # (the default config: the variants' references are checked above, in Python)
    code, out, err = invoke(
        "space", "gemm_w4a16", "--check-reference", "--sample", "0", "--shape", "M=3,N=100,K=256"
    )
    assert code == 0, out + err
    assert "C float16 (3, 100)" in out


def test_math_of_the_tolerance_comment() -> None:
    """The space file's atol comment: rms(a * w) for its distributions is about 0.024 (a
    uniform in [-1, 1]: rms 1/sqrt(3); w = s (q - z): s uniform in [0.001, 0.01], q - z of two
    uniform nibbles), so sigma = sqrt(K) * 0.024 * u / sqrt(3) = 0.014 sqrt(K) u and the atol
    0.15 sqrt(K) u is about 10 sigma."""
    rms_a = 1 / math.sqrt(3)
    rms_s = math.sqrt((0.01**3 - 0.001**3) / (3 * 0.009))
    rms_code = math.sqrt(2 * (256 - 1) / 12)  # q - z, both uniform on 0..15
    sigma_per_u = rms_a * rms_s * rms_code / math.sqrt(3)
    assert 0.012 < sigma_per_u < 0.016
    assert 9 < 0.15 / sigma_per_u < 12


# --------------------------------------------------------------------------------------------
# on a GPU (scripts/device_check.sh, step pytest_w4a16): every knob's path against the reference

#: one knob (or a tiling) changed from the default each; at a shape where one is invalid it is
#: left out (e.g. tiles of more than 16 rows at M = 1)
GPU_CONFIGS = [
    "",
    "CVT=i2f",
    "SCALE=group",
    "HINT=evict_first",
    "WARPS_K=1",
    "BN=128,WARPS_K=4",
    "SPLIT_K=4",
    "SPLIT_K=2,WARPS_K=4,BK=256,STAGES=3",  # a partial last k-tile at K = 4224, 1152, 640
    "BK=32,STAGES=6",
    "BM=64,WM=32,BN=128,WN=64,WARPS_K=1,BK=64,GROUP_M=8",
    "BM=32,WM=32,BN=256,WN=128,WARPS_K=1,BK=64",
]
#: the odd set (N odd or not a multiple of 64, K a partial tile, M of 1 to 333) and three decode
#: shapes; fp16 symmetric with G = 128, bf16 with zero points and G = 32 (k-tiles of 4 groups)
GPU_SHAPES = [
    {"M": 77, "N": 1001, "K": 4224},
    {"M": 5, "N": 4095, "K": 1152},
    {"M": 1, "N": 1, "K": 128},
    {"M": 333, "N": 173, "K": 640},
    {"M": 1, "N": 4096, "K": 4096},
    {"M": 16, "N": 11008, "K": 4096},
    {"M": 64, "N": 4096, "K": 11008},
]
GPU_VARIANTS = ["DTYPE=float16,SYMMETRIC=true,G=128", "DTYPE=bfloat16,SYMMETRIC=false,G=32"]
#: the wgmma path (sm_90a), one knob changed from its decode tile each, at the same shapes
WGMMA_GPU_CONFIGS = [
    ",".join(
        f"{k}={v}"
        for k, v in {
            "PATH": "wgmma",
            "BN": "256",
            "WN": "64",
            "WARPS_K": "1",
            **dict(a.split("=") for a in change.split(",") if a),
        }.items()
    )
    for change in [
        "",
        "CVT=i2f",
        "SCALE=group",
        "SPLIT_K=4,WARPS_K=2,HINT=evict_first",
        "WARPS_K=4,BK=256,STAGES=3",  # a partial last k-tile at K = 4224, 1152, 640
        "BK=32,STAGES=6",
        "BM=64,WM=32,BK=64,GROUP_M=8",
        "BM=32,WM=16,SPLIT_K=2,STAGES=3",
    ]
]


def gpu_configs(space: Space, variant: str, changes: list[str] = GPU_CONFIGS) -> list[Config]:
    """The ``changes`` (GPU_CONFIGS) valid at ``space``'s shape, with the problem variant
    ``variant``."""
    out: list[Config] = []
    for change in changes:
        assignments = [a for a in f"{variant},{change}".split(",") if a]
        config = space.parse_config(assignments, space.spec.default_config())
        if space.is_valid(config) and config not in out:
            out.append(config)
    return out


def test_the_gpu_configs_cover_every_knob_at_every_shape() -> None:
    """(CPU) What the gpu test will run: at least 4 configs per shape and variant, and over all
    of them every value of CVT, SCALE, HINT, WARPS_K, GROUP_M and a split K."""
    seen: dict[str, set[object]] = {}
    for shape in GPU_SHAPES:
        space = _space("sm_90", **shape)
        for variant in GPU_VARIANTS:
            configs = gpu_configs(space, variant)
            assert len(configs) >= 4, (shape, variant)
            for c in configs:
                for name in ("CVT", "SCALE", "HINT", "WARPS_K", "GROUP_M", "SPLIT_K", "BK"):
                    seen.setdefault(name, set()).add(c[name])
    assert seen["CVT"] == {"lop3", "i2f"} and seen["SCALE"] == {"element", "group"}
    assert seen["HINT"] == {"none", "evict_first"} and seen["WARPS_K"] == {1, 2, 4}
    assert seen["GROUP_M"] == {1, 8} and {2, 4} <= seen["SPLIT_K"] and 256 in seen["BK"]


def test_the_wgmma_gpu_configs_cover_its_knobs_at_every_shape() -> None:
    """(CPU) What the wgmma gpu test will run on sm_90a: at least 3 configs per shape and
    variant, all on the wgmma path, and over all of them every CVT, SCALE, HINT, WARPS_K,
    GROUP_M, a split K and a partial k-tile (BK = 256), tokens per warpgroup 16 and 32."""
    seen: dict[str, set[object]] = {}
    for shape in GPU_SHAPES:
        space = _space(SM90A, **shape)
        for variant in GPU_VARIANTS:
            configs = gpu_configs(space, variant, WGMMA_GPU_CONFIGS)
            assert len(configs) >= 3, (shape, variant)
            assert {c["PATH"] for c in configs} == {"wgmma"}
            for c in configs:
                for name in ("CVT", "SCALE", "HINT", "WARPS_K", "GROUP_M", "SPLIT_K", "BK", "WM"):
                    seen.setdefault(name, set()).add(c[name])
    assert seen["CVT"] == {"lop3", "i2f"} and seen["SCALE"] == {"element", "group"}
    assert seen["HINT"] == {"none", "evict_first"} and seen["WARPS_K"] == {1, 2, 4}
    assert seen["GROUP_M"] == {1, 8} and {2, 4} <= seen["SPLIT_K"] and 256 in seen["BK"]
    assert seen["WM"] == {16, 32}


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: f"M{s['M']}_N{s['N']}_K{s['K']}")
def test_w4a16_wgmma_matches_the_reference_on_the_gpu(
    shape: dict[str, int], variant: str, cache: CompileCache
) -> None:
    """The wgmma path, built for sm_90a, on a Hopper GPU: every WGMMA_GPU_CONFIGS point valid
    at the shape against the reference."""
    from gpu_checks import BRIEF, GPU

    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda import CudaRunner

    if GPU.cc != 90:
        pytest.skip(f"the wgmma path needs sm_90a (a Hopper GPU); this one is sm_{GPU.cc}")
    space = Space(load_kernel("gemm_w4a16"), shape=shape, arch=Arch.parse(SM90A))
    configs = gpu_configs(space, variant, WGMMA_GPU_CONFIGS)
    with CudaRunner(space, cache, timing=BRIEF) as runner:
        for config in configs:
            m = runner.evaluate(config)
            assert m.outcome is TrialOutcome.OK, (config, m.reason)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: f"M{s['M']}_N{s['N']}_K{s['K']}")
def test_w4a16_matches_the_reference_on_the_gpu(
    shape: dict[str, int], variant: str, cache: CompileCache
) -> None:
    from gpu_checks import BRIEF, GPU

    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda import CudaRunner

    spec = load_kernel("gemm_w4a16")
    arch = f"sm_{GPU.cc}"
    if arch not in spec.arches:
        pytest.skip(f"gemm_w4a16 does not declare {arch}")
    space = Space(spec, shape=shape, arch=Arch.parse(arch))
    configs = gpu_configs(space, variant)
    with CudaRunner(space, cache, timing=BRIEF) as runner:
        for config in configs:
            m = runner.evaluate(config)
            assert m.outcome is TrialOutcome.OK, (config, m.reason)


def test_the_device_steps_tune_with_valid_seeds_and_compare_with_both_baselines(
    tmp_path: Path,
) -> None:
    """(CPU) scripts/device_check.py's W4A16 steps: on request, the gpu tests of this file,
    tunes at two decode shapes and one prefill shape whose seeds are valid there on sm_90a (the
    newest declared arch, what a tune builds for on a Hopper GPU) and on sm_90, tunes of the
    wgmma path alone (PATH fixed) at a decode and a prefill shape, and two comparisons (fp16:
    the dense matmul; bf16: tinygemm too)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import device_check

    layout = device_check.Layout(tmp_path / "out", tmp_path / "work")
    steps = {s.name: s for s in device_check.build_steps(sys.executable, layout)}
    mine = [n for n in steps if "w4a16" in n]
    assert mine == [
        "pytest_w4a16",
        "tune_gemm_w4a16_m1",
        "tune_gemm_w4a16_m16",
        "tune_gemm_w4a16_m2048",
        "tune_gemm_w4a16_wgmma_m16",
        "tune_gemm_w4a16_wgmma_m2048",
        "compare_gemm_w4a16",
        "compare_gemm_w4a16_bf16",
    ]
    assert all(steps[n].on_request for n in mine)
    assert steps["pytest_w4a16"].argv[-1] == "tests/test_kernels_gemm_w4a16.py"
    decode = 0
    for name in mine[1:6]:
        argv = steps[name].argv
        shape = dict(
            (k, int(v))
            for k, v in (argv[i + 1].split("=") for i, a in enumerate(argv) if a == "--shape")
        )
        decode += shape["M"] <= 64
        fixed = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
        seeds = [argv[i + 1] for i, a in enumerate(argv) if a == "--enqueue"]
        wgmma = "wgmma" in name
        assert fixed == (["PATH=wgmma", "BN=256", "WN=64"] if wgmma else [])
        assert len(seeds) >= (3 if wgmma else 4)
        assert (seeds[-1] == "default") != wgmma  # the default config is PATH=mma
        for arch in [SM90A] if wgmma else [SM90A, "sm_90"]:
            space = _space(arch, **shape)
            base = space.parse_config(fixed, space.spec.default_config())
            for seed in seeds[:-1] if not wgmma else seeds:
                config = space.parse_config(seed.split(","), base)
                assert space.is_valid(config), (name, arch, seed, _reasons(space, config))
                assert config["PATH"] == ("wgmma" if wgmma else "mma")
    assert decode == 3
    bf16 = steps["compare_gemm_w4a16_bf16"].argv
    config = bf16[bf16.index("-c") + 1]
    problem = classify(_space("sm_90"), _config(**dict(a.split("=") for a in config.split(","))))
    chosen = select(load_kernel("gemm_w4a16").baselines, problem, 90, check=_installed)[0]
    assert {s.name for s in chosen if s.choice is Choice.RUN} == {"torch_dense", "torch_int4mm"}
