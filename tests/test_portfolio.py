"""The default sampler: valid, unvisited proposals; deterministic; better than random search."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import load_recording, write_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordingProblem
from workbench.search.tuner import Budget, StopReason, Tuner
from workbench.store import Store

CACHES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "tuning-caches"


def run(tmp: Path, rec, sampler: str, budget: int, seed: int):
    store = Store(f"sqlite:///{tmp}/{sampler}-{seed}.sqlite")
    problem = RecordingProblem(rec)
    study = store.study(
        kernel=rec.kernel, shape_label="x", device_key="d", parameters=rec.parameters
    )
    return Tuner(problem, ReplayRunner(rec), store, study, sampler=sampler, seed=seed).run(
        Budget(evaluations=budget)
    )


def proposer_on(path: Path, parameters: list, entries: list):
    """The default sampler's proposer on a recording written from ``entries``."""
    import workbench.search.portfolio as portfolio

    rec = load_recording(
        write_recording(
            path, kernel=path.stem, device=DeviceInfo("GPU"), parameters=parameters, entries=entries
        )
    )
    problem = RecordingProblem(rec)
    return portfolio.PortfolioProposer(problem, problem.valid_configs(), seed=0)


def observe_rows(proposer, rows, values) -> None:
    """Tell ``proposer`` that the configs at ``rows`` took ``values`` (inf: failed)."""
    for row, value in zip(rows, values, strict=True):
        config = proposer.config_at(row)
        m = (
            Measurement(TrialOutcome.OK, value=float(value))
            if math.isfinite(value)
            else Measurement.failure(TrialOutcome.LAUNCH_FAILED, "boom")
        )
        proposer.observe(config, m)


def replay_step(proposer, recording):
    """One proposal of ``proposer``, answered from ``recording``; returns the config."""
    config = proposer.propose()
    proposer.observe(config, recording.lookup(config).to_measurement(recording.source))
    return config


def a100_proposer():
    """The default sampler's proposer on the recorded A100 convolution (a constrained space)."""
    import workbench.search.portfolio as portfolio

    problem = RecordingProblem(load_recording(CACHES / "convolution_milo_A100.json.gz"))
    return portfolio.PortfolioProposer(problem, problem.valid_configs(), seed=0)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory):
    """A 3-parameter space with an interaction and a failing region (values from a formula)."""
    entries = []
    for a in range(12):
        for b in range(10):
            for c in ("x", "y", "z"):
                if a + b > 18:
                    continue  # outside the space
                if c == "z" and a > 8:
                    m = Measurement.failure(TrialOutcome.LAUNCH_FAILED, "boom")
                else:
                    bonus = 0.0 if (c == "y") == (b >= 7) else 3.0
                    m = Measurement(TrialOutcome.OK, value=1.0 + abs(a - 9) + abs(b - 8) + bonus)
                entries.append(({"a": a, "b": b, "c": c}, m))
    path = write_recording(
        tmp_path_factory.mktemp("rec") / "syn.json",
        kernel="syn",
        device=DeviceInfo("GPU"),
        parameters=[("a", list(range(12))), ("b", list(range(10))), ("c", ["x", "y", "z"])],
        entries=entries,
    )
    return load_recording(path)


def test_proposals_are_valid_and_never_repeat(tmp_path: Path, synthetic) -> None:
    result = run(tmp_path, synthetic, "portfolio", 1000, seed=0)
    assert result.stop is StopReason.EXHAUSTED
    assert result.evaluations == len(synthetic.entries)
    assert result.proposals == result.evaluations  # no repeats, nothing outside the space
    assert result.best.measurement.value == 1.0


def test_same_seed_same_search(tmp_path: Path, synthetic) -> None:
    a = run(tmp_path / "a", synthetic, "portfolio", 40, seed=5)
    b = run(tmp_path / "b", synthetic, "portfolio", 40, seed=5)
    assert [e.config for e in a.history] == [e.config for e in b.history]


def test_better_than_random_search_on_a_real_space(tmp_path: Path) -> None:
    rec = load_recording(CACHES / "pnpoly_RTX_3090.json.gz")
    ours = [run(tmp_path, rec, "portfolio", 100, s).best.measurement.value for s in range(6)]
    rand = [run(tmp_path, rec, "random", 100, s).best.measurement.value for s in range(6)]
    assert statistics.mean(ours) < statistics.mean(rand)


@pytest.mark.parametrize("pair_weight", [0.0, 0.5])
def test_model_learns_an_interaction_between_two_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pair_weight: float
) -> None:
    """Good configs fill two opposite quadrants ((a < 4) == (b < 4)): each parameter alone is
    as often good as bad, so a model of per-parameter effects cannot tell an unvisited config of
    a good quadrant from one of a bad quadrant; one with pairwise features can (checked on 20
    seeds of the posterior draw when this was written; the test uses one)."""
    import numpy as np

    import workbench.search.pair_model as pair_model

    monkeypatch.setattr(pair_model, "PAIR_WEIGHT", pair_weight)

    def value(a: int, b: int) -> float:
        if (a < 4) == (b < 4):
            return 1.0 + ((5 * a + 3 * b) % 7) / 100  # spread, so both quadrants reach "good"
        return 2.0

    entries = [
        ({"a": a, "b": b}, Measurement(TrialOutcome.OK, value=value(a, b)))
        for a in range(8)
        for b in range(8)
    ]
    proposer = proposer_on(
        tmp_path / "quadrants.json", [("a", list(range(8))), ("b", list(range(8)))], entries
    )
    good, bad = [(1, 2), (6, 5)], [(1, 6), (6, 2)]
    for config, m in entries:
        if (config["a"], config["b"]) not in good + bad:
            proposer.observe(config, m)
    scores = proposer._scores(np.array([proposer.row_of[c] for c in good + bad]))
    separated = min(scores[:2]) > max(scores[2:])
    assert separated == (pair_weight > 0), scores


def test_pair_move_leaves_a_basin_that_no_single_change_improves(tmp_path: Path) -> None:
    """Two flags that only help together: from the incumbent (0, 0, c=0), every config one
    change away is visited (or worse), so the line move has nothing to offer; the pair move
    proposes the config with both flags flipped, which is the optimum."""

    def value(a: int, b: int, c: int) -> float:
        if a == b == 1:
            return 1.0 + c / 100
        return 1.5 + c / 100 if a == b == 0 else 3.0

    entries = [
        ({"a": a, "b": b, "c": c}, Measurement(TrialOutcome.OK, value=value(a, b, c)))
        for a in (0, 1)
        for b in (0, 1)
        for c in range(6)
    ]
    proposer = proposer_on(
        tmp_path / "flags.json", [("a", [0, 1]), ("b", [0, 1]), ("c", list(range(6)))], entries
    )
    for config, m in entries:
        if not config["a"] == config["b"] == 1:
            proposer.observe(config, m)
    assert proposer._line() is None
    row = proposer._pair()
    assert row is not None
    assert proposer.X[row].tolist() == [1, 1, 0]


@pytest.mark.parametrize("lookup", ["codes", "keys"])
def test_neighbours_differ_in_exactly_the_asked_number_of_parameters(lookup: str) -> None:
    """On a recorded constrained space: every neighbour is valid, open, and one or two changes
    away from the base; none is missed (checked against a scan of the whole valid set). Both
    lookups: by sorted config codes, and key by key (spaces whose product overflows int64)."""
    import numpy as np

    proposer = a100_proposer()
    if lookup == "keys":
        proposer._radix = None
    observe_rows(proposer, np.arange(50), np.ones(50))  # visited: not neighbours to propose
    base = proposer.X[7]
    distance = (base != proposer.X).sum(axis=1)
    for flips in (1, 2):
        found = proposer._neighbours(base, flips)
        expected = np.flatnonzero((distance == flips) & ~proposer.visited)
        assert len(found) > 0
        assert sorted(found.tolist()) == expected.tolist()


def test_a_large_neighbourhood_is_sampled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many parameters with many values: the pair move looks up a bounded random subset of its
    neighbours (here 20 of the A100 convolution's 261), still all two changes away."""
    import workbench.search.portfolio as portfolio

    monkeypatch.setattr(portfolio, "MODEL_CANDIDATES", 20)
    proposer = a100_proposer()
    base = proposer.X[7]
    found = proposer._neighbours(base, 2)
    assert 0 < len(found) <= 20
    assert ((base != proposer.X[found]).sum(axis=1) == 2).all()


def test_grouped_scores_equal_the_sum_of_every_table() -> None:
    """Scores from the groups' joint tables equal the sum of the per-parameter and pair
    tables' predictions, on a space whose tables do not fit one group (A100 convolution)."""
    import numpy as np

    model = a100_proposer().model
    assert len(model.group_cells) > 1  # more than one group
    rng = np.random.default_rng(1)
    for _ in range(3):
        prediction = rng.standard_normal(model.n_cells)
        rows = rng.choice(len(model.cells), 500, replace=False)
        direct = -prediction[model.cells[rows]].sum(axis=1)
        scores = model.scores(model.grouped(prediction), rows)
        assert np.allclose(scores, direct, rtol=0, atol=1e-9)


def test_past_max_fit_one_draw_serves_a_few_evaluations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Below MAX_FIT evaluations every new observation brings a new posterior draw; past 384,
    one draw serves three new evaluations."""
    import numpy as np

    import workbench.search.portfolio as portfolio

    proposer = a100_proposer()
    draws = []
    real = proposer.model.draw
    monkeypatch.setattr(proposer.model, "draw", lambda *args: draws.append(1) or real(*args))
    rng = np.random.default_rng(0)
    order = rng.permutation(len(proposer.X))

    def observe(n: int) -> None:
        rows = order[proposer.n_visited : proposer.n_visited + n]
        observe_rows(proposer, rows, rng.uniform(1, 2, len(rows)))

    rows = np.arange(10)
    observe(100)
    proposer._scores(rows)
    observe(1)
    proposer._scores(rows)
    assert len(draws) == 2
    observe(400 - proposer.n_visited)
    proposer._scores(rows)
    for _ in range(2):
        observe(1)
        proposer._scores(rows)  # the same draw
    assert len(draws) == 3
    observe(1)
    proposer._scores(rows)
    assert len(draws) == 4
    assert portfolio.MAX_FIT < 400 and 400 // portfolio.DRAW_STRIDE - 3 == 3


@settings(deadline=None)  # the first example imports scipy.stats
@given(st.lists(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.5, math.inf]), min_size=1, max_size=40))
def test_average_ranks_match_scipy(values: list[float]) -> None:
    """Ties (repeated times, failed configs as +inf) share their mean rank, as scipy's."""
    import numpy as np
    from scipy.stats import rankdata

    from workbench.search.portfolio import average_ranks

    v = np.array(values)
    assert (average_ranks(v) == rankdata(v)).all()


def test_target_ranks_configs_and_caps_the_slow_tail() -> None:
    """The target follows the times' order whatever their scale; the slowest tenth (here a
    1000x-slow config) and the failed configs share one value, the cap."""
    import numpy as np

    import workbench.search.portfolio as portfolio

    proposer = a100_proposer()
    rows = np.arange(40)
    proposer.values[rows] = np.r_[np.linspace(1.0, 2.0, 36), [1000.0], np.full(3, np.inf)]
    y = proposer._target(rows)
    assert np.isclose(y.mean(), 0) and np.isclose(y.std(), 1)
    assert (np.diff(y[:36]) > 0).all()  # faster configs score lower
    capped = y[36:]
    assert np.allclose(capped, capped[0]) and capped[0] > y[35]  # slow and failed alike
    proposer.values[rows[:36]] = np.linspace(1.0, 2.0, 36) ** 8  # same order, other scale
    assert np.allclose(proposer._target(rows), y)
    assert portfolio.TARGET_CAP == 0.9


def test_after_a_stall_line_and_pair_search_around_an_elite_in_another_basin(
    tmp_path: Path,
) -> None:
    """While the best improves, the line move changes one parameter of the incumbent; once it
    has not improved for STALL evaluations, it changes one of an elite config that differs
    from the incumbent in ESCAPE_DISTANCE parameters or more (here the only such one)."""
    import itertools

    import workbench.search.portfolio as portfolio

    names = ["a", "b", "c", "d"]
    configs = [dict(zip(names, v, strict=True)) for v in itertools.product(range(4), repeat=4)]
    entries = [(c, Measurement(TrialOutcome.OK, value=2.0 + sum(c.values()))) for c in configs]
    proposer = proposer_on(tmp_path / "s.json", [(n, list(range(4))) for n in names], entries)
    incumbent, far = (0, 0, 0, 0), (3, 3, 3, 0)

    def observe(key: tuple[int, ...], value: float) -> None:
        proposer.observe(dict(zip(names, key, strict=True)), Measurement(TrialOutcome.OK, value))

    def distance(key: tuple[int, ...], base: tuple[int, ...]) -> int:
        return sum(a != b for a, b in zip(key, base, strict=True))

    def changes_from(row: int | None) -> list[int]:
        assert row is not None
        return [distance(tuple(proposer.X[row].tolist()), base) for base in (incumbent, far)]

    observe(incumbent, 1.0)
    observe(far, 1.1)
    # slow configs two changes from the incumbent, three or more from the far elite
    slow = [
        k
        for k in itertools.product(range(4), repeat=4)
        if distance(k, incumbent) == 2 and distance(k, far) > 2
    ]
    for key in slow[: portfolio.STALL - 3]:
        observe(key, 10.0)
    assert proposer.n_visited - proposer._improved_at < portfolio.STALL
    for _ in range(5):
        assert changes_from(proposer._line())[0] == 1  # around the incumbent
        assert changes_from(proposer._pair())[0] == 2
    for key in slow[portfolio.STALL - 3 : portfolio.STALL]:
        observe(key, 10.0)
    assert proposer.n_visited - proposer._improved_at >= portfolio.STALL
    for _ in range(5):
        assert changes_from(proposer._line())[1] == 1  # around the far elite
        assert changes_from(proposer._pair())[1] == 2
    # another far config joins the fastest (no better than the incumbent: still stalled), so
    # the escape now picks either far elite
    far2 = (0, 3, 3, 3)
    observe(far2, 1.2)
    keys = [tuple(proposer.X[proposer._line()].tolist()) for _ in range(40)]
    from_far = [(distance(k, far), distance(k, far2)) for k in keys]
    assert all(1 in d for d in from_far)  # one change from one of the far elites
    assert any(d[0] != 1 for d in from_far)  # some from far2 (not only around the first)


def test_elite_stays_ordered_by_value_then_row_as_configs_arrive() -> None:
    """The elite (kept in order as each result arrives) equals sorting the successful results
    by value, ties by row; failed configs are not in it."""
    import numpy as np

    proposer = a100_proposer()
    rng = np.random.default_rng(2)
    rows = rng.choice(len(proposer.X), 300, replace=False)
    values = rng.choice([1.0, 1.5, 2.0, 2.5, math.inf], len(rows))  # many ties
    for lo in range(0, len(rows), 50):
        observe_rows(proposer, rows[lo : lo + 50], values[lo : lo + 50])
        done = np.flatnonzero(proposer.visited & np.isfinite(proposer.values))
        expected = done[np.argsort(proposer.values[done], kind="stable")]
        assert np.array_equal(proposer._elite(), expected)


def test_fits_extend_the_last_one_and_always_hold_the_best() -> None:
    """Up to MAX_FIT evaluations the fit is every evaluated config in the order evaluated;
    past it, a selection followed by each config evaluated since, renewed every MAX_FIT // 2,
    so that consecutive fits share all but their new rows, and the fit always holds the
    MAX_FIT // 2 fastest."""
    import numpy as np

    import workbench.search.portfolio as portfolio

    proposer = a100_proposer()
    rng = np.random.default_rng(3)
    order = rng.permutation(len(proposer.X))[:700]
    values = rng.uniform(1.0, 2.0, len(order))
    half = portfolio.MAX_FIT // 2
    last = np.zeros(0, dtype=np.int64)
    renewed = 0
    for n in range(1, len(order) + 1):
        observe_rows(proposer, order[n - 1 : n], values[n - 1 : n])
        fit = proposer._fit_rows()
        assert len(set(fit.tolist())) == len(fit) <= portfolio.MAX_FIT + half
        if n <= portfolio.MAX_FIT:
            assert np.array_equal(fit, order[:n])
        best = order[np.argsort(values[:n])[:half]]
        assert set(best.tolist()) <= set(fit.tolist())
        if np.array_equal(fit[: len(last)], last):
            assert np.array_equal(fit[len(last) :], order[n - 1 : n])  # the new one at the end
        else:
            renewed += 1
            assert len(fit) == portfolio.MAX_FIT
        last = fit
    assert renewed == len(range(portfolio.MAX_FIT + 1, len(order) + 1, half + 1))


def test_an_exhausted_neighbourhood_is_skipped_until_a_held_config_is_released(
    tmp_path: Path,
) -> None:
    """Once every config one change from the incumbent is visited or held, the line move has
    nothing to offer and does not look again; when another worker releases a held config
    (it failed to claim it, say), the line move proposes it."""
    import itertools

    names = ["a", "b", "c"]
    configs = [dict(zip(names, v, strict=True)) for v in itertools.product(range(3), repeat=3)]
    entries = [(c, Measurement(TrialOutcome.OK, value=2.0 + sum(c.values()))) for c in configs]
    proposer = proposer_on(tmp_path / "s.json", [(n, list(range(3))) for n in names], entries)
    incumbent = {"a": 0, "b": 0, "c": 0}
    line = [{**incumbent, n: v} for n in names for v in (1, 2)]
    proposer.observe(incumbent, Measurement(TrialOutcome.OK, 1.0))
    for config in line[1:]:
        proposer.observe(config, Measurement(TrialOutcome.OK, 5.0))
    proposer.hold([line[0]])
    looked: list[int] = []
    real = proposer._neighbours
    proposer._neighbours = lambda *args: looked.append(1) or real(*args)
    assert proposer._line() is None and proposer._line() is None
    assert len(looked) == 1
    proposer.hold([])
    row = proposer._line()
    assert row is not None and proposer.X[row].tolist() == [1, 0, 0]


def test_the_bandit_ranks_moves_by_ucb_over_the_last_window_of_proposals() -> None:
    import workbench.search.portfolio as portfolio

    proposer = a100_proposer()
    recording = load_recording(CACHES / "convolution_milo_A100.json.gz")
    for step in range(portfolio.WINDOW + 60):
        replay_step(proposer, recording)
        if step in (portfolio.WINDOW - 5, portfolio.WINDOW + 59):  # a partial and a full window
            recent = proposer.history[-portfolio.WINDOW :]
            state = proposer.rng.bit_generator.state
            ties = proposer.rng.random(len(portfolio.MOVES))
            proposer.rng.bit_generator.state = state  # the ranking draws the same tie-breaks

            def ucb(move: str, recent=recent) -> float:
                rewards = [r for m, r in recent if m == move]
                if not rewards:
                    return math.inf
                bonus = math.sqrt(math.log(len(recent) + 1) / len(rewards))
                return sum(rewards) / len(rewards) + portfolio.EXPLORATION * bonus

            expected = sorted(
                portfolio.MOVES,
                key=lambda m: (ucb(m), ties[portfolio.MOVES.index(m)]),
                reverse=True,
            )
            assert proposer._ranked_moves() == expected
    assert len(proposer.history) > portfolio.WINDOW  # moves entered and left the window


def trend_proposer(path: Path) -> tuple:
    """A proposer on a space whose speed improves along ``a`` (12 values) and a little along
    ``b`` (3), having observed the configs with a <= 5 and b < 2; and those configs' (a, b)."""
    entries = [
        ({"a": a, "b": b}, Measurement(TrialOutcome.OK, value=20.0 - a + 0.1 * b))
        for a in range(12)
        for b in range(3)
    ]
    proposer = proposer_on(path, [("a", list(range(12))), ("b", list(range(3)))], entries)
    seen = {(c["a"], c["b"]) for c, _ in entries if c["a"] <= 5 and c["b"] < 2}
    for config, m in entries:
        if (config["a"], config["b"]) in seen:
            proposer.observe(config, m)
    return proposer, seen


def test_the_walk_move_proposes_open_configs_and_a_run_takes_it(tmp_path: Path) -> None:
    """The walk move (the model move under the random-walk model, whose trend-keeping is
    tested in test_pair_model) proposes only configs not yet evaluated, and a run's bandit
    takes it (``moves`` counts it)."""
    proposer, seen = trend_proposer(tmp_path / "trend.json")
    for _ in range(10):
        config = proposer.config_at(proposer._walk())
        assert (config["a"], config["b"]) not in seen
    result = run(tmp_path, load_recording(CACHES / "pnpoly_RTX_3090.json.gz"), "portfolio", 120, 1)
    assert result.moves is not None and result.moves["walk"]["proposed"] > 0


def test_the_exploit_move_proposes_the_open_config_the_walk_models_mean_ranks_first(
    tmp_path: Path,
) -> None:
    """The exploit move proposes an unevaluated config, the one the random-walk model's
    posterior mean scores highest (whatever the proposer's seed: it draws nothing but a
    tie-break), and a run's bandit takes it (``moves`` counts it)."""
    (first, seen), (second, _) = (trend_proposer(tmp_path / f"trend{i}.json") for i in range(2))
    second.rng = np.random.default_rng(99)
    proposers = [first, second]
    open_rows = np.flatnonzero(proposers[0]._open())
    scores = [p._exploit_scores(open_rows) for p in proposers]
    assert np.array_equal(scores[0], scores[1])
    config = proposers[0].config_at(proposers[0]._exploit())
    assert (config["a"], config["b"]) not in seen
    row = proposers[0]._row(config)
    assert scores[0][open_rows == row][0] == scores[0].max()
    result = run(tmp_path, load_recording(CACHES / "pnpoly_RTX_3090.json.gz"), "portfolio", 60, 1)
    assert result.moves is not None and result.moves["exploit"]["proposed"] > 0


def test_line_and_pair_rank_the_incumbents_neighbours_by_a_new_draw_of_the_walk_model(
    tmp_path: Path,
) -> None:
    """The line and pair moves propose the incumbent's open neighbour that a draw of the
    random-walk model scores highest, a new draw per proposal: with no new result between
    them, repeated proposals still differ (one shared draw would repeat one config)."""
    proposer, seen = trend_proposer(tmp_path / "trend.json")
    incumbent = proposer.X[proposer._elite()[0]]
    for flips, move in ((1, proposer._line), (2, proposer._pair)):
        proposed = set()
        for _ in range(20):
            state = proposer.rng.bit_generator.state
            row = move()
            proposer.rng.bit_generator.state = state  # the same draw, made again
            rows = proposer._neighbours(incumbent, flips)
            scores = proposer._walk_scores(rows)
            assert row in rows and scores[rows == row][0] == scores.max()
            assert (proposer.X[row] != incumbent).sum() == flips
            config = proposer.config_at(row)
            assert (config["a"], config["b"]) not in seen
            proposed.add(row)
        assert len(proposed) > 1


def test_the_bandit_rewards_a_new_best_only_when_it_gains_more_than_min_gain(
    tmp_path: Path,
) -> None:
    """A proposal that beats the best by less than MIN_GAIN earns no reward (the move that
    only inches the incumbent along does not crowd out the others); ``moves`` still counts
    it as an improvement, and the stall clock restarts."""
    import workbench.search.portfolio as portfolio

    entries = [({"a": a}, Measurement(TrialOutcome.OK, value=10.0 - a)) for a in range(4)]
    proposer = proposer_on(tmp_path / "gain.json", [("a", list(range(4)))], entries)
    gain = portfolio.MIN_GAIN
    steps = [("random", 10.0), ("line", 10.0 * (1 - gain / 3)), ("pair", 8.0), ("line", 9.0)]
    for a, (move, value) in enumerate(steps):
        proposer._record({"a": a}, Measurement(TrialOutcome.OK, value=value), move)
    assert proposer.history == [("random", 1.0), ("line", 0.0), ("pair", 1.0), ("line", 0.0)]
    assert proposer._improved_at == 3  # the small gain restarted the clock, then the large one
    stats = proposer.moves()
    assert stats["line"] == {"proposed": 2, "improved": 1}
    assert stats["pair"] == {"proposed": 1, "improved": 1}


def test_the_last_evaluations_of_a_budget_go_to_the_exploit_move() -> None:
    """Told a budget (``plan``), the proposer gives its last FINAL_EXPLOIT evaluations to the
    exploit move and searches as before until then; without one, the bandit keeps choosing."""
    import workbench.search.portfolio as portfolio

    recording = load_recording(CACHES / "convolution_milo_A100.json.gz")
    budget = 40
    runs = []
    for planned in (True, False):
        proposer = a100_proposer()
        if planned:
            proposer.plan(budget)
        proposals = [replay_step(proposer, recording) for _ in range(budget)]
        runs.append((proposals, [move for move, _ in proposer.history]))
    (planned_configs, planned_moves), (free_configs, free_moves) = runs
    final = portfolio.FINAL_EXPLOIT
    assert planned_moves[-final:] == ["exploit"] * final
    assert free_moves[-final:] != ["exploit"] * final
    assert planned_configs[: budget - final] == free_configs[: budget - final]


def test_the_tuner_tells_the_proposer_its_budget(tmp_path: Path) -> None:
    """A tune with a budget of evaluations ends with the exploit move's proposals (the tuner
    plans the proposer with its budget); the same seed searches alike before that."""
    import workbench.search.portfolio as portfolio

    rec = load_recording(CACHES / "pnpoly_RTX_3090.json.gz")
    short, long = (run(tmp_path / str(b), rec, "portfolio", b, 3) for b in (30, 50))
    assert long.moves is not None and long.moves["exploit"]["proposed"] >= portfolio.FINAL_EXPLOIT
    same = 30 - portfolio.FINAL_EXPLOIT
    configs = [[e.config for e in result.history[:same]] for result in (short, long)]
    assert configs[0] == configs[1]


def test_the_random_move_fills_the_small_tables_cells_before_uniform_sampling_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.search.portfolio as portfolio

    # three small parameters (pair tables of 16-20 cells) and a large one (70 values)
    params = [("a", [0, 1, 2, 3]), ("b", [0, 1, 2, 3]), ("c", [0, 1, 2, 3, 4])]
    params.append(("big", list(range(70))))
    entries = [
        ({"a": a, "b": b, "c": c, "big": g}, Measurement(TrialOutcome.OK, value=1.0 + a + b + c))
        for a in range(4)
        for b in range(4)
        for c in range(5)
        for g in range(70)
    ]
    path = tmp_path / "cover.json"

    def unseen_small_cells(candidates: int, seed: int) -> int:
        """Cells of the small tables that 20 random proposals leave unseen."""
        monkeypatch.setattr(portfolio, "COVER_CANDIDATES", candidates)
        proposer = proposer_on(path, params, entries)
        proposer.rng = np.random.default_rng(seed)
        model = proposer.model
        small = [t for t, table in enumerate(model.tables) if 3 not in table]
        assert proposer._cover_tables.tolist() == small  # the large parameter's tables left out
        seen = set()
        for _ in range(20):
            row = proposer._random()
            observe_rows(proposer, [row], [1.0])
            seen.update(model.cells[row, small].tolist())
        total = sum(math.prod(len(params[j][1]) for j in model.tables[t]) for t in small)
        return total - len(seen)

    covered = [unseen_small_cells(portfolio.COVER_CANDIDATES, seed) for seed in range(5)]
    uniform = [unseen_small_cells(1, seed) for seed in range(5)]
    # 69 cells (13 of the three small parameters, 56 of their pair tables) and 20 draws: uniform
    # draws leave 12-21 of them unseen here, the covering ones under half as many
    assert max(covered) < min(uniform)
    assert 2 * sum(covered) < sum(uniform)
