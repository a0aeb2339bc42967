"""The default sampler, through its public interface: what it proposes after what it was told.

Every test drives the proposer as the tuner does (``start``, ``plan``, ``hold``, ``propose`` or
``next``, ``observe``) or runs the tuner, and reads what a caller can read: the proposals, the
per-move counts (``moves()``) and the bandit's record of rewards (``history``). The module's
constants are the documented knobs (docs/search.md); a test that changes one says why.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from dataset_paths import CACHES, needs_caches
from hypothesis import given, settings
from hypothesis import strategies as st

import workbench.search.portfolio as portfolio
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import Recording, load_recording, write_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.portfolio import PortfolioProposer
from workbench.search.problem import RecordingProblem
from workbench.search.tuner import Budget, SearchSettings, SearchStopReason, Tuner
from workbench.spaces.model import Config
from workbench.store import Store

Values = Callable[[Config], float]


def run(tmp: Path, rec: Recording, sampler: str, budget: int, seed: int):
    store = Store(f"sqlite:///{tmp}/{sampler}-{seed}.sqlite")
    problem = RecordingProblem(rec)
    study = store.study(
        kernel=rec.kernel, shape_label="x", device_key="d", parameters=rec.parameters
    )
    return Tuner(
        problem, ReplayRunner(rec), store, study, SearchSettings(sampler=sampler, seed=seed)
    ).run(Budget(evaluations=budget))


def record(path: Path, parameters: list, value: Values) -> Recording:
    """A recording of every config of ``parameters``' product, timed by ``value`` (a config
    whose value is inf failed)."""
    names = [n for n, _ in parameters]
    entries = []
    for values in itertools.product(*(v for _, v in parameters)):
        config = dict(zip(names, values, strict=True))
        entries.append((config, measured(value(config))))
    written = write_recording(
        path, kernel=path.stem, device=DeviceInfo("GPU"), parameters=parameters, entries=entries
    )
    return load_recording(written)


def configs_of(rec: Recording) -> list[Config]:
    """The recorded configs, in the recording's order."""
    names = rec.parameter_names
    return [dict(zip(names, key, strict=True)) for key in rec.entries]


def measured(value: float) -> Measurement:
    if math.isfinite(value):
        return Measurement(TrialOutcome.OK, value=float(value))
    return Measurement.failure(TrialOutcome.LAUNCH_FAILED, "boom")


def proposer_for(rec: Recording, seed: int = 0, **options: int) -> PortfolioProposer:
    problem = RecordingProblem(rec)
    return PortfolioProposer(problem, problem.valid_configs(), seed=seed, **options)


def tell(proposer: PortfolioProposer, configs: list[Config], value: Values) -> None:
    """Results of configs the proposer did not propose (a resumed study, other workers)."""
    for config in configs:
        proposer.observe(config, measured(value(config)))


def step(proposer: PortfolioProposer, value: Values) -> tuple[Config, str]:
    """One proposal, answered by ``value``; returns it and the move that made it."""
    before = proposer.moves()
    config = proposer.propose()
    assert config is not None
    proposer.observe(config, measured(value(config)))
    after = proposer.moves()
    (move,) = [m for m in portfolio.MOVES if after[m]["proposed"] > before[m]["proposed"]]
    return config, move


def distance(a: Config, b: Config) -> int:
    return sum(a[k] != b[k] for k in a)


def a100() -> Recording:
    return load_recording(CACHES / "convolution_milo_A100.json.gz")


def replayed(rec: Recording) -> Values:
    def value(config: Config) -> float:
        m = rec.lookup(config).to_measurement(rec.source)  # type: ignore[union-attr]
        return m.value if m.outcome is TrialOutcome.OK else math.inf  # type: ignore[return-value]

    return value


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Recording:
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


# -- the whole search -------------------------------------------------------------------------


def test_proposals_are_valid_and_never_repeat(tmp_path: Path, synthetic) -> None:
    result = run(tmp_path, synthetic, "portfolio", 1000, seed=0)
    assert result.stop is SearchStopReason.EXHAUSTED
    assert result.evaluations == len(synthetic.entries)
    assert result.proposals == result.evaluations  # no repeats, nothing outside the space
    assert result.best.measurement.value == 1.0


def test_same_seed_same_search(tmp_path: Path, synthetic) -> None:
    a = run(tmp_path / "a", synthetic, "portfolio", 40, seed=5)
    b = run(tmp_path / "b", synthetic, "portfolio", 40, seed=5)
    assert [e.config for e in a.history] == [e.config for e in b.history]


@needs_caches
def test_better_than_random_search_on_a_real_space(tmp_path: Path) -> None:
    rec = load_recording(CACHES / "pnpoly_RTX_3090.json.gz")
    ours = [run(tmp_path, rec, "portfolio", 100, s).best.measurement.value for s in range(6)]
    rand = [run(tmp_path, rec, "random", 100, s).best.measurement.value for s in range(6)]
    assert statistics.mean(ours) < statistics.mean(rand)


@needs_caches
@pytest.mark.parametrize("neighbours", [8192, 20])
def test_a_run_on_a_constrained_space_proposes_valid_open_configs_with_every_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, neighbours: int
) -> None:
    """On the recorded A100 convolution every proposal is a valid config not evaluated before,
    and every move takes part, also where the line and pair moves look up only a random subset
    of the incumbent's neighbours (MODEL_CANDIDATES 20 of its 261 two-change ones)."""
    monkeypatch.setattr(portfolio, "MODEL_CANDIDATES", neighbours)
    result = run(tmp_path, a100(), "portfolio", 150, seed=2)
    assert result.proposals == result.evaluations == 150
    assert result.moves is not None
    assert all(result.moves[m]["proposed"] > 0 for m in portfolio.MOVES), result.moves


def test_a_space_whose_product_overflows_int64_is_searched_config_by_config(
    tmp_path: Path,
) -> None:
    """20 parameters of 12 values (12^20 > 2^62 configs in the product: no config codes), 300
    recorded: the moves that look configs up (crossover, line, pair) still propose valid,
    unvisited ones, and only those."""
    names = [f"p{i}" for i in range(20)]
    rng = np.random.default_rng(0)
    base = rng.integers(0, 12, 20)
    rows = {tuple(base)}
    while len(rows) < 300:  # neighbours of neighbours of one config, so that moves find some
        row = np.array(list(rng.choice(sorted(rows))))
        row[rng.integers(0, 20, 2)] = rng.integers(0, 12, 2)
        rows.add(tuple(row))
    entries = [
        (dict(zip(names, map(int, r), strict=True)), measured(1.0 + sum(r) / 100))
        for r in sorted(rows)
    ]
    path = write_recording(
        tmp_path / "wide.json",
        kernel="wide",
        device=DeviceInfo("GPU"),
        parameters=[(n, list(range(12))) for n in names],
        entries=entries,
    )
    result = run(tmp_path, load_recording(path), "portfolio", 80, seed=0)
    assert result.proposals == result.evaluations == 80
    assert result.moves is not None
    assert all(result.moves[m]["proposed"] > 0 for m in ("crossover", "line", "pair"))


# -- the model --------------------------------------------------------------------------------


@pytest.mark.parametrize("pair_weight", [0.0, 0.5])
def test_the_model_learns_an_interaction_between_two_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pair_weight: float
) -> None:
    """Good configs fill two opposite quadrants ((a < 4) == (b < 4)): each parameter alone is
    as often good as bad, so a model of per-parameter effects cannot tell an open config of a
    good quadrant from one of a bad quadrant; one with pairwise features can. Told that the
    budget ends now, the proposer gives its turns to the model's best guess: with pairwise
    features the two good configs come first, whatever the seed; without, they do not."""
    import workbench.search.pair_model as pair_model

    monkeypatch.setattr(pair_model, "PAIR_WEIGHT", pair_weight)

    def value(c: Config) -> float:
        if (c["a"] < 4) == (c["b"] < 4):
            return 1.0 + ((5 * c["a"] + 3 * c["b"]) % 7) / 100  # both quadrants reach "good"
        return 2.0

    rec = record(tmp_path / "quadrants.json", [("a", list(range(8))), ("b", list(range(8)))], value)
    good, bad = [(1, 2), (6, 5)], [(1, 6), (6, 2)]
    seen = [c for c in configs_of(rec) if (c["a"], c["b"]) not in good + bad]
    firsts = []
    for seed in range(5):
        proposer = proposer_for(rec, seed)
        tell(proposer, seen, value)
        proposer.plan(len(seen))
        firsts.append({(c["a"], c["b"]) for c in (step(proposer, value)[0] for _ in range(2))})
    assert all(first == set(good) for first in firsts) == (pair_weight > 0), firsts


def test_the_search_follows_the_order_of_the_times_not_their_scale(tmp_path: Path) -> None:
    """The model fits the ranks of the times, capped at the 90th percentile: making the slowest
    tenth of the configs 1000x slower (their order and every ratio the bandit compares kept)
    leaves the search as it was."""
    params = [("a", list(range(8))), ("b", list(range(6))), ("c", list(range(4)))]

    def value(c: Config) -> float:
        return 1.0 + abs(c["a"] - 5) + abs(c["b"] - 2) * 0.7 + c["c"] * (c["a"] % 3) * 0.3

    times = sorted(
        value(dict(zip("abc", v, strict=True))) for v in itertools.product(*(p for _, p in params))
    )
    slowest = times[int(0.9 * len(times))]

    def slower_tail(c: Config) -> float:
        return value(c) * (1000 if value(c) > slowest else 1)

    runs = []
    for name, times_of in (("plain", value), ("tail", slower_tail)):
        rec = record(tmp_path / f"{name}.json", params, times_of)
        runs.append([e.config for e in run(tmp_path / name, rec, "portfolio", 80, 3).history])
    assert runs[0] == runs[1]


def test_past_max_fit_one_posterior_draw_serves_a_few_evaluations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the model move alone (MOVES patched to it), each proposal below MAX_FIT evaluations
    comes from a new posterior draw; past 384 (MAX_FIT 256, DRAW_STRIDE 64) one draw serves
    three new evaluations, four from 448."""
    monkeypatch.setattr(portfolio, "MOVES", ("model",))
    rec = record(
        tmp_path / "big.json",
        [("a", list(range(16))), ("b", list(range(16))), ("c", list(range(4)))],
        lambda c: 1.0 + abs(c["a"] - 9) + abs(c["b"] - 3) / 2 + c["c"] / 4,
    )
    value = replayed(rec)
    proposer = proposer_for(rec, seed=1)
    configs = configs_of(rec)
    order = np.random.default_rng(0).permutation(len(configs))
    draws: list[int] = []
    real = proposer.model.draw
    monkeypatch.setattr(proposer.model, "draw", lambda *a: draws.append(1) or real(*a))

    def draws_for(proposals: int) -> int:
        before = len(draws)
        for _ in range(proposals):
            assert step(proposer, value)[1] == "model"
        return len(draws) - before

    tell(proposer, [configs[i] for i in order[:100]], value)
    assert draws_for(10) == 10
    for i in order[100:]:  # up to 400 evaluations
        if proposer.n_visited == 400:
            break
        tell(proposer, [configs[i]], value)
    # draws at 400, 403, ..., 445 (every third), then 449, 453, 457 (every fourth from 448)
    assert draws_for(60) == len(range(400, 448, 3)) + len(range(449, 460, 4))


@needs_caches
def test_grouped_scores_equal_the_sum_of_every_table() -> None:
    """Scores from the groups' joint tables equal the sum of the per-parameter and pair
    tables' predictions, on a space whose tables do not fit one group (A100 convolution)."""
    model = proposer_for(a100()).model
    assert len(model.group_cells) > 1  # more than one group
    rng = np.random.default_rng(1)
    for _ in range(3):
        prediction = rng.standard_normal(model.n_cells)
        rows = rng.choice(len(model.cells), 500, replace=False)
        direct = -prediction[model.cells[rows]].sum(axis=1)
        scores = model.scores(model.grouped(prediction), rows)
        assert np.allclose(scores, direct, rtol=0, atol=1e-9)


@settings(deadline=None)  # the first example imports scipy.stats
@given(st.lists(st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.5, math.inf]), min_size=1, max_size=40))
def test_average_ranks_match_scipy(values: list[float]) -> None:
    """Ties (repeated times, failed configs as +inf) share their mean rank, as scipy's."""
    from scipy.stats import rankdata

    from workbench.search.portfolio import average_ranks

    v = np.array(values)
    assert (average_ranks(v) == rankdata(v)).all()


# -- the moves --------------------------------------------------------------------------------


def test_the_pair_move_leaves_a_basin_that_no_single_change_improves(tmp_path: Path) -> None:
    """Two flags that only help together: from the incumbent (0, 0, c=0) every config one
    change away has been evaluated, so the line move has nothing to offer; whenever the pair
    move has the first turn it proposes the config with both flags flipped, the optimum."""

    def value(c: Config) -> float:
        if c["a"] == c["b"] == 1:
            return 1.0 + c["c"] / 100
        return 1.5 + c["c"] / 100 if c["a"] == c["b"] == 0 else 3.0

    rec = record(
        tmp_path / "flags.json", [("a", [0, 1]), ("b", [0, 1]), ("c", list(range(6)))], value
    )
    basin = [c for c in configs_of(rec) if not c["a"] == c["b"] == 1]
    first_moves = []
    for seed in range(40):
        proposer = proposer_for(rec, seed)
        tell(proposer, basin, value)
        config, move = step(proposer, value)
        first_moves.append(move)
        assert move != "line"
        if move == "pair":
            assert config == {"a": 1, "b": 1, "c": 0}
    assert "pair" in first_moves


def test_after_a_stall_line_and_pair_search_around_an_elite_in_another_basin(
    tmp_path: Path,
) -> None:
    """While the best improves, the line and pair moves change one or two parameters of the
    incumbent; once it has not improved for STALL evaluations, of an elite config 3 or more
    changes away (here the only one); a second such config joining the fastest, either."""
    names = ["a", "b", "c", "d"]
    keys = list(itertools.product(range(4), repeat=4))
    incumbent, far, far2 = (
        dict(zip(names, k, strict=True)) for k in [(0,) * 4, (3, 3, 3, 0), (0, 3, 3, 3)]
    )
    # slow configs two changes from the incumbent and three or more from the far elite: with
    # the three above, the fastest eight (the escape looks among them)
    slow = [
        c
        for c in (dict(zip(names, k, strict=True)) for k in keys)
        if distance(c, incumbent) == 2 and distance(c, far) > 2
    ][:6]
    rec = record(tmp_path / "escape.json", [(n, list(range(4))) for n in names], lambda c: 9.0)
    fixed = {str(incumbent): 1.0, str(far): 1.1, str(far2): 1.2}
    fixed.update({str(c): 5.0 + i / 100 for i, c in enumerate(slow)})

    around: dict[str, list[set[str]]] = {"before": [], "after": [], "both": []}
    for seed in range(4):
        proposer = proposer_for(rec, seed)
        answered: dict[str, float] = {}

        def answer(c: Config, answered: dict[str, float] = answered) -> float:
            # nothing beats the incumbent; configs proposed later run slower than earlier ones
            return fixed.get(str(c)) or answered.setdefault(str(c), 50.0 + len(answered))

        tell(proposer, [incumbent, far, *slow], answer)
        phase = "before"
        while proposer.n_visited < portfolio.STALL + 30:
            if phase == "before" and proposer.n_visited - 1 >= portfolio.STALL:
                phase = "after"  # the incumbent, told first, is the last improvement
            if phase == "after" and proposer.n_visited >= portfolio.STALL + 12:
                tell(proposer, [far2], answer)  # not faster than the incumbent: still stalled
                phase = "both"
            config, move = step(proposer, answer)
            if move in ("line", "pair"):
                flips = 1 if move == "line" else 2
                bases = {"incumbent": incumbent, "far": far, "far2": far2}
                around[phase].append({n for n, b in bases.items() if distance(config, b) == flips})
    assert around["before"] and all("incumbent" in a for a in around["before"]), around
    assert around["after"] and all("far" in a for a in around["after"]), around
    assert all({"far", "far2"} & a for a in around["both"]), around
    assert any("far2" in a for a in around["both"]), around


def test_a_held_config_is_not_proposed_until_it_is_released(tmp_path: Path) -> None:
    """Configs other workers are measuring (``hold``) are left alone: with every other config
    evaluated the proposer has nothing to offer; released, the config is proposed."""
    names = ["a", "b", "c"]
    rec = record(
        tmp_path / "s.json", [(n, list(range(3))) for n in names], lambda c: 2.0 + sum(c.values())
    )
    proposer = proposer_for(rec, seed=0)
    held = {"a": 1, "b": 0, "c": 0}  # one change from the incumbent, the fastest open config
    proposer.hold([held])
    value = replayed(rec)
    proposed = []
    while (config := proposer.propose()) is not None:
        proposer.observe(config, measured(value(config)))
        proposed.append(config)
    assert held not in proposed and len(proposed) == 26
    proposer.hold([])
    assert proposer.propose() == held


@needs_caches
def test_the_bandit_chooses_the_move_with_the_highest_ucb_over_the_last_window(
    tmp_path: Path,
) -> None:
    """Each proposal comes from a move whose UCB1 score over the last WINDOW proposals (mean
    reward plus EXPLORATION times the bonus) is the highest, unless a higher one had nothing to
    offer; moves enter and leave the window."""
    rec = a100()
    value = replayed(rec)
    proposer = proposer_for(rec, seed=0)

    def ucb(move: str) -> float:
        recent = proposer.history[-portfolio.WINDOW :]
        rewards = [r for m, r in recent if m == move]
        if not rewards:
            return math.inf
        bonus = math.sqrt(math.log(len(recent) + 1) / len(rewards))
        return sum(rewards) / len(rewards) + portfolio.EXPLORATION * bonus

    for _ in range(portfolio.N_STARTUP):
        step(proposer, value)
    chosen_best = 0
    for _ in range(portfolio.WINDOW + 60):
        scores = {m: ucb(m) for m in portfolio.MOVES}
        _, move = step(proposer, value)
        higher = [m for m in portfolio.MOVES if scores[m] > scores[move]]
        # only a move that can run dry passes its turn: crossover (no valid child), line and
        # pair (a neighbourhood fully visited)
        assert set(higher) <= {"crossover", "line", "pair"}, (move, scores)
        chosen_best += not higher
    assert chosen_best >= portfolio.WINDOW  # most turns go to the top move itself
    assert len(proposer.history) > portfolio.WINDOW  # moves entered and left the window


def test_the_bandit_rewards_a_new_best_only_when_it_gains_more_than_min_gain(
    tmp_path: Path,
) -> None:
    """A proposal that beats the best by less than MIN_GAIN earns no reward (the move that
    only inches the incumbent along does not crowd out the others); ``moves`` still counts
    it as an improvement."""
    rec = record(tmp_path / "gain.json", [("a", list(range(8)))], lambda c: 10.0)
    gain = portfolio.MIN_GAIN
    answers = [10.0, 10.0 * (1 - gain / 3), 8.0, 9.0]
    proposer = proposer_for(rec, seed=0)
    moves = [step(proposer, lambda c, v=v: v)[1] for v in answers]
    assert [r for _, r in proposer.history] == [1.0, 0.0, 1.0, 0.0]
    improved = {m: proposer.moves()[m]["improved"] for m in set(moves)}
    expected = {m: sum(1 for i, n in enumerate(moves) if n == m and i < 3) for m in set(moves)}
    assert improved == expected  # the first three improved the best, the small gain too


def trend(tmp_path: Path) -> tuple[Recording, list[Config]]:
    """A space whose speed improves along ``a`` (12 values) and a little with smaller ``b``
    (3), and the configs with a <= 5 and b < 2 (the ones evaluated)."""
    rec = record(
        tmp_path / "trend.json",
        [("a", list(range(12))), ("b", list(range(3)))],
        lambda c: 20.0 - c["a"] + 0.1 * c["b"],
    )
    return rec, [c for c in configs_of(rec) if c["a"] <= 5 and c["b"] < 2]


def test_told_its_budget_ends_the_proposer_proposes_the_models_best_guess(
    tmp_path: Path,
) -> None:
    """In the budget's last FINAL_EXPLOIT evaluations the exploit move proposes the open config
    the random-walk model's mean ranks first: along the trend (a beyond the values seen, the
    better b), whatever the seed."""
    rec, seen = trend(tmp_path)
    value = replayed(rec)
    for seed in range(4):
        proposer = proposer_for(rec, seed)
        tell(proposer, seen, value)
        proposer.plan(len(seen) + portfolio.FINAL_EXPLOIT)
        config, move = step(proposer, value)
        assert move == "exploit" and config["a"] > 5 and config["b"] == 0, config


@needs_caches
def test_runs_take_the_walk_and_exploit_moves(tmp_path: Path) -> None:
    rec = load_recording(CACHES / "pnpoly_RTX_3090.json.gz")
    result = run(tmp_path, rec, "portfolio", 120, 1)
    assert result.moves is not None
    assert result.moves["walk"]["proposed"] > 0 and result.moves["exploit"]["proposed"] > 0


@needs_caches
def test_the_last_evaluations_of_a_budget_go_to_the_exploit_move() -> None:
    """Told a budget (``plan``), the proposer gives its last FINAL_EXPLOIT evaluations to the
    exploit move and searches as before until then; without one, the bandit keeps choosing."""
    rec = a100()
    value = replayed(rec)
    budget = 40
    runs = []
    for planned in (True, False):
        proposer = proposer_for(rec)
        if planned:
            proposer.plan(budget)
        runs.append([step(proposer, value) for _ in range(budget)])
    (planned_steps, free_steps), final = runs, portfolio.FINAL_EXPLOIT
    assert [m for _, m in planned_steps[-final:]] == ["exploit"] * final
    assert [m for _, m in free_steps[-final:]] != ["exploit"] * final
    assert planned_steps[: budget - final] == free_steps[: budget - final]


@needs_caches
def test_the_tuner_tells_the_proposer_its_budget(tmp_path: Path) -> None:
    """A tune with a budget of evaluations ends with the exploit move's proposals (the tuner
    plans the proposer with its budget); the same seed searches alike before that."""
    rec = load_recording(CACHES / "pnpoly_RTX_3090.json.gz")
    short, long = (run(tmp_path / str(b), rec, "portfolio", b, 3) for b in (30, 50))
    assert long.moves is not None and long.moves["exploit"]["proposed"] >= portfolio.FINAL_EXPLOIT
    same = 30 - portfolio.FINAL_EXPLOIT
    configs = [[e.config for e in result.history[:same]] for result in (short, long)]
    assert configs[0] == configs[1]


def test_the_random_move_fills_the_small_tables_cells_before_uniform_sampling_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the random move alone (MOVES patched to it, no uniform start), 20 proposals leave
    fewer combinations of three small parameters unseen than uniform draws do (COVER_CANDIDATES
    1): every value and pair of values of a, b and c (69 cells), while ``big`` (70 values) is
    too large a table to cover."""
    params = [("a", [0, 1, 2, 3]), ("b", [0, 1, 2, 3]), ("c", [0, 1, 2, 3, 4])]
    params.append(("big", list(range(70))))
    rec = record(tmp_path / "cover.json", params, lambda c: 1.0 + c["a"] + c["b"] + c["c"])
    monkeypatch.setattr(portfolio, "MOVES", ("random",))
    small = ["a", "b", "c"]
    cells = {(n,): set(dict(params)[n]) for n in small}
    for n, m in itertools.combinations(small, 2):
        cells[(n, m)] = set(itertools.product(dict(params)[n], dict(params)[m]))
    total = sum(len(v) for v in cells.values())

    def unseen(candidates: int, seed: int) -> int:
        monkeypatch.setattr(portfolio, "COVER_CANDIDATES", candidates)
        proposer = proposer_for(rec, seed, n_startup=0)
        seen: set = set()
        for _ in range(20):
            config, _ = step(proposer, lambda c: 1.0)
            seen.update((key, tuple(config[n] for n in key)) for key in cells)
        return total - len(seen)

    covered = [unseen(portfolio.COVER_CANDIDATES, seed) for seed in range(5)]
    uniform = [unseen(1, seed) for seed in range(5)]
    assert total == 69
    assert max(covered) < min(uniform) and 2 * sum(covered) < sum(uniform), (covered, uniform)
