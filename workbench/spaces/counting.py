"""Counting a space's valid configs without listing them.

The walk of :class:`~workbench.spaces.space.Space` binds the parameters in declaration order
and checks each derived value and constraint at the first level where it can run. Below a
level, what the rest of the walk can do depends only on the values bound so far that the
deeper derived values and constraints read (the level's *frontier*): two partial configs that
agree there have as many valid completions. Those counts are kept per frontier, so the late,
loosely tied knobs of a GEMM (raster order, epilogue, cluster shape) are counted once per
combination of what they read, not once per config above them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from workbench.spaces.model import Value

if TYPE_CHECKING:
    from workbench.spaces.space import Space

#: Values a walk or a count tries between two looks at the clock (tens of ms of walking).
CLOCK_EVERY = 16_384
#: Frontier counts kept at most (a few hundred MB at worst; past it, counts are recomputed).
COUNT_MEMO_LIMIT = 2_000_000


class CountTimeout(Exception):
    """The count ran past its deadline (:meth:`Space.count_valid` says how far it got)."""

    def __init__(self, visited: int, found: int) -> None:
        super().__init__(visited, found)
        self.visited = visited  #: values tried
        self.found = found  #: valid configs counted in the parts of the tree finished


def frontiers(space: Space) -> list[tuple[str, ...]]:
    """Per level, the names bound above it (parameters, and derived values computed by then)
    that a derived value or constraint checked below it reads."""
    depth = len(space.names)
    available: set[str] = set()
    out: list[tuple[str, ...]] = []
    for level in range(depth + 1):
        if level > 0:
            available.add(space.names[level - 1])
        available.update(name for name, _ in space.derived_at(level))
        read: set[str] = set()
        for deeper in range(level + 1, depth + 1):
            for _, expr in space.derived_at(deeper):
                read.update(expr.names)
            for constraint in space.constraints_at(deeper):
                read.update(constraint.expr.names)
        out.append(tuple(sorted(read & available)))
    return out


class ValidCounter:
    """One count of ``space``'s valid configs over ``domains`` within ``seconds``."""

    def __init__(self, space: Space, domains: Sequence[Sequence[Value]], seconds: float) -> None:
        self.space = space
        self.domains = domains
        self.deadline = time.perf_counter() + seconds
        self.frontier = frontiers(space)
        self.memo: dict[tuple, int] = {}
        self.visited = 0
        self.found = 0

    def count(self) -> int:
        """The number of valid configs.

        Raises:
            CountTimeout: the deadline passed first.
        """
        env = self.space.start_env()
        return 0 if env is None else self._below(0, env)

    def config_at(self, index: int) -> tuple[Value, ...]:
        """The valid config at ``index`` (0 <= index < :meth:`count`) in domain order: at
        each level, the value whose completions hold the index (uniform draws of indices are
        uniform draws of configs).

        Raises:
            CountTimeout: the deadline passed (a count past COUNT_MEMO_LIMIT recounts).
            IndexError: ``index`` is past the last valid config.
        """
        env = self.space.start_env()
        if env is None:
            raise IndexError("no valid config: a constraint of the shape alone fails")
        chosen: list[Value] = []
        for level, name in enumerate(self.space.names):
            for value in self.domains[level]:
                env[name] = value
                if not self.space.run_level(level + 1, env):
                    continue
                below = self._below(level + 1, env)
                if index < below:  # (the deeper levels' values in env are rebound next)
                    chosen.append(value)
                    break
                index -= below
            else:
                raise IndexError(f"no valid config at index {index} past level {level}")
        return tuple(chosen)

    def _below(self, level: int, env: dict[str, object]) -> int:
        """Valid completions of the partial config in ``env`` (its first ``level`` values)."""
        if level == len(self.domains):
            self.found += 1
            return 1
        key = (level, *[env.get(name) for name in self.frontier[level]])
        known = self.memo.get(key)
        if known is not None:
            self.found += known
            return known
        name, total = self.space.names[level], 0
        last = level + 1 == len(self.domains)  # (its values are the leaves: counted here)
        for value in self.domains[level]:
            self.visited += 1
            if self.visited % CLOCK_EVERY == 0 and time.perf_counter() > self.deadline:
                raise CountTimeout(self.visited, self.found)
            env[name] = value
            if self.space.run_level(level + 1, env):
                total += 1 if last else self._below(level + 1, env)
        self.found += total if last else 0
        if len(self.memo) < COUNT_MEMO_LIMIT:
            self.memo[key] = total
        return total
