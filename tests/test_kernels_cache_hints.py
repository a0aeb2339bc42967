"""cache_hints (ptx/cache_hints.ptx): every point assembles, each hint and policy reaches SASS.

What ptxas 13.5 prints, read from nvdisasm on sm_80 and sm_90 (the tests below check it):

- ``ld.global.<hint>.v4.f32`` -> the LDG.E.*.128 opcodes of :data:`LOAD_OPCODE`. ``cs`` and
  ``L1::evict_first`` give the same instruction (LDG.E.EF.128); every other hint its own.
- ``createpolicy`` emits no instruction of its own: with a constant fraction ptxas folds the
  policy into the 64-bit *memory descriptor* that every hinted access takes as ``desc[URn]``.
  Its high word is ``0x1PF00000``: P the primary priority (:data:`PRIORITY_CODE`), F the
  fraction in 16ths, ``floor(15.99 * fraction)`` (1.0 -> 0xf, 0.75 -> 0xb, 0.5 -> 7, 0.25 -> 3).
  On sm_80 it is one ``UMOV URn, 0x1PF00000``; on sm_90 ptxas builds it from
  ``UMOV URa, 0xF0`` (F << 4) and ``UMOV URb, 0x1P0`` (then ULOP3 / USHF.L by 20).
  Equal policies share one descriptor; different ones get one each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pytest

from workbench.analysis.sass import SassInstruction
from workbench.compiler import CompileCache, compile_jobs, make_job
from workbench.compiler.ptx import assemble_ptx
from workbench.references import ReferenceCall
from workbench.references.cache_hints import add_periodic
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

ARCHES = ["sm_80", "sm_89", "sm_90"]

#: ld.global.<hint>.v4.f32 (+ .L2::cache_hint) as ptxas 13.5 lowers it, on sm_80 and sm_90
LOAD_OPCODE = {
    "L1::evict_normal": "LDG.E.128",
    "ca": "LDG.E.128.STRONG.SM",
    "cg": "LDG.E.128.STRONG.GPU",
    "cs": "LDG.E.EF.128",
    "lu": "LDG.E.LU.128",
    "nc": "LDG.E.128.CONSTANT",
    "L1::no_allocate": "LDG.E.NA.128",
    "L1::evict_first": "LDG.E.EF.128",
    "L1::evict_last": "LDG.E.EL.128",
}
STORE_OPCODE = {"wb": "STG.E.128.STRONG.SM", "cg": "STG.E.128.STRONG.GPU", "cs": "STG.E.EF.128"}
#: the primary priority field P of the descriptor word 0x1PF00000
PRIORITY_CODE = {"evict_unchanged": 0x0, "evict_first": 0x2, "evict_last": 0x4, "evict_normal": 0x6}

DESCRIPTOR = re.compile(r"desc\[(UR\d+)\]")


def space_for(arch: str) -> Space:
    return Space(load_kernel("cache_hints"), arch=Arch.parse(arch))


def instructions(space: Space, config: Config, cache: CompileCache) -> list[SassInstruction]:
    (result,) = compile_jobs([make_job(space, config)], cache)
    assert result.ok, result.log
    (listing,) = sass_of(result, cache).values()
    return listing


# ---- the reference -------------------------------------------------------------------------


def looped_reference(x: np.ndarray, hot: np.ndarray) -> np.ndarray:
    """The definition, one element at a time."""
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = np.float32(x[i]) + np.float32(hot[i % hot.size])
    return out


@pytest.mark.parametrize("n,h", [(1, 4), (3, 4), (4099, 4100), (1000, 64), (4097, 12), (10, 3)])
def test_reference_matches_the_definition(n: int, h: int) -> None:
    rng = np.random.default_rng(n * 31 + h)
    x = rng.standard_normal(n).astype(np.float32)
    hot = rng.standard_normal(h).astype(np.float32)
    call = ReferenceCall(inputs={"x": x, "hot": hot}, scalars={}, shape={"n": n, "h": h}, config={})
    out = add_periodic(call)["out"]
    assert out.dtype == np.float32 and out.shape == (n,)
    assert np.array_equal(out, looped_reference(x, hot))


# ---- every point assembles -----------------------------------------------------------------


def one_of_each(space: Space) -> Iterator[Config]:
    """The default with each value of each parameter (when valid): every knob is exercised."""
    for p in space.spec.parameters:
        for value in p.values:
            config = space.spec.default_config() | {p.name: value}
            if space.is_valid(config):
                yield config


def hint_policy_pairs(space: Space) -> Iterator[Config]:
    """Each load hint with each L2 priority and store hint: the .L2::cache_hint combinations."""
    spec = space.spec
    stores = spec.parameter("STORE").values
    for hint in spec.parameter("HOT_HINT").values:
        for k, prio in enumerate(spec.parameter("HOT_L2").values):
            config = spec.default_config() | {
                "HOT_HINT": hint,
                "COLD_HINT": hint,
                "HOT_L2": prio,
                "STORE": stores[k % len(stores)],
                "ITEMS": 1,
            }
            if prio in spec.parameter("COLD_L2").values:
                config["COLD_L2"] = prio
            yield config


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHES)
def test_every_point_assembles(arch: str, cache: CompileCache) -> None:
    """A fixed-seed sample, every value of every knob, and every hint with every policy."""
    space = space_for(arch)
    configs = [*space.sample(50, seed=3), *one_of_each(space), *hint_policy_pairs(space)]
    assert all(space.is_valid(c) for c in configs)
    results = compile_jobs([make_job(space, c) for c in configs], cache)
    failed = [(c, r.log[-400:]) for c, r in zip(configs, results, strict=True) if not r.ok]
    assert not failed, failed[:3]


def test_constraints_cut_duplicate_fractions_only() -> None:
    space = space_for("sm_90")
    base = space.spec.default_config()
    assert space.explain(base | {"HOT_L2": "evict_normal", "HOT_FRACTION": 0.5})
    assert not space.explain(base | {"HOT_L2": "evict_last", "HOT_FRACTION": 0.5})
    assert space.explain(base | {"BLOCK": 1024, "BLOCKS_PER_SM": 4})  # 4096 threads per SM


def test_table_length_is_a_shape_precondition() -> None:
    spec = load_kernel("cache_hints")
    bad = Space(spec, shape={"n": 1000, "h": 6}, arch=Arch.parse("sm_90"))
    assert bad.count_valid() == 0
    assert "h % 4 == 0" in bad.explain(spec.default_config())[0].message


# ---- SASS ----------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_each_load_hint_has_its_own_opcode(arch: str, cache: CompileCache) -> None:
    """Both loads take the hint; the stores cycle through wb, cg, cs in the same binaries."""
    space = space_for(arch)
    stores = list(STORE_OPCODE)
    configs = [
        space.parse_config([f"HOT_HINT={h}", f"COLD_HINT={h}", f"STORE={stores[k % 3]}"])
        for k, h in enumerate(LOAD_OPCODE)
    ]
    seen: dict[str, str] = {}
    for r in static_sweep(space, configs, cache=cache):
        assert r.ok, r.error
        vector_loads = {op for op in r.global_memory_ops if op.startswith("LDG") and "128" in op}
        assert vector_loads == {LOAD_OPCODE[str(r.config["HOT_HINT"])]}, r.global_memory_ops
        vector_stores = {op for op in r.global_memory_ops if op.startswith("STG") and "128" in op}
        assert vector_stores == {STORE_OPCODE[str(r.config["STORE"])]}, r.global_memory_ops
        assert r.spill_stores == 0 and r.stack_frame == 0 and r.lints == []
        seen[str(r.config["HOT_HINT"])] = vector_loads.pop()
    assert seen["cs"] == seen["L1::evict_first"]  # one SASS instruction for both
    assert len(set(seen.values())) == len(LOAD_OPCODE) - 1


@pytest.mark.parametrize("items", [1, 2, 4])
def test_items_is_the_number_of_vector_loads_per_operand(items: int, cache: CompileCache) -> None:
    """ptxas drops the slots beyond ITEMS; every load is issued before the first add."""
    space = space_for("sm_90")
    listing = instructions(space, space.parse_config([f"ITEMS={items}"]), cache)
    opcodes = [i.opcode for i in listing]
    vector_loads = [k for k, op in enumerate(opcodes) if op.startswith("LDG") and "128" in op]
    vector_stores = [k for k, op in enumerate(opcodes) if op.startswith("STG") and "128" in op]
    assert len(vector_loads) == 2 * items and len(vector_stores) == items
    first_add = next(k for k, op in enumerate(opcodes) if op == "FADD")
    assert max(vector_loads) < first_add


def descriptor_registers(listing: list[SassInstruction], prefix: str) -> set[str]:
    out = set()
    for i in listing:
        if i.opcode.startswith(prefix) and "128" in i.opcode:
            m = DESCRIPTOR.search(i.operands)
            assert m, f"{i} has no memory descriptor operand"
            out.add(m.group(1))
    return out


def umov_immediates(listing: list[SassInstruction]) -> set[int]:
    out = set()
    for i in listing:
        if i.opcode == "UMOV" and (m := re.fullmatch(r"UR\d+, (0x[0-9a-f]+)", i.operands)):
            out.add(int(m.group(1), 16))
    return out


def policy_word(priority: str, fraction: float) -> int:
    return (0x10 | PRIORITY_CODE[priority]) << 24 | int(15.99 * fraction) << 20


@pytest.mark.parametrize(
    "hot,fraction,cold",
    [
        ("evict_last", 1.0, "evict_first"),
        ("evict_last", 0.75, "evict_normal"),
        ("evict_last", 0.5, "evict_first"),
        ("evict_first", 0.25, "evict_last"),
        ("evict_unchanged", 1.0, "evict_normal"),
    ],
)
def test_l2_policy_is_the_memory_descriptor_sm80(
    hot: str, fraction: float, cold: str, cache: CompileCache
) -> None:
    space = space_for("sm_80")
    config = space.parse_config(
        [f"HOT_L2={hot}", f"HOT_FRACTION={fraction}", f"COLD_L2={cold}", "ITEMS=1"]
    )
    listing = instructions(space, config, cache)
    words = umov_immediates(listing)
    assert policy_word(hot, fraction) in words, sorted(map(hex, words))
    assert policy_word(cold, 1.0) in words, sorted(map(hex, words))
    # the x and table loads carry different descriptors; the stores share the x loads' one
    loads = descriptor_registers(listing, "LDG")
    assert len(loads) == 2
    assert descriptor_registers(listing, "STG") < loads


def test_default_policies_share_one_descriptor(cache: CompileCache) -> None:
    space = space_for("sm_80")
    listing = instructions(space, space.spec.default_config(), cache)
    assert policy_word("evict_normal", 1.0) in umov_immediates(listing)
    assert len(descriptor_registers(listing, "LDG")) == 1


def test_l2_policy_is_built_in_uniform_registers_sm90(cache: CompileCache) -> None:
    space = space_for("sm_90")
    config = space.parse_config(
        ["HOT_L2=evict_last", "HOT_FRACTION=0.5", "COLD_L2=evict_first", "ITEMS=1"]
    )
    listing = instructions(space, config, cache)
    words = umov_immediates(listing)
    # priority fields 0x1P0 and fraction fields F << 4, combined by ULOP3 and USHF.L by 20
    assert {0x140, 0x120, 0x70, 0xF0} <= words, sorted(map(hex, words))
    assert not any(i.base == "CREATEPOLICY" for i in listing)
    assert len(descriptor_registers(listing, "LDG")) == 2


@pytest.mark.parametrize(
    "version,target,message",
    [
        ("7.3", "sm_80", "requires PTX ISA .version 7.4 or later"),
        ("7.4", "sm_75", "requires .target sm_80 or higher"),
    ],
)
def test_createpolicy_needs_ptx_isa_74_and_sm80(version: str, target: str, message: str) -> None:
    """Why the file says .version 7.4 / .target sm_80: ptxas refuses anything older."""
    space = space_for("sm_80")
    job = make_job(space, space.spec.default_config())
    text = job.source.replace(".version 7.4", f".version {version}")
    text = text.replace(".target sm_80", f".target {target}")
    options = job.options if target == "sm_80" else type(job.options).build(Arch.parse(target))
    out = assemble_ptx(text, options)
    assert not out.ok and "createpolicy.fractional" in out.log and message in out.log
