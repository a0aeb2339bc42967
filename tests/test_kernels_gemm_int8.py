"""gemm_int8 and gemm_w8a8: references, space files, compiles, resources and SASS (CPU only).

The kernels cannot run here; what can be checked without a GPU is checked: the references
against independent integer arithmetic, that the space's constraints leave only points that
compile without spills on every declared arch (a fixed sample, with the Hopper wgmma path on
sm_90a), that every static_assert in the kernels fires for a point its constraint rejects, and
that the binaries contain the instructions each path is about (IMMA.16832.S8.S8, LDGSTS, LDSM for
mma.sync; IGMMA.64xBNx32.S8.S8 for wgmma; IDP.4A.S8.S8 for dp4a).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from workbench.analysis import kernel_resources
from workbench.analysis.sass import SassInstruction, find_opcode, has_opcode
from workbench.compiler import CompileCache, CompileResult, compile_jobs, make_job
from workbench.references import ReferenceCall
from workbench.references.gemm import (
    gemm_int8,
    gemm_w8a8,
    int8_gemm_exact,
    w8a8_dequantize,
)
from workbench.search.problem import SpaceProblem
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.launch import launch_geometry, work_counts
from workbench.spaces.model import Config, SpaceSpec
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

ARCHES = ["sm_80", "sm_89", "sm_90", "sm_90a"]
ROOT = Path(__file__).resolve().parents[1]
#: the development space of the wgmma path (its knobs, constraints and default were merged)
WGMMA_DEV_SPACE = ROOT / "tests" / "data" / "gemm_int8_wgmma.yaml"
#: the knobs of each path; the others are pinned to their defaults on that path
_BLOCK_KNOBS = ("BM", "BN", "BK", "GROUP_M")
PATH_KNOBS = {
    "mma": (*_BLOCK_KNOBS, "WM", "WN", "STAGES", "SMEM_LAYOUT", "UNROLL", "SPLIT_K", "MIN_BLOCKS"),
    "dp4a": (*_BLOCK_KNOBS, "TM", "TN", "VEC", "UNROLL", "SPLIT_K", "MIN_BLOCKS"),
    "wgmma": (*_BLOCK_KNOBS, "STAGES", "SWIZZLE"),
    "tma_coop": (*_BLOCK_KNOBS, "STAGES"),
    "tma_pingpong": (*_BLOCK_KNOBS, "STAGES"),
}
WGMMA_KNOBS = PATH_KNOBS["wgmma"]
#: the paths that exist only on sm_90a
SM90A_PATHS = ("wgmma", "tma_coop", "tma_pingpong")
#: valid configs per path and arch compiled (no disassembly) by the "every point compiles" test,
#: besides the defaults: 4 arches x (7 + 6) + 6 wgmma + 2 x 2 TMA >= 50 (a wgmma compile takes
#: 1-2 s; tests/test_kernels_gemm_tma_ws.py compiles more of the TMA paths)
SAMPLE_PER_PATH = {"mma": 7, "dp4a": 6, "wgmma": 6, "tma_coop": 2, "tma_pingpong": 2}

Sampled = dict[str, list[tuple[Config, CompileResult]]]

# --------------------------------------------------------------------------------------------
# references


def _int8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


@pytest.mark.parametrize(
    "m,n,k",
    [(1, 1, 16), (77, 300, 160), (33, 47, 1008), (130, 70, 2048), (5, 4099, 48)],
)
def test_int8_reference_is_exact(m: int, n: int, k: int) -> None:
    """Against int64 integer arithmetic (independent of BLAS), on shapes off every tile."""
    rng = np.random.default_rng(m * 7919 + n * 31 + k)
    a, b = _int8(rng, m, k), _int8(rng, n, k)
    want = np.einsum("mk,nk->mn", a.astype(np.int64), b.astype(np.int64))
    got = int8_gemm_exact(a, b, block_rows=32)  # small blocks: exercise the blocking
    assert got.dtype == np.int32 and got.shape == (m, n)
    np.testing.assert_array_equal(got, want)
    # and against one unblocked float64 BLAS product (exact: |partial sums| < 2**53)
    np.testing.assert_array_equal(got, (a.astype(np.float64) @ b.astype(np.float64).T))


def test_int8_reference_at_the_int32_limit() -> None:
    """Worst-case inputs: K = 131071 still fits int32, K = 131072 overflows and is refused."""
    k_ok = 131071
    a = np.full((2, k_ok), -128, dtype=np.int8)
    b = np.full((3, k_ok), -128, dtype=np.int8)
    got = int8_gemm_exact(a, b)
    assert int(got[1, 2]) == 128 * 128 * k_ok == 2**31 - 2**14
    a = np.full((1, k_ok + 1), -128, dtype=np.int8)
    with pytest.raises(ValueError, match="overflow"):
        int8_gemm_exact(a, a)
    mixed = a.copy()
    mixed[0, ::2] = 127  # signs cancel: the same K is fine for these inputs
    assert int8_gemm_exact(mixed, a).shape == (1, 1)


def test_int8_reference_rejects_wrong_inputs() -> None:
    a = np.zeros((2, 16), dtype=np.int16)
    with pytest.raises(ValueError, match="int8"):
        int8_gemm_exact(a, a)
    with pytest.raises(ValueError, match=r"A\[M, K\]"):
        int8_gemm_exact(np.zeros((2, 16), np.int8), np.zeros((2, 32), np.int8))


@pytest.mark.parametrize("out", ["float16", "bfloat16", "float32"])
def test_w8a8_reference_rounds_once_from_fp32(out: str) -> None:
    """fp32 math in the kernel's order, then one rounding: within one output ulp of the
    float64 value, and equal to rounding the float32 value by another route."""
    rng = np.random.default_rng(3)
    m, n, k = 37, 65, 4096
    a, b = _int8(rng, m, k), _int8(rng, n, k)
    rs = rng.uniform(0.005, 0.05, m).astype(np.float32)
    cs = rng.uniform(1e-4, 1e-3, n).astype(np.float32)
    acc = np.einsum("mk,nk->mn", a.astype(np.int64), b.astype(np.int64))
    got = w8a8_dequantize(acc.astype(np.int32), rs, cs, out)
    dtype = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}[out]
    assert got.dtype == np.dtype(dtype)
    exact = acc * rs.astype(np.float64)[:, None] * cs.astype(np.float64)[None, :]
    ulp = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23}[out]
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= ulp * np.abs(exact) + 2.0**-24)
    # float32 products by hand, element by element, then the dtype's round-to-nearest-even
    by_hand = np.array(
        [[np.float32(np.float32(acc[i, j]) * rs[i]) * cs[j] for j in range(n)] for i in range(m)],
        dtype=np.float32,
    ).astype(dtype)
    np.testing.assert_array_equal(got.view(np.uint8), by_hand.view(np.uint8))


def test_reference_functions_follow_the_runner_convention() -> None:
    rng = np.random.default_rng(5)
    m, n, k = 20, 24, 64
    inputs = {
        "A": _int8(rng, m, k),
        "B": _int8(rng, n, k),
        "row_scale": rng.uniform(0.005, 0.05, m).astype(np.float32),
        "col_scale": rng.uniform(1e-4, 1e-3, n).astype(np.float32),
    }
    shape = {"M": m, "N": n, "K": k}
    raw = gemm_int8(ReferenceCall(inputs, {"M": m, "N": n, "K": k}, shape, {"OUT": "int32"}))
    assert set(raw) == {"C"} and raw["C"].dtype == np.int32
    w8a8 = gemm_w8a8(ReferenceCall(inputs, {}, shape, {"OUT": "bfloat16"}))
    assert w8a8["C"].dtype == np.dtype(ml_dtypes.bfloat16)
    want = raw["C"].astype(np.float32) * inputs["row_scale"][:, None] * inputs["col_scale"]
    np.testing.assert_array_equal(w8a8["C"], want.astype(ml_dtypes.bfloat16))


# --------------------------------------------------------------------------------------------
# the space files


def wgmma_default(spec: SpaceSpec) -> Config:
    """The wgmma path's default (that of its development space): 2 warpgroups, 128 x 256 x 128,
    4 stages, 128-byte swizzle; every other knob at the space default."""
    return dict(spec.default_config(), PATH="wgmma", BM=128, BN=256, BK=128)


def _wgmma_knobs(config: Config) -> tuple[object, ...]:
    return tuple(config[n] for n in WGMMA_KNOBS)


def path_sample(space: Space, path: str, n: int, seed: int) -> list[Config]:
    """``n`` distinct valid configs of one path, uniformly at random: its own knobs drawn from
    their domains, the pinned ones at their defaults (a uniform sample of the whole space is
    slow to draw, about 0.1% of the cartesian product is valid, and rarely reaches wgmma)."""
    spec, rng = space.spec, random.Random(seed)
    domains = {k: spec.parameter(k).values for k in PATH_KNOBS[path]}
    found: list[Config] = []
    for _ in range(100_000):
        config = dict(spec.default_config(), PATH=path)
        config.update({k: rng.choice(v) for k, v in domains.items()})
        if config not in found and space.is_valid(config):
            found.append(config)
            if len(found) == n:
                return found
    raise AssertionError(f"only {len(found)} valid {path} configs found")


def wgmma_points(space: Space) -> list[Config]:
    """Every valid PATH=wgmma point of ``space`` (its other knobs are pinned to one value)."""
    spec = space.spec
    out = []
    for values in itertools.product(*(spec.parameter(n).values for n in WGMMA_KNOBS)):
        config = dict(
            spec.default_config(), PATH="wgmma", **dict(zip(WGMMA_KNOBS, values, strict=True))
        )
        if space.is_valid(config):
            out.append(config)
    return out


def test_every_constraint_says_why() -> None:
    for name in ("gemm_int8", "gemm_w8a8"):
        for c in load_kernel(name).constraints:
            assert c.reason, f"{name}: constraint `{c.expr.text}` has no reason"


def test_gemm_w8a8_is_gemm_int8_with_the_w8a8_epilogue() -> None:
    """One file, two names: gemm_w8a8 is gemm_int8 with EPI=w8a8 (the same knobs, constraints,
    geometry and shapes: they are written once), its output type a problem variant that a
    search keeps at float16 unless told; ``gemm_int8 --set EPI=w8a8`` is the same problem."""
    raw, w8a8 = load_kernel("gemm_int8"), load_kernel("gemm_w8a8")
    assert w8a8.name == "gemm_w8a8" and w8a8.path == raw.path
    assert w8a8.constraints == raw.constraints and w8a8.derived == raw.derived
    assert w8a8.parameter("EPI").values == ("w8a8",)
    out = w8a8.parameter("OUT")
    assert out.values == ("float16", "bfloat16", "float32") and out.default == "float16"
    assert not out.tunable
    sm90 = Arch.parse("sm_90")
    problem = SpaceProblem(Space(w8a8, arch=sm90))
    assert problem.pinned == {"EPI": "w8a8", "OUT": "float16"}
    assert problem.kernel == "gemm_w8a8[OUT=float16]"  # the label studies had before the fold
    assert SpaceProblem(Space(w8a8, arch=sm90), {"OUT": "float32"}).kernel == (
        "gemm_w8a8[OUT=float32]"
    )
    via = SpaceProblem(Space(raw, arch=sm90), {"EPI": "w8a8"})
    assert (via.pinned, via.kernel, via.defaults()) == (
        problem.pinned,
        problem.kernel,
        problem.defaults(),
    )
    assert SpaceProblem(Space(raw, arch=sm90)).kernel == "gemm_int8"
    # the raw epilogue writes int32 only, the W8A8 one a float type (the kernel's #error too)
    assert Space(raw, arch=sm90).explain(dict(raw.default_config(), OUT="float16"))


def test_spaces_declare_the_five_paths() -> None:
    for name in ("gemm_int8", "gemm_w8a8"):
        spec = load_kernel(name)
        assert list(spec.arches) == ARCHES
        assert spec.parameter("PATH").values == ("mma", "dp4a", *SM90A_PATHS)
        whens = {e.when.text: e.opcodes for e in spec.expect_sass}
        assert whens["PATH == 'wgmma'"] == ("IGMMA",)
        assert whens["ws"] == ("UTMALDG", "SYNCS", "IGMMA", "USETMAXREG")
        # the default (mma) is valid on every declared arch, the Hopper paths on sm_90a only
        tma = [dict(wgmma_default(spec), PATH=p) for p in ("tma_coop", "tma_pingpong")]
        tma[1].update(BN=128)  # a 128 x 256 tile per warpgroup would not fit its registers
        for arch in ARCHES:
            space = Space(spec, arch=Arch.parse(arch))
            assert space.is_valid(spec.default_config()), arch
            assert space.is_valid(wgmma_default(spec)) == (arch == "sm_90a"), arch
            assert all(space.is_valid(c) == (arch == "sm_90a") for c in tma), arch


#: the config the H200 tunes of 2026-12-04 found fastest at 8192^3 (1,276 TOPS) and 4096^3
#: (1,083), against 799 and 720 for the mma default (see `defaults:` in gemm_int8.yaml)
H200_BEST = {
    "PATH": "wgmma", "BM": 128, "BN": 256, "BK": 128, "WM": 64, "WN": 64, "STAGES": 4,
    "SMEM_LAYOUT": "swizzle", "SWIZZLE": 128, "TM": 8, "TN": 8, "VEC": 16, "UNROLL": 2,
    "GROUP_M": 8, "SPLIT_K": 1, "MIN_BLOCKS": 1, "EPI": "raw", "OUT": "int32",
    "SCHED": "static", "RASTER": "m",  # (the TMA paths' scheduler knobs, pinned for wgmma)
    "EPILOGUE": "direct",  # (the TMA paths' epilogue knob, pinned for wgmma)
    "CLUSTER_M": 1, "CLUSTER_N": 1,  # (the TMA paths' cluster knobs, pinned for wgmma)
}  # fmt: skip


def test_the_sm_90a_default_is_the_config_measured_fastest_on_the_h200() -> None:
    """What compile, run, profile and compare take by default, and tune evaluates first, on
    sm_90a (the newest arch, so also with no --arch); the other arches keep the mma default."""
    from workbench.search.configs import select_configs

    spec = load_kernel("gemm_int8")
    space = Space(spec)
    assert space.arch.sm == "sm_90a"
    assert space.default_config() == H200_BEST
    assert select_configs(space) == [H200_BEST]
    assert SpaceProblem(space).defaults() == [H200_BEST]
    for arch in ("sm_80", "sm_89", "sm_90"):
        default = Space(spec, arch=Arch.parse(arch)).default_config()
        assert default == spec.default_config() and default["PATH"] == "mma", arch
    # gemm_w8a8 keeps its mma default everywhere until its wgmma path is measured (see its file)
    w8a8 = load_kernel("gemm_w8a8")
    assert Space(w8a8).default_config() == w8a8.default_config()


def test_wgmma_slice_matches_the_development_space() -> None:
    """On their common domain the merged space's PATH=wgmma points are exactly the valid points
    of the wgmma development space (same constraints, same register and shared-memory limits),
    with its default among them; every knob the wgmma path ignores is pinned to one value."""
    dev = load_space(WGMMA_DEV_SPACE)
    spec = load_kernel("gemm_int8")
    arch = Arch.parse("sm_90a")
    dev_space, space = Space(dev, arch=arch), Space(spec, arch=arch)
    merged = wgmma_points(space)
    assert len(merged) > 1000
    assert wgmma_default(spec) in merged
    assert {k: dev.default_config()[k] for k in WGMMA_KNOBS} == {
        k: wgmma_default(spec)[k] for k in WGMMA_KNOBS
    }
    common = {n: set(dev.parameter(n).values) & set(spec.parameter(n).values) for n in WGMMA_KNOBS}
    assert all(len(v) >= 2 for v in common.values()), common
    in_common = [c for c in merged if all(c[n] in common[n] for n in WGMMA_KNOBS)]
    dev_valid = [c for c in dev_space.iter_valid() if all(c[n] in common[n] for n in WGMMA_KNOBS)]
    assert sorted(map(_wgmma_knobs, in_common)) == sorted(map(_wgmma_knobs, dev_valid))
    # the ignored knobs take one value each: no two wgmma points give the same binary
    ignored = [p.name for p in spec.parameters if p.name not in (*WGMMA_KNOBS, "PATH")]
    assert {tuple(c[n] for n in ignored) for c in merged} == {
        tuple(spec.default_config()[n] for n in ignored)
    }


def test_default_launch_and_work_model() -> None:
    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse("sm_90"))
    default = spec.default_config()
    assert space.is_valid(default)
    launch = launch_geometry(space, default)
    # 128 x 128 tiles of 4096 x 4096, 4 warps of 64 x 64, 4 stages of (128 + 128) x 64 bytes
    assert launch.grid == (32 * 32, 1, 1) and launch.block == (128, 1, 1)
    assert launch.shared_bytes == 4 * 256 * 64
    flops, nbytes = work_counts(space, default)
    assert flops == 2 * 4096**3 and nbytes == 2 * 4096**2 + 4 * 4096**2
    assert spec.work.unit == "TOPS"
    split = dict(default, SPLIT_K=4)
    assert launch_geometry(space, split).grid == (1024, 1, 4)
    assert set(spec.shape_sets) == {"square", "llm_decode", "llm_prefill", "compare", "odd"}
    layers = {(4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096)}
    for name, ms in (("llm_decode", {1, 16, 64, 128}), ("llm_prefill", {512, 2048, 8192})):
        shapes = spec.shape_sets[name]
        assert {(s["M"], s["N"], s["K"]) for s in shapes} == {
            (m, n, k) for m in ms for n, k in layers
        }


def _reasons(space: Space, config: Config) -> list[str]:
    return [v.message for v in space.explain(config)]


def test_constraints_reject_with_reasons() -> None:
    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse("sm_90"))
    d = spec.default_config()
    cases: list[tuple[Mapping[str, object], str]] = [
        ({"PATH": "dp4a", "WM": 32}, "only exist in the mma and wgmma paths"),
        ({"TM": 4}, "only exist in the dp4a path"),
        ({"VEC": 8}, "cp.async.cg"),
        ({"BM": 32}, "BM % WM == 0"),
        ({"BK": 32, "UNROLL": 2}, "(BK/32) % UNROLL"),
        ({"BM": 256, "BN": 256, "WM": 16, "WN": 16}, "threads per block"),
        ({"WN": 128}, "spill"),  # 64 x 128 warp tiles: 128 accumulators + fragments > 255
        ({"PATH": "dp4a", "BM": 16, "BN": 16}, "whole warps"),
    ]
    for change, reason in cases:
        config = dict(d, **change)
        assert any(reason in r for r in _reasons(space, config)), (change, _reasons(space, config))
    # the shape's own requirements
    odd_k = Space(spec, arch=Arch.parse("sm_90"), shape={"M": 64, "N": 64, "K": 1000})
    assert any("16-byte" in r for r in _reasons(odd_k, d))
    huge_k = Space(spec, arch=Arch.parse("sm_90"), shape={"M": 64, "N": 64, "K": 131072})
    assert any("overflow" in r for r in _reasons(huge_k, d))
    short_k = Space(spec, arch=Arch.parse("sm_90"), shape={"M": 64, "N": 64, "K": 192})
    assert any("at least one k-tile" in r for r in _reasons(short_k, dict(d, SPLIT_K=4)))
    # sm_89 (99 KB per block) rejects what sm_90 (227 KB) takes
    big = dict(d, STAGES=5, BM=256, BN=128, WM=64, WN=64)
    assert space.is_valid(big)
    sm89 = Space(spec, arch=Arch.parse("sm_89"))
    assert any("shared memory" in r for r in _reasons(sm89, big))
    # one-warp blocks with 128-byte k-tiles: 24 copies per thread per stage spill on ptxas 13
    one_warp = dict(d, BM=64, BN=32, BK=128, WM=64, WN=32)
    assert any("16-byte copies" in r for r in _reasons(space, one_warp))
    # SWIZZLE is a wgmma knob
    assert any("only exists in the wgmma path" in r for r in _reasons(space, dict(d, SWIZZLE=64)))


def test_wgmma_constraints_reject_with_reasons() -> None:
    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse("sm_90a"))
    wg = wgmma_default(spec)
    assert space.is_valid(wg)
    sm90 = Space(spec, arch=Arch.parse("sm_90"))
    assert any("sm_90a" in r for r in _reasons(sm90, wg))
    cases: list[tuple[Mapping[str, object], str]] = [
        ({"BM": 32}, "64 rows of the block tile"),
        ({"BK": 64}, "whole swizzle atoms"),  # 64 bytes of K, 128-byte swizzle
        ({"STAGES": 2}, "at least one being loaded"),
        ({"SPLIT_K": 2}, "no split-K"),
        ({"UNROLL": 4}, "not wgmma knobs"),
        ({"WM": 32}, "not wgmma knobs"),
        ({"TM": 4}, "only exist in the dp4a path"),
        ({"VEC": 8}, "cp.async.cg"),
        ({"BM": 256, "BN": 256, "STAGES": 3}, "spill"),  # 128 accumulators, 128 registers
        ({"STAGES": 6}, "shared memory"),  # 6 x 48 KB + 1 KB > 227 KB
    ]
    for change, reason in cases:
        config = dict(wg, **change)
        assert any(reason in r for r in _reasons(space, config)), (change, _reasons(space, config))
    # 64 rows x 256 columns per warpgroup and 4 stages of 128 + 256 rows x 128 bytes
    launch = launch_geometry(space, wg)
    assert launch.grid == (32 * 16, 1, 1) and launch.block == (256, 1, 1)
    assert launch.shared_bytes == 4 * 384 * 128 + 1024


def test_random_points_compile_or_are_rejected_with_a_reason() -> None:
    """Points drawn from the whole cartesian product: each invalid one names its reasons."""
    spec = load_kernel("gemm_int8")
    rng = random.Random(17)
    for arch in ARCHES:
        space = Space(spec, arch=Arch.parse(arch))
        for _ in range(300):
            config = {p.name: rng.choice(p.values) for p in spec.parameters}
            for v in space.explain(config):
                assert v.constraint is not None and v.constraint.reason, v.message


# --------------------------------------------------------------------------------------------
# compiles


@pytest.fixture(scope="module")
def sampled(cache: CompileCache) -> Sampled:
    """Per arch: the default, the dp4a default, and a fixed-seed sample of valid configs of each
    path (wgmma: sm_90a only, with its default), compiled (no disassembly)."""
    spec = load_kernel("gemm_int8")
    out: Sampled = {}
    for i, arch in enumerate(ARCHES):
        space = Space(spec, arch=Arch.parse(arch))
        configs = [spec.default_config(), dict(spec.default_config(), PATH="dp4a")]
        if arch == "sm_90a":
            configs.append(wgmma_default(spec))
        for path, n in SAMPLE_PER_PATH.items():
            if path not in SM90A_PATHS or arch == "sm_90a":
                configs += [c for c in path_sample(space, path, n, 100 + i) if c not in configs]
        assert all(space.is_valid(c) for c in configs)
        results = compile_jobs([make_job(space, c) for c in configs], cache)
        out[arch] = list(zip(configs, results, strict=True))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHES)
def test_sampled_configs_compile_without_spills(arch: str, sampled: Sampled) -> None:
    pairs = sampled[arch]
    assert len(pairs) >= 12
    paths = {c["PATH"] for c, _ in pairs}
    assert paths == ({"mma", "dp4a", *SM90A_PATHS} if arch == "sm_90a" else {"mma", "dp4a"})
    for config, result in pairs:
        assert result.ok, (config, result.log[-2000:])
        res = kernel_resources(result.cubin, result.log)[result.entry]
        # the register constraint promises no spills under the launch-bounds cap
        assert res.spill_stores == 0 and res.spill_loads == 0, (config, res)
        assert res.stack_frame == 0, (config, res)
        assert res.max_reg_count is None or res.registers <= res.max_reg_count


@pytest.mark.parametrize("arch", ARCHES)
def test_defaults_issue_tensor_core_and_dp4a_instructions(arch: str, cache: CompileCache) -> None:
    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse(arch))
    mma = spec.default_config()
    dp4a = dict(mma, PATH="dp4a")
    records = static_sweep(space, [mma, dp4a], cache=cache)
    for r in records:
        assert r.ok, r.error
        assert r.lints == [], r.lints  # expect_sass satisfied, no spills, no local memory
        assert r.spill_stores == 0 and r.stack_frame == 0
    rm, rd = records
    sm, sd = _sass(space, mma, cache), _sass(space, dp4a, cache)
    # 128 x 128 x 64 tile, 4 warps of 64 x 64, BK/32 = 2 k-steps unrolled: 2 * 4 * 8 mma.sync
    assert len(find_opcode(sm, "IMMA.16832.S8.S8")) == 64 == rm.opcodes["IMMA"]
    assert not has_opcode(sm, "IDP") and not has_opcode(sm, "IGMMA")
    # cp.async.cg 16 bytes, its commit/wait, ldmatrix.x4: 4 for A and 4 for B per k-step
    assert has_opcode(sm, "LDGSTS.E.BYPASS.128") and has_opcode(sm, "DEPBAR")
    assert len(find_opcode(sm, "LDSM.16.M88.4")) == 16 == rm.opcodes["LDSM"]
    assert rm.registers is not None and rm.registers <= 255
    assert rm.dynamic_smem == 65536 and rm.static_smem == 0
    # dp4a default: 8 x 8 outputs per thread, BK/4 = 16 k-words unrolled by 2: 2 * 64 dp4a
    assert len(find_opcode(sd, "IDP.4A.S8.S8")) == 128
    assert not has_opcode(sd, "IMMA") and not has_opcode(sd, "LDGSTS")
    assert rd.dynamic_smem == 2 * 16 * (128 + 128 + 8) * 4


def test_wgmma_default_issues_warpgroup_mma(cache: CompileCache) -> None:
    """The Hopper path on sm_90a: one IGMMA.64x256x32 per 32 bytes of K, pipelined (ptxas does
    not serialize it), fed by cp.async; no mma.sync, no spills."""
    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse("sm_90a"))
    wg = wgmma_default(spec)
    (r,) = static_sweep(space, [wg], cache=cache)
    assert r.ok, r.error
    assert r.lints == [], r.lints  # expect_sass (IGMMA) satisfied, no spills, no local memory
    assert r.spill_stores == 0 and r.stack_frame == 0
    assert "serialized" not in r.log
    assert r.threads_per_block == 256 and r.dynamic_smem == 4 * 384 * 128 + 1024
    assert r.registers is not None and r.registers <= 255
    sass = _sass(space, wg, cache)
    # BK / 32 = 4 wgmma per k-tile, all 64 x 256 x 32, s8 x s8
    assert len(find_opcode(sass, "IGMMA.64x256x32.S8.S8")) == 4 == r.opcodes["IGMMA"]
    assert has_opcode(sass, "WARPGROUP.ARRIVE") and has_opcode(sass, "WARPGROUP.DEPBAR.LE")
    assert has_opcode(sass, "LDGSTS.E.BYPASS.128")
    assert not has_opcode(sass, "IMMA") and not has_opcode(sass, "IDP")


def _sass(space: Space, config: Config, cache: CompileCache) -> list[SassInstruction]:
    """The kernel's SASS (compiled and disassembled once: answered from ``cache`` after a sweep)."""
    (result,) = compile_jobs([make_job(space, config)], cache)
    assert result.ok and result.entry is not None
    return sass_of(result, cache)[result.entry]


def test_split_k_reduces_through_atomics(cache: CompileCache) -> None:
    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse("sm_90"))
    (r,) = static_sweep(space, [dict(spec.default_config(), SPLIT_K=4)], cache=cache)
    assert r.ok and r.lints == []
    assert any(op.startswith(("ATOMG.E.ADD", "RED")) for op in r.global_memory_ops)
    assert any(op.startswith("LDG.E.STRONG.GPU") for op in r.global_memory_ops)  # __ldcg
    assert r.opcodes.get("MEMBAR", 0) >= 1  # __threadfence


# --------------------------------------------------------------------------------------------
# static_asserts back up the constraints


@pytest.mark.parametrize(
    "arch,change,message",
    [
        ("sm_90", {"BM": 32}, "BM % WM == 0"),
        ("sm_90", {"BN": 32}, "BN % WN == 0"),
        ("sm_90", {"BK": 32, "UNROLL": 2}, "(BK/32) % UNROLL == 0"),
        ("sm_90", {"BM": 256, "BN": 256, "WM": 16, "WN": 16}, "at most 1024 threads"),
        ("sm_89", {"STAGES": 5, "BM": 256, "BN": 128}, "shared memory per block"),
        ("sm_90", {"PATH": "dp4a", "BM": 16, "BN": 16}, "whole warps"),
        (
            "sm_89",
            {"PATH": "dp4a", "BK": 128, "BM": 256, "BN": 256, "TM": 8, "TN": 8},
            "shared memory per block",
        ),
        # outside the domains (the domains guarantee these relations)
        ("sm_90", {"WM": 24, "BM": 96}, "WM % 16 == 0"),
        ("sm_90", {"BK": 256}, "BK in {32, 64, 128}"),
        ("sm_90", {"STAGES": 1}, "STAGES >= 2"),
        ("sm_90", {"PATH": "dp4a", "TN": 3, "BN": 96}, "TN even"),
        ("sm_90", {"PATH": "dp4a", "VEC": 2}, "VEC in {4, 8, 16}"),
        ("sm_90", {"PATH": "dp4a", "BK": 32, "UNROLL": 16}, "(BK/4) % UNROLL == 0"),
        ("sm_90", {"EPI": "w8a8"}, "EPI=w8a8 dequantises"),
        ("sm_90", {"OUT": "float16"}, "EPI=raw writes the int32 accumulators"),
        # the wgmma path (from its default: 128 x 256 x 128, 4 stages, 128-byte swizzle)
        ("sm_90", {"PATH": "wgmma"}, "needs the architecture-specific target sm_90a"),
        ("sm_90a", {"PATH": "wgmma", "BM": 32}, "BM: 64 rows per warpgroup"),
        ("sm_90a", {"PATH": "wgmma", "BK": 64}, "BK: whole swizzle atoms"),
        ("sm_90a", {"PATH": "wgmma", "STAGES": 2}, "STAGES: one slot multiplied"),
        ("sm_90a", {"PATH": "wgmma", "SPLIT_K": 2}, "SPLIT_K: this path runs the whole K range"),
        # outside the domain
        ("sm_90a", {"PATH": "wgmma", "BN": 40}, "BN: a legal N of wgmma s8"),
    ],
)
def test_kernel_preconditions_back_up_the_constraints(
    arch: str, change: dict[str, object], message: str, cache: CompileCache
) -> None:
    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse(arch))
    start = wgmma_default(spec) if change.get("PATH") == "wgmma" else spec.default_config()
    config = dict(start, **change)
    assert space.explain(config), f"{change} should be rejected by the space"
    (result,) = compile_jobs([make_job(space, config)], cache)
    assert not result.ok
    assert message in result.log, result.log[-1500:]


# --------------------------------------------------------------------------------------------
# W8A8: the three output types


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_90", "sm_90a"])
def test_w8a8_compiles_for_every_output_type(arch: str, cache: CompileCache) -> None:
    spec = load_kernel("gemm_w8a8")
    space = Space(spec, arch=Arch.parse(arch))
    if arch == "sm_90":
        # the epilogue is shared code: every type on the mma path, one on the dp4a path
        configs = [
            dict(spec.default_config(), OUT=out) for out in ("float16", "bfloat16", "float32")
        ]
        configs.append(dict(spec.default_config(), PATH="dp4a", OUT="bfloat16"))
    else:  # and on the wgmma path, from its accumulator layout
        configs = [dict(wgmma_default(spec), OUT=out) for out in ("bfloat16", "float32")]
    assert all(space.is_valid(c) for c in configs)
    records = static_sweep(space, configs, cache=cache)
    pack = {"float16": "F2FP.F16.F32.PACK_AB", "bfloat16": "F2FP.BF16.F32.PACK_AB"}
    for r in records:
        assert r.ok and r.lints == [], (r.config, r.error, r.lints)
        assert r.spill_stores == 0
        sass = _sass(space, r.config, cache)
        assert has_opcode(sass, "I2FP.F32.S32") and has_opcode(sass, "FMUL")  # float(acc) * s
        out = r.config["OUT"]
        if out in pack:
            assert has_opcode(sass, pack[out]), r.opcodes  # two fp32 -> one 16-bit pair
            assert "STG.E" in r.global_memory_ops  # a pair of 16-bit outputs: one 4-byte store
        else:
            assert not has_opcode(sass, "F2FP")
            assert "STG.E.64" in r.global_memory_ops  # a pair of floats: one 8-byte store
        assert spec.outputs[0].dtype_for(space.env(r.config)).value == out
