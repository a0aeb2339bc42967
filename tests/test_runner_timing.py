"""The stopping rule and the timing summary, on real measurement noise.

Real noise: the ``times`` arrays of Kernel Tuner cache files (32 repeated measurements in ms
of real kernels on real GPUs: A100, RTX A4000, RTX 3090, RTX 4000 Ada), from
``../shared/datasets/tuning-caches`` (see its SOURCES.md). Tests that need the files skip
without them; a few series are copied below, verbatim, so that the essentials run anywhere.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from dataset_paths import CACHES, missing

from workbench.runners.timing import (
    MAX_NOISE,
    MIN_SAMPLES,
    Noise,
    StoppingRule,
    TimingOptions,
    TimingStopReason,
    is_throttled,
    median_interval,
    summarize,
)

#: Verbatim ``times`` of config "1,32,1,1,1,0,0,0" in dedispersion_milo_A100.json.gz (A100,
#: rel. stdev 0.04 %).
QUIET = [
    73.68498992919922, 73.57952117919922, 73.55494689941406, 73.55801391601562,
    73.5467529296875, 73.5313949584961, 73.5313949584961, 73.53036499023438,
    73.53343963623047, 73.55801391601562, 73.5283203125, 73.55494689941406,
    73.5498275756836, 73.53753662109375, 73.56416320800781, 73.55187225341797,
    73.53651428222656, 73.54777526855469, 73.5621109008789, 73.55391693115234,
    73.55801391601562, 73.52422332763672, 73.55084991455078, 73.55289459228516,
    73.55699157714844, 73.53651428222656, 73.58668518066406, 73.57542419433594,
    73.53036499023438, 73.55289459228516, 73.54777526855469, 73.55801391601562,
]  # fmt: skip
#: Verbatim ``times`` of config "128,128,32,8,32,16,8,2,8,2,0,0,1,0,32" in
#: gemm_RTX_3090.json.gz (RTX 3090): two speeds, 17.75 ms and 19.02 ms, interleaved.
NOISY = [
    17.770495999999998, 19.019776, 17.745919999999998, 17.749888, 17.744896, 19.016704,
    17.74784, 18.965439999999997, 17.737728, 19.034112, 19.013631999999998,
    17.748991999999998, 17.748896, 17.7408, 17.756159999999998, 17.7408, 17.753087999999998,
    19.027967999999998, 17.743872, 19.017727999999998, 19.01568, 17.762304, 19.03104,
    17.750016, 17.750016, 19.033088, 19.039232, 17.75104, 19.013631999999998,
    17.756031999999998, 17.75104, 19.006463999999998,
]  # fmt: skip
#: Verbatim ``times`` of config "48,1,1,2,1,0,1,1,15,15" in convolution_milo_A4000.json.gz
#: (RTX A4000, rel. stdev 10 %): the GPU changed speed twice during the run (2.48 ms, then
#: 3.13 ms, then 3.06 ms), as a clock change does.
SHIFT = [
    2.565119981765747, 2.4882240295410156, 2.480959892272949, 2.4821760654449463,
    2.481152057647705, 2.48524808883667, 2.4842240810394287, 2.48524808883667,
    2.4832000732421875, 2.481152057647705, 2.5774080753326416, 3.126271963119507,
    3.1283199787139893, 3.1262400150299072, 3.124095916748047, 3.1303679943084717,
    3.1252479553222656, 3.126271963119507, 3.126271963119507, 3.127295970916748,
    3.1252479553222656, 3.126271963119507, 3.126271963119507, 3.0914559364318848,
    3.0607359409332275, 3.0597119331359863, 3.0617599487304688, 3.0597119331359863,
    3.0597119331359863, 3.0607359409332275, 3.055583953857422, 3.037184000015259,
]  # fmt: skip


def _load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:  # type: ignore[operator]
        return json.load(fh)


def real_series(min_len: int = 32) -> Iterator[tuple[str, str, np.ndarray]]:
    """(file, config key, times) of every config with ``min_len`` numeric samples."""
    if not CACHES.is_dir():
        pytest.skip(missing(CACHES))
    for path in sorted(CACHES.glob("*.json*")):
        data = _load(path)
        for key, record in data.get("cache", {}).items():
            times = record.get("times") if isinstance(record, dict) else None
            if (
                isinstance(times, list)
                and len(times) >= min_len
                and all(isinstance(t, int | float) and t > 0 for t in times)
            ):
                yield path.name, key, np.asarray(times, dtype=float)


@pytest.fixture(scope="module")
def series() -> list[tuple[str, str, np.ndarray]]:
    return list(real_series())


def run_rule(rule: StoppingRule, samples: np.ndarray) -> int:
    """Feed samples until the rule is done; the number it took."""
    rule.reset()
    for i, s in enumerate(samples, 1):
        rule.add(float(s))
        if rule.done():
            return i
    return len(samples)


def rel_stdev(a: np.ndarray) -> float:
    return float(np.std(a, ddof=1) / np.mean(a))


# -- the median's confidence interval ------------------------------------------------------


def test_interval_ranks_are_the_binomial_ones() -> None:
    # exact coverage 1 - 2 P(B <= k-1), B ~ Bin(n, 1/2), checked with integer arithmetic
    for n in range(1, 200):
        ci = median_interval(n)
        k = ci.low_rank + 1
        assert ci.high_rank == n - k
        coverage = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n
        assert ci.coverage == pytest.approx(coverage, abs=1e-9)
        if n >= 6:
            assert coverage >= 0.95
            tighter = 1 - 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n
            assert k + 1 > (n + 1) // 2 or tighter < 0.95  # the narrowest that holds
        else:
            assert (ci.low_rank, ci.high_rank) == (0, n - 1) and ci.coverage < 0.95


def test_interval_for_large_n_stays_close_to_the_normal_one() -> None:
    ci = median_interval(1000)
    assert (ci.low_rank, ci.high_rank) == (468, 531)
    assert 0.95 <= ci.coverage < 0.96


def test_interval_contains_the_true_median_of_real_series(
    series: list[tuple[str, str, np.ndarray]],
) -> None:
    """Sub-samples of 10 to 20 out of 32: the CI holds the full series' median >= 95 %."""
    rng = random.Random(1)
    hits = trials = 0
    for _, _, times in rng.sample(series, 3000):
        truth = float(np.median(times))
        size = rng.randint(10, 20)
        sub = summarize(rng.sample(list(times), size))
        trials += 1
        hits += sub.ci_low <= truth <= sub.ci_high
    assert hits / trials >= 0.95, f"coverage {hits / trials:.3f}"


def test_interval_coverage_per_gpu(series: list[tuple[str, str, np.ndarray]]) -> None:
    """The guarantee is distribution-free: it holds on each GPU's noise separately."""
    rng = random.Random(2)
    by_file: dict[str, list[np.ndarray]] = {}
    for name, _, times in series:
        by_file.setdefault(name, []).append(times)
    for name, all_times in by_file.items():
        picks = rng.sample(all_times, min(500, len(all_times)))
        hits = 0
        for times in picks:
            sub = summarize(rng.sample(list(times), 12))
            hits += sub.ci_low <= float(np.median(times)) <= sub.ci_high
        assert hits / len(picks) >= 0.95, f"{name}: coverage {hits / len(picks):.3f}"


# -- the stopping rule on real series ------------------------------------------------------


def test_quiet_series_stop_at_the_minimum(series: list[tuple[str, str, np.ndarray]]) -> None:
    quiet = [t for _, _, t in series if rel_stdev(t) < 0.005][:500]
    assert len(quiet) >= 100
    for times in quiet:
        rule = StoppingRule(min_time_s=0.0, max_samples=len(times))
        assert run_rule(rule, times) <= 12
        assert rule.stop_reason is TimingStopReason.CONVERGED


def test_noisy_series_run_to_the_cap(series: list[tuple[str, str, np.ndarray]]) -> None:
    """Noisy from the start and throughout (rel. stdev > 5 % over the first ten samples and
    over all 32): the standard error never gets below 0.5 %."""
    noisy = [t for _, _, t in series if rel_stdev(t) > 0.05 and rel_stdev(t[:10]) > 0.05]
    assert len(noisy) >= 100
    for times in noisy:
        rule = StoppingRule(min_time_s=0.0, max_samples=len(times))
        assert run_rule(rule, times) == len(times)
        assert rule.stop_reason is TimingStopReason.MAX_SAMPLES


def test_a_converged_rule_meant_it(series: list[tuple[str, str, np.ndarray]]) -> None:
    """Where the rule stops early, the samples so far really are that quiet, and most
    real series (kernel times on idle GPUs) stop before the 32nd sample."""
    early = 0
    for _, _, times in series[::7]:
        rule = StoppingRule(min_time_s=0.0, max_samples=len(times))
        n = run_rule(rule, times)
        if rule.stop_reason is TimingStopReason.CONVERGED:
            early += 1
            seen = times[:n]
            assert n >= MIN_SAMPLES
            assert rel_stdev(seen) / math.sqrt(n) < MAX_NOISE
    assert early / len(series[::7]) > 0.8


def test_nvbench_statistic_is_much_stricter(series: list[tuple[str, str, np.ndarray]]) -> None:
    """Relative stdev < 0.5 % (nvbench) rarely holds for real kernels within 32 samples:
    the reason the default is the standard error."""
    picks = series[::11]
    stops = {}
    for noise in (Noise.REL_STDERR, Noise.REL_STDEV):
        converged = 0
        for _, _, times in picks:
            rule = StoppingRule(noise=noise, min_time_s=0.0, max_samples=len(times))
            run_rule(rule, times)
            converged += rule.stop_reason is TimingStopReason.CONVERGED
        stops[noise] = converged / len(picks)
    assert stops[Noise.REL_STDERR] > stops[Noise.REL_STDEV] + 0.2


def test_median_ci_noise_shrugs_off_an_outlier(series: list[tuple[str, str, np.ndarray]]) -> None:
    """One sample 10x slow (a preempted launch) keeps the standard error high, not the
    median's interval."""
    quiet = [t for _, _, t in series if rel_stdev(t) < 0.005][:50]
    for times in quiet:
        spoiled = times.copy()
        spoiled[3] *= 10
        stderr_rule = StoppingRule(min_time_s=0.0, max_samples=len(times))
        ci_rule = StoppingRule(noise=Noise.MEDIAN_CI, min_time_s=0.0, max_samples=len(times))
        run_rule(stderr_rule, spoiled)
        run_rule(ci_rule, spoiled)
        assert stderr_rule.stop_reason is TimingStopReason.MAX_SAMPLES
        assert ci_rule.stop_reason is TimingStopReason.CONVERGED


def test_embedded_quiet_series_stops_at_ten() -> None:
    rule = StoppingRule(min_time_s=0.0, max_samples=32)
    assert run_rule(rule, np.array(QUIET)) == 10
    assert rule.stop_reason is TimingStopReason.CONVERGED
    s = summarize(QUIET[:10])
    assert s.ci_low <= float(np.median(QUIET)) <= s.ci_high


def test_embedded_noisy_series_runs_to_the_cap() -> None:
    for noise in Noise:
        rule = StoppingRule(noise=noise, min_time_s=0.0, max_samples=32)
        assert run_rule(rule, np.array(NOISY)) == 32, noise
        assert rule.stop_reason is TimingStopReason.MAX_SAMPLES


def test_a_speed_change_after_the_minimum_goes_unseen() -> None:
    """A sequential rule judges the samples it has: the first ten of SHIFT are quiet."""
    rule = StoppingRule(min_time_s=0.0, max_samples=32)
    assert run_rule(rule, np.array(SHIFT)) == 10


def test_throttled_phase_leaves_the_median() -> None:
    """Had SHIFT's slow phases been taken at a low SM clock, marking them throttled keeps the
    fast phase's median, and every sample is still there."""
    flags = [t > 3.0 for t in SHIFT]
    s = summarize(SHIFT, flags)
    assert s.n == 32 and s.n_used == 11 and s.median == pytest.approx(2.4842240810394287)
    assert summarize(SHIFT).median > 3.0


# -- the rule's mechanics ------------------------------------------------------------------


class Ticker:
    """A wall clock that advances by ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_time_cap_stops_a_noisy_loop() -> None:
    rule = StoppingRule(max_time_s=1.0, clock=Ticker(0.125))  # read at reset, then per done()
    values = iter([1.0, 3.0] * 100)
    while not rule.done():
        rule.add(next(values))
    assert rule.stop_reason is TimingStopReason.TIME_CAP
    assert rule.count == 8


def test_min_time_holds_a_quiet_loop_back() -> None:
    rule = StoppingRule(min_time_s=0.05)  # 50 ms of samples at 1 ms each
    while not rule.done():
        rule.add(1.0)
    assert rule.count == 50 and rule.stop_reason is TimingStopReason.CONVERGED


def test_throttled_samples_count_toward_caps_only() -> None:
    rule = StoppingRule(min_time_s=0.0, max_samples=30)
    for _ in range(25):
        rule.add(1.0, throttled=True)
        assert not rule.done()
    for _ in range(5):
        rule.add(1.0)
    assert rule.done() and rule.stop_reason is TimingStopReason.MAX_SAMPLES
    assert math.isinf(StoppingRule().current_noise)


def test_reset_and_clone_start_over() -> None:
    rule = StoppingRule(min_time_s=0.0)
    for _ in range(10):
        rule.add(1.0)
    assert rule.done()
    clone = rule.clone()
    assert clone.count == 0 and not clone.done() and clone.min_samples == rule.min_samples
    rule.reset()
    assert rule.count == 0 and rule.stop_reason is None and not rule.done()


@pytest.mark.parametrize(
    "kwargs",
    [{"min_samples": 1}, {"max_samples": 5}, {"max_noise": 0.0}, {"min_time_s": -1.0}],
)
def test_bad_parameters(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        StoppingRule(**kwargs)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0])
def test_bad_samples(bad: float) -> None:
    with pytest.raises(ValueError):
        StoppingRule().add(bad)


def test_defaults_are_nvbench_like() -> None:
    rule = TimingOptions().rule
    assert (rule.min_samples, rule.max_noise, rule.noise) == (10, 0.005, Noise.REL_STDERR)
    assert TimingOptions().throttle_fraction == 0.75 and TimingOptions().flush_l2


# -- summaries and throttling --------------------------------------------------------------


def test_summary_of_known_values() -> None:
    s = summarize([3.0, 1.0, 2.0, 4.0, 100.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    assert s.median == 5.5 and s.n == s.n_used == 10
    assert (s.ci_low, s.ci_high) == (2.0, 9.0)  # ranks 1 and 8 of 10
    assert s.mean == pytest.approx(14.5) and not s.all_throttled


def test_throttled_samples_are_kept_but_not_in_the_median() -> None:
    samples = [1.0] * 10 + [2.0] * 5
    flags = [False] * 10 + [True] * 5
    s = summarize(samples, flags)
    assert s.samples == tuple(samples) and s.throttled == tuple(flags)
    assert s.median == 1.0 and s.n_used == 10 and s.stdev == 0.0
    everything = summarize([2.0, 4.0], [True, True])
    assert everything.all_throttled and everything.median == 3.0


def test_summary_errors() -> None:
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0], [True, False])


def test_is_throttled() -> None:
    assert is_throttled(1400.0, 1980.0)  # below 75 % of the maximum
    assert not is_throttled(1500.0, 1980.0)
    assert not is_throttled(None, 1980.0) and not is_throttled(1000.0, None)
    assert not is_throttled(math.nan, 1980.0)


def test_measure_follows_the_protocol_for_configs_and_baselines() -> None:
    """The one timing loop (runner and compare): warm-up launches, then a flush, a timed launch
    and a clock reading per sample until the rule stops; outputs reset before every launch;
    slow-clock samples marked throttled."""
    from types import SimpleNamespace

    from workbench.runners.cuda.worker import Heartbeat, measure

    events: list[str] = []
    speeds = iter([1400.0, 600.0] * 50)  # every other sample at 600 of 1500 MHz: throttled
    clocks = SimpleNamespace(
        max_sm_clock_mhz=1500.0, sm_clock_mhz=lambda: next(speeds), energy_mj=lambda: None
    )
    opts = TimingOptions(
        rule=StoppingRule(min_samples=4, max_noise=1.0, min_time_s=0.0, max_samples=50),
        warmup_s=0.0,
        warmup_min_launches=3,
    )

    def timed() -> float:
        events.append("timed")
        return 1.0

    timing = measure(
        opts,
        launch=lambda: events.append("launch"),
        timed_launch=timed,
        flush=lambda: events.append("flush"),
        clocks=clocks,  # type: ignore[arg-type]
        clock_note="",
        beat=Heartbeat(lambda _msg: None),
        before_launch=lambda: events.append("reset"),
    )
    assert timing.warmup_launches == 3
    assert events[:6] == ["reset", "launch"] * 3
    n = len(timing.samples_ms)
    assert events[6:] == ["reset", "flush", "timed"] * n
    assert timing.throttled == tuple(i % 2 == 1 for i in range(n))
    assert sum(not t for t in timing.throttled) >= 4  # the rule counts unthrottled samples
    assert timing.sm_clock_mhz[:2] == (1400.0, 600.0) and timing.max_sm_clock_mhz == 1500.0
    without_flush = measure(
        TimingOptions(rule=opts.rule, warmup_s=0.0, warmup_min_launches=1, flush_l2=False),
        launch=lambda: None,
        timed_launch=lambda: 1.0,
        flush=lambda: events.append("flush!"),
        clocks=None,
        clock_note="no NVML",
        beat=Heartbeat(lambda _msg: None),
    )
    assert "flush!" not in events and without_flush.sm_clock_mhz == ()
    assert without_flush.clock_note == "no NVML" and not any(without_flush.throttled)
