"""The first two kernels, compiled and inspected for real: resources, SASS, lints."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.compiler import CompileCache
from workbench.search.configs import select_configs
from workbench.spaces import Space, load_kernel
from workbench.static.sweep import static_sweep
from workbench.toolchain import Arch

ARCHES = ["sm_80", "sm_89", "sm_90"]

#: ld.global.<hint> as ptxas 13 lowers it (read from nvdisasm output on sm_80 and sm_90)
LOAD_OPCODE = {
    "ca": "LDG.E.128.STRONG.SM",
    "cg": "LDG.E.128.STRONG.GPU",
    "cs": "LDG.E.EF.128",
    "lu": "LDG.E.LU.128",
    "nc": "LDG.E.128.CONSTANT",
}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHES)
def test_reduce_sample_has_shfl_and_no_spills(arch: str, cache: CompileCache) -> None:
    spec = load_kernel("reduce")
    space = Space(spec, arch=Arch.parse(arch))
    # the float32 variant (what `reduce` names); float16 tiles hold more values per thread
    configs = select_configs(space, sample=6, seed=11, fixed={"DTYPE": "float32"})
    records = static_sweep(space, configs, cache=cache)
    assert len(records) == 7
    for r in records:
        assert r.ok, r.error
        assert "SHFL" in r.opcodes, r.opcodes
        assert r.spill_stores == 0 and r.stack_frame == 0
        assert r.lints == []
        # warp sums in shared memory: one float per warp
        assert r.static_smem == 4 * r.config["BLOCK"] // 32
        assert 0 < r.occupancy <= 1 and r.registers <= 64


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cache_hint_variants_differ_in_their_loads(arch: str, cache: CompileCache) -> None:
    spec = load_kernel("stream_scale")
    space = Space(spec, arch=Arch.parse(arch))
    configs = [space.parse_config([f"HINT={h}"]) for h in LOAD_OPCODE]
    records = static_sweep(space, configs, cache=cache)
    seen = {}
    for r in records:
        assert r.ok, r.error
        vector_loads = [op for op in r.global_memory_ops if op.startswith("LDG") and "128" in op]
        assert vector_loads == [LOAD_OPCODE[r.config["HINT"]]], r.global_memory_ops
        seen[r.config["HINT"]] = tuple(r.global_memory_ops)
    assert len(set(seen.values())) == len(LOAD_OPCODE)  # every hint gives different SASS


def test_store_hint_reaches_sass(cache: CompileCache) -> None:
    spec = load_kernel("stream_scale")
    space = Space(spec, arch=Arch.parse("sm_90"))
    (record,) = static_sweep(space, [space.parse_config(["STORE=cs"])], cache=cache)
    assert "STG.E.EF.128" in record.global_memory_ops


@pytest.mark.slow
def test_all_stream_scale_configs_compile_for_sm_89(cache: CompileCache) -> None:
    spec = load_kernel("stream_scale")
    space = Space(spec, arch=Arch.parse("sm_89"))
    configs = select_configs(space, all_configs=True)
    assert len(configs) == space.count_valid()
    records = static_sweep(space, configs, cache=cache)
    assert all(r.ok for r in records)
    # sm_89 holds 1536 threads per SM: BLOCK=1024 never fits twice
    assert {r.config["BLOCK"] for r in records} == {128, 256, 512}


@pytest.mark.slow
def test_second_sweep_is_answered_from_the_cache(tmp_path: Path) -> None:
    spec = load_kernel("reduce")
    space = Space(spec, arch=Arch.parse("sm_90"))
    configs = select_configs(space, sample=2, seed=5)
    cache = CompileCache(tmp_path)
    first = static_sweep(space, configs, cache=cache)
    second = static_sweep(space, configs, cache=cache)
    assert not any(r.cached for r in first) and all(r.cached for r in second)
    assert [r.opcodes for r in first] == [r.opcodes for r in second]
    assert all(
        cache.get_artifact(k, "sass.txt") for k in {j.key() for j in _results(space, configs)}
    )


def _results(space: Space, configs: list) -> list:
    from workbench.compiler import make_job

    return [make_job(space, c) for c in configs]


def test_expect_sass_lint_fires_when_opcode_is_missing(project: Path, cache: CompileCache) -> None:
    from workbench.spaces import load_space

    path = project / "spaces" / "tiny.yaml"
    path.write_text(
        path.read_text() + "expect_sass: [SHFL, {opcodes: [IMMA], when: 'arch.cc >= 90'}]\n"
    )
    spec = load_space(path)
    space = Space(spec, arch=Arch.parse("sm_90"))
    (record,) = static_sweep(space, [spec.default_config()], cache=cache)
    assert record.ok
    assert any("SHFL" in lint.message for lint in record.lints)
    assert any("IMMA" in lint.message for lint in record.lints)
    space80 = Space(spec, arch=Arch.parse("sm_80"))
    (record80,) = static_sweep(space80, [spec.default_config()], cache=cache)
    assert not any("IMMA" in lint.message for lint in record80.lints)


@pytest.mark.parametrize(
    "assignment,message",
    [("ITEMS=2,VEC=4", "ITEMS: a whole number of VEC-wide loads")],
)
def test_kernel_preconditions_back_up_the_constraints(assignment: str, message: str) -> None:
    """A config the space rejects also fails to compile, with the kernel's static_assert."""
    from workbench.compiler import compile_job, make_job

    spec = load_kernel("reduce")
    space = Space(spec, arch=Arch.parse("sm_90"))
    config = space.parse_config(assignment.split(","))
    assert space.explain(config)  # the space rejects it ...
    result = compile_job(make_job(space, config))  # ... and so does the compiler
    assert not result.ok and message in result.log
