"""One selection of the configs to compile, for `workbench compile` and tune's compile stage:
what each batch holds, in which order, and for which problem variant (no compile, no GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import ConfigError
from workbench.search.configs import (
    Assignments,
    CompileSelection,
    compile_batches,
    select_configs,
)
from workbench.spaces import Space, load_kernel
from workbench.spaces.targets import resolve_arches
from workbench.store import Store


def _selection(**fields: object) -> CompileSelection:
    spec = load_kernel("reduce", [])
    arches = tuple(resolve_arches(spec, "sm_80,sm_90"))
    shapes = ({"n": 4096}, {"n": 1 << 20})
    return CompileSelection(spec, arches, shapes, **fields)  # type: ignore[arg-type]


def test_batches_go_per_arch_then_shape_with_the_default_and_a_sample() -> None:
    batches = list(compile_batches(_selection(sample=2, seed=3)))
    assert [(b.space.arch.sm, b.space.shape["n"]) for b in batches] == [
        ("sm_80", 4096),
        ("sm_80", 1 << 20),
        ("sm_90", 4096),
        ("sm_90", 1 << 20),
    ]
    for b in batches:  # the same configs as select_configs picks for one space
        assert b.configs == select_configs(b.space, sample=2, seed=3)
        assert b.configs[0] == b.default == b.space.default_config()
        assert b.kernel == "reduce"  # nothing pinned: the kernel's own compile-only study


def test_given_configs_replace_the_sweep_unless_it_follows_them() -> None:
    given = Assignments(("BLOCK=128", "BLOCK=128", "BLOCK=512,ITEMS=4"))
    (alone, *_) = compile_batches(_selection(given=given, sample=3))
    assert [(c["BLOCK"], c["ITEMS"]) for c in alone.configs] == [(128, 8), (512, 4)]
    (first, *_) = compile_batches(_selection(given=given, sample=3, then_sweep=True))
    assert first.configs[:2] == alone.configs
    assert first.configs[2] == first.default  # then the default and the sample, no repeats
    assert len(first.configs) == 2 + 1 + 3
    assert len({tuple(sorted(c.items())) for c in first.configs}) == len(first.configs)


def test_one_variant_pins_the_problem_variants_a_tune_searches() -> None:
    every = next(compile_batches(_selection(all_configs=True)))
    assert {c["OP"] for c in every.configs} == {"sum", "max", "sumsq"}
    one = next(compile_batches(_selection(all_configs=True, one_variant=True)))
    assert {(c["DTYPE"], c["OP"]) for c in one.configs} == {("float32", "sum")}
    assert one.kernel != "reduce" and "sum" in one.kernel  # the variant's study
    pinned = next(compile_batches(_selection(pin=("OP=max",), sample=2)))
    assert {c["OP"] for c in pinned.configs} == {"max"} and pinned.default["OP"] == "max"
    assert "max" in pinned.kernel


def test_a_given_config_off_the_pins_is_refused() -> None:
    selection = _selection(given=Assignments(("OP=sum",)), pin=("OP=max",))
    with pytest.raises(ConfigError, match="OP is set to 'max'"):
        next(compile_batches(selection))


def test_warm_starts_are_read_from_a_store(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="`storage`"):
        next(compile_batches(_selection(warm=("best",))))
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    said: list[str] = []
    batch = next(
        compile_batches(_selection(warm=("best",), one_variant=True), store=store, say=said.append)
    )
    assert batch.configs == [batch.default] and said == [
        f"--enqueue best: no other study of {batch.kernel} in the store"
    ]
    assert Space(batch.space.spec, arch=batch.space.arch).default_config() == batch.default
