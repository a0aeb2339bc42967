"""Groups of parameters that together contain every pair of parameters.

The portfolio's model predicts a config's target as a sum over one table per parameter and
one per pair of parameters: 55 tables for 10 parameters, so scoring every config of a large
space gathers 55 numbers per config. Tables over a group of parameters can hold the sum of
all the per-parameter and pair tables inside the group; when every pair lies in some group, a
config's score is one number per group (3 for the recorded gemm space). A group's table has
one cell per combination of its parameters' values, so groups are kept to ``cap`` cells.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Largest joint table of a group (cells): rebuilt after every posterior draw, so small.
GROUP_CELLS = 4096


def pair_cover(cards: Sequence[int], cap: int = GROUP_CELLS) -> list[tuple[int, ...]]:
    """Groups of parameter positions (sorted tuples) such that every parameter and every pair
    of parameters lies in at least one group, each group's product of ``cards`` at most
    ``cap`` unless a single pair already exceeds it (then that pair is a group of its own).

    Greedy: each group starts from the smallest uncovered pair and takes in the parameter that
    covers the most uncovered pairs (the one with fewer values on a tie) while it fits. Few
    groups, not provably the fewest.
    """
    n = len(cards)
    if n == 0:
        return []
    if math.prod(cards) <= cap or n == 1:
        return [tuple(range(n))]
    uncovered = {(a, b) for a in range(n) for b in range(a + 1, n)}
    groups: list[tuple[int, ...]] = []
    while uncovered:
        a, b = min(sorted(uncovered), key=lambda ab: cards[ab[0]] * cards[ab[1]])
        group, size = [a, b], cards[a] * cards[b]
        while True:
            options = [
                (sum((min(c, x), max(c, x)) in uncovered for x in group), -cards[c], -c)
                for c in range(n)
                if c not in group and size * cards[c] <= cap
            ]
            gain, minus_card, minus_c = max(options, default=(0, 0, 0))
            if gain == 0:
                break
            group.append(-minus_c)
            size *= -minus_card
        group.sort()
        uncovered -= {(x, y) for i, x in enumerate(group) for y in group[i + 1 :]}
        groups.append(tuple(group))
    return groups
