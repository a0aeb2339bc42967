"""The default sampler: a bandit over four search moves on the valid set of a discrete space.

Autotuning spaces are small, discrete and constrained, and they differ: some reward
exploitation around the incumbent, some hide the optimum behind a parameter interaction that
only a population or a global model finds (recorded spaces show both). No single move wins
everywhere, so the sampler keeps four and lets the search decide (as OpenTuner's AUC bandit
does), rewarding a move when its proposal improves the best value:

* ``random``: an unvisited valid config, uniformly (exploration; the baseline itself);
* ``model``: a draw from the softmax of a Parzen density ratio (TPE's l/g) over unvisited
  valid configs (a random subset in large spaces), ordinal domains smoothed between
  neighbouring values; the ratio mixes per-parameter densities with densities over pairs of
  parameters, because tiles, block sizes and vector widths interact (a block size is good
  only with some tile sizes);
* ``crossover``: uniform crossover of two elite configs plus a small mutation (ordinal
  parameters step to a nearby value), as a genetic algorithm would;
* ``line``: the best-scoring unvisited config that differs from the incumbent in one
  parameter (a model-ranked coordinate move).

Moves choose among valid configs only, so no proposal is wasted on a point outside the space,
and never propose a visited one. The space must be enumerable (the problem's valid set); for a
larger space the tuner uses TPE instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse

from workbench.runners.base import Measurement, TrialOutcome
from workbench.search.problem import Problem
from workbench.search.proposers import Proposer
from workbench.spaces.model import Config
from workbench.store import StoredEvaluation

MOVES = ("random", "model", "crossover", "line")
#: Random configs before the moves start (a model needs a few points).
N_STARTUP = 10
#: Share of the evaluated configs that make the "good" density (TPE's gamma).
GOOD_FRACTION = 0.25
#: Bandit: recent proposals that count, and the weight of the exploration bonus (UCB1).
WINDOW = 40
EXPLORATION = 0.3
#: Softmax temperature of the model move (1: proportional to the density ratio l/g).
TEMPERATURE = 1.0
#: Prior weight spread over each parameter's values in both densities.
PRIOR = 1.0
#: Weight of the pairwise densities in the model score (the rest: per-parameter densities).
#: 0.5 scored best of 0, 0.5 and 1 on the recorded spaces (benchmarks/tuner_efficiency.py).
PAIR_WEIGHT = 0.5
#: The model move scores at most this many unvisited configs (a random subset): a few
#: milliseconds per proposal in spaces of tens of thousands of configs. Smaller subsets cost
#: search efficiency (2048 scored clearly worse than 8192 on the recorded 4k-config spaces).
MODEL_CANDIDATES = 8192


class PortfolioProposer(Proposer):
    """Bandit over search moves on the enumerated valid set (see the module docstring)."""

    def __init__(
        self,
        problem: Problem,
        configs: Sequence[Config],
        *,
        seed: int | None = None,
        n_startup: int = N_STARTUP,
    ) -> None:
        super().__init__(problem)
        self.rng = np.random.default_rng(seed)
        self.n_startup = n_startup
        params = problem.params
        self.cards = np.array([len(p.values) for p in params])
        self.ordinal = [p.ordinal for p in params]
        self._is_ordinal = np.array(self.ordinal, dtype=bool)
        self._index = [{v: i for i, v in enumerate(p.values)} for p in params]
        self.X = np.array([self._encode(c) for c in configs], dtype=np.int32).reshape(
            len(configs), len(params)
        )
        self.row_of = {tuple(r): i for i, r in enumerate(self.X.tolist())}
        self.visited = np.zeros(len(configs), dtype=bool)
        # configs other workers are measuring now (a shared study): skipped by every move, so
        # concurrent workers with the same history diverge instead of colliding
        self.held = np.zeros(len(configs), dtype=bool)
        self.values = np.full(len(configs), np.nan)  # objective; +inf for failed configs
        self.n_visited = 0
        self.history: list[tuple[str, float]] = []  # (move, reward) in order
        self.best = math.inf
        self._last_move: str | None = None
        # per parameter: Gaussian smoothing between neighbouring ordinal values, identity for
        # a categorical one
        smoothing = [
            self._kernel(int(k)) if o else np.eye(int(k))
            for k, o in zip(self.cards, self.ordinal, strict=True)
        ]
        varying = [j for j, k in enumerate(self.cards) if k > 1]
        pairs = [(a, b) for i, a in enumerate(varying) for b in varying[i + 1 :]]
        # Every table (one per varying parameter, one per pair) is a block of one flat array;
        # each config's cell in each table is computed once, offsets included, so building
        # the tables is two bincounts and scoring is one gather.
        tables: list[tuple[int, ...]] = [(j,) for j in varying] + pairs
        sizes = [math.prod(int(self.cards[j]) for j in t) for t in tables]
        cells = [self._cell(t) for t in tables]
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._cells = (
            np.stack(cells, axis=1) + self._offsets[:-1]
            if cells
            else np.zeros((len(configs), 0), dtype=np.int64)
        ).astype(np.int32)
        # Smoothing of all tables at once: a block-diagonal operator, each block the Kronecker
        # product of its parameters' smoothing.
        blocks = [functools.reduce(np.kron, [smoothing[j] for j in t]) for t in tables]
        self._smooth = scipy.sparse.block_diag(blocks, format="csr") if blocks else None
        block_of = np.repeat(np.arange(len(sizes)), sizes)
        self._prior = PRIOR / np.asarray(sizes, dtype=float)[block_of]
        n_pair_terms = max(1, len(varying) - 1)  # each parameter appears in (n - 1) pairs
        self._table, self._table_at = np.zeros(0), -1
        self._weight = np.where(
            block_of < len(varying), 1 - PAIR_WEIGHT, PAIR_WEIGHT / n_pair_terms
        )

    # -- bookkeeping -----------------------------------------------------------------------
    def _cell(self, params: tuple[int, ...]) -> np.ndarray:
        """Each config's row-major cell in the joint table of ``params``."""
        cell = np.zeros(len(self.X), dtype=np.int64)
        for j in params:
            cell = cell * int(self.cards[j]) + self.X[:, j]
        return cell

    @staticmethod
    def _kernel(k: int) -> np.ndarray:
        """Row-normalised Gaussian smoothing between neighbouring ordinal values."""
        idx = np.arange(k)
        w = np.exp(-0.5 * (idx[:, None] - idx[None, :]) ** 2)
        return w / w.sum(axis=1, keepdims=True)

    def _encode(self, config: Config) -> list[int]:
        return [self._index[j][config[p.name]] for j, p in enumerate(self.problem.params)]

    def _row(self, config: Config) -> int | None:
        try:
            return self.row_of.get(tuple(self._encode(config)))
        except KeyError:
            return None

    def _record(self, config: Config, m: Measurement, move: str | None) -> None:
        row = self._row(config)
        if row is None or self.visited[row]:
            return
        ok = m.outcome is TrialOutcome.OK and m.value is not None
        value = float(m.value) if ok else math.inf  # type: ignore[arg-type]
        self.visited[row] = True
        self.n_visited += 1
        self.values[row] = value
        if move is not None:
            self.history.append((move, 1.0 if value < self.best else 0.0))
        self.best = min(self.best, value)

    def start(self, history: Sequence[StoredEvaluation]) -> None:
        for e in history:
            self._record(e.config, e.measurement, None)

    def hold(self, configs: Sequence[Config]) -> None:
        self.held[:] = False
        for config in configs:
            row = self._row(config)
            if row is not None:
                self.held[row] = True

    def _open(self) -> np.ndarray:
        """Rows a move may propose: not visited, not held elsewhere."""
        return ~(self.visited | self.held)

    def observe(self, config: Config, m: Measurement) -> None:
        move, self._last_move = self._last_move, None
        if m.outcome is not TrialOutcome.INFEASIBLE:
            self._record(config, m, move)

    # -- moves -----------------------------------------------------------------------------
    def _good_bad(self) -> tuple[np.ndarray, np.ndarray]:
        """Evaluated rows split into the best GOOD_FRACTION of the successful ones and the rest
        (failed configs are "bad")."""
        done = np.flatnonzero(self.visited)
        vals = self.values[done]
        order = done[np.argsort(vals, kind="stable")]
        n_ok = int(np.isfinite(vals).sum())
        n_good = max(1, math.ceil(GOOD_FRACTION * n_ok))
        return order[:n_good], order[n_good:]

    def _log_ratio_table(self) -> np.ndarray:
        """log l - log g for every cell of every table (flat, blocks at ``_offsets``) from the
        good and bad evaluated rows, smoothed, weighted for the mix of per-parameter and
        pairwise terms (PAIR_WEIGHT; a config's pair terms sum like its per-parameter ones)."""
        total = int(self._offsets[-1])
        if total == 0:
            return np.zeros(0)
        h = np.stack(
            [np.bincount(self._cells[r].ravel(), minlength=total) for r in self._good_bad()]
        ).astype(float)
        h = np.asarray(h @ self._smooth) + self._prior
        h /= np.add.reduceat(h, self._offsets[:-1], axis=1).repeat(np.diff(self._offsets), axis=1)
        return self._weight * (np.log(h[0]) - np.log(h[1]))

    def _scores(self, rows: np.ndarray) -> np.ndarray:
        """Model score of ``rows``: per-parameter log density ratios mixed with pairwise ones."""
        if self._table_at != self.n_visited:  # the tables change only with a new observation
            self._table, self._table_at = self._log_ratio_table(), self.n_visited
        return self._table[self._cells[rows]].sum(axis=1)

    def _random(self) -> int | None:
        left = np.flatnonzero(self._open())
        return int(self.rng.choice(left)) if len(left) else None

    def _model(self) -> int | None:
        left = np.flatnonzero(self._open())
        if not len(left):
            return None
        if len(left) > MODEL_CANDIDATES:
            left = self.rng.choice(left, MODEL_CANDIDATES, replace=False)
        s = self._scores(left) / TEMPERATURE
        p = np.exp(s - s.max())
        return int(left[self.rng.choice(len(left), p=p / p.sum())])

    def _elite(self) -> np.ndarray:
        done = np.flatnonzero(self.visited & np.isfinite(self.values))
        return done[np.argsort(self.values[done], kind="stable")]

    def _crossover(self) -> int | None:
        elite = self._elite()
        if len(elite) < 2:
            return None
        pool = elite[: max(2, min(8, len(elite) // 3))]
        # 32 children at once (most crossovers of constrained spaces land outside the valid
        # set); the first valid unvisited one wins
        shape = (32, self.X.shape[1])
        child = np.where(
            self.rng.random(shape) < 0.5,
            self.X[self.rng.choice(pool, shape[0])],
            self.X[self.rng.choice(pool, shape[0])],
        )
        # mutation, one parameter per child on average: ordinal values step to a nearby
        # value, categorical ones are redrawn
        stepped = np.clip(child + self.rng.choice([-2, -1, 1, 2], shape), 0, self.cards - 1)
        redrawn = (self.rng.random(shape) * self.cards).astype(child.dtype)
        mutated = np.where(self._is_ordinal, stepped, redrawn)
        child = np.where(self.rng.random(shape) < 1.0 / shape[1], mutated, child)
        for key in map(tuple, child.tolist()):
            row = self.row_of.get(key)
            if row is not None and not self.visited[row] and not self.held[row]:
                return row
        return None

    def _line(self) -> int | None:
        elite = self._elite()
        if not len(elite):
            return None
        base = self.X[elite[0]]
        rows = []
        for j, k in enumerate(self.cards):
            for v in range(int(k)):
                if v != base[j]:
                    key = base.copy()
                    key[j] = v
                    row = self.row_of.get(tuple(key.tolist()))
                    if row is not None and not self.visited[row] and not self.held[row]:
                        rows.append(row)
        if not rows:
            return None
        cand = np.array(rows)
        s = self._scores(cand)
        return int(cand[self.rng.choice(np.flatnonzero(s == s.max()))])

    def _ranked_moves(self) -> list[str]:
        """Moves by UCB1 score over the recent window, best first (ties in random order)."""
        recent = self.history[-WINDOW:]
        total = len(recent) + 1
        sums = dict.fromkeys(MOVES, 0.0)
        counts = dict.fromkeys(MOVES, 0)
        for move, reward in recent:
            sums[move] += reward
            counts[move] += 1

        def ucb(move: str) -> float:
            n = counts[move]
            if not n:
                return math.inf
            return sums[move] / n + EXPLORATION * math.sqrt(math.log(total) / n)

        return sorted(MOVES, key=lambda m: (ucb(m), self.rng.random()), reverse=True)

    # -- the proposer interface ------------------------------------------------------------
    def propose(self) -> Config | None:
        move, row = "random", None
        if self.n_visited < self.n_startup:
            row = self._random()
        else:
            for move in self._ranked_moves():  # a move with nothing to offer passes its turn
                row = getattr(self, "_" + move)()
                if row is not None:
                    break
        if row is None:
            return None  # every valid config visited
        self._last_move = move
        return {p.name: p.values[self.X[row, j]] for j, p in enumerate(self.problem.params)}

    def move_counts(self) -> dict[str, int]:
        """How often each move was used (for reports)."""
        return {m: sum(1 for move, _ in self.history if move == m) for m in MOVES}
