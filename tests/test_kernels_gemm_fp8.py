"""The FP8 GEMM family: compiled and inspected per arch (no GPU needed), and its reference.

* wgmma on sm_90a issues QGMMA; mma.sync issues native QMMA on sm_89 and, built for sm_90, is
  emulated with F2FP unpacks + HMMA, which the FP8_MMA_EMULATED lint reports.
* The reference is checked against an independent exact computation: FP8 bit patterns decoded
  by hand into integers (value * 2^bias), an int64 matmul, one rounding at the end.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from workbench.analysis import LintCode, kernel_resources, lint
from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.references import ReferenceCall
from workbench.references.gemm_fp8 import decode_fp8, gemm_fp8
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config
from workbench.static.sweep import StaticRecord, sass_of, static_sweep
from workbench.toolchain import Arch

#: configs per arch in the compile sample (50 in all): wgmma on sm_90a, mma on sm_89 and sm_90
SAMPLE = {"sm_90a": 20, "sm_89": 15, "sm_90": 15}


def space_for(kernel: str, arch: str) -> Space:
    return Space(load_kernel(kernel), arch=Arch.parse(arch))


def sweep_one(space: Space, assignment: list[str], cache: CompileCache) -> StaticRecord:
    config = space.parse_config(assignment)
    assert space.is_valid(config), space.explain(config)
    (record,) = static_sweep(space, [config], cache=cache)
    assert record.ok, record.log[-2000:]
    return record


def full_opcodes(space: Space, config: Config, cache: CompileCache) -> set[str]:
    """Every SASS opcode with its modifiers (QGMMA.64x128x32.F32.E4M3.E4M3) of one config."""
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.entry is not None, result.log
    return {i.opcode for i in sass_of(result, cache)[result.entry]}


# ---- every point compiles or is rejected -------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("arch", list(SAMPLE))
def test_sample_of_valid_points_compiles(arch: str, cache: CompileCache) -> None:
    space = space_for("gemm_fp8", arch)
    configs = space.sample(SAMPLE[arch], seed=89)
    assert len(configs) == SAMPLE[arch]
    # the wgmma paths (cp.async or TMA) only where they exist, mma.sync everywhere else
    hopper = {"wgmma", "tma_coop", "tma_pingpong"}
    assert {c["PATH"] for c in configs} == (hopper if arch == "sm_90a" else {"mma"})
    results = compile_jobs([make_job(space, c) for c in configs], cache)
    failed = [(c, r.log[-600:]) for c, r in zip(configs, results, strict=True) if not r.ok]
    assert not failed, failed[:2]


def test_every_arch_has_valid_points_and_paths_split_by_arch() -> None:
    for kernel in ("gemm_fp8", "gemm_fp8_e5m2"):
        spec = load_kernel(kernel)
        assert spec.arches == ("sm_89", "sm_90", "sm_90a")
        for arch in spec.arches:
            space = Space(spec, arch=Arch.parse(arch))
            assert space.count_valid() > 100
        wgmma_on_90 = Space(spec, arch=Arch.parse("sm_90")).parse_config(["PATH=wgmma"])
        assert not Space(spec, arch=Arch.parse("sm_90")).is_valid(wgmma_on_90)
        mma_on_90a = Space(spec, arch=Arch.parse("sm_90a")).parse_config(["PATH=mma"])
        assert not Space(spec, arch=Arch.parse("sm_90a")).is_valid(mma_on_90a)


# ---- SASS per path and arch --------------------------------------------------------------------
def test_wgmma_default_on_sm_90a_issues_qgmma(cache: CompileCache) -> None:
    space = space_for("gemm_fp8", "sm_90a")
    record = sweep_one(space, [], cache)
    assert record.lints == [] and record.spill_stores == 0 and record.stack_frame == 0
    assert "serialized" not in record.log  # the wgmma stay asynchronous (see ptxas -v)
    assert record.threads_per_block == 256 and record.dynamic_smem == 132096
    ops = full_opcodes(space, record.config, cache)
    assert "QGMMA.64x128x32.F32.E4M3.E4M3" in ops, sorted(ops)
    assert "WARPGROUP.ARRIVE" in ops and "FENCE.VIEW.ASYNC.S" in ops
    assert not any(op.startswith(("HMMA", "QMMA")) for op in ops)


def test_wgmma_fast_accumulation_wide_tile(cache: CompileCache) -> None:
    space = space_for("gemm_fp8", "sm_90a")
    record = sweep_one(space, ["PROMOTE=false", "BN=256", "OUT=float16"], cache)
    assert record.lints == [] and record.spill_stores == 0
    assert "serialized" not in record.log
    assert "QGMMA.64x256x32.F32.E4M3.E4M3" in full_opcodes(space, record.config, cache)


def test_mma_on_sm_89_is_native_qmma(cache: CompileCache) -> None:
    space = space_for("gemm_fp8", "sm_89")
    record = sweep_one(space, ["PATH=mma", "STAGES=3"], cache)
    assert record.lints == [] and record.spill_stores == 0 and record.stack_frame == 0
    ops = full_opcodes(space, record.config, cache)
    assert "QMMA.16832.F32.E4M3.E4M3" in ops, sorted(ops)
    assert "LDSM.16.M88.4" in ops  # ldmatrix.x4
    assert not any(op.startswith(("HMMA", "QGMMA")) for op in ops)


def test_mma_on_sm_90_is_emulated_and_the_lint_says_so(cache: CompileCache) -> None:
    space = space_for("gemm_fp8", "sm_90")
    record = sweep_one(space, ["PATH=mma", "STAGES=3", "PROMOTE=false"], cache)
    assert record.spill_stores == 0
    ops = full_opcodes(space, record.config, cache)
    assert "HMMA.16816.F32" in ops and "F2FP.F16.E4M3.UNPACK_B" in ops, sorted(ops)
    assert not any(op.startswith("QMMA") for op in ops)
    assert len(record.lints) == 1 and "emulated" in record.lints[0].message, record.lints
    # the same finding through the lint API, with its code
    result = compile_job(make_job(space, record.config), cache)
    assert result.entry is not None and result.cubin is not None
    resources = kernel_resources(result.cubin, result.log)[result.entry]
    sass = sass_of(result, cache)[result.entry]
    findings = lint(result.entry, "sm_90", resources, sass, result.ptx)
    assert [f.code for f in findings] == [LintCode.FP8_MMA_EMULATED]


def test_e5m2_space_issues_e5m2_instructions(cache: CompileCache) -> None:
    wg = space_for("gemm_fp8_e5m2", "sm_90a")
    record = sweep_one(wg, [], cache)
    assert record.lints == []
    assert "QGMMA.64x128x32.F32.E5M2.E5M2" in full_opcodes(wg, record.config, cache)
    mma = space_for("gemm_fp8_e5m2", "sm_89")
    record = sweep_one(mma, ["PATH=mma", "STAGES=3", "PROMOTE=false"], cache)
    assert record.lints == []
    assert "QMMA.16832.F32.E5M2.E5M2" in full_opcodes(mma, record.config, cache)


@pytest.mark.parametrize(
    "arch,assignment,message",
    [
        ("sm_90", "PATH=wgmma", "sm_90a"),  # arch.specific: the kernel's #error
        ("sm_90a", "BK=64,SWIZZLE=128", "BK: whole swizzle atoms"),
        ("sm_89", "PATH=mma,STAGES=3,SWIZZLE=64", "SWIZZLE: the widest span that divides BK"),
    ],
)
def test_kernel_preconditions_back_up_the_constraints(
    arch: str, assignment: str, message: str, cache: CompileCache
) -> None:
    space = space_for("gemm_fp8", arch)
    config = space.parse_config(assignment.split(","))
    assert space.explain(config)
    result = compile_job(make_job(space, config), cache)
    assert not result.ok and message in result.log, result.log[-1500:]


# ---- reference ---------------------------------------------------------------------------------
#: (exponent bits, mantissa bits, exponent bias) of the two formats
FORMATS = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}
FP8_DTYPES = {"e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2)}


def fp8_as_scaled_int(codes: np.ndarray, fmt: str) -> np.ndarray:
    """FP8 bit patterns as exact integers value * 2^(bias + mantissa bits - 1), by hand.

    Normal: (-1)^s (1 + m / 2^M) 2^(e - bias); subnormal (e = 0): (-1)^s (m / 2^M) 2^(1 - bias).
    Multiplying by 2^(bias - 1 + M) makes every finite value an integer.
    """
    e_bits, m_bits, _ = FORMATS[fmt]
    c = codes.astype(np.int64)
    sign = np.where(c >> 7, -1, 1)
    e = (c >> m_bits) & ((1 << e_bits) - 1)
    m = c & ((1 << m_bits) - 1)
    significand = np.where(e == 0, m, m + (1 << m_bits))  # integer significand
    shift = np.maximum(e, 1) - 1  # value * 2^(bias - 1 + M) = significand * 2^(max(e,1) - 1)
    return sign * (significand << shift)


def finite_codes(fmt: str) -> np.ndarray:
    codes = np.arange(256, dtype=np.uint8)
    return codes[np.isfinite(codes.view(FP8_DTYPES[fmt]).astype(np.float64))]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_decode_matches_the_bit_layout(fmt: str) -> None:
    codes = finite_codes(fmt)
    _, m_bits, bias = FORMATS[fmt]
    by_hand = fp8_as_scaled_int(codes, fmt) * 2.0 ** -(bias - 1 + m_bits)
    np.testing.assert_array_equal(decode_fp8(codes.view(FP8_DTYPES[fmt])), by_hand)
    assert decode_fp8(codes.view(FP8_DTYPES[fmt])).max() == (448.0 if fmt == "e4m3" else 57344.0)


def random_fp8(rng: np.random.Generator, shape: tuple[int, int], fmt: str) -> np.ndarray:
    """Normal(0, 1) values quantised to the format, as the runner draws them."""
    return rng.standard_normal(shape).astype(np.float32).astype(FP8_DTYPES[fmt])


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("out", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(1, 1, 16), (77, 200, 1008), (130, 67, 48), (64, 256, 4112)])
def test_reference_against_exact_integer_matmul(
    fmt: str, out: str, shape: tuple[int, int, int]
) -> None:
    m, n, k = shape
    rng = np.random.default_rng(m * 7 + n * 13 + k)
    a, b = random_fp8(rng, (m, k), fmt), random_fp8(rng, (n, k), fmt)
    scale_a, scale_b = np.float32(0.375), np.float32(0.8125)  # exact binary fractions
    call = ReferenceCall(
        inputs={
            "A": a,
            "B": b,
            "scale_a": np.array([scale_a]),
            "scale_b": np.array([scale_b]),
        },
        scalars={"M": m, "N": n, "K": k},
        shape={"M": m, "N": n, "K": k},
        config={"OUT": out, "FORMAT": fmt},
    )
    c = gemm_fp8(call)["C"]
    assert c.shape == (m, n)
    assert c.dtype == (np.dtype(np.float16) if out == "float16" else np.dtype(ml_dtypes.bfloat16))
    # independent: integer matmul of the hand-decoded bit patterns (exact), one final scaling
    _, m_bits, bias = FORMATS[fmt]
    ia = fp8_as_scaled_int(a.view(np.uint8), fmt)
    ib = fp8_as_scaled_int(b.view(np.uint8), fmt)
    exact = (ia @ ib.T).astype(np.float64) * 2.0 ** (-2 * (bias - 1 + m_bits))
    expected = exact * float(scale_a) * float(scale_b)  # exact: few significant bits
    got = c.astype(np.float64)
    if out == "float16":  # numpy rounds float64 -> float16 once, to nearest even
        np.testing.assert_array_equal(got, expected.astype(np.float16).astype(np.float64))
    else:  # half a bfloat16 ulp (2^-8 relative), plus the float32 step's 2^-24 (double rounding)
        assert np.all(np.abs(got - expected) <= (2.0**-8 + 2.0**-20) * np.abs(expected))


def test_tolerances_follow_promotion_and_output_type() -> None:
    spec = load_kernel("gemm_fp8")
    space = Space(spec, arch=Arch.parse("sm_90a"))
    reference = spec.reference
    assert reference is not None and not reference.exact
    tight = space.env(space.parse_config(["OUT=float16"]))
    loose = space.env(space.parse_config(["PROMOTE=false"]))
    assert reference.rtol.evaluate(tight) == pytest.approx(2e-3)
    assert reference.rtol.evaluate(loose) == pytest.approx(1e-2)
    assert reference.atol.evaluate(tight) == pytest.approx(4e-3 * 64)  # K = 4096
    assert reference.atol.evaluate(loose) == pytest.approx(2e-2 * 64)
