"""The portfolio's model: a Bayesian linear regression over a discrete space's configs.

A config's standardised target (the portfolio's: a score of its time's rank) is modelled as a
sum of weights, one per cell of a table per varying parameter and per pair of parameters (a
second-order model, as in BOCS, Baptista & Poloczek 2018): pairs matter because tiles, block
sizes and vector widths interact. An ordinal parameter's values share weight along their order,
by one of two bases: a smoothing between next neighbours (``smoothing_kernel``) or a random walk
along the values (``random_walk_basis``), under which a trend seen at a few values carries to
the values between and beyond them; the portfolio keeps a model of each. Weights have a
Gaussian prior; the portfolio draws one sample from the posterior per fit (Thompson sampling)
and ranks configs by the sample's prediction.

Everything a fit needs about the space is computed once here, so that a fit costs about a
small dense solve: each config's cells, the basis of every table in one flat array (a
config's features are one gather), and joint tables over groups of parameters that cover every
pair (``pair_cover``), into which each prediction is summed so that a config's score is a few
gathered numbers. Consecutive fits share most of their rows (the portfolio adds the newly
evaluated configs at the end), so a fit keeps its rows' features and Cholesky factor and the
next one extends them: adding b rows to n costs O(n^2 b), not a new O(n^3) factorisation.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import scipy.sparse
import threadpoolctl
from scipy.linalg import lapack

from workbench.search.pair_cover import pair_cover

#: Prior variance of the pairwise features' share of the model (the rest: per-parameter features).
PAIR_WEIGHT = 0.5
#: Prior standard deviation of the weights (standardised target): wide, so that Thompson draws
#: stay uncertain about combinations not yet seen and still explore them.
PRIOR_SD = 4.0
#: Observation noise of the regression (standardised target): small, as measurements repeat well.
NOISE = 0.01

#: The model's matrices are small (a few hundred rows): a multi-threaded BLAS only adds
#: contention (10-30x slower on a busy 2-core machine than one thread, measured), so the fit
#: runs on one thread (of every BLAS loaded: numpy's and scipy's).
_BLAS_LIBRARIES = threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block on one BLAS thread, then restore each library's thread count (directly:
    threadpoolctl's ``limit`` rebuilds the libraries' info on every entry, 8x the cost)."""
    before = [library.get_num_threads() for library in _BLAS_LIBRARIES]
    for library in _BLAS_LIBRARIES:
        library.set_num_threads(1)
    try:
        yield
    finally:
        for library, threads in zip(_BLAS_LIBRARIES, before, strict=True):
            library.set_num_threads(threads)


def smoothing_kernel(k: int) -> np.ndarray:
    """Row-normalised Gaussian smoothing between neighbouring ordinal values (one index wide:
    a weight also speaks for the values next to it, and for nothing two steps away)."""
    idx = np.arange(k)
    w = np.exp(-0.5 * (idx[:, None] - idx[None, :]) ** 2)
    return w / w.sum(axis=1, keepdims=True)


def random_walk_basis(k: int) -> np.ndarray:
    """The basis of an ordinal parameter's ``k`` values: value i's prediction is the sum of
    the weights of values 0..i (a random walk along the ordered values, over 1/sqrt(k) so that
    the walk's end has the variance of one weight). Neighbouring values share most of their
    prediction and distant ones some, so a parameter whose speed improves toward one end of
    its range is predicted to go on improving past the values seen, and a pair table becomes a
    random surface over the two orders. It helps some spaces and costs others (docs/search.md),
    so the portfolio uses it beside the smoothing, in moves of its own."""
    return np.tril(np.ones((k, k))) / math.sqrt(k)


def joint_cells(X: np.ndarray, cards: np.ndarray, params: Sequence[int]) -> np.ndarray:
    """Each config's (row of ``X``'s) row-major cell in the joint table of ``params``."""
    cell = np.zeros(len(X), dtype=np.int64)
    for j in params:
        cell = cell * int(cards[j]) + X[:, j]
    return cell


def _scoring_groups(
    X: np.ndarray,
    cards: np.ndarray,
    varying: Sequence[int],
    tables: Sequence[tuple[int, ...]],
    offsets: np.ndarray,
) -> tuple[np.ndarray, scipy.sparse.csr_array]:
    """Each config's cell in each joint table of a group of parameters, one row per group,
    and the sparse matrix that sums the model's tables (cells from ``offsets``) into the
    groups' cells.

    Scoring: a config's prediction is the sum of its cells' predictions, one per table. The
    tables are summed into a few joint tables over groups of parameters that cover every pair
    (pair_cover), so a score gathers one number per group (3 instead of 55 on the recorded
    gemm space). A table goes to the first group that holds its parameters: each of the
    group's cells adds the table's cell for the same values, one sparse product for all
    groups at once.
    """
    groups = [tuple(varying[i] for i in g) for g in pair_cover(cards[varying].tolist())]
    group_sizes = [math.prod(int(cards[j]) for j in g) for g in groups]
    group_offsets = np.concatenate([[0], np.cumsum(group_sizes)]).astype(np.int64)
    group_cells = np.zeros((len(groups), len(X)), dtype=np.intp)
    for g, group in enumerate(groups):
        group_cells[g] = joint_cells(X, cards, group) + group_offsets[g]
    into, source = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for tab, lo in zip(tables, offsets[:-1], strict=True):
        g = next(i for i, group in enumerate(groups) if set(tab) <= set(group))
        shape = tuple(int(cards[j]) if j in tab else 1 for j in groups[g])
        table_cells = np.arange(lo, lo + math.prod(shape)).reshape(shape)
        into.append(np.arange(group_offsets[g], group_offsets[g + 1]))
        source.append(np.broadcast_to(table_cells, [int(cards[j]) for j in groups[g]]).ravel())
    into_all, source_all = np.concatenate(into), np.concatenate(source)
    assembly = scipy.sparse.csr_array(
        (np.ones(len(into_all)), (into_all, source_all)),
        shape=(int(group_offsets[-1]), int(offsets[-1])),
    )
    return group_cells, assembly


class PairModel:
    """The regression over the configs whose value indices are the rows of ``X`` (one column
    per parameter, ``cards`` values each; ``ordinal`` parameters share weight along their
    values' order through ``ordinal_basis``, a k x k matrix for k values)."""

    def __init__(
        self,
        X: np.ndarray,
        cards: np.ndarray,
        ordinal: Sequence[bool],
        ordinal_basis: Callable[[int], np.ndarray] = smoothing_kernel,
    ) -> None:
        n = len(X)
        self._cards, self._ordinal = cards, list(ordinal)
        varying = [j for j, k in enumerate(cards) if k > 1]
        pairs = [(a, b) for i, a in enumerate(varying) for b in varying[i + 1 :]]
        # The features: one-hot cells of a table per varying parameter and per pair, all
        # tables blocks of one flat array; each config's cell in each table is computed once,
        # offsets included.
        tables: list[tuple[int, ...]] = [*((j,) for j in varying), *pairs]
        self._tables = tables
        sizes = [math.prod(int(cards[j]) for j in t) for t in tables]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_cells = int(offsets[-1])
        self.cells = np.zeros((n, len(tables)), dtype=np.int32)
        for t, table in enumerate(tables):
            self.cells[:, t] = joint_cells(X, cards, table) + offsets[t]
        self._use_basis(ordinal_basis)
        block_of = np.repeat(np.arange(len(sizes)), sizes)
        # Every table's basis rows are in one flat array (_use_basis), so that a config's
        # features are one gather: feature column k (table t, position i in it) of a config
        # whose cell in t is c is the flat array at t's start + (c - t's first cell) * t's
        # size + i.
        table_sizes = np.array(sizes, dtype=np.int64)
        self.table_sizes = table_sizes  # cells per table, in the order of ``tables``
        block_starts = np.concatenate([[0], np.cumsum(np.square(table_sizes))])
        self._column_table = block_of
        self._column_size = table_sizes[block_of]
        self._column_base = (
            block_starts[:-1][block_of]
            + np.arange(len(block_of))
            - offsets[:-1][block_of] * (1 + self._column_size)
        )
        n_pair_terms = max(1, len(varying) - 1)  # each parameter appears in (n - 1) pairs
        # prior standard deviation of each cell's weight: a config's pair terms together weigh
        # PAIR_WEIGHT, its per-parameter terms the rest
        self._prior_sd = PRIOR_SD * np.sqrt(
            np.where(block_of < len(varying), 1 - PAIR_WEIGHT, PAIR_WEIGHT / n_pair_terms)
        )
        self.group_cells, self._assembly = _scoring_groups(X, cards, varying, tables, offsets)
        self._forget_fit()

    def _use_basis(self, ordinal_basis: Callable[[int], np.ndarray]) -> None:
        """Take ``ordinal_basis`` for the ordinal parameters (one-hot cells for categorical
        ones): each table's basis is the Kronecker product of its parameters' bases, kept as
        one block-diagonal matrix and as every table's rows in one flat array."""
        basis = [
            ordinal_basis(int(k)) if o else np.eye(int(k))
            for k, o in zip(self._cards, self._ordinal, strict=True)
        ]
        blocks = [functools.reduce(np.kron, [basis[j] for j in t]) for t in self._tables]
        self._basis = scipy.sparse.block_diag(blocks or [np.zeros((0, 0))], format="csr")
        self._basis_flat = np.concatenate([np.zeros(0), *(b.ravel() for b in blocks)])

    def _forget_fit(self) -> None:
        """No fit yet. The last fit: its rows, their features (the first rows of a buffer that
        grows) and the lower Cholesky factor of their Gram matrix plus the noise (Fortran
        order, as LAPACK takes it), which the next fit extends (see _factor)."""
        self._fit_rows = np.zeros(0, dtype=np.int64)
        self._fit_phi = np.zeros((0, self.n_cells))
        self._fit_chol = np.zeros((0, 0), order="F")

    def with_basis(self, ordinal_basis: Callable[[int], np.ndarray]) -> PairModel:
        """The model of the same configs under another ordinal basis: it shares every array
        that depends on the configs alone (their cells, groups and prior, the largest part of
        a model of a large space) and fits on its own."""
        other = copy.copy(self)
        other._use_basis(ordinal_basis)
        other._forget_fit()
        return other

    @property
    def tables(self) -> list[tuple[int, ...]]:
        """The model's tables: each a tuple of parameter positions (one parameter or a pair),
        in the order of ``cells``' columns."""
        return self._tables

    @property
    def constant(self) -> bool:
        """Nothing varies: every config scores the same."""
        return self.n_cells == 0

    def features(self, rows: np.ndarray) -> np.ndarray:
        """Features of ``rows`` scaled by their prior standard deviations (so the weights' prior
        is a standard normal): per table, the basis rows of the rows' cells (dense: an ordinal
        value's row spreads over its neighbours, or every value up to it)."""
        cells = self.cells[rows][:, self._column_table]  # each column's table's cell
        return self._basis_flat[self._column_base + cells * self._column_size] * self._prior_sd

    def _factor(self, rows: np.ndarray) -> int:
        """Make the first ``len(rows)`` rows of the fit's feature buffer the features of
        ``rows`` and the leading block of its factor buffer the lower Cholesky factor of their
        Gram matrix plus NOISE on the diagonal, reusing the last fit's for the longest prefix
        ``rows`` share with its rows (the factor of a matrix's leading block does not depend
        on the rest; the new rows' block is L21 = (L11^-1 B)^T, L22 = chol(C - L21 L21^T)).
        Returns the number of rows."""
        last, n = self._fit_rows, len(rows)
        m = min(len(last), n)
        differ = np.flatnonzero(last[:m] != rows[:m])
        k = int(differ[0]) if len(differ) else m
        self._fit_rows = rows.copy()
        if k == n:  # the same rows, or the first of them
            return n
        if n > len(self._fit_phi):  # grow both buffers by doubling
            size = max(n, 2 * len(self._fit_phi), 64)
            phi, chol = np.zeros((size, self.n_cells)), np.zeros((size, size), order="F")
            phi[:k], chol[:k, :k] = self._fit_phi[:k], self._fit_chol[:k, :k]
            self._fit_phi, self._fit_chol = phi, chol
        new_phi = self.features(rows[k:])
        self._fit_phi[k:n] = new_phi
        schur = new_phi @ new_phi.T
        schur.flat[:: n - k + 1] += NOISE
        failed = 0
        if k:
            # the leading k x k block of the factor buffer, whose columns are contiguous
            below, failed = lapack.dtrtrs(
                self._fit_chol[:, :k], self._fit_phi[:k] @ new_phi.T, lower=1
            )
            schur -= below.T @ below
            self._fit_chol[k:n, :k] = below.T
        corner, info = lapack.dpotrf(schur, lower=1)
        if failed or info:
            self._fit_rows = self._fit_rows[:0]
            raise np.linalg.LinAlgError(f"Cholesky factor of {n} configs' Gram matrix: {info}")
        self._fit_chol[k:n, k:n] = corner
        return n

    def _solve(self, n: int, b: np.ndarray) -> np.ndarray:
        """(L L^T)^-1 b for the fit's factor L (n x n, the buffer's leading block)."""
        lower = self._fit_chol[:, :n]
        x, _ = lapack.dtrtrs(lower, b[:, None], lower=1)
        x, _ = lapack.dtrtrs(lower, x, lower=1, trans=1)
        return x[:n, 0]

    def draw(self, rows: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """One draw from the posterior given the configs ``rows`` and their standardised
        targets ``y``, as the groups' joint tables (for ``scores``). Drawn with the
        perturbation trick in the dual form (an n x n solve): the weights that fit perturbed
        targets under a perturbed prior are a posterior sample. The draw does not depend on
        the order of ``rows`` (each row's noise is drawn in ascending row order); the order
        only decides what the next fit can reuse (see _factor)."""
        with one_blas_thread():
            n = self._factor(rows)
            phi = self._fit_phi[:n]
            w0 = rng.standard_normal(phi.shape[1])
            eps = np.empty(n)  # drawn for the rows in ascending order
            eps[np.argsort(rows, kind="stable")] = rng.standard_normal(n) * math.sqrt(NOISE)
            w = w0 + phi.T @ self._solve(n, y - phi @ w0 - eps)
        return self._grouped_weights(w)

    def mean(self, rows: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The posterior mean given ``rows`` and their targets ``y``, as the groups' joint
        tables (for ``scores``): the draw without its perturbations, the model's best guess
        (the same factor as a draw of the same rows: a draw and a mean share one fit)."""
        with one_blas_thread():
            n = self._factor(rows)
            w = self._fit_phi[:n].T @ self._solve(n, y)
        return self._grouped_weights(w)

    def _grouped_weights(self, w: np.ndarray) -> np.ndarray:
        """The groups' joint tables of the weights ``w`` (in prior standard deviations)."""
        return self.grouped(self._prior_sd * (self._basis @ w))

    def grouped(self, prediction: np.ndarray) -> np.ndarray:
        """A prediction per cell (flat, one table after another) summed into the groups' joint
        tables."""
        return self._assembly @ prediction

    def scores(self, grouped: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Minus the predicted standardised target of ``rows`` (higher is better)."""
        if self.constant:
            return np.zeros(len(rows))
        # a gather per group, summed in place (a 2-d gather and a sum cost twice as much)
        total = grouped[self.group_cells[0][rows]]
        for cells in self.group_cells[1:]:
            total += grouped[cells[rows]]
        return -total
