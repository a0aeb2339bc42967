"""aos_soa (kernels_cu/aos_soa.cu): layout transforms, the update, compiles, SASS, preconditions."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from gpu_checks import gpu, verify_on_gpu

from workbench.analysis import kernel_resources
from workbench.analysis.sass import SassInstruction
from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.references import ReferenceCall
from workbench.references.aos_soa import FIELDS, pack, step, unpack, update
from workbench.spaces import Space, load_kernel
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

ARCHES = ["sm_80", "sm_89", "sm_90"]
LAYOUTS = [("aos", 8), ("soa", 8), ("aosoa", 2), ("aosoa", 4), ("aosoa", 8), ("aosoa", 32)]


def offset(i: int, f: int, n: int, layout: str, tile: int) -> int:
    """Where field f of particle i lives: the kernel's formula, written out independently."""
    if layout == "aos":
        return i * 7 + f
    if layout == "soa":
        return f * n + i
    first = i - i % tile
    width = min(tile, n - first)
    return first * 7 + f * width + (i - first)


# -- the layouts ---------------------------------------------------------------------------
@pytest.mark.parametrize(("layout", "tile"), LAYOUTS)
@pytest.mark.parametrize("n", [1, 5, 37, 64])
def test_pack_puts_every_field_where_the_kernel_looks(layout: str, tile: int, n: int) -> None:
    state = np.arange(7 * n, dtype=np.float32).reshape(n, 7)  # value = 7 * i + f
    flat = pack(state, layout, tile)
    assert flat.shape == (7 * n,) and sorted(flat.tolist()) == list(range(7 * n))
    for i in range(n):
        for f in range(7):
            assert flat[offset(i, f, n, layout, tile)] == 7 * i + f, (i, f)
    assert (unpack(flat, n, layout, tile) == state).all()


def test_unpack_checks_its_input() -> None:
    with pytest.raises(ValueError, match="expected 7 \\* 3"):
        unpack(np.zeros(20, np.float32), 3, "soa", 8)
    with pytest.raises(ValueError, match="unknown layout 'soaos'"):
        pack(np.zeros((3, 7), np.float32), "soaos", 8)
    assert FIELDS[6] == "mass"


def test_step_against_float64() -> None:
    """The float32 step agrees with the same physics in float64 to float32 rounding."""
    rng = np.random.default_rng(0)
    state = rng.uniform(0.5, 2.0, (1000, 7)).astype(np.float32)
    dt, k = np.float32(0.01), np.float32(1.5)
    got = step(state, dt, k)
    s = state.astype(np.float64)
    r, v, m = s[:, :3], s[:, 3:6], s[:, 6:]
    v_new = v + float(dt) * (-float(k) * r / m)
    r_new = r + float(dt) * v_new
    want = np.concatenate([r_new, v_new, m], axis=1)
    assert np.allclose(got, want, rtol=1e-6, atol=0)
    assert (got[:, 6] == state[:, 6]).all()  # mass is copied
    assert not np.allclose(got, state, rtol=1e-4)  # and the step moves everything else


@pytest.mark.parametrize("n", [37, 4099])
def test_update_is_one_step_in_every_layout(n: int) -> None:
    """The reference reads and writes the config's layout; the physics is the same."""
    rng = np.random.default_rng(n)
    state = rng.uniform(0.5, 2.0, (n, 7)).astype(np.float32)
    want = step(state, np.float32(0.01), np.float32(1.5))
    for layout, tile in LAYOUTS:
        call = ReferenceCall(
            inputs={"particles": pack(state, layout, tile)},
            scalars={"dt": 0.01, "k": 1.5},
            shape={"n": n},
            config={"LAYOUT": layout, "TILE": tile},
        )
        out = update(call)["updated"]
        assert out.dtype == np.float32 and out.shape == (7 * n,)
        assert (unpack(out, n, layout, tile) == want).all(), layout


# -- the space -----------------------------------------------------------------------------
def test_space_constraints() -> None:
    spec = load_kernel("aos_soa")
    space = Space(spec, arch=Arch.parse("sm_90"))
    valid = list(space.iter_valid())
    assert {c["TILE"] for c in valid if c["LAYOUT"] != "aosoa"} == {8}  # one point per knob
    assert {c["TILE"] for c in valid if c["LAYOUT"] == "aosoa"} == {2, 4, 8, 16, 32}
    assert all(c["TILE"] % c["VEC"] == 0 and c["ITEMS"] % c["VEC"] == 0 for c in valid)
    assert not any(c["BLOCK"] == 1024 and c["ITEMS"] == 8 for c in valid)  # would spill
    for arch in spec.arches:
        assert Space(spec, arch=Arch.parse(arch)).explain(spec.default_config()) == []


@pytest.mark.slow
def test_fixed_sample_compiles_for_every_arch(cache: CompileCache) -> None:
    """A fixed-seed sample of 51 valid configs, 17 per arch, compiles without spills (every
    one of the 285 points per arch was compiled once by hand: see the kernel's report)."""
    spec = load_kernel("aos_soa")
    jobs = []
    for i, arch in enumerate(ARCHES):
        space = Space(spec, arch=Arch.parse(arch))
        jobs += [make_job(space, c) for c in space.sample(17, seed=77 + i)]
    assert len(jobs) == 51
    for job, result in zip(jobs, compile_jobs(jobs, cache, workers=2), strict=True):
        assert result.ok, (job.options.defines, job.arch.sm, result.log[-2000:])
        (res,) = kernel_resources(result.cubin or b"", result.log).values()
        assert res.spill_stores == 0 and res.stack_frame == 0, (job.options.defines, res)


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("ITEMS=2,VEC=4", "ITEMS: a whole number of VEC-particle groups"),
        ("LAYOUT=aosoa,TILE=2,VEC=4,ITEMS=4", "TILE % VEC == 0"),
        ("LAYOUT=soa,TILE=4", "TILE: only aosoa has tiles"),
        ("ITEMS=8,BLOCK=1024", "registers: 7 floats per particle x ITEMS"),
    ],
)
def test_preconditions_back_up_the_constraints(assignment: str, message: str) -> None:
    space = Space(load_kernel("aos_soa"), arch=Arch.parse("sm_90"))
    config = space.parse_config(assignment.split(","))
    assert space.explain(config)  # the space rejects it ...
    result = compile_job(make_job(space, config))  # ... and so does the compiler
    assert not result.ok and message in result.log


# -- SASS ----------------------------------------------------------------------------------
def sass(arch: str, assignment: str, cache: CompileCache) -> list[SassInstruction]:
    space = Space(load_kernel("aos_soa"), arch=Arch.parse(arch))
    result = compile_job(make_job(space, space.parse_config(assignment.split(","))), cache)
    assert result.ok and result.entry
    return sass_of(result, cache)[result.entry]


#: the address operand of a global access: ``desc[UR4][R32.64+0x10]`` -> (R32, 0x10)
ADDRESS = re.compile(r"\[(R\d+)\.64(?:\+0x([0-9a-f]+))?\]$")


def wide_load_addresses(instructions: list[SassInstruction]) -> list[tuple[str, int]]:
    """(base register, byte offset) of every 16-byte global load."""
    out = []
    for i in instructions:
        if i.base == "LDG" and ".128" in i.opcode:
            match = ADDRESS.search(i.operands)
            assert match, i
            out.append((match.group(1), int(match.group(2) or "0", 16)))
    return out


def widths(instructions: list[SassInstruction], base: str) -> Counter[int]:
    """Access widths in bits of the global loads or stores."""
    out: Counter[int] = Counter()
    for i in instructions:
        if i.base == base:
            bits = [int(p) for p in i.opcode.split(".") if p in ("64", "128")]
            out[bits[0] if bits else 32] += 1
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_load_widths_follow_vec_in_every_layout(arch: str, cache: CompileCache) -> None:
    """VEC = 4: each group's fields move as seven 16-byte loads and stores (the fast path),
    VEC = 2 as 8-byte ones, VEC = 1 as 4-byte ones; the scalar path (tails) is 4 bytes."""
    for layout in ("LAYOUT=aos", "LAYOUT=soa", "LAYOUT=aosoa,TILE=8"):
        code = sass(arch, f"{layout},VEC=4,ITEMS=4", cache)
        assert widths(code, "LDG")[128] == 7 and widths(code, "STG")[128] == 7, layout
        code = sass(arch, f"{layout},VEC=2,ITEMS=2", cache)
        assert widths(code, "LDG")[64] == 7 and widths(code, "STG")[64] == 7, layout
    code = sass(arch, "LAYOUT=aos,VEC=1,ITEMS=2", cache)
    assert widths(code, "LDG") == Counter({32: 14}) and widths(code, "STG") == Counter({32: 14})


def test_aos_reads_one_contiguous_run_per_thread_and_soa_seven_arrays(cache: CompileCache) -> None:
    """What a thread reads: AoS, its group's 7 vectors at one base (+0, +16, ... +96 bytes),
    SoA, 7 vectors from 7 different addresses (one per field array). Across a warp, SoA's
    vectors are contiguous and AoS's are 112 bytes apart: sectors per request need ncu."""
    aos = wide_load_addresses(sass("sm_90", "LAYOUT=aos,VEC=4,ITEMS=4", cache))
    assert len({base for base, _ in aos}) == 1
    assert sorted(off for _, off in aos) == [16 * k for k in range(7)]
    soa = wide_load_addresses(sass("sm_90", "LAYOUT=soa,VEC=4,ITEMS=4", cache))
    assert len(set(soa)) == 7 and len({base for base, _ in soa}) == 7


def test_default_sweep_is_clean(cache: CompileCache) -> None:
    spec = load_kernel("aos_soa")
    space = Space(spec, arch=Arch.parse("sm_89"))
    (record,) = static_sweep(space, [spec.default_config()], cache=cache, workers=1)
    assert record.ok and record.lints == [] and record.spill_stores == 0
    assert "MUFU" in record.opcodes  # 1 / mass: the reciprocal behind the IEEE division


# -- on a GPU (-m gpu; skipped cleanly without one) ----------------------------------------


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("n", [37, 4099, 1 << 22])
def test_layouts_verify_on_the_gpu(n: int, tmp_path: Path) -> None:
    configs = [
        f"{layout},VEC={vec},ITEMS=4"
        for layout in ("LAYOUT=aos", "LAYOUT=soa", "LAYOUT=aosoa,TILE=4", "LAYOUT=aosoa,TILE=32")
        for vec in (1, 2, 4)
    ]
    verify_on_gpu("aos_soa", {"n": n}, ["", *configs, "LAYOUT=aosoa,TILE=2,VEC=2"], tmp_path)
