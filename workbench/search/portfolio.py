"""The default sampler: a bandit over seven search moves on the valid set of a discrete space.

Spaces differ (some reward exploitation around the incumbent, some hide the optimum behind an
interaction that only a global model finds), so no single move wins everywhere: a UCB1 bandit
rewards a move when its proposal improves the best value by more than MIN_GAIN. The moves:

* ``random``: of COVER_CANDIDATES uniform draws, the config with the most unseen cells of the
  model's small tables (a space-filling design);
* ``model``: Thompson sampling from the pairwise regression (``pair_model``) of rank scores;
* ``walk``: the same under the random-walk model (ordinal values share weight along their order);
* ``exploit``: the open config the walk model's posterior mean ranks first;
* ``crossover``: uniform crossover of two elite configs plus a small mutation;
* ``line`` / ``pair``: the incumbent's best open neighbour one / two parameter changes away,
  ranked by a new draw of the walk model; around another elite config once stalled (STALL).

Told a budget (``plan``), the last FINAL_EXPLOIT evaluations go to ``exploit``. Moves propose
only open configs of the enumerated valid set. The design, the measurements behind each choice
and the current results are in docs/search.md.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy.special import ndtri

from workbench.runners.base import Measurement, TrialOutcome
from workbench.search.pair_model import PairModel, random_walk_basis
from workbench.search.problem import SearchProblem
from workbench.search.proposers import Proposer
from workbench.spaces.model import Config
from workbench.store import StoredEvaluation

MOVES = ("random", "model", "crossover", "line", "pair", "walk", "exploit")
#: Configs drawn uniformly before the moves start (a model needs a few points).
N_STARTUP = 10
#: Bandit: recent proposals that count, and the weight of the exploration bonus (UCB1).
WINDOW = 40
EXPLORATION = 0.3
#: A proposal earns the bandit's reward only when it improves the best value by more than this
#: fraction, so moves that inch the incumbent along do not crowd out those that find larger steps.
MIN_GAIN = 0.03
#: The target (normal scores of the evaluated configs' ranks) is capped at this quantile's score:
#: the slowest tenth and the failed configs count alike.
TARGET_CAP = 0.9
_CAPPED_SCORE = float(ndtri(TARGET_CAP))
#: The regression is fitted on every evaluated config up to this many; past it, on a selection
#: of this many plus those evaluated since (see _fit_rows), so a long run's fit stays small.
MAX_FIT = 256
#: Past MAX_FIT evaluations a posterior draw serves n // DRAW_STRIDE - 3 new evaluations: the
#: draws are the largest part of the sampler's cost per evaluation.
DRAW_STRIDE = 64
#: The model moves score at most this many open configs (a random subset), and the line and
#: pair moves look up at most this many neighbours.
MODEL_CANDIDATES = 8192

#: Escape: once the best value has not improved for STALL evaluations, the line and pair moves
#: search around another of the ESCAPE_POOL fastest configs, preferring those ESCAPE_DISTANCE
#: or more parameters from the incumbent (another basin), as an iterated local search restarts.
STALL = 20
ESCAPE_POOL = 8
ESCAPE_DISTANCE = 3
#: With a budget of evaluations (``plan``), its last FINAL_EXPLOIT go to the exploit move first:
#: near the budget, a config that only teaches the model is wasted.
FINAL_EXPLOIT = 15
#: The random move draws COVER_CANDIDATES open configs and proposes the one filling the most
#: unseen cells of the model's tables of at most COVER_CELLS cells: small parameters'
#: combinations are all seen early, as in a covering design, while large tables stay uniform.
COVER_CANDIDATES = 16
COVER_CELLS = 64
#: The crossover's mutation steps of an ordinal parameter's value index.
_STEPS = np.array([-2, -1, 1, 2])


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Each value's rank, 1 for the smallest; tied values share their mean rank (as
    ``scipy.stats.rankdata``, whose import would cost a second at CLI start-up)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.empty(len(values), dtype=bool)  # (np.r_ costs more than the rest together)
    starts[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    first = np.flatnonzero(starts)  # each run of ties
    last = np.empty_like(first)
    last[:-1], last[-1:] = first[1:], len(values)
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((first + last + 1) / 2, last - first)
    return ranks


def _value_indices(
    names: Sequence[str], index: Sequence[dict[Any, int]], configs: Sequence[Config]
) -> np.ndarray:
    """Each config's value indices, a row per config and a column per parameter (``index``:
    each parameter's value -> its index)."""
    # one pass over the configs (a pass per parameter cost twice as much: most of the
    # sampler's set-up on a 18k-config space)
    values = operator.itemgetter(*names) if len(names) > 1 else lambda c: [c[n] for n in names]
    return np.fromiter(
        (i for c in configs for i in map(dict.__getitem__, index, values(c))),
        np.int32,
        len(configs) * len(names),
    ).reshape(len(configs), len(names))


def _row_codes(
    X: np.ndarray, cards: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The radix of each parameter in a row-major code of the cartesian product, the rows in
    order of code, and the codes in that order; (None, empty, empty) when the product
    overflows an int64."""
    if math.prod(int(k) for k in cards) >= 2**62:
        return None, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    radix = np.cumprod([1, *cards[::-1]])[-2::-1].astype(np.int64)
    codes = X.astype(np.int64) @ radix
    order = np.argsort(codes)
    return radix, order, codes[order]


def _neighbourhoods(cards: np.ndarray) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """For one and two changed parameters: the combinations of varying parameters that change
    together, and how many neighbours each combination makes."""
    varying = [j for j, k in enumerate(cards) if k > 1]
    combos = {
        f: np.array(list(itertools.combinations(varying, f)), dtype=np.int64).reshape(-1, f)
        for f in (1, 2)
    }
    return combos, {f: np.prod(cards[c] - 1, axis=1) for f, c in combos.items()}


class PortfolioProposer(Proposer):
    """Bandit over search moves on the enumerated valid set (see the module docstring)."""

    def __init__(
        self,
        problem: SearchProblem,
        configs: Sequence[Config],
        *,
        seed: int | None = None,
        n_startup: int = N_STARTUP,
    ) -> None:
        super().__init__(problem)
        self.rng = np.random.default_rng(seed)
        self.n_startup = n_startup
        self.budget: int | None = None  # the run's budget of evaluations (plan), if it has one
        params = problem.params
        self.cards = np.array([len(p.values) for p in params])
        self.ordinal = [p.ordinal for p in params]
        self._is_ordinal = np.array(self.ordinal, dtype=bool)
        self._index = [{v: i for i, v in enumerate(p.values)} for p in params]
        self.X = _value_indices([p.name for p in params], self._index, configs)
        self._top = self.cards - 1  # each parameter's last value index
        # Each config's row-major code in the cartesian product, sorted, so that a batch of
        # configs is found with one searchsorted (None if the product overflows an int64:
        # then they are looked up one by one in row_of).
        self._radix, self._code_order, self._sorted_codes = _row_codes(self.X, self.cards)
        self._empty_record(len(configs))
        # the line and pair moves' neighbourhoods: which parameters change together, and how
        # many neighbours each combination makes
        self._combos, self._combo_sizes = _neighbourhoods(self.cards)
        self._neighbourhood_size = {f: int(sizes.sum()) for f, sizes in self._combo_sizes.items()}
        self.model = PairModel(self.X, self.cards, self.ordinal)
        self.walk_model = self.model.with_basis(random_walk_basis)
        # the random move's coverage: the model's tables of at most COVER_CELLS cells, and
        # which of their cells an evaluated config has been in
        self._cover_tables = np.flatnonzero(self.model.table_sizes <= COVER_CELLS)
        self._seen_cells = np.zeros(self.model.n_cells, dtype=bool)
        self._drawn, self._draw_at = np.zeros(0), -1  # the latest posterior draw (grouped)
        # (row, flips) whose whole neighbourhood (see _neighbours) has no open config: as the
        # visited set only grows, it never will again (until hold() changes the held ones),
        # so the line and pair moves skip the lookup (past a few hundred evaluations, most of
        # the line move's turns around the incumbent find nothing)
        self._exhausted: set[tuple[int, int]] = set()

    def _empty_record(self, n_configs: int) -> None:
        """The record of a search that has evaluated nothing: what observe() fills in, the
        bandit's window, the elite and the escape's bases."""
        self.visited = np.zeros(n_configs, dtype=bool)
        # configs other workers are measuring now (a shared study): skipped by every move, so
        # concurrent workers with the same history diverge instead of colliding
        self.held = np.zeros(n_configs, dtype=bool)
        self._open_rows = np.ones(n_configs, dtype=bool)
        self.values = np.full(n_configs, np.nan)  # objective; +inf for failed configs
        self.n_visited = 0
        self._visit_order = np.zeros(n_configs, dtype=np.int64)  # rows, as evaluated
        # past MAX_FIT: the fit's selection of evaluated rows, and n_visited when it was made
        self._selected, self._selected_at = np.zeros(0, dtype=np.int64), -MAX_FIT
        self.history: list[tuple[str, float]] = []  # (move, reward) in order
        # the bandit's window (the last WINDOW of history): each move's proposals and rewards
        self._window_counts = dict.fromkeys(MOVES, 0)
        self._window_sums = dict.fromkeys(MOVES, 0.0)
        self._improvements = dict.fromkeys(MOVES, 0)  # per move, proposals that improved the best
        self.best = math.inf
        self._improved_at = 0  # n_visited when the best value last improved
        # the escape's bases (see _around_incumbent), until the ESCAPE_POOL fastest change
        self._escape_bases: np.ndarray | None = None
        #: proposals in flight (not observed yet): row -> the move that proposed it
        self._pending: dict[int, str] = {}
        # the last proposal, as returned and as a row: observe finds its row without encoding
        self._last_config: Config | None = None
        self._last_row = -1
        # successfully evaluated rows, fastest first (ties by row), and their values
        self._elite_rows = np.zeros(0, dtype=np.int64)
        self._elite_values = np.zeros(0)

    # -- bookkeeping -----------------------------------------------------------------------
    def _encode(self, config: Config) -> list[int]:
        return [self._index[j][config[p.name]] for j, p in enumerate(self.problem.params)]

    @functools.cached_property
    def row_of(self) -> dict[tuple[int, ...], int]:
        """Each config's row by its value indices (built when first needed: spaces whose
        product fits an int64 find rows by code)."""
        return {tuple(r): i for i, r in enumerate(self.X.tolist())}

    def _rows_of_codes(self, codes: np.ndarray) -> np.ndarray:
        """The row of each config code, -1 where no config has it."""
        known = self._sorted_codes
        if not len(known):
            return np.full(len(codes), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(known, codes), len(known) - 1)
        return np.where(known[pos] == codes, self._code_order[pos], -1)

    def _rows_of(self, keys: np.ndarray) -> np.ndarray:
        """The row of each key (value indices, one column per parameter), -1 where no
        config has it."""
        if self._radix is not None:
            return self._rows_of_codes(keys.astype(np.int64) @ self._radix)
        found = [self.row_of.get(k, -1) for k in map(tuple, keys.tolist())]
        return np.array(found, dtype=np.int64)

    def _row(self, config: Config) -> int | None:
        try:
            key = np.array([self._encode(config)], dtype=np.int64)
        except KeyError:  # a value outside the space
            return None
        row = int(self._rows_of(key)[0])
        return row if row >= 0 else None

    def _record(self, config: Config, m: Measurement, move: str | None) -> None:
        row = self._last_row if config is self._last_config else self._row(config)
        self._record_row(row, m, move)

    def _record_row(self, row: int | None, m: Measurement, move: str | None) -> None:
        if row is None or self.visited[row]:
            return
        ok = m.outcome is TrialOutcome.OK and m.value is not None
        value = float(m.value) if ok else math.inf  # type: ignore[arg-type]
        self.visited[row] = True
        self._open_rows[row] = False
        self._seen_cells[self.model.cells[row, self._cover_tables]] = True
        self._visit_order[self.n_visited] = row
        self.n_visited += 1
        self.values[row] = value
        improved = value < self.best
        # the bandit's reward: a new best by more than MIN_GAIN (any first finite value)
        gained = improved and (
            not math.isfinite(self.best) or value < self.best - MIN_GAIN * abs(self.best)
        )
        if math.isfinite(value):  # into the elite, in order of value, then of row
            lo = int(np.searchsorted(self._elite_values, value, side="left"))
            hi = int(np.searchsorted(self._elite_values, value, side="right"))
            at = lo + int(np.searchsorted(self._elite_rows[lo:hi], row))
            rows, values = self._elite_rows, self._elite_values  # (np.insert costs 10x more)
            self._elite_rows = np.concatenate((rows[:at], [row], rows[at:]))
            self._elite_values = np.concatenate((values[:at], [value], values[at:]))
            if at < ESCAPE_POOL:
                self._escape_bases = None
        if move is not None:
            self.history.append((move, float(gained)))
            self._window_counts[move] += 1
            self._window_sums[move] += float(gained)
            self._improvements[move] += int(improved)
            if len(self.history) > WINDOW:  # the oldest proposal leaves the window
                gone, reward = self.history[-WINDOW - 1]
                self._window_counts[gone] -= 1
                self._window_sums[gone] -= reward
        if improved:
            self.best, self._improved_at = value, self.n_visited

    def start(self, history: Sequence[StoredEvaluation]) -> None:
        for e in history:
            self._record(e.config, e.measurement, None)

    def plan(self, evaluations: int | None) -> None:
        self.budget = evaluations

    def hold(self, configs: Sequence[Config]) -> None:
        self.held[:] = False
        self._exhausted.clear()  # a released config opens its neighbourhoods again
        for config in configs:
            row = self._row(config)
            if row is not None:
                self.held[row] = True
        self._open_rows = ~(self.visited | self.held)
        self._open_rows[list(self._pending)] = False

    def _open(self) -> np.ndarray:
        """Rows a move may propose: not visited, not held elsewhere (kept up to date by
        _record and hold; read-only)."""
        return self._open_rows

    def observe(self, config: Config, m: Measurement) -> None:
        row = self._last_row if config is self._last_config else self._row(config)
        move = self._pending.pop(row, None) if row is not None else None
        if row is not None and not (self.visited[row] or self.held[row]):
            self._open_rows[row] = True  # proposable again, unless recorded below
        if m.outcome is not TrialOutcome.INFEASIBLE:
            self._record_row(row, m, move)
        self._last_config = None

    # -- moves -----------------------------------------------------------------------------
    def _fit_rows(self) -> np.ndarray:
        """Evaluated rows the regression is fitted on, in the order that lets the model reuse
        the last fit (see ``PairModel``): all of them in the order they were evaluated, and
        past MAX_FIT, a selection (the best MAX_FIT // 2 and a random draw from the rest)
        followed by every row evaluated since, until MAX_FIT // 2 have been, when a new
        selection is made. The fit always holds the MAX_FIT // 2 best."""
        n = self.n_visited
        if n <= MAX_FIT:
            return self._visit_order[:n]
        if n - self._selected_at > MAX_FIT // 2:
            done = self._visit_order[:n]
            order = done[np.argsort(self.values[done], kind="stable")]
            best, rest = order[: MAX_FIT // 2], order[MAX_FIT // 2 :]
            chosen = self.rng.choice(rest, MAX_FIT - len(best), replace=False)
            self._selected, self._selected_at = np.concatenate([best, chosen]), n
        return np.concatenate([self._selected, self._visit_order[self._selected_at : n]])

    def _target(self, rows: np.ndarray) -> np.ndarray:
        """The regression target of ``rows`` (lower is faster): the normal score of each one's
        rank among them (ties share their mean rank; failed configs rank last), capped at
        TARGET_CAP's score, standardised."""
        n = len(rows)
        y = np.minimum(ndtri(average_ranks(self.values[rows]) / (n + 1)), _CAPPED_SCORE)
        # standardised as (y - y.mean()) / y.std() would, bit for bit, at a third of the cost
        centred = y - np.add.reduce(y) / n
        return centred / (math.sqrt(np.add.reduce(centred * centred) / n) or 1.0)

    def _scores(self, rows: np.ndarray) -> np.ndarray:
        """Model score of ``rows`` (higher is better): minus the predicted target of one
        posterior draw, the same draw for every move until the next observation (past
        MAX_FIT evaluations, the next few)."""
        if self.model.constant:
            return np.zeros(len(rows))
        # past MAX_FIT evaluations, where the fit is a subsample anyway, one draw serves a
        # few new evaluations (batch Thompson sampling): 2 from 320, 3 from 384, 12 at 1000
        # (see DRAW_STRIDE)
        stride = max(1, self.n_visited // DRAW_STRIDE - 3)
        if self._draw_at < 0 or self.n_visited - self._draw_at >= stride:
            fit = self._fit_rows()
            self._drawn = self.model.draw(fit, self._target(fit), self.rng)
            self._draw_at = self.n_visited
        return self.model.scores(self._drawn, rows)

    def _pick(self, rows: np.ndarray, size: int | tuple[int, ...] | None = None) -> Any:
        """One of ``rows`` (not empty), uniformly, or an array of ``size`` such picks: the draw
        Generator.choice makes, without its checks (which cost ten times the draw)."""
        return rows[self.rng.integers(0, len(rows), size)]

    def _uniform(self) -> int | None:
        """An open config, uniformly (the startup configs)."""
        left = np.flatnonzero(self._open())
        return int(self._pick(left)) if len(left) else None

    def _random(self) -> int | None:
        """Of COVER_CANDIDATES open configs drawn uniformly, the one with the most unseen
        cells in the small tables (the first of those tied: the draws are in random order)."""
        if not len(self._cover_tables):
            return self._uniform()
        left = np.flatnonzero(self._open())
        if not len(left):
            return None
        drawn = self._pick(left, min(COVER_CANDIDATES, len(left)))
        cells = self.model.cells[drawn][:, self._cover_tables]
        unseen = (~self._seen_cells[cells]).sum(axis=1)
        return int(drawn[np.argmax(unseen)])

    def _model_candidates(self) -> np.ndarray:
        """The open rows a model move scores (a random MODEL_CANDIDATES of them past that)."""
        left = np.flatnonzero(self._open())
        if len(left) > MODEL_CANDIDATES:
            left = self.rng.choice(left, MODEL_CANDIDATES, replace=False)
        return left

    def _model(self) -> int | None:
        return self._best_scored(self._model_candidates())

    def _walk(self) -> int | None:
        """The open config that a draw of the random-walk model predicts fastest (a draw per
        proposal: the bandit takes this move a fraction of the time)."""
        if self.walk_model.constant:
            return None
        return self._best_scored(self._model_candidates(), self._walk_scores)

    def _walk_scores(self, rows: np.ndarray) -> np.ndarray:
        """Model score of ``rows`` under a new draw of the random-walk model (all alike where
        nothing varies, as ``_scores``)."""
        if self.walk_model.constant:
            return np.zeros(len(rows))
        fit = self._fit_rows()
        return self.walk_model.scores(self.walk_model.draw(fit, self._target(fit), self.rng), rows)

    def _exploit(self) -> int | None:
        """The open config that the random-walk model's posterior mean predicts fastest (no
        draw: the model's best guess, where the other model moves sample)."""
        if self.walk_model.constant:
            return None
        return self._best_scored(self._model_candidates(), self._exploit_scores)

    def _exploit_scores(self, rows: np.ndarray) -> np.ndarray:
        """Model score of ``rows`` under the random-walk model's posterior mean."""
        fit = self._fit_rows()
        return self.walk_model.scores(self.walk_model.mean(fit, self._target(fit)), rows)

    def _elite(self) -> np.ndarray:
        """Successfully evaluated rows, fastest first (ties in row order)."""
        return self._elite_rows

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
            self.X[self._pick(pool, shape[0])],
            self.X[self._pick(pool, shape[0])],
        )
        # mutation, one parameter per child on average: ordinal values step to a nearby
        # value, categorical ones are redrawn
        stepped = child + self._pick(_STEPS, shape)
        stepped = np.minimum(np.maximum(stepped, 0), self._top)
        redrawn = (self.rng.random(shape) * self.cards).astype(child.dtype)
        mutated = np.where(self._is_ordinal, stepped, redrawn)
        child = np.where(self.rng.random(shape) < 1.0 / shape[1], mutated, child)
        rows = self._rows_of(child)
        rows = rows[rows >= 0]
        rows = rows[self._open()[rows]]
        return int(rows[0]) if len(rows) else None

    def _neighbours(self, base: np.ndarray, flips: int) -> np.ndarray:
        """Open rows that differ from ``base`` in exactly ``flips`` parameters (1 or 2), in
        parameter order then value order; at most MODEL_CANDIDATES of them looked up (a random
        subset when there are more)."""
        combos, sizes = self._combos[flips], self._combo_sizes[flips]
        total = self._neighbourhood_size[flips]
        if not total:
            return np.zeros(0, dtype=np.int64)
        if total > MODEL_CANDIDATES:
            picks = np.sort(self.rng.choice(total, MODEL_CANDIDATES, replace=False))
        else:
            picks = np.arange(total)
        # the k-th neighbour of the ordered list: its combination of parameters, then (within
        # it, row-major) which other value each of them takes
        ends = np.cumsum(sizes)
        combo = np.searchsorted(ends, picks, side="right")
        within = picks - (ends - sizes)[combo]
        keys = np.repeat(base[None, :].astype(np.int64), len(picks), axis=0)
        for position in reversed(range(flips)):
            param = combos[combo, position]
            count = self.cards[param] - 1  # the parameter's other values
            within, other = np.divmod(within, count)
            keys[np.arange(len(picks)), param] = other + (other >= base[param])
        rows = self._rows_of(keys)
        rows = rows[rows >= 0]
        return rows[self._open()[rows]]

    def _best_scored(
        self, rows: np.ndarray, scores: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> int | None:
        """The row of ``rows`` the posterior draw predicts fastest (ties broken at random), or
        the one ``scores`` scores highest."""
        if not len(rows):
            return None
        s = (scores or self._scores)(rows)
        return int(rows[self._pick(np.flatnonzero(s == s.max()))])

    def _around_incumbent(self, flips: int) -> int | None:
        """The best-scored open config ``flips`` parameter changes from the incumbent, or,
        once the best has not improved for STALL evaluations, from another elite config in
        another basin (one of the ESCAPE_POOL fastest, ESCAPE_DISTANCE parameters or more
        from the incumbent where one is), at random."""
        elite = self._elite()
        if not len(elite):
            return None
        base = elite[0]
        if self.n_visited - self._improved_at >= STALL and len(elite) > 1:
            if self._escape_bases is None:
                others = elite[1:ESCAPE_POOL]
                far = (self.X[others] != self.X[base]).sum(axis=1) >= ESCAPE_DISTANCE
                self._escape_bases = others[far] if far.any() else others
            base = self._pick(self._escape_bases)
        if (int(base), flips) in self._exhausted:
            return None
        rows = self._neighbours(self.X[base], flips)
        if not len(rows) and self._neighbourhood_size[flips] <= MODEL_CANDIDATES:
            self._exhausted.add((int(base), flips))  # every neighbour was looked up
        # ranked by a draw of the random-walk model: a trend seen at some block or tile sizes
        # carries to the neighbour's other values
        return self._best_scored(rows, self._walk_scores)

    def _line(self) -> int | None:
        return self._around_incumbent(1)

    def _pair(self) -> int | None:
        return self._around_incumbent(2)

    def _ranked_moves(self) -> list[str]:
        """Moves by UCB1 score over the recent window, best first (ties in random order)."""
        counts, sums = self._window_counts, self._window_sums
        log_total = math.log(min(len(self.history), WINDOW) + 1)

        def ucb(move: str) -> float:
            n = counts[move]
            if not n:
                return math.inf
            return sums[move] / n + EXPLORATION * math.sqrt(log_total / n)

        tie_breaks = self.rng.random(len(MOVES)).tolist()
        scored = [(ucb(m), tie, m) for m, tie in zip(MOVES, tie_breaks, strict=True)]
        return [m for *_, m in sorted(scored, reverse=True)]

    # -- the proposer interface ------------------------------------------------------------
    def propose(self) -> Config | None:
        move, row = "random", None
        if self.n_visited < self.n_startup:
            row = self._uniform()
        else:
            ranked = self._ranked_moves()
            if self.budget is not None and self.n_visited >= self.budget - FINAL_EXPLOIT:
                ranked.remove("exploit")  # the run's last evaluations: the model's best guess
                ranked.insert(0, "exploit")
            for move in ranked:  # a move with nothing to offer passes its turn
                row = getattr(self, "_" + move)()
                if row is not None:
                    break
        if row is None:
            return None  # every valid config visited
        self._pending[row] = move
        self._open_rows[row] = False  # in flight: not proposed again before it is observed
        self._last_row = row
        self._last_config = self.config_at(row)
        return self._last_config

    def config_at(self, row: int) -> Config:
        """The config of the enumerated valid set's ``row``."""
        return {p.name: p.values[self.X[row, j]] for j, p in enumerate(self.problem.params)}

    def moves(self) -> dict[str, dict[str, int]]:
        """Per move, the configs it proposed and how many improved the best value (this run's,
        evaluated ones only)."""
        stats = {m: {"proposed": 0, "improved": self._improvements[m]} for m in MOVES}
        for move, _reward in self.history:
            stats[move]["proposed"] += 1
        return stats
