"""divergence (kernels_cu/divergence.cu): one function written three ways (branchy, masked,
partitioned): the reference, compiles, branch counts in SASS, preconditions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gpu_checks import gpu, verify_on_gpu

from workbench.analysis import kernel_resources
from workbench.compiler import CompileCache, compile_job, compile_jobs, make_job
from workbench.references import ReferenceCall
from workbench.references.divergence import KEYS, ROUNDS, apply_cases, hash_cases
from workbench.spaces import Space, load_kernel
from workbench.static.sweep import StaticRecord, static_sweep
from workbench.toolchain import Arch

ARCHES = ["sm_80", "sm_89", "sm_90"]
VARIANTS = ["branchy", "masked", "partitioned"]
#: SASS control flow: branches and the convergence barriers around divergent regions
BRANCH_OPCODES = ("BRA", "BRX", "JMP", "JMX", "BSSY", "BSYNC", "BREAK", "WARPSYNC")


# -- the reference -------------------------------------------------------------------------
def python_hash(x: int, case: int | None = None) -> int:
    """The function on one word, in plain Python integers (an independent computation);
    ``case`` forces one case's function instead of ``x & 3``."""
    mask = 0xFFFFFFFF
    case = x & 3 if case is None else case
    h = x
    for _ in range(ROUNDS[case]):
        h = (h + KEYS[case]) & mask
        h ^= h >> 16
        h = (h * 0x7FEB352D) & mask
        h ^= h >> 15
        h = (h * 0x846CA68B) & mask
        h ^= h >> 16
    return h


@pytest.mark.parametrize("n", [1, 37, 4099])
def test_reference_against_python_integers(n: int) -> None:
    x = np.random.default_rng(n).integers(1, 2**32 - 1, n, dtype=np.uint32)
    got = hash_cases(ReferenceCall(inputs={"x": x}, scalars={}, shape={"n": n}, config={}))["y"]
    assert got.dtype == np.uint32 and got.shape == (n,)
    assert got.tolist() == [python_hash(int(v)) for v in x]


def test_random_inputs_take_every_case_in_nearly_every_warp() -> None:
    """The space's input (random 32-bit words) makes the branchy variant diverge."""
    spec = load_kernel("divergence")
    (x_spec,) = spec.inputs
    assert x_spec.dtype.value == "uint32" and x_spec.distribution.value == "randint"
    x = np.random.default_rng(1).integers(int(x_spec.low), int(x_spec.high), 32 * 1000)
    cases = (x & 3).reshape(-1, 32)  # one row per warp
    all_four = np.array([len(set(row.tolist())) == 4 for row in cases])
    assert all_four.mean() > 0.95
    assert set(np.unique(cases).tolist()) == {0, 1, 2, 3}


def test_the_four_cases_are_different_functions() -> None:
    """A wrong case (a swapped branch or select) cannot go unnoticed."""
    for word in (8, 12345, 0xDEADBEEF):
        assert len({python_hash(word, c) for c in range(4)}) == 4
    x = np.arange(4, 4 + 4 * 64, dtype=np.uint32)  # every case many times
    assert len(set(apply_cases(x).tolist())) == len(x)


# -- the space -----------------------------------------------------------------------------
def test_space_and_launch() -> None:
    spec = load_kernel("divergence")
    space = Space(spec, arch=Arch.parse("sm_90"))
    valid = list(space.iter_valid())
    assert {c["VARIANT"] for c in valid} == set(VARIANTS)
    assert all(
        c["BLOCK"] * c["ITEMS"] * 10 <= 48 * 1024 for c in valid if c["VARIANT"] == "partitioned"
    )
    assert spec.reference is not None and spec.reference.exact
    for arch in spec.arches:
        assert Space(spec, arch=Arch.parse(arch)).explain(spec.default_config()) == []


@pytest.mark.slow
def test_fixed_sample_compiles_for_every_arch(cache: CompileCache) -> None:
    """A fixed-seed sample of 51 valid configs, 17 per arch (all 72 per arch were compiled
    once by hand, without spills)."""
    spec = load_kernel("divergence")
    jobs = []
    for i, arch in enumerate(ARCHES):
        space = Space(spec, arch=Arch.parse(arch))
        jobs += [make_job(space, c) for c in space.sample(17, seed=31 + i)]
    for job, result in zip(jobs, compile_jobs(jobs, cache, workers=2), strict=True):
        assert result.ok, (job.options.defines, job.arch.sm, result.log[-2000:])
        (res,) = kernel_resources(result.cubin or b"", result.log).values()
        assert res.spill_stores == 0 and res.stack_frame == 0, (job.options.defines, res)


def test_preconditions_back_up_the_constraints() -> None:
    space = Space(load_kernel("divergence"), arch=Arch.parse("sm_90"))
    config = space.parse_config(["VARIANT=partitioned", "BLOCK=1024", "ITEMS=8"])
    assert space.explain(config)  # the space rejects it ...
    result = compile_job(make_job(space, config))  # ... and so does the compiler
    assert not result.ok and "partitioned: a tile's inputs, positions and results" in result.log


# -- SASS ----------------------------------------------------------------------------------
def branches(record: StaticRecord) -> int:
    return sum(record.opcodes.get(op, 0) for op in BRANCH_OPCODES)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_masked_has_fewer_branches_than_branchy(arch: str, cache: CompileCache) -> None:
    spec = load_kernel("divergence")
    space = Space(spec, arch=Arch.parse(arch))
    configs = [space.parse_config([f"VARIANT={v}", f"ITEMS={i}"]) for v in VARIANTS for i in (1, 4)]
    records = {
        (r.config["VARIANT"], r.config["ITEMS"]): r
        for r in static_sweep(space, configs, cache=cache, workers=2)
    }
    for r in records.values():
        assert r.ok and r.lints == [] and r.spill_stores == 0, (r.label, r.lints)
    for items in (1, 4):
        branchy, masked = records["branchy", items], records["masked", items]
        assert branches(masked) < branches(branchy), (masked.opcodes, branchy.opcodes)
        assert masked.opcodes["BRA"] < branchy.opcodes["BRA"]
        part = records["partitioned", items]
        # the partition: lanes grouped by case, one shared atomic per group, block barriers
        for op in ("MATCH", "ATOMS", "SHFL", "BAR", "POPC"):
            assert op in part.opcodes, (op, part.opcodes)
        assert part.static_smem == 10 * 256 * items + 16  # 3 arrays of the tile + 4 counters
        assert branchy.static_smem == masked.static_smem == 0


# -- on a GPU (-m gpu; skipped cleanly without one) ----------------------------------------


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("n", [37, 1_000_003])
def test_variants_verify_on_the_gpu(n: int, tmp_path: Path) -> None:
    configs = [f"VARIANT={v},ITEMS={i}" for v in VARIANTS for i in (1, 4, 16)]
    verify_on_gpu(
        "divergence", {"n": n}, [*configs, "VARIANT=partitioned,BLOCK=1024,ITEMS=4"], tmp_path
    )
