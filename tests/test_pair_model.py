"""The portfolio's regression: a posterior draw reuses the last fit's factor without changing
what it draws."""

from __future__ import annotations

import numpy as np
import pytest
import threadpoolctl
from dataset_paths import CACHES, needs_caches

from workbench.runners.recordings import load_recording
from workbench.search.pair_model import (
    PairModel,
    one_blas_thread,
    random_walk_basis,
    smoothing_kernel,
)
from workbench.search.portfolio import PortfolioProposer
from workbench.search.problem import RecordingProblem


@pytest.fixture(scope="module")
def space() -> tuple[np.ndarray, np.ndarray, list[bool]]:
    """The recorded A100 convolution's configs (value indices), cardinalities and kinds."""
    problem = RecordingProblem(load_recording(CACHES / "convolution_milo_A100.json.gz"))
    proposer = PortfolioProposer(problem, problem.valid_configs(), seed=0)
    return proposer.X, proposer.cards, proposer.ordinal


def fresh_draw(space, rows: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """A draw by a model that has never fitted anything (its factor computed whole)."""
    return PairModel(*space).draw(rows, y, np.random.default_rng(seed))


@needs_caches
def test_a_draw_does_not_depend_on_the_order_of_its_rows(space) -> None:
    rng = np.random.default_rng(0)
    rows = rng.choice(len(space[0]), 120, replace=False)
    y = rng.standard_normal(len(rows))
    shuffled = rng.permutation(len(rows))
    a = fresh_draw(space, rows, y, seed=3)
    b = fresh_draw(space, rows[shuffled], y[shuffled], seed=3)
    assert np.allclose(a, b, rtol=0, atol=1e-7)
    assert not np.allclose(a, fresh_draw(space, rows, y, seed=4), rtol=0, atol=1e-3)


@needs_caches
def test_a_fit_that_extends_or_shares_a_prefix_with_the_last_draws_as_a_fresh_one(space) -> None:
    """Rows added at the end (one or several), rows replaced after a shared prefix, a prefix
    of the last rows, the same rows again and a fit with nothing in common: each draw equals
    the one a fresh model makes, so reusing the factor changes nothing but the cost."""
    rng = np.random.default_rng(1)
    order = rng.permutation(len(space[0]))
    other = order[500:]
    fits = [
        order[:40],
        order[:41],
        order[:47],
        np.r_[order[:20], other[:30]],  # replaced after 20
        order[:15],  # a prefix of the last
        order[:15],
        other[:60],  # nothing in common
        np.r_[other[:60], order[:300]],  # past the buffers' first size
    ]
    model = PairModel(*space)
    for i, rows in enumerate(fits):
        y = rng.standard_normal(len(rows))
        reused = model.draw(rows, y, np.random.default_rng(i))
        assert np.allclose(reused, fresh_draw(space, rows, y, seed=i), rtol=0, atol=1e-7), i


@needs_caches
def test_a_draw_is_the_perturbed_least_squares_fit_of_the_features(space) -> None:
    """The draw equals the textbook one, w = w0 + Phi^T (Phi Phi^T + noise I)^-1
    (y - Phi w0 - eps), with w0 and eps drawn as the model draws them (eps in ascending row
    order), and the groups' tables built from w."""
    import math

    from workbench.search.pair_model import NOISE

    model = PairModel(*space)
    rng = np.random.default_rng(5)
    rows = rng.choice(len(space[0]), 150, replace=False)
    y = rng.standard_normal(len(rows))
    model.draw(rows[:100], y[:100], np.random.default_rng(8))  # a factor to extend
    drawn = model.draw(rows, y, np.random.default_rng(9))

    phi = model.features(rows)
    draws = np.random.default_rng(9)
    w0 = draws.standard_normal(model.n_cells)
    eps = np.empty(len(rows))
    eps[np.argsort(rows)] = draws.standard_normal(len(rows)) * math.sqrt(NOISE)
    gram = phi @ phi.T + NOISE * np.eye(len(rows))
    w = w0 + phi.T @ np.linalg.solve(gram, y - phi @ w0 - eps)
    expected = model.grouped(model._prior_sd * (model._basis @ w))
    assert np.allclose(drawn, expected, rtol=0, atol=1e-7)


def test_the_fit_runs_on_one_blas_thread_and_restores_each_librarys_threads() -> None:
    def blas_threads() -> list[int]:
        info = threadpoolctl.threadpool_info()
        return [library["num_threads"] for library in info if library["user_api"] == "blas"]

    before = blas_threads()
    assert before  # numpy's and scipy's BLAS are loaded
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        with one_blas_thread():
            assert blas_threads() == [1] * len(before)
        assert blas_threads() == [2] * len(before)
        with pytest.raises(RuntimeError), one_blas_thread():
            raise RuntimeError("a failed fit")
        assert blas_threads() == [2] * len(before)
    assert blas_threads() == before


def test_a_trend_over_an_ordinal_parameters_values_carries_past_the_values_seen() -> None:
    """Speed improves along an ordinal parameter's first five values (of eight). The random
    walk model ranks the three values never evaluated, past the trend, above the second
    fastest seen (a walk keeps the last level); the smoothing model, which knows little two
    or more steps from a value seen, ranks the last of them back below it."""
    X = np.array([(i, c) for i in range(8) for c in range(2)], dtype=np.int32)
    seen = np.flatnonzero(X[:, 0] <= 4)
    y = -X[seen, 0].astype(float)  # lower is faster: the fifth value is the fastest seen
    y = (y - y.mean()) / y.std()

    def by_value(basis) -> np.ndarray:  # mean score of each value over 200 draws, higher faster
        model = PairModel(X, np.array([8, 2]), [True, False], ordinal_basis=basis)
        draws = [model.draw(seen, y, np.random.default_rng(s)) for s in range(200)]
        scores = np.mean([model.scores(d, np.arange(16)) for d in draws], axis=0)
        return scores.reshape(8, 2).mean(axis=1)

    walk, smooth = by_value(random_walk_basis), by_value(smoothing_kernel)
    for seen_order in (walk, smooth):
        assert np.all(np.diff(seen_order[:5]) > 0)  # both fit the values seen
    assert np.all(walk[5:] > walk[3])
    assert smooth[7] < smooth[3]  # three steps past the last value seen


@needs_caches
def test_a_model_with_another_basis_shares_the_configs_arrays_and_fits_on_its_own(space) -> None:
    """``with_basis`` draws as a model built with that basis does, shares the arrays of the
    configs alone (not copied for a second model), and leaves the first model's fit alone."""
    rng = np.random.default_rng(2)
    rows = rng.choice(len(space[0]), 80, replace=False)
    y = rng.standard_normal(len(rows))
    first = PairModel(*space)
    before = first.draw(rows[:50], y[:50], np.random.default_rng(1))
    walk = first.with_basis(random_walk_basis)
    fresh = PairModel(*space, ordinal_basis=random_walk_basis)
    drawn = walk.draw(rows, y, np.random.default_rng(7))
    assert np.allclose(drawn, fresh.draw(rows, y, np.random.default_rng(7)), rtol=0, atol=1e-7)
    assert walk.cells is first.cells and walk.group_cells is first.group_cells
    again = first.draw(rows[:50], y[:50], np.random.default_rng(1))  # its own factor, reused
    assert np.array_equal(before, again)


@needs_caches
def test_the_mean_is_the_least_squares_fit_of_the_features_and_fits_the_configs_seen(
    space,
) -> None:
    """The posterior mean equals the textbook one, Phi^T (Phi Phi^T + noise I)^-1 y, after a
    fit it extends (the factor reused); it draws nothing, and it predicts the configs seen
    closer to their targets than a draw does."""
    from workbench.search.pair_model import NOISE

    rng = np.random.default_rng(6)
    rows = rng.choice(len(space[0]), 120, replace=False)
    y = rng.standard_normal(len(rows))
    model = PairModel(*space, ordinal_basis=random_walk_basis)
    model.draw(rows[:70], y[:70], np.random.default_rng(1))  # a factor to extend
    mean = model.mean(rows, y)

    phi = model.features(rows)
    w = phi.T @ np.linalg.solve(phi @ phi.T + NOISE * np.eye(len(rows)), y)
    assert np.allclose(mean, model.grouped(model._prior_sd * (model._basis @ w)), atol=1e-7)
    assert np.array_equal(mean, model.mean(rows, y))
    fitted = -model.scores(mean, rows)  # scores are minus the predicted target
    drawn = -model.scores(model.draw(rows, y, np.random.default_rng(2)), rows)
    assert np.corrcoef(fitted, y)[0, 1] > 0.95
    assert np.abs(fitted - y).mean() < np.abs(drawn - y).mean()  # a draw wanders off
