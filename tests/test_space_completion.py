"""Completing a partial config: the given values kept, the others from the default, or from the
nearest valid config where the default does not fit them; impossible values refused by name."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.completion import complete_config
from workbench.spaces.model import Config, Value
from workbench.toolchain import Arch

SM_90A = Arch.parse("sm_90a")


def test_given_values_are_kept_and_the_rest_comes_from_the_default(project: Path) -> None:
    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    done = complete_config(space, {"BLOCK": 64})
    assert done.config == {"BLOCK": 64, "SCALE": 2, "WAVES": 1}
    assert done.filled == {"SCALE": 2, "WAVES": 1} and done.moved == {}
    assert done.describe() == "BLOCK=64: filled in SCALE=2,WAVES=1 from the default"
    # nothing left to fill in: nothing to say
    assert complete_config(space, {"BLOCK": 64, "SCALE": 1, "WAVES": 2}).describe() is None


def test_where_the_default_does_not_fit_the_nearest_valid_config_is_taken() -> None:
    """The reported defect: PATH=wgmma over gemm_w8a8's mma default (BK=64, SWIZZLE=128) broke
    BK % SWIZZLE. One knob moves, one step: SWIZZLE=64 (BK is declared first: it is kept)."""
    spec = load_kernel("gemm_w8a8")
    space = Space(spec, arch=SM_90A)
    done = complete_config(space, {"PATH": "wgmma"})
    assert done.config == dict(spec.default_config(), PATH="wgmma", SWIZZLE=64)
    assert space.is_valid(done.config)
    assert done.moved == {"SWIZZLE": 64} and "SWIZZLE" not in done.filled
    line = done.describe()
    assert line is not None and "\n" not in line
    assert line.startswith("PATH=wgmma: filled in BM=128,BN=128,BK=64,")
    assert "moved to be valid: SWIZZLE=64 (not 128)" in line
    assert "BK % SWIZZLE == 0" in line
    # on sm_90a gemm_int8's own default is a wgmma config: a BK it cannot take moves SWIZZLE
    int8 = Space(load_kernel("gemm_int8"), arch=SM_90A)
    done = complete_config(int8, {"BK": 32})
    assert done.moved == {"SWIZZLE": 32} and done.config["PATH"] == "wgmma"
    assert "from the sm_90a default" in (done.describe() or "")


@pytest.mark.parametrize(
    "arch,given,message",
    [
        # a constraint that reads the given values alone
        ("sm_90", {"PATH": "wgmma"}, "cannot be valid (sm_90, H200, M=4096,N=4096,K=4096): it "
         "violates PATH != 'wgmma' or arch.specific"),
        ("sm_90a", {"PATH": "wgmma", "BM": 16}, "cannot be valid (sm_90a, H200, "
         "M=4096,N=4096,K=4096): it violates PATH != 'wgmma' or BM in (64, 128, 256)"),
        # none does, but the search finds no valid config: the default's broken one is named
        ("sm_90a", {"PATH": "dp4a", "STAGES": 6}, "no valid config has PATH=dp4a,STAGES=6 "
         "(sm_90a, H200, M=4096,N=4096,K=4096); with the sm_90a default's other values it "
         "violates PATH != 'dp4a' or (WM == 64 and WN == 64 and STAGES == 4"),
        # SMEM_LAYOUT=pad is an mma knob and SWIZZLE=32 a wgmma one: no PATH takes both
        ("sm_90a", {"SMEM_LAYOUT": "pad", "SWIZZLE": 32}, "no valid config has "
         "SMEM_LAYOUT=pad,SWIZZLE=32"),
    ],
)  # fmt: skip
def test_values_that_cannot_be_valid_together_name_the_constraint(
    arch: str, given: Config, message: str
) -> None:
    space = Space(load_kernel("gemm_int8"), arch=Arch.parse(arch))
    with pytest.raises(ConfigError) as info:
        complete_config(space, given)
    text = str(info.value)
    assert message in text and "violates" in text and "\n" not in text


def test_a_shape_no_config_fits_is_said() -> None:
    space = Space(load_kernel("gemm_int8"), arch=SM_90A, shape={"M": 64, "N": 64, "K": 100})
    with pytest.raises(ConfigError, match=r"cannot be valid .*K % 16 == 0"):
        complete_config(space, {"PATH": "mma"})


def _listed(space: Space) -> np.ndarray:
    """Every valid config of ``space`` as a row of value positions (one column per parameter,
    in declaration order), for :func:`_nearest_by_listing`."""
    params = space.spec.parameters
    rows = [[p.values.index(c[p.name]) for p in params] for c in space.iter_valid()]
    return np.array(rows, dtype=np.int64).reshape(-1, len(params))


def _nearest_by_listing(space: Space, listed: np.ndarray, given: Config) -> Config | None:
    """The rule, applied to every valid config (``listed``: :func:`_listed`): fewest
    parameters off the default, then the fewest steps along their domains, then the
    earliest-declared parameters kept (then nearer values) in declaration order; the default
    is that of the problem variant given (its named variant's: reduce_f16's ITEMS and VEC for
    DTYPE=float16). The key of a config names every value, so no two configs tie."""
    params = space.spec.parameters
    start = {**space.default_config(space.variant_values(given)), **given}
    at = np.array([p.values.index(start[p.name]) for p in params], dtype=np.int64)
    names = [p.name for p in params]
    fixed = [names.index(n) for n in given]
    keeping = listed[np.all(listed[:, fixed] == at[fixed], axis=1)]
    if len(keeping) == 0:
        return None
    steps = np.abs(keeping - at)
    # np.lexsort sorts by its last key first: moved, steps, then (steps, value) per parameter
    keys = [k for j in reversed(range(len(params))) for k in (keeping[:, j], steps[:, j])]
    best = keeping[np.lexsort([*keys, steps.sum(axis=1), (steps != 0).sum(axis=1)])[0]]
    return {p.name: p.values[i] for p, i in zip(params, best, strict=True)}


@pytest.mark.parametrize(
    "kernel,arch,sample",
    [
        ("reduce", "sm_90", None),
        ("gemm_fp8", "sm_90a", 80),
        # every pair: about 50 ms of search each, 900 pairs
        pytest.param("gemm_fp8", "sm_90a", None, marks=pytest.mark.slow),
    ],
    ids=["reduce-sm_90-every-pair", "gemm_fp8-sm_90a-80-pairs", "gemm_fp8-sm_90a-every-pair"],
)
def test_the_nearest_valid_config_is_the_one_the_rule_picks_from_all(
    kernel: str, arch: str, sample: int | None
) -> None:
    """Every pair of given values of two library spaces (or a fixed-seed ``sample`` of those
    pairs): the search agrees with the rule applied to the whole listed space (or both find no
    valid config)."""
    space = Space(load_kernel(kernel), arch=Arch.parse(arch))
    params = [p for p in space.spec.parameters if len(p.values) > 1]
    pairs: list[dict[str, Value]] = [
        {a.name: va, b.name: vb}
        for a, b in itertools.combinations(params, 2)
        for va, vb in itertools.product(a.values, b.values)
    ]
    if sample is not None:
        pairs = random.Random(57).sample(pairs, sample)
    listed = _listed(space)
    searched = 0
    for given in pairs:
        start = {**space.default_config(space.variant_values(given)), **given}
        try:
            got = complete_config(space, given).config
        except ConfigError:
            got = None
        if space.is_valid(start):  # (nothing moves: no need to list)
            assert got == start, given
            continue
        assert got == _nearest_by_listing(space, listed, given), given
        searched += 1
    assert searched > 20, searched  # (the default did not fit often: the search was exercised)
