"""attention_decode: the reference, the space file, the kernel's math, compiles, resources, SASS
and the second launch (CPU only).

The kernel cannot run here; what can be checked without a GPU is checked: the reference against
a float64 one and the paged layout against the contiguous one on the same data; a NumPy mirror
of the kernel's index math and merges (tests/attention_mirror.py) against the reference within
the space's tolerance at the odd shapes, for every variant, and a broken combine outside it; the
input draws against the reference quantizer; the quantization error of int8 / fp8 caches
against the fp16 cache; the constraints with their static_asserts; sampled points compiling
without spills on sm_80, sm_89 and sm_90a (slow); SHFL, EX2 and the load forms in SASS; the
combine kernel's launch through the CUDA worker on host memory.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
from attention_mirror import cache_row, mirror
from cli_helpers import invoke
from gpu_checks import gpu
from host_device import HostDevice

from workbench.analysis import kernel_resources
from workbench.analysis.sass import SassInstruction, find_opcode, has_opcode, streaming_loads
from workbench.analysis.signature import then_problems
from workbench.compare.baselines import REGISTRY
from workbench.compare.problems import Family, classify
from workbench.compiler import CompileCache, compile_jobs, make_job
from workbench.references import ReferenceCall
from workbench.references.attention import (
    PAGE,
    CacheLayout,
    attention_decode,
    decode_attention,
    dequantized_cache,
    kv_error,
    layout_of,
    quantize_kv,
)
from workbench.runners.buffers import input_specs, make_inputs
from workbench.runners.cuda.worker import CudaExecutor
from workbench.runners.input_sets import InputSets
from workbench.runners.kernel_jobs import kernel_job, then_steps
from workbench.runners.protocol import LoadInputs, RunOnce
from workbench.runners.verify import tolerance_for
from workbench.spaces import Space, load_kernel
from workbench.spaces.launch import launch_geometry
from workbench.spaces.model import Config, Shape
from workbench.static.sweep import sass_of
from workbench.toolchain import Arch

ROOT = Path(__file__).resolve().parents[1]
ARCHES = ["sm_80", "sm_89", "sm_90a"]
ODD: list[Shape] = list(load_kernel("attention_decode").shape_sets["odd"])
SMALL: Shape = {"B": 3, "Hkv": 2, "S": 1001, "S_MIN": 1001}


def _space(arch: str = "sm_90a", **shape: int) -> Space:
    spec = load_kernel("attention_decode")
    return Space(spec, arch=Arch.parse(arch), shape={**spec.default_shape, **shape})


def _config(**change: object) -> Config:
    return dict(load_kernel("attention_decode").default_config(), **change)


def _problem(shape: Shape, **change: object) -> tuple[Space, Config, dict[str, np.ndarray]]:
    space = _space("sm_90a", **shape)
    config = _config(**change)
    assert space.is_valid(config), [v.message for v in space.explain(config)]
    return space, config, make_inputs(space, 0, config)


def _exact(inputs: dict[str, np.ndarray], config: Config, shape: Shape) -> np.ndarray:
    """float64 attention on the float64 dequantized cache."""
    call = ReferenceCall(inputs, {}, shape, config)
    keys, values = dequantized_cache(
        inputs,
        kv=str(config["KV"]),
        kscale=str(config["KSCALE"]),
        layout=layout_of(call),
        seq_lens=inputs["seq_lens"],
        hkv=int(shape["Hkv"]),
        dtype=np.float64,
    )
    return decode_attention(inputs["q"], keys, values, np.float64)


def _within(space: Space, config: Config, got: np.ndarray, expected: np.ndarray) -> bool:
    tol = tolerance_for(space.spec.reference, space.env(config))  # type: ignore[arg-type]
    bound = tol.atol + tol.rtol * np.abs(expected.astype(np.float64))
    return bool(np.all(np.abs(got.astype(np.float64) - expected.astype(np.float64)) <= bound))


# --------------------------------------------------------------------------------------------
# the reference


VARIANTS = [
    {"KV": "int8"},
    {"KV": "fp8"},
    {"KV": "fp16", "VEC": 8},
    {"KV": "int8", "KSCALE": "channel"},
    {"KV": "int8", "LAYOUT": "paged"},
    {"KV": "fp8", "KSCALE": "channel", "LAYOUT": "paged", "QTYPE": "bfloat16"},
    {"KV": "int8", "HEAD_DIM": 64, "VEC": 8, "GROUP": 8},
    {"KV": "fp16", "VEC": 8, "GROUP": 1, "HEAD_DIM": 64},
]


@pytest.mark.parametrize(
    "change", VARIANTS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
)
def test_reference_matches_a_float64_one(change: dict[str, object]) -> None:
    """The float32 reference, rounded to QTYPE, against float64 attention on a float64
    dequantization, within the space's tolerance; the unrounded float32 result within 2^-15."""
    for shape in (SMALL, {"B": 5, "Hkv": 1, "S": 4099, "S_MIN": 1}):
        space, config, inputs = _problem(shape, **change)
        exact = _exact(inputs, config, shape)
        out = attention_decode(ReferenceCall(inputs, {}, shape, config))["out"]
        assert out.shape == exact.shape and out.dtype.itemsize == 2
        assert _within(space, config, out, exact)
        assert np.abs(out.astype(np.float64)).max() > 0.1  # (outputs of a useful size)


def test_reference_softmax_is_attention() -> None:
    """A by-hand check of decode_attention: one query against two keys, weights by hand."""
    q = np.array([[[1.0, 0.0]]])  # B=1, Hq=1, D=2
    k = [[np.array([[2.0, 0.0], [0.0, 0.0]])]]
    v = [[np.array([[1.0, 3.0], [5.0, -1.0]])]]
    w = np.exp(np.array([2.0, 0.0]) / np.sqrt(2.0))
    w /= w.sum()
    expected = w @ v[0][0]
    assert np.allclose(decode_attention(q, k, v, np.float64)[0, 0], expected, rtol=1e-12)


@pytest.mark.parametrize("kv", ["int8", "fp8", "fp16"])
def test_paged_layout_gives_the_contiguous_result(kv: str) -> None:
    """The same cache stored contiguously and in pages (a permuted block table): the
    reference's outputs are bit-identical, and the kernel's row formula (``cache_row``, mirrored)
    finds every token of the paged pool where the contiguous one has it."""
    shape: Shape = {"B": 3, "Hkv": 2, "S": 70, "S_MIN": 5}
    change = {"KV": kv} | ({"VEC": 8} if kv == "fp16" else {})
    _, config, inputs = _problem(shape, **change)
    batch, hkv, s, d = 3, 2, 70, 128
    pages = -(-s // PAGE)
    rng = np.random.default_rng(7)
    table = (rng.permutation(batch * pages) + 1).astype(np.int32)

    def to_pages(x: np.ndarray) -> np.ndarray:  # [B, Hkv, S, ...] -> [B*pages+1, Hkv, 16, ...]
        pad = np.zeros((batch, hkv, pages * PAGE, *x.shape[3:]), x.dtype)
        pad[:, :, :s] = x
        pool = np.zeros((batch * pages + 1, hkv, PAGE, *x.shape[3:]), x.dtype)
        for b in range(batch):
            for p in range(pages):
                pool[table[b * pages + p]] = pad[b, :, p * PAGE : (p + 1) * PAGE]
        return pool

    paged = dict(inputs, block_table=table)
    paged["k"], paged["v"] = to_pages(inputs["k"]), to_pages(inputs["v"])
    if kv != "fp16":
        for name in ("k_scale", "v_scale"):
            tok = inputs[name].reshape(batch, hkv, s)
            paged[name] = to_pages(tok).reshape(-1)
    contiguous = attention_decode(ReferenceCall(inputs, {}, shape, config))["out"]
    pconfig = dict(config, LAYOUT="paged")
    assert _space("sm_90a", **shape).is_valid(pconfig)
    got = attention_decode(ReferenceCall(paged, {}, shape, pconfig))["out"]
    assert np.array_equal(got.view(np.uint16), contiguous.view(np.uint16))
    # the kernel's addressing: token t of sequence b is row cache_row(...) of the pool
    flat_pool, flat = paged["k"].reshape(-1, d), inputs["k"].reshape(-1, d)
    for b in range(batch):
        for hk in range(hkv):
            for t in (0, 15, 16, 17, 69):
                row = cache_row(b, hk, t, hkv, s, table)
                assert np.array_equal(flat_pool[row], flat[cache_row(b, hk, t, hkv, s, None)])
    layout = CacheLayout(True, table, pages)
    slab, row = layout.rows(2, 33)
    assert (slab[16:32] == table[2 * pages + 1]).all() and (row[:16] == np.arange(16)).all()


# --------------------------------------------------------------------------------------------
# the kernel's math, mirrored in NumPy


MIRRORED = [
    {"SPLITS": 4},
    {"SPLITS": 4, "COMBINE": "last", "KV": "fp8"},
    {"SPLITS": 8, "KV": "fp16", "VEC": 8, "LAYOUT": "paged"},
    {"SPLITS": 16, "KSCALE": "channel", "DEQUANT": "before", "THREADS": 256, "KEYS": 64},
    {"SPLITS": 2, "KSCALE": "channel", "LAYOUT": "paged", "VEC": 4, "KEYS": 16},
    {"SPLITS": 64, "HEADS": "q", "DEQUANT": "before", "THREADS": 64, "KEYS": 8},
    {"HEAD_DIM": 64, "VEC": 8, "GROUP": 8, "THREADS": 256, "KEYS": 64, "SPLITS": 4},
    {"GROUP": 1, "QTYPE": "bfloat16", "KV": "fp8", "SPLITS": 32, "LAYOUT": "paged"},
]


@pytest.mark.parametrize(
    "change", MIRRORED, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items())
)
def test_the_kernels_math_matches_the_reference_within_the_tolerance(
    change: dict[str, object],
) -> None:
    """The mirror of the kernel's splits, key slots, online softmax, merges and combine, at the
    odd shapes (S = 1001, 1, 4099 mixed down to 1, 333), against the reference within the
    space's tolerance and close to float64; leaving one slice out of the combine is caught."""
    caught = 0
    for shape in ODD:
        space, config, inputs = _problem(shape, **change)
        expected = attention_decode(ReferenceCall(inputs, {}, shape, config))["out"]
        got = mirror(inputs, config, shape)
        assert _within(space, config, got, expected), shape
        exact = _exact(inputs, config, shape)
        error = np.abs(got - exact).max()
        assert error < 2e-5, shape
        if int(shape["S_MIN"]) >= int(config["SPLITS"]) > 1:  # (every slice holds keys)
            broken = mirror(inputs, config, shape, drop_split=1)
            assert np.abs(broken - exact).max() > 100 * error, shape
            # fp16's tolerance sees it; bf16's (one bf16 ulp, 8 times wider) may not when the
            # slice is 1/32 of the keys and holds none of the dominant ones
            caught += not _within(space, config, broken, expected)
    assert caught >= 1 or config["SPLITS"] == 1 or config["QTYPE"] == "bfloat16"


# --------------------------------------------------------------------------------------------
# inputs and quantization error


def test_inputs_are_drawn_like_the_reference_quantizers_codes() -> None:
    """The space draws codes N(0, 40) (int8) and N(0, 140) (E4M3) and scales in one range:
    what quantize_kv makes of N(0, 1) keys of 128 channels (per token, and per channel over
    4096 tokens) lies there; the paged block table maps every page but the null page once."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4096, 128)).astype(np.float32)
    for fmt, drawn_std in (("int8", 40), ("fp8", 140)):
        space = _space()
        drawn = input_specs(space, _config(KV=fmt))["k_scale"]  # (its bounds for the format)
        low, high = drawn.low, drawn.high
        for gran in ("token", "channel"):
            codes, scales = quantize_kv(x, fmt, gran)
            std = float(np.std(codes.astype(np.float32)))
            assert 0.7 * drawn_std < std < 1.3 * drawn_std, (fmt, gran, std)
            assert low <= scales.min() and scales.max() <= high, (fmt, gran)
            back = codes.astype(np.float32) * (
                scales[..., None, :] if gran == "channel" else scales[..., None]
            )
            assert np.abs(back - x).max() <= (0.5 if fmt == "int8" else 16) * scales.max()
    _, _, inputs = _problem({"B": 3, "Hkv": 2, "S": 70, "S_MIN": 9}, LAYOUT="paged")
    assert sorted(inputs["block_table"].tolist()) == list(range(1, 3 * 5 + 1))
    assert inputs["k"].shape == (16, 2, 16, 128) and inputs["k"].dtype == np.int8
    assert inputs["seq_lens"].min() >= 9 and inputs["seq_lens"].max() <= 70
    assert np.std(inputs["k"].astype(np.float32)) == pytest.approx(40, rel=0.05)


def test_quantized_caches_add_a_small_error_to_attention() -> None:
    """int8 and fp8 E4M3 caches (the reference quantizer) against the fp16 cache, same inputs:
    the relative rms error of the outputs (what docs/attention-decode.md tabulates)."""
    rng = np.random.default_rng(1)
    q = (2 * rng.standard_normal((2, 8, 128))).astype(np.float16)
    k = rng.standard_normal((2, 2, 1024, 128)).astype(np.float16)
    v = rng.standard_normal((2, 2, 1024, 128)).astype(np.float16)
    errors = {
        (f, g): kv_error(q, k, v, f, g) for f in ("int8", "fp8") for g in ("token", "channel")
    }
    for key, e in errors.items():
        print(f"{key}: max {e.max_abs:.3g} rms {e.rms:.3g} relative rms {e.relative_rms:.3g}")
        assert 0 < e.relative_rms < 0.1, key
    # E4M3 keeps 3 mantissa bits, int8 ~7: fp8's error is the larger
    assert errors["fp8", "token"].rms > 2 * errors["int8", "token"].rms
    with pytest.raises(ValueError, match="not int8 or fp8"):
        quantize_kv(np.ones((2, 4)), "int4")


# --------------------------------------------------------------------------------------------
# the space: constraints, launch, the second kernel


def _reasons(space: Space, config: Config) -> list[str]:
    return [v.message for v in space.explain(config)]


def test_constraints_reject_with_reasons() -> None:
    space = _space()
    assert space.is_valid(_config())
    cases = {
        "VEC * elem_bytes >= 4": _config(KV="fp16", VEC=16),
        "D / VEC lanes": _config(VEC=2, KV="fp16"),
        "whole number of the THREADS": _config(KEYS=8, THREADS=256),
        "at most 8 keys per thread": _config(KEYS=256, THREADS=64),
        "HEADS=q is the HEADS=kv": _config(GROUP=1, HEADS="q"),
        "nothing to combine": _config(COMBINE="last"),
        "an fp16 cache has no scales": _config(KV="fp16", VEC=8, DEQUANT="before"),
        "would spill registers": _config(GROUP=8, VEC=16, KEYS=64),
    }
    for reason, config in cases.items():
        assert any(reason in r for r in _reasons(space, config)), (reason, _reasons(space, config))
    assert any("S_MIN" in r for r in _reasons(_space(S_MIN=9000), _config()))


def test_launch_geometry_and_the_second_kernel() -> None:
    space = _space(B=8, Hkv=8, S=4096, S_MIN=4096)
    config = _config(SPLITS=8, HEADS="q")
    launch = launch_geometry(space, config)
    assert launch.grid == (8, 32, 8) and launch.block == (128, 1, 1)
    assert launch.shared_bytes == 1 * 4 * 130 * 4
    (step,) = then_steps(space, config)
    assert step.entry == "attention_decode_combine"
    assert step.launch.grid == (8 * 32, 1, 1) and step.launch.block == (128, 1, 1)
    assert then_steps(space, dict(config, COMBINE="last")) == ()
    assert then_steps(space, _config()) == ()  # SPLITS = 1


def _compiled(space: Space, config: Config, cache: CompileCache):  # type: ignore[no-untyped-def]
    (result,) = compile_jobs([make_job(space, config)], cache)
    assert result.ok and result.entry is not None, result.log[-2000:]
    return result


def test_the_worker_launches_the_combine_kernel_after_the_entry(
    cache: CompileCache, tmp_path: Path
) -> None:
    """COMBINE=kernel with SPLITS > 1 through the CUDA worker on host memory: two launches,
    the entry then attention_decode_combine with the workspace and out buffers the entry got
    and B * Hq; COMBINE=last: one launch."""
    shape: Shape = {"B": 2, "Hkv": 2, "S": 100, "S_MIN": 100}
    space = _space("sm_90a", **shape)
    for combine, launches in (("kernel", 2), ("last", 1)):
        config = _config(SPLITS=4, COMBINE=combine)
        result = _compiled(space, config, cache)
        assert then_problems(space.spec, result.cubin, result.ptx) == []
        sets = InputSets(space, 0, tmp_path, None)
        inputs = sets.get(config)
        job = kernel_job(space, config, result)
        device = HostDevice("sm_90a")
        executor = CudaExecutor(gpu=device)  # type: ignore[arg-type]
        out_dir = tmp_path / combine
        out_dir.mkdir()
        try:
            executor.handle(LoadInputs(inputs.key, inputs.files), lambda _: None)
            executor.handle(RunOnce(job, str(out_dir)), lambda _: None)
        finally:
            executor.close()
        assert [la.entry for la in device.launches][:1] == ["attention_decode"]
        assert len(device.launches) == launches
        if launches == 2:
            first, second = device.launches
            assert second.entry == "attention_decode_combine"
            assert second.launch.grid == (2 * 8, 1, 1) and second.launch.block == (128, 1, 1)
            # workspace and out: the same device buffers as the entry's parameters 8 and 7
            assert second.params[0] == first.params[8] and second.params[1] == first.params[7]
            assert int.from_bytes(second.params[2], "little") == 2 * 8


# --------------------------------------------------------------------------------------------
# compiles, resources, SASS


def _sass(space: Space, config: Config, cache: CompileCache) -> dict[str, list[SassInstruction]]:
    result = _compiled(space, config, cache)
    return sass_of(result, cache)


@pytest.mark.parametrize("arch", ARCHES)
def test_named_configs_compile_without_spills_and_show_their_sass(
    arch: str, cache: CompileCache
) -> None:
    space = _space(arch)
    configs = [
        _config(),
        _config(KV="fp8", POLICY="cs", SPLITS=8, COMBINE="last", VEC=8, KEYS=8),
        _config(KV="fp16", VEC=8, LAYOUT="paged", POLICY="evict_first", SPLITS=4),
        _config(KSCALE="channel", DEQUANT="before", HEADS="q", THREADS=256, KEYS=64),
    ]
    for config in configs:
        assert space.is_valid(config), (config, _reasons(space, config))
        result = _compiled(space, config, cache)
        res = kernel_resources(result.cubin, result.log)
        for entry in ("attention_decode", "attention_decode_combine"):
            assert res[entry].spill_stores == 0 and res[entry].spill_loads == 0, (config, res)
            assert res[entry].stack_frame == 0, (config, entry)
        sass = sass_of(result, cache)["attention_decode"]
        shuffles = find_opcode(sass, "SHFL.BFLY")
        assert shuffles, config  # the dot products' and the slots' reductions
        assert has_opcode(sass, "MUFU.EX2")
        if config["POLICY"] == "cs":
            assert streaming_loads(sass), config  # LDG.E.EF on the cache stream
        else:
            assert not streaming_loads(sass), config
        if config["KV"] == "fp8" and arch != "sm_80":
            assert has_opcode(sass, "F2FP"), config  # E4M3 -> f16 in hardware
        if config["COMBINE"] == "last":
            assert has_opcode(sass, "ATOMG") and has_opcode(sass, "MEMBAR")


def test_the_cache_loads_carry_the_evict_first_policy(cache: CompileCache) -> None:
    """POLICY=evict_first: createpolicy + ld.global.L2::cache_hint in the PTX; on sm_80 the
    cache's vector loads take the policy as a memory descriptor (desc[UR]), plain loads none;
    POLICY=cs: the cache's 16-byte loads are LDG.E.EF.128."""
    space = _space("sm_80")
    for policy in ("plain", "evict_first", "cs"):
        config = _config(POLICY=policy)
        result = _compiled(space, config, cache)
        sass = sass_of(result, cache)["attention_decode"]
        vectors = [i for i in find_opcode(sass, "LDG") if ".128" in i.opcode]
        assert len(vectors) >= 4, policy  # K and V, KPT = 2 keys each
        described = [i for i in vectors if "desc[" in str(i)]
        if policy == "evict_first":
            assert (
                result.ptx is not None and "createpolicy.fractional.L2::evict_first" in result.ptx
            )
            assert "ld.global.L2::cache_hint.v4.u32" in result.ptx
            assert len(described) == len(vectors)
        else:
            assert not described
        assert all(i.opcode.startswith("LDG.E.EF") for i in vectors) == (policy == "cs")


@pytest.mark.parametrize(
    "change,message",
    [
        ({"KV": "fp16", "VEC": 16}, "VEC * element bytes"),
        ({"KV": "fp16", "VEC": 2}, "share a key row"),
        ({"KEYS": 8, "THREADS": 256}, "KEYS is a whole number"),
        ({"KEYS": 256, "THREADS": 64}, "at most 8 keys per thread"),
        ({"COMBINE": "last"}, "one split has nothing to combine"),
        ({"KV": "fp16", "VEC": 8, "DEQUANT": "before"}, "one DEQUANT value"),
        ({"KV": "fp16", "VEC": 8, "KSCALE": "channel"}, "one KSCALE value"),
        ({"GROUP": 1, "HEADS": "q"}, "one HEADS value"),
        ({"POLICY": "lu"}, "POLICY must be plain, cs or evict_first"),
        ({"KV": "int4"}, "KV must be fp16, int8 or fp8"),
        ({"HEAD_DIM": 96, "VEC": 4}, "HEAD_DIM is 64 or 128"),
        ({"KV": "fp8", "ARCH": "sm_80"}, "sm_80 decodes E4M3 in software"),
    ],
)
def test_kernel_preconditions_back_up_the_constraints(
    change: dict[str, object], message: str, cache: CompileCache
) -> None:
    change = dict(change)
    space = _space(str(change.pop("ARCH", "sm_90a")))
    config = _config(**change)
    assert not space.is_valid(config), change
    (result,) = compile_jobs([make_job(space, config)], cache)
    assert not result.ok
    assert message in result.log, result.log[-1500:]


#: valid configs per arch compiled by the sweep: 3 x 12
SAMPLE = 12


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHES)
def test_sampled_configs_compile_without_spills(arch: str, cache: CompileCache) -> None:
    """A fixed-seed uniform sample of the valid configs (problem variants drawn too): every one
    compiles, both kernels without spills or stack, within the launch-bounds cap."""
    spec = load_kernel("attention_decode")
    rng = random.Random(ARCHES.index(arch) + 56)
    space = _space(arch)
    found: list[Config] = []
    while len(found) < SAMPLE:
        config = {p.name: rng.choice(p.values) for p in spec.parameters}
        if config not in found and space.is_valid(config):
            found.append(config)
    results = compile_jobs([make_job(space, c) for c in found], cache)
    for config, result in zip(found, results, strict=True):
        assert result.ok, (config, result.log[-2000:])
        for entry, res in kernel_resources(result.cubin, result.log).items():
            assert res.spill_stores == 0 and res.spill_loads == 0, (config, entry, res)
            assert res.stack_frame == 0, (config, entry)


# --------------------------------------------------------------------------------------------
# baselines (they run on a GPU) and the CLI


def test_the_family_is_compared_with_torch_sdpa() -> None:
    space = _space("sm_90a", B=2, Hkv=8, S=1024, S_MIN=1024)
    problem = classify(space, _config())
    assert problem.family is Family.ATTENTION_DECODE
    import workbench.compare.attention_baselines  # noqa: F401  (registers torch_sdpa)

    sdpa = REGISTRY["torch_sdpa"]
    assert Family.ATTENTION_DECODE in sdpa.families
    assert sdpa.limits(problem) is None


def test_the_cli_lists_the_kernels_and_checks_the_reference() -> None:
    code, out, _ = invoke("kernels", env={"COLUMNS": "200"})
    assert code == 0
    for name in ("attention_decode", "attention_decode_fp8", "attention_decode_fp16"):
        assert name in out
    code, out, err = invoke("space", "attention_decode", "--check-reference", "--sample", "0")
    assert code == 0, out + err
    assert "reference ok" in out and "out float16 (2, 32, 128)" in out


# --------------------------------------------------------------------------------------------
# on a GPU (scripts/device_check.sh, step pytest_attention): every variant and knob at the odd
# shapes against the reference

GPU_CONFIGS = [
    "",
    "SPLITS=4",
    "SPLITS=8,COMBINE=last",
    "SPLITS=64,COMBINE=last,HEADS=q",
    "DEQUANT=before,POLICY=cs,THREADS=256,KEYS=64",
    "POLICY=evict_first,SPLITS=16,VEC=8,KEYS=16",
    "THREADS=512,KEYS=32,VEC=4,SPLITS=2",
]
GPU_VARIANTS = [
    "KV=int8",
    "KV=fp8",
    "KV=fp16",
    "KV=int8,KSCALE=channel",
    "KV=int8,LAYOUT=paged",
    "KV=fp8,LAYOUT=paged,KSCALE=channel,QTYPE=bfloat16",
    "KV=int8,HEAD_DIM=64,GROUP=8,VEC=8",
    "KV=fp16,GROUP=1,QTYPE=bfloat16",
]


def gpu_configs(space: Space, variant: str) -> list[Config]:
    """The GPU_CONFIGS valid for ``variant`` (VEC halved where the cache is fp16)."""
    out: list[Config] = []
    for change in GPU_CONFIGS:
        pairs = dict(a.split("=") for a in f"{variant},{change}".split(",") if a)  # (last wins)
        config = space.parse_config(
            [f"{k}={v}" for k, v in pairs.items()], space.spec.default_config()
        )
        if config["KV"] == "fp16" and int(config["VEC"]) * 2 > 16:  # type: ignore[call-overload]
            config["VEC"] = int(config["VEC"]) // 2  # type: ignore[call-overload]
        if space.is_valid(config) and config not in out:
            out.append(config)
    return out


def test_the_gpu_configs_cover_every_knob_for_every_variant() -> None:
    seen: dict[str, set[object]] = {}
    for shape in ODD:
        space = _space("sm_90a", **shape)
        for variant in GPU_VARIANTS:
            configs = gpu_configs(space, variant)
            assert len(configs) >= 4, (shape, variant)
            for c in configs:
                for name in ("COMBINE", "HEADS", "DEQUANT", "POLICY", "THREADS", "SPLITS"):
                    seen.setdefault(name, set()).add(c[name])
    assert seen["COMBINE"] == {"kernel", "last"} and seen["HEADS"] == {"kv", "q"}
    assert seen["DEQUANT"] == {"after", "before"}
    assert seen["POLICY"] == {"plain", "cs", "evict_first"}
    assert {1, 4, 64} <= seen["SPLITS"] and {128, 256, 512} <= seen["THREADS"]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("variant", GPU_VARIANTS)
@pytest.mark.parametrize("shape", ODD, ids=lambda s: f"B{s['B']}_Hkv{s['Hkv']}_S{s['S']}")
def test_attention_matches_the_reference_on_the_gpu(
    shape: Shape, variant: str, cache: CompileCache
) -> None:
    from gpu_checks import BRIEF, GPU

    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda import CudaRunner

    spec = load_kernel("attention_decode")
    arch = "sm_90a" if GPU.cc == 90 else f"sm_{GPU.cc}"
    if arch not in spec.arches:
        pytest.skip(f"attention_decode does not declare {arch}")
    space = Space(spec, shape=shape, arch=Arch.parse(arch))
    with CudaRunner(space, cache, timing=BRIEF) as runner:
        for config in gpu_configs(space, variant):
            m = runner.evaluate(config)
            assert m.outcome is TrialOutcome.OK, (config, m.reason)


def test_the_device_steps_verify_tune_and_compare(tmp_path: Path) -> None:
    """(CPU) scripts/device_check.py's attention steps: on request, the gpu tests of this file,
    tunes of the int8 cache and of the fp16 variant at two shapes whose seeds are valid there,
    and one comparison with torch SDPA and the fp16 variant in the same table."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import device_check

    layout = device_check.Layout(tmp_path / "out", tmp_path / "work")
    steps = {s.name: s for s in device_check.build_steps(sys.executable, layout)}
    mine = [n for n in steps if "attention" in n]
    assert mine == [
        "pytest_attention",
        "tune_attention_decode_b32",
        "tune_attention_decode_b1",
        "tune_attention_decode_fp16_b32",
        "tune_attention_decode_fp16_b1",
        "compare_attention_decode",
    ]
    assert all(steps[n].on_request for n in mine)
    assert steps["pytest_attention"].argv[-1] == "tests/test_kernels_attention_decode.py"
    for name in mine[1:5]:
        argv = steps[name].argv
        spec = load_kernel(argv[argv.index("tune") + 1])
        shape = dict(
            (k, int(v))
            for k, v in (argv[i + 1].split("=") for i, a in enumerate(argv) if a == "--shape")
        )
        space = Space(spec, shape={**spec.default_shape, **shape}, arch=Arch.parse("sm_90a"))
        seeds = [argv[i + 1] for i, a in enumerate(argv) if a == "--enqueue"]
        seeds.remove("default")
        assert seeds, name
        for seed in seeds:
            config = space.parse_config(seed.split(","), spec.default_config())
            assert space.is_valid(config), (name, seed, [v.message for v in space.explain(config)])
    for name in mine[5:]:
        assert "--shapes" in steps[name].argv and "compare" in steps[name].argv
