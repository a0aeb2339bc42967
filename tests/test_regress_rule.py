"""The regression decision rule on real GPU timing noise (Kernel Tuner ``times`` arrays).

Each trial draws a baseline and a candidate "run" of one recorded config by resampling its 32
recorded samples with replacement; the candidate is optionally shifted. The configs are
grouped by their noise, the relative standard deviation of their samples.
"""

from __future__ import annotations

import numpy as np
import pytest
from dataset_paths import CACHES, missing

from workbench.regress.noise import SampleSet, draw_run, load_sample_sets, relative_spread
from workbench.stats.rule import (
    DecisionRule,
    Verdict,
    compare_samples,
    family_discoveries,
    history_estimate,
    history_noise,
    history_p_value,
)

#: Kernel Tuner caches with 32 samples per config, from three GPUs (A100, RTX A4000, RTX 3090).
FILES = (
    "convolution_milo_A100.json.gz",
    "convolution_milo_A4000.json.gz",
    "gemm_RTX_3090.json.gz",
)
TRIALS = 400


@pytest.fixture(scope="module")
def real_sets() -> list[SampleSet]:
    paths = [CACHES / f for f in FILES]
    if not all(p.exists() for p in paths):
        pytest.skip(missing(CACHES))
    return load_sample_sets(paths, min_samples=32)


@pytest.fixture(scope="module")
def noise_of(real_sets: list[SampleSet]) -> dict[int, float]:
    """Relative standard deviation of each set's samples, by ``id``."""
    return {id(s): float(np.std(s.samples, ddof=1) / np.mean(s.samples)) for s in real_sets}


def pool(
    sets: list[SampleSet], noise: dict[int, float], low: float, high: float
) -> list[SampleSet]:
    chosen = [s for s in sets if low <= noise[id(s)] <= high]
    assert len(chosen) >= 20, f"only {len(chosen)} configs with noise in [{low}, {high}]"
    return chosen


def rates(sets: list[SampleSet], shift: float, trials: int, seed: int) -> dict[Verdict, float]:
    """How often each verdict comes out when the candidate is ``1 + shift`` times slower."""
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys(Verdict, 0)
    for _ in range(trials):
        s = sets[rng.integers(len(sets))].samples
        base, cand = draw_run(s, rng), draw_run(s, rng, factor=1.0 + shift)
        counts[compare_samples(base, cand).verdict] += 1
    return {v: n / trials for v, n in counts.items()}


def test_identical_distributions_give_no_regression(real_sets: list[SampleSet]) -> None:
    """False-positive rate under 1 % over 1000 resamplings of every kind of recorded config."""
    r = rates(real_sets, 0.0, 1000, seed=1)
    assert r[Verdict.SLOWER] < 0.01
    assert r[Verdict.SLOWER] + r[Verdict.FASTER] < 0.01
    print(f"false positives (slower) {r[Verdict.SLOWER]:.2%}, (faster) {r[Verdict.FASTER]:.2%}")


def test_five_percent_slowdown_at_one_percent_noise_is_found(
    real_sets: list[SampleSet], noise_of: dict[int, float]
) -> None:
    r = rates(pool(real_sets, noise_of, 0.008, 0.012), 0.05, TRIALS, seed=2)
    assert r[Verdict.SLOWER] >= 0.95, r
    print(f"5 % slowdown at ~1 % noise detected in {r[Verdict.SLOWER]:.1%}")


def test_five_percent_speedup_at_one_percent_noise_is_faster(
    real_sets: list[SampleSet], noise_of: dict[int, float]
) -> None:
    r = rates(pool(real_sets, noise_of, 0.008, 0.012), -0.05, TRIALS, seed=3)
    assert r[Verdict.FASTER] >= 0.95 and r[Verdict.SLOWER] == 0.0, r


def test_one_percent_shift_under_three_percent_noise_is_not_a_regression(
    real_sets: list[SampleSet], noise_of: dict[int, float]
) -> None:
    r = rates(pool(real_sets, noise_of, 0.025, 0.035), 0.01, 1000, seed=4)
    assert r[Verdict.SLOWER] < 0.01, r
    print(f"1 % shift at ~3 % noise called slower in {r[Verdict.SLOWER]:.2%}")


def test_one_percent_shift_is_below_the_floor_even_without_noise() -> None:
    """A clean 1.5 % shift is highly significant, but smaller than the 2 % floor."""
    rng = np.random.default_rng(0)
    base = 1.0 + rng.normal(0, 0.0005, 500)
    result = compare_samples(base, base * 1.015)
    assert result.time is not None and result.time.p_value < 1e-10
    assert result.verdict is Verdict.SAME


def test_history_noise_raises_the_threshold() -> None:
    rng = np.random.default_rng(5)
    base = 1.0 + rng.normal(0, 0.002, 200)
    cand = base * 1.04
    assert compare_samples(base, cand).verdict is Verdict.SLOWER
    # runs that moved by ~2 % from one to the next: a 4 % change is within that noise
    noisy = history_noise([1.0, 1.02, 0.99, 1.015, 0.985, 1.01])
    assert noisy is not None and noisy > 0.015
    result = compare_samples(base, cand, history=noisy)
    assert result.verdict is Verdict.SAME
    assert result.time is not None and result.time.threshold > 0.04


def test_history_noise_needs_four_runs_and_ignores_one_step() -> None:
    assert history_noise([1.0, 1.1, 1.0]) is None
    steady = history_noise([1.0, 1.001, 0.999, 1.0, 1.2, 1.201, 1.199, 1.2])
    assert steady is not None and steady < 0.005  # one 20 % step moves one difference only


def test_history_noise_is_unbiased_for_normal_run_to_run_noise() -> None:
    """Ten differences, the largest left out, then unbiased: the mean square is sigma^2."""
    rng = np.random.default_rng(10)
    sigma = 0.01
    runs = np.exp(np.cumsum(rng.normal(0.0, sigma, (4000, 11)), axis=1))
    estimates = np.array([history_noise(r) for r in runs])
    assert np.mean(estimates**2) == pytest.approx(sigma**2, rel=0.05)


@pytest.mark.parametrize("runs", [5, 11])
def test_the_history_p_value_is_calibrated(runs: int) -> None:
    """With normal run-to-run noise and no change, p < a happens about a of the time: the t
    tail with the estimate's degrees of freedom accounts for a noise measured from few runs
    (a normal tail would give p < 0.01 in 8 % of checks at five runs)."""
    rng = np.random.default_rng(11)
    sigma = 0.01
    histories = np.exp(np.cumsum(rng.normal(0.0, sigma, (4000, runs)), axis=1))
    ratios = np.exp(rng.normal(0.0, sigma, 4000))
    estimates = [history_estimate(h) for h in histories]
    assert {e.df for e in estimates if e} == {runs - 2 if runs > 4 else runs - 1}
    ps = np.array([history_p_value(r, e) for r, e in zip(ratios, estimates, strict=True)])
    for level in (0.05, 0.01):
        assert np.mean(ps < level) == pytest.approx(level, rel=0.5)
    assert history_p_value(1.1, None) is None


def test_family_discoveries_are_benjamini_hochberg() -> None:
    # sorted p: 0.001 <= 0.05/5, 0.008 <= 0.10/5, 0.039 > 0.15/5, 0.0395 <= 0.20/5 (step-up:
    # the largest k that passes rejects the k smallest), 0.9 > 0.25/5
    ps = [0.0395, 0.9, 0.001, 0.039, 0.008]
    assert family_discoveries(ps, 0.05) == [True, False, True, True, True]
    assert family_discoveries([0.02, 0.03], 0.05) == [True, True]
    assert family_discoveries([0.02] + [0.5] * 29, 0.05) == [False] * 30  # 0.02 > 0.05 / 30
    assert family_discoveries([], 0.05) == []


def test_a_change_the_sm_clock_explains_is_not_reported() -> None:
    """10 % slower in time at a 10 % lower clock: the same number of cycles."""
    rng = np.random.default_rng(6)
    base = 1.0 + rng.normal(0, 0.003, 100)
    cand = (1.0 + rng.normal(0, 0.003, 100)) * 1.1
    result = compare_samples(
        base, cand, baseline_clock=np.full(100, 1980.0), candidate_clock=np.full(100, 1800.0)
    )
    assert result.verdict is Verdict.SAME
    assert result.time is not None and result.time.direction == 1
    assert result.cycles is not None and result.cycles.direction == 0
    assert "clock" in result.note
    same_clock = compare_samples(
        base, cand, baseline_clock=np.full(100, 1980.0), candidate_clock=np.full(100, 1980.0)
    )
    assert same_clock.verdict is Verdict.SLOWER


def test_clocks_on_one_side_only_are_ignored() -> None:
    rng = np.random.default_rng(7)
    base = 1.0 + rng.normal(0, 0.003, 50)
    result = compare_samples(base, base * 1.1, baseline_clock=np.full(50, 1980.0))
    assert result.verdict is Verdict.SLOWER and result.cycles is None


def test_too_few_samples_are_not_comparable() -> None:
    result = compare_samples([1.0, 1.1, 1.0], [2.0, 2.1, 2.0])
    assert result.verdict is Verdict.NOT_COMPARABLE and "too few" in result.note


def test_identical_constant_samples_are_the_same() -> None:
    result = compare_samples([2.0] * 20, [2.0] * 20)
    assert result.verdict is Verdict.SAME and result.time is not None
    assert result.time.p_value == 1.0 and result.time.ratio == 1.0


def test_bad_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        compare_samples([1.0] * 10, [1.0] * 9 + [float("nan")])
    with pytest.raises(ValueError, match="clock"):
        compare_samples([1.0] * 10, [1.0] * 10, baseline_clock=[1.0] * 3)


def test_the_ratio_interval_brackets_the_ratio() -> None:
    rng = np.random.default_rng(8)
    base = 1.0 + rng.gamma(2.0, 0.01, 300)
    result = compare_samples(base, base * 1.07)
    ev = result.time
    assert ev is not None and ev.ci_low <= ev.ratio <= ev.ci_high
    assert result.verdict is Verdict.SLOWER
    # reproducible: the bootstrap has a fixed seed
    assert compare_samples(base, base * 1.07).time == ev


def test_rule_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        DecisionRule(alpha=0.0)
    with pytest.raises(ValueError):
        DecisionRule(min_samples=1)
    assert DecisionRule().threshold(None) == pytest.approx(0.02)


def test_relative_spread_is_robust() -> None:
    x = np.array([1.0, 1.01, 0.99, 1.0, 100.0])
    assert relative_spread(x) < 0.02


def test_the_u_test_matches_scipy() -> None:
    """The direct normal approximation equals scipy's, ties included (scipy below 9 samples)."""
    from scipy.stats import mannwhitneyu

    from workbench.stats.rule import _mann_whitney_p

    rng = np.random.default_rng(9)
    for _ in range(300):
        n1, n2 = rng.integers(3, 200, 2)
        digits = int(rng.integers(2, 5))
        a = np.round(rng.normal(1.0, 0.01, n1), digits)
        b = np.round(rng.normal(1.0 + rng.choice([0.0, 0.003, 0.01]), 0.01, n2), digits)
        expected = mannwhitneyu(b, a, alternative="two-sided").pvalue
        assert _mann_whitney_p(a, b) == pytest.approx(expected, rel=1e-9, abs=1e-300)
