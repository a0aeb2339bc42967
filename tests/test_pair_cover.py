"""pair_cover: groups of parameters holding every pair, each joint table within the cap."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workbench.search.pair_cover import pair_cover


def covered(groups: list[tuple[int, ...]], n: int) -> bool:
    inside = {pair for g in groups for pair in itertools.combinations(g, 2)}
    return all(pair in inside for pair in itertools.combinations(range(n), 2)) and {
        j for g in groups for j in g
    } == set(range(n))


def test_the_recorded_gemm_space_needs_three_groups() -> None:
    cards = [4, 4, 3, 3, 3, 3, 4, 4, 2, 2]  # gemm_RTX_3090's varying parameters
    groups = pair_cover(cards, 4096)
    assert covered(groups, len(cards))
    assert len(groups) == 3
    assert all(math.prod(cards[j] for j in g) <= 4096 for g in groups)


def test_a_small_space_is_one_group_and_nothing_is_no_group() -> None:
    assert pair_cover([4, 31, 11, 3], 4096) == [(0, 1, 2, 3)]
    assert pair_cover([7], 4) == [(0,)]
    assert pair_cover([], 4096) == []


def test_a_pair_larger_than_the_cap_is_a_group_of_its_own() -> None:
    groups = pair_cover([100, 100, 2], 64)
    assert covered(groups, 3)
    assert (0, 1) in groups


@given(st.lists(st.integers(2, 12), min_size=2, max_size=12), st.sampled_from([16, 256, 4096]))
def test_every_pair_is_covered_within_the_cap(cards: list[int], cap: int) -> None:
    groups = pair_cover(cards, cap)
    assert covered(groups, len(cards))
    for g in groups:
        assert g == tuple(sorted(set(g)))
        assert math.prod(cards[j] for j in g) <= cap or len(g) == 2


@pytest.mark.parametrize("cap", [1, 2])
def test_a_cap_below_every_pair_gives_the_pairs(cap: int) -> None:
    groups = pair_cover([2, 2, 2], cap)
    assert sorted(groups) == [(0, 1), (0, 2), (1, 2)]
