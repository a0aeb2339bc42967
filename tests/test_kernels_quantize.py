"""The quantize family: references against independent computations, every space compiles.

References (workbench/references/quantize.py) are checked against per-element loops written
with Python scalars (``round`` rounds half to even) and an E4M3 encoder that searches a table
of all 256 codes decoded from the bit layout by hand, so neither numpy's vectorised rint nor
ml_dtypes' conversion is trusted on its own. Kernels (kernels_cu/quantize*.cu) are compiled for
each arch their space declares and their SASS is read; running them needs a GPU.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import ml_dtypes
import numpy as np
import pytest

from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.references import ReferenceCall
from workbench.references import quantize as ref
from workbench.runners.buffers import make_inputs
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config
from workbench.spaces.schema import DType
from workbench.static.sweep import static_sweep
from workbench.toolchain import Arch

SPACES = [
    "quantize_int8",
    "quantize_fp8",
    "quantize_f32",
    "quantize_mx",
    "quantize_static",
    "dequantize_int8",
    "dequantize_fp8",
]
E4M3 = ml_dtypes.float8_e4m3fn


# ---- an independent E4M3 encoder ------------------------------------------------------------


def e4m3_value(code: int) -> float:
    """The value of an E4M3 byte from its bit layout (bias 7, no infinities, S.1111.111 NaN)."""
    sign, exp, man = code >> 7, (code >> 3) & 0xF, code & 7
    if exp == 15 and man == 7:
        return math.nan
    magnitude = man / 8 * 2.0**-6 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7)
    return -magnitude if sign else magnitude


POSITIVE_E4M3 = [e4m3_value(c) for c in range(0x7F)]  # codes 0x00..0x7E, increasing


def e4m3_by_search(v: float) -> int:
    """Nearest E4M3 code to ``v`` (ties to the even code), saturating at 448; keeps the sign."""
    a = min(abs(v), 448.0)
    best = min(range(0x7F), key=lambda c: (abs(POSITIVE_E4M3[c] - a), c % 2))
    return best | (0x80 if math.copysign(1.0, v) < 0 else 0)


def test_the_table_is_the_format() -> None:
    assert POSITIVE_E4M3[0x7E] == 448.0 and POSITIVE_E4M3[1] == 2.0**-9
    assert sorted(POSITIVE_E4M3) == POSITIVE_E4M3
    assert all(float(np.uint8(c).view(E4M3)) == POSITIVE_E4M3[c] for c in range(0x7F))


def test_e4m3_encoder_rounds_half_to_even_and_saturates() -> None:
    rng = np.random.default_rng(1)
    mids = [(a + b) / 2 for a, b in itertools.pairwise(POSITIVE_E4M3)]
    values = np.concatenate(
        [
            np.array(mids + POSITIVE_E4M3 + [449.0, 464.0, 465.0, 1e6, 2.0**-10, 2.0**-12, 0.0]),
            rng.standard_normal(2000) * 50,
            np.exp2(rng.uniform(-14, 10, 2000)) * rng.choice([-1, 1], 2000),
        ]
    ).astype(np.float32)
    values = np.concatenate([values, -values])
    got = ref.encode_e4m3(values).view(np.uint8)
    want = np.array([e4m3_by_search(float(v)) for v in values], np.uint8)
    assert np.array_equal(got, want)
    assert ref.encode_e4m3(np.float32([464.0, -1e9])).view(np.uint8).tolist() == [0x7E, 0xFE]


# ---- per-element loops ------------------------------------------------------------------------


def loop_quantize(
    x: np.ndarray, group: int, fmt: str, symmetric: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The standard formulas, one element at a time with float32 scalars (codes as bytes)."""
    f32 = np.float32
    m, k = x.shape
    codes = np.zeros((m, k), np.uint8)
    scales, zps = np.zeros((m, k // group), np.float32), np.zeros((m, k // group), np.int32)
    for r in range(m):
        for g in range(k // group):
            vals = [f32(x[r, c]) for c in range(g * group, (g + 1) * group)]
            if symmetric:
                amax = max(abs(v) for v in vals)
                scale = amax / f32(127 if fmt == "int8" else 448) if amax > 0 else f32(1)
                zp = 0
            else:
                lo, hi = min(*vals, f32(0)), max(*vals, f32(0))
                scale = (hi - lo) / f32(255) if hi - lo > 0 else f32(1)
                zp = min(max(round(float(f32(-128) - lo / scale)), -128), 127)
            for i, v in enumerate(vals):
                t = float(v / scale)
                if fmt == "fp8":
                    code = e4m3_by_search(t)
                elif symmetric:
                    code = min(max(round(t), -127), 127) & 0xFF
                else:
                    code = min(max(round(t) + zp, -128), 127) & 0xFF
                codes[r, g * group + i] = code
            scales[r, g], zps[r, g] = scale, zp
    return codes, scales, zps


def loop_mx(x: np.ndarray, elem: str) -> tuple[np.ndarray, np.ndarray]:
    """MX with exact float64 arithmetic: floor(log2(amax)) - emax_elem, elements x / 2^e."""
    m, k = x.shape
    codes, e8m0 = np.zeros((m, k), np.uint8), np.zeros((m, k // 32), np.uint8)
    for r in range(m):
        for b in range(k // 32):
            vals = [float(x[r, c]) for c in range(32 * b, 32 * b + 32)]
            amax = max(abs(v) for v in vals)
            floor_log2 = math.frexp(amax)[1] - 1 if amax > 0 else -126
            shared = max(floor_log2 - (8 if elem == "fp8" else 0), -127)
            for i, v in enumerate(vals):
                p = v * 2.0**-shared
                if elem == "fp8":
                    code = e4m3_by_search(p)
                else:
                    code = min(max(round(p * 64), -127), 127) & 0xFF
                codes[r, 32 * b + i] = code
            e8m0[r, b] = shared + 127
    return codes, e8m0


def sample_rows(m: int, k: int, dtype: type, seed: int) -> np.ndarray:
    """Normal data with the corner cases: an all-zero row, exact ties, a lone outlier."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(dtype)
    x[0] = 0
    if m > 1:
        x[1, :4] = [127, 2.5, -0.5, 1.5]  # symmetric int8 scale 1: ties 2.5 -> 2, -0.5 -> -0
    if m > 2:
        x[2, k // 2] = 1000  # an outlier
    return x


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize(
    "group_of_k,fmt,symmetric",
    [(1, "int8", True), (1, "int8", False), (1, "fp8", True), (32, "int8", True),
     (64, "int8", False), (128, "fp8", True)],
)  # fmt: skip
def test_quantize_groups_matches_the_loop(
    group_of_k: int, fmt: str, symmetric: bool, dtype: type
) -> None:
    m, k = 5, 384
    x = sample_rows(m, k, dtype, seed=group_of_k)
    group = k if group_of_k == 1 else group_of_k
    q = ref.quantize_groups(x, group, fmt, symmetric)
    codes, scales, zps = loop_quantize(x, group, fmt, symmetric)
    assert np.array_equal(q.codes.view(np.uint8), codes)
    assert np.array_equal(q.scales, scales)
    assert q.zero_points is None if symmetric else np.array_equal(q.zero_points, zps)


@pytest.mark.parametrize("elem", ["fp8", "int8"])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_mx_matches_exact_arithmetic(elem: str, dtype: type) -> None:
    x = sample_rows(4, 160, dtype, seed=7)
    if dtype is np.float32:  # magnitudes from 2^-140 to 2^100 in one row, one block each
        x[3] = np.exp2(np.repeat(np.arange(-140, 100, 48), 32)).astype(np.float32)
    q = ref.quantize_groups(x, 32, "mx" + elem)
    codes, e8m0 = loop_mx(x, elem)
    assert np.array_equal(q.codes.view(np.uint8), codes)
    assert np.array_equal(q.scales, e8m0)


# ---- hand-computed cases ----------------------------------------------------------------------


def test_hand_computed_int8() -> None:
    x = np.float32([[1, -2, 0.5, 127, -127, 1.5, 2.5, 0]])
    q = ref.quantize_groups(x, 8, "int8")  # scale 127 / 127 = 1: ties go to even
    assert q.codes.tolist() == [[1, -2, 0, 127, -127, 2, 2, 0]] and q.scales.tolist() == [[1.0]]
    # asymmetric: lo -1, hi 3, scale 4 / 255, zp = rint(-128 + 63.75) = -64
    q = ref.quantize_groups(np.float32([[-1, 0, 1, 3]]), 4, "int8", symmetric=False)
    assert q.codes.tolist() == [[-128, -64, 0, 127]] and q.zero_points.tolist() == [[-64]]
    assert q.scales[0, 0] == np.float32(4) / np.float32(255)
    # all zeros: scale 1; zp = rint(-128 - 0 / 1) = -128, so 0 is the code -128 (and back to 0)
    q = ref.quantize_groups(np.zeros((1, 4), np.float32), 4, "int8", symmetric=False)
    assert q.codes.tolist() == [[-128] * 4] and q.scales.tolist() == [[1.0]]
    assert q.zero_points.tolist() == [[-128]]
    assert ref.dequantize_codes(q.codes, q.scales, q.zero_points).tolist() == [[0.0] * 4]


def test_hand_computed_fp8_and_mx() -> None:
    q = ref.quantize_groups(np.float32([[896, -3, 1, 0]]), 4, "fp8")  # scale 896 / 448 = 2
    assert q.scales.tolist() == [[2.0]] and q.codes.astype(np.float32).tolist() == [
        [448, -1.5, 0.5, 0]
    ]
    block = np.ones((1, 32), np.float32)
    block[0, 1] = -0.3
    mxfp8 = ref.quantize_groups(block, 32, "mxfp8")  # floor(log2 1) - 8 = -8: E8M0 119
    assert mxfp8.scales.tolist() == [[119]]
    assert mxfp8.codes[0, :2].astype(np.float32).tolist() == [256, -80]  # -76.8 -> -80
    mxint8 = ref.quantize_groups(block, 32, "mxint8")  # floor(log2 1) - 0 = 0: E8M0 127
    assert mxint8.scales.tolist() == [[127]] and mxint8.codes[0, :2].tolist() == [64, -19]
    zeros = np.zeros((1, 32), np.float32)  # -126 - emax_elem, clamped to -127
    assert ref.quantize_groups(zeros, 32, "mxfp8").scales.tolist() == [[0]]
    assert ref.quantize_groups(zeros, 32, "mxint8").scales.tolist() == [[1]]


def test_quantization_error_on_hand_cases() -> None:
    err = ref.quantization_error(np.array([1.0, -1.0]), np.array([1.1, -0.9]))
    assert err.sqnr_db == pytest.approx(20.0) and err.max_abs == pytest.approx(0.1)
    err = ref.quantization_error(np.array([3.0, 4.0]), np.array([3.0, 4.0]))
    assert err.sqnr_db == math.inf and err.max_abs == 0.0
    err = ref.quantization_error(np.array([2.0, 0.0]), np.array([1.0, 0.0]))  # 4 / 1
    assert err.sqnr_db == pytest.approx(10 * math.log10(4)) and err.max_abs == 1.0
    with pytest.raises(ValueError):
        ref.quantization_error(np.zeros(2), np.ones(2))
    with pytest.raises(ValueError):
        ref.quantization_error(np.zeros(2), np.zeros(3))


def test_roundtrip_error_finer_groups_help_an_outlier() -> None:
    x = np.random.default_rng(3).standard_normal((16, 512)).astype(np.float32)
    x[:, 7] = 200.0  # one outlier per row: per-token scales waste the range on it
    token = ref.roundtrip_error(x, 512, "int8")
    group = ref.roundtrip_error(x, 32, "int8")
    assert group.sqnr_db > token.sqnr_db + 10
    # int8 symmetric: the error of one element is at most half a step, scale / 2
    assert token.max_abs <= 200.0 / 127 / 2 * 1.0001


def test_division_is_not_multiplication_by_the_reciprocal() -> None:
    """Why kernel and reference both divide: x * (1 / s) rounds twice and, for x next to a
    tie k + 0.5 of x / s, lands on the other side of it."""
    s = ref.symmetric_scale(np.float32(3.9), 127)
    ties = np.float32((np.arange(-127, 127) + 0.5) * np.float64(s))
    x = np.concatenate([np.nextafter(ties, -np.inf), ties, np.nextafter(ties, np.inf)])
    by_division = np.rint(x / s)
    by_reciprocal = np.rint(x * (np.float32(1) / s))
    assert np.count_nonzero(by_division != by_reciprocal) > 0
    codes = ref.quantize_with_scales(x, s, None, "int8")
    assert np.array_equal(codes, ref.encode_int8(x / s, -127, 127))


def test_dequantize_matches_the_loop() -> None:
    rng = np.random.default_rng(5)
    codes = rng.integers(-128, 128, (3, 64)).astype(np.int8)
    scale = rng.uniform(0.001, 0.02, (3, 1)).astype(np.float32)
    zp = rng.integers(-20, 21, (3, 1)).astype(np.int32)
    got = ref.dequantize_codes(codes, scale, zp)
    want = [[(np.float32(c) - np.float32(z)) * s for c in row] for row, s, z in
            zip(codes, scale[:, 0], zp[:, 0], strict=True)]  # fmt: skip
    assert np.array_equal(got, np.array(want, np.float32))
    e8m0 = np.array([[120, 0xFF], [127, 130], [1, 240]], np.uint8)
    for elem, q in [("int8", codes), ("fp8", rng.uniform(-448, 448, (3, 64)).astype(E4M3))]:
        x = ref.dequantize_mx(q, e8m0)
        for r in range(3):
            for c in range(64):
                e = int(e8m0[r, c // 32]) - 127 - (6 if elem == "int8" else 0)
                want_v = float(q[r, c].astype(np.float32)) * 2.0**e
                if e8m0[r, c // 32] == 0xFF:
                    assert math.isnan(x[r, c])
                else:
                    assert x[r, c] == np.float32(want_v)  # exact: a power of two


def test_quantize_dequantize_roundtrip_recovers_the_grid() -> None:
    """Dequantizing codes and quantizing again gives the same codes (no drift)."""
    x = sample_rows(4, 256, np.float32, seed=11)
    for fmt, sym in [("int8", True), ("int8", False), ("fp8", True)]:
        q = ref.quantize_groups(x, 64, fmt, sym)
        rep = np.repeat(q.scales, 64, axis=1)
        zp = None if q.zero_points is None else np.repeat(q.zero_points, 64, axis=1)
        again = ref.quantize_with_scales(ref.dequantize_codes(q.codes, rep, zp), rep, zp, fmt)
        assert np.array_equal(again.view(np.uint8), q.codes.view(np.uint8))


# ---- the space files and their references -----------------------------------------------------

NUMPY_DTYPE = {
    DType.INT8: np.int8,
    DType.UINT8: np.uint8,
    DType.INT32: np.int32,
    DType.FLOAT16: np.float16,
    DType.FLOAT32: np.float32,
    DType.FLOAT8_E4M3: E4M3,
}


def expected_outputs(space: Space, config: Config) -> Mapping[str, tuple[tuple[int, ...], type]]:
    env = space.env(config)
    return {
        o.name: (tuple(int(e.evaluate(env)) for e in o.shape), NUMPY_DTYPE[o.dtype_for(env)])
        for o in space.spec.outputs
    }


@pytest.mark.parametrize("name", SPACES)
def test_references_fill_every_output_of_their_space(name: str) -> None:
    spec = load_kernel(name)
    space = Space(spec, shape=dict(spec.shape_sets["odd"][0]), arch=Arch.parse("sm_90"))
    for config in space.sample(12, seed=2):
        inputs = make_inputs(space, 3, config)  # what the runner draws for this config
        assert spec.reference is not None
        module, function = spec.reference.target.split(":")
        reference = getattr(ref, function)
        assert module == "workbench.references.quantize"
        call = ReferenceCall(inputs=inputs, scalars={}, shape=space.shape, config=config)
        got = reference(call)
        want = expected_outputs(space, config)
        assert set(got) == set(want), config
        for out, (shape, dtype) in want.items():
            assert got[out].reshape(-1).size == math.prod(shape), (config, out)
            assert got[out].dtype == dtype, (config, out, got[out].dtype)


def test_dequantize_reference_inverts_the_quantize_reference() -> None:
    """quantize_int8 then dequantize_int8, per group with zero points, through the spaces."""
    q_space = Space(load_kernel("quantize_int8"), shape={"M": 6, "K": 256})
    d_space = Space(load_kernel("dequantize_int8"), shape={"M": 6, "K": 256})
    config = q_space.parse_config(["GRANULARITY=group", "G=64", "SYMMETRIC=false"])
    x = sample_rows(6, 256, np.float16, seed=4)
    qcall = ReferenceCall({"x": x}, {}, q_space.shape, config)
    q = ref.quantize_rows(qcall)
    dconfig = d_space.parse_config(["GRANULARITY=group", "G=64", "SYMMETRIC=false", "OUT=float32"])
    inputs = {"q": q["q"], "scale": q["scale"], "zero_point": q["zero_point"], "e8m0": np.ones(1)}
    x_hat = ref.dequantize(ReferenceCall(inputs, {}, d_space.shape, dconfig))["out"]
    err = ref.quantization_error(x.astype(np.float32), x_hat)
    assert err.sqnr_db > 40 and err.sqnr_db == ref.roundtrip_error(x, 64, "int8", False).sqnr_db


# ---- the work split of quantize_rows (per group / MX), replayed on the CPU ----------------------


@pytest.mark.parametrize(
    "m,k,g,vec,items,warps",
    [(3, 1152, 128, 4, 32, 5), (2, 96, 32, 8, 8, 3), (5, 4224, 64, 2, 16, 7), (1, 32, 32, 1, 4, 2)],
)
def test_group_work_split_covers_each_element_and_scale_once(
    m: int, k: int, g: int, vec: int, items: int, warps: int
) -> None:
    """The kernel's index formulas, replayed for every warp and lane: each element is encoded
    once, each scale is stored once, by the first lane of the G / VEC lanes that reduce it."""
    chunk, lanes = 32 * items, g // vec
    chunks_per_row = -(-k // chunk)
    element_writes = np.zeros(m * k, np.int32)
    scale_writes = np.zeros(m * (k // g), np.int32)
    for warp in range(warps):
        for c_id in range(warp, m * chunks_per_row, warps):
            row, c = c_id // chunks_per_row, (c_id % chunks_per_row) * chunk
            for j in range(items // vec):
                cols = [c + (j * 32 + lane) * vec for lane in range(32)]
                for lane, col in enumerate(cols):
                    if col >= k:
                        continue
                    scale = row * (k // g) + col // g
                    first = lane - lane % lanes  # the butterfly partners of this lane
                    partners = cols[first : first + lanes]
                    assert all(p >= k or row * (k // g) + p // g == scale for p in partners)
                    covered = sum(min(vec, k - p) for p in partners if p < k)
                    assert covered == g  # the partners hold exactly the group
                    element_writes[row * k + col : row * k + col + vec] += 1
                    scale_writes[scale] += lane % lanes == 0
    assert (element_writes == 1).all() and (scale_writes == 1).all()


# ---- compile: every point compiles or is rejected ---------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", SPACES)
def test_sampled_points_compile_for_every_arch(name: str, cache: CompileCache) -> None:
    """A fixed-seed sample of 50 valid configs per space, the arch rotating over the declared
    ones (each arch compiles a third: compiling all 50 for every arch costs three times the
    CPU budget of this file), plus the default config for every arch."""
    spec = load_kernel(name)
    jobs, labels = [], []
    for config in Space(spec, arch=Arch.parse("sm_90")).sample(100, seed=13):
        arch = spec.arches[len(jobs) % len(spec.arches)]
        space = Space(spec, arch=Arch.parse(arch))
        if not space.is_valid(config):  # e.g. 1536 threads per SM on sm_89
            assert space.explain(config)
            continue
        jobs.append(make_job(space, config))
        labels.append((arch, config))
        if len(jobs) == 50:
            break
    for arch in spec.arches:
        space = Space(spec, arch=Arch.parse(arch))
        jobs.append(make_job(space, spec.default_config()))
        labels.append((arch, spec.default_config()))
    results = compile_jobs(jobs, cache)
    failed = [(lab, r.log[-600:]) for lab, r in zip(labels, results, strict=True) if not r.ok]
    assert not failed, failed[:2]
    assert len(jobs) >= 50


@pytest.mark.parametrize(
    "name,assignment,message",
    [
        ("quantize_int8", {"ITEMS": 4, "VEC": 8}, "ITEMS: a whole number of VEC-wide loads"),
        ("quantize_int8", {"GRANULARITY": "group", "G": 128, "VEC": 2},
         "G: a group is G / VEC lanes of one warp"),
        ("quantize_f32", {"OUT": "fp8", "SYMMETRIC": False}, "zero points (asymmetric): int8 only"),
        ("quantize_f32", {"VEC": 8, "ITEMS": 8}, "VEC: one load of at most 16 bytes"),
        ("quantize_static", {"OUT": "fp8", "SYMMETRIC": False},
         "zero points (asymmetric): int8 only"),
        ("quantize_mx", {"ITEMS": 4, "VEC": 8}, "ITEMS: a whole number of VEC-wide loads"),
        ("dequantize_int8", {"GRANULARITY": "mx", "SYMMETRIC": False},
         "zero points: int8, not MX"),
        ("dequantize_int8", {"OUT": "float32", "VEC": 8}, "VEC: one store of at most 16 bytes"),
    ],
)  # fmt: skip
def test_kernel_preconditions_back_up_the_constraints(
    name: str, assignment: dict[str, object], message: str
) -> None:
    """A config the space rejects also fails to compile, with the kernel's static_assert."""
    spec = load_kernel(name)
    space = Space(spec, arch=Arch.parse("sm_90"))
    config = spec.default_config() | assignment
    assert space.explain(config)  # the space rejects it (constraint, or outside the domain) ...
    result = compile_job(make_job(space, config))  # ... and so does the compiler
    assert not result.ok and message in result.log


# ---- SASS -------------------------------------------------------------------------------------


def sweep(name: str, arch: str, assignments: list[list[str]], cache: CompileCache) -> list:
    spec = load_kernel(name)
    space = Space(spec, arch=Arch.parse(arch))
    records = static_sweep(space, [space.parse_config(a) for a in assignments], cache=cache)
    for r in records:
        assert r.ok, (r.label, r.error, r.log[-400:])
        assert r.spill_stores == 0 and r.stack_frame == 0, r.label
        assert r.lints == [], (r.label, r.lints)  # includes the space's expect_sass
    return records


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_int8_rows_shuffle_round_and_convert(arch: str, cache: CompileCache) -> None:
    token, group = sweep(
        "quantize_int8",
        arch,
        [[], ["GRANULARITY=group", "G=64", "VEC=4", "SYMMETRIC=false"]],
        cache,
    )
    for r in (token, group):
        assert {"SHFL", "F2I", "FRND"} <= set(r.opcodes)
    # fp16 rows: 8 elements = one 16-byte load, 4 elements = 8 bytes; codes 8 and 4 bytes
    assert "LDG.E.128.CONSTANT" in token.global_memory_ops and "STG.E.64" in token.global_memory_ops
    assert "LDG.E.64.CONSTANT" in group.global_memory_ops
    # a butterfly over the warp (token: 5 steps) or over G / VEC = 16 lanes (4 steps per group)
    assert token.opcodes["SHFL"] >= 5 and group.opcodes["SHFL"] >= 2 * 4  # min and max


def test_fp8_conversion_is_hardware_from_sm89(cache: CompileCache) -> None:
    for arch in ["sm_89", "sm_90"]:
        (r,) = sweep("quantize_fp8", arch, [[]], cache)
        assert "F2FP" in r.opcodes and "SHFL" in r.opcodes
    (r80,) = sweep("quantize_fp8", "sm_80", [[]], cache)
    assert "F2FP" not in r80.opcodes  # sm_80 has no E4M3 conversion: software, longer code
    assert r80.sass_instructions > r.sass_instructions


def test_mx_and_dequantize_sass(cache: CompileCache) -> None:
    mxfp8, mxint8 = sweep("quantize_mx", "sm_90", [["ELEM=fp8"], ["ELEM=int8"]], cache)
    assert "F2FP" in mxfp8.opcodes and "F2I" in mxint8.opcodes
    assert "STG.E.U8" in mxfp8.global_memory_ops  # one E8M0 byte per block of 32
    (dq8,) = sweep("dequantize_fp8", "sm_90", [["GRANULARITY=mx"]], cache)
    assert "F2FP" in dq8.opcodes  # E4M3 -> fp16 unpack
    (dqi,) = sweep("dequantize_int8", "sm_90", [["GRANULARITY=group", "SYMMETRIC=false"]], cache)
    assert "I2F" in dqi.opcodes and "STG.E.128" in dqi.global_memory_ops  # 8 fp16 outputs
