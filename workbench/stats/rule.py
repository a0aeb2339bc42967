"""The decision rule: did one measurement of a config get faster, slower, or stay the same?

Both sides are the raw timing samples of one configuration on one problem shape (milliseconds;
throttled samples left out, as the timing summary does). A change is reported only when all
three of these hold:

1. **Significance.** A two-sided Mann-Whitney U test on the raw samples gives
   ``p < alpha`` (``alpha = 0.002``, asv's level). The test is distribution-free: kernel times
   are skewed and carry outliers, so a t-test on means would be driven by the tails.
2. **Magnitude.** The ratio of medians ``r = median(candidate) / median(baseline)`` is a
   change beyond the noise on both counts:

   a. its whole 95 % bootstrap interval clears the **floor**: ``low >= 1 + floor`` (slower) or
      ``high <= 1 / (1 + floor)`` (faster), ``floor = 2 %``. The interval is the 2.5 and 97.5
      percentiles of ``r`` over ``bootstrap`` resamplings (with replacement, fixed seed) of
      both sample sets: what two runs of the same kernel in the same state would differ by.
      A percentile interval, not a normal one: the median of a bimodal kernel (two clock
      states, two code paths) jumps between modes under resampling, and the interval widens.
      The floor (the issue's) stands for the run-to-run noise that no stored history
      measures yet: boost clocks and thermal state move medians between identical runs.
   b. ``r`` itself passes the **threshold set from the measured run-to-run noise**
      ``tau = max(floor, exp(k * history_noise) - 1)``, ``k = 3``: ``r >= 1 + tau`` or
      ``r <= 1 / (1 + tau)``. The history noise is measured when at least
      :data:`MIN_HISTORY_RUNS` earlier runs of this config and shape on this GPU are stored
      (up to and including the baseline): the root mean square of the differences
      ``log m[i] - log m[i-1]`` of their consecutive medians ``m``, the largest one left out
      when there are more than three (the mean square then divided by its expected shrinkage
      for normal differences): the standard deviation of the log ratio of two runs (a
      consecutive difference is such a log ratio; a real step in the history moves one
      difference only). It is the noise between runs that one run's samples cannot see:
      clock and thermal state, placement, other tenants, a rebooted machine. Without that
      history, ``tau`` is the floor.
3. **Clocks.** When both sides recorded the SM clock of every sample, the same two tests
   (same ``tau``) must also hold, in the same direction, on the clock-normalized samples
   ``time * clock`` (cycles, as nvbench's compare does): a change the clock explains is not
   reported as the kernel's.

Anything that fails a test is SAME.

**Many configs at once.** A check compares every (shape, config) of two runs, and each row has
its own chance of a false alarm: at k = 3 and ten runs of history, about 0.5 to 1 % per row
under run-to-run drift, so a check of 30 rows would cry wolf in one check in five or six. The
check therefore also controls the false discovery rate across its rows (Benjamini-Hochberg at
``q =`` :data:`FAMILY_Q`; when nothing changed, that is the chance of any false alarm). Each
compared row's p-value is the larger of its U test's and its **history p-value**, the
two-sided tail of ``log r / history_noise`` in Student's t with the history's degrees of
freedom (:func:`history_estimate`): ten runs estimate the noise roughly, and the t tail says
how roughly. A row without history has only its U test's. A change that the per-row rule
finds but that does not survive the family step is SAME, with a note.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: asv's significance level for Mann-Whitney U on raw samples.
ALPHA = 0.002
#: No change under this relative size is ever reported (the issue's floor).
FLOOR = 0.02
#: The threshold is this many standard deviations of the history noise of ``log r`` (the
#: estimate from ten runs is rough: at k = 3 the false-positive rate under 1 and 2 % drift was
#: 0.5 and 0.75 %; benchmarks/README.md, regress_power).
NOISE_K = 3.0
#: Fewer samples per side and the comparison is not made: the U test cannot reach ``ALPHA``
#: with fewer (the smallest two-sided p with 6 + 6 samples is 2 / 924 = 0.0022).
MIN_SAMPLES = 7
#: Up to this many samples on a side, the U test's p-value is scipy's (exact without ties).
EXACT_MAX = 8
#: Earlier runs needed before their spread is trusted as history noise (3 differences).
MIN_HISTORY_RUNS = 4
#: Bootstrap resamplings for the interval of ``r``.
BOOTSTRAP = 1000
#: Confidence level of the ratio's interval.
CI_LEVEL = 0.95
#: The MAD of a normal sample times this is its standard deviation.
MAD_TO_SIGMA = 1.4826
#: False discovery rate across the rows of one check (Benjamini-Hochberg).
FAMILY_Q = 0.05


class Verdict(enum.Enum):
    """What a check says about one (shape, config)."""

    FASTER = "faster"
    SLOWER = "slower"  #: a regression: the check exits 1
    SAME = "same"
    NOT_COMPARABLE = "not comparable"  #: different GPU or shape, missing side, too few samples
    BROKEN = "broken"  #: the candidate failed (wrong, crashed) where the baseline ran: exits 1
    FIXED = "fixed"  #: the candidate ran where the baseline failed
    #: a side's samples are so damaged (NaN, zero, negative) that too few are left to compare:
    #: the check exits 2, as for any measurement it cannot trust
    DAMAGED = "damaged"

    @property
    def fails(self) -> bool:
        """Whether this verdict makes ``workbench regress check`` exit 1."""
        return self in (Verdict.SLOWER, Verdict.BROKEN)

    @property
    def exit_status(self) -> int:
        """What this verdict makes ``workbench regress check`` exit with: 2 damaged, 1 a
        regression or a broken config, else 0 (the check exits with its rows' largest)."""
        if self is Verdict.DAMAGED:
            return 2
        return 1 if self.fails else 0


@dataclass(frozen=True)
class DecisionRule:
    """The rule's parameters (the module docstring states the rule).

    Args:
        alpha: significance level of the Mann-Whitney U test.
        floor: smallest relative change ever reported.
        noise_k: the threshold in standard deviations of the history noise.
        min_samples: fewer samples on a side and the comparison is not made.
        bootstrap: resamplings for the ratio's interval.
        seed: seed of the resamplings (a check is reproducible).
        family_q: false discovery rate across the rows of one check.
    """

    alpha: float = ALPHA
    floor: float = FLOOR
    noise_k: float = NOISE_K
    min_samples: int = MIN_SAMPLES
    bootstrap: int = BOOTSTRAP
    seed: int = 0
    family_q: float = FAMILY_Q

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if not 0 < self.family_q <= 1:
            raise ValueError(f"family_q must be in (0, 1], got {self.family_q}")
        if self.floor < 0 or self.noise_k < 0:
            raise ValueError("floor and noise_k must be >= 0")
        if self.min_samples < 2 or self.bootstrap < 100:
            raise ValueError("min_samples must be >= 2 and bootstrap >= 100")

    def threshold(self, history: float | None) -> float:
        """``tau = max(floor, exp(k * history) - 1)``; ``history`` is the standard deviation of
        ``log r`` between runs (None: no history, ``tau = floor``)."""
        return max(self.floor, math.expm1(self.noise_k * (history or 0.0)))


@dataclass(frozen=True)
class Evidence:
    """What one of the tests saw on one scale (time, or cycles)."""

    ratio: float  #: median(candidate) / median(baseline)
    ci_low: float  #: 95 % bootstrap interval of ``ratio``
    ci_high: float
    p_value: float  #: two-sided Mann-Whitney U
    sampling_noise: float  #: bootstrap standard deviation of log(ratio), for display
    threshold: float  #: tau (the floor, or k history deviations when larger)
    direction: int  #: +1 slower, -1 faster, 0 no change (all tests considered)


@dataclass(frozen=True)
class SampleComparison:
    """The rule's answer for one pair of sample sets."""

    verdict: Verdict
    time: Evidence | None
    cycles: Evidence | None  #: None when either side lacks per-sample clocks
    history_noise: float | None
    note: str = ""


@dataclass(frozen=True)
class HistoryNoise:
    """Run-to-run noise measured from stored runs, and how many numbers it rests on."""

    sigma: float  #: standard deviation of ``log r`` between two runs
    df: int  #: degrees of freedom of the estimate (the consecutive differences it keeps)


def history_estimate(medians: Sequence[float]) -> HistoryNoise | None:
    """Run-to-run noise of ``log`` median ratios from consecutive stored runs.

    Args:
        medians: the medians of earlier runs of one config and shape on one GPU, oldest first.

    Returns:
        The RMS of ``diff(log m)`` without its largest magnitude (kept with three or fewer),
        with its degrees of freedom, or None with fewer than :data:`MIN_HISTORY_RUNS`
        positive medians.
    """
    logs = np.log([m for m in medians if m is not None and m > 0 and math.isfinite(m)])
    if len(logs) < MIN_HISTORY_RUNS:
        return None
    # RMS, not 1.4826 * MAD: the MAD has 37 % of the standard deviation's efficiency on normal
    # data, and from ten runs its scatter cost detection at equal false-positive rate in the
    # power benchmark (scenario B); leaving the largest out keeps one real step from inflating it.
    diffs = np.sort(np.abs(np.diff(logs)))
    if len(diffs) <= 3:
        return HistoryNoise(float(np.sqrt(np.mean(diffs**2))), len(diffs))
    sigma = np.sqrt(np.mean(diffs[:-1] ** 2) / _trimmed_mean_square(len(diffs)))
    return HistoryNoise(float(sigma), len(diffs) - 1)


def history_noise(medians: Sequence[float]) -> float | None:
    """:func:`history_estimate`'s standard deviation alone (None without enough runs)."""
    estimate = history_estimate(medians)
    return estimate.sigma if estimate else None


def history_p_value(ratio: float, noise: HistoryNoise | None) -> float | None:
    """Two-sided ``P(|T| >= |log r| / sigma)``, T Student's t with the history's degrees of
    freedom: how often two runs with no change between them differ as much (None: no history).
    """
    if noise is None or noise.sigma <= 0:
        return None
    from scipy.stats import t  # imported here: see _trimmed_mean_square

    return float(2.0 * t.sf(abs(math.log(ratio)) / noise.sigma, noise.df))


def family_discoveries(p_values: Sequence[float], q: float = FAMILY_Q) -> list[bool]:
    """Benjamini-Hochberg: which of these p-values are discoveries at false discovery rate q.

    The largest ``k`` with ``p_(k) <= k q / m`` (p sorted ascending) rejects the ``k``
    smallest. With no real change among the ``m``, the chance of any discovery is at most q.
    """
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")
    passed = [k for k in range(1, m + 1) if p_values[order[k - 1]] <= k * q / m]
    out = [False] * m
    for i in order[: max(passed, default=0)]:
        out[int(i)] = True
    return out


@functools.lru_cache(maxsize=128)
def _trimmed_mean_square(n: int) -> float:
    """Mean of the ``n - 1`` smallest of ``n`` squared standard normals, in expectation:
    ``(n - E[max]) / (n - 1)``, with ``E[max] = integral of 1 - P(Z^2 <= x)^n`` (0.69 for
    ``n = 10``). Dividing by it unbiases the trimmed mean square."""
    from scipy.integrate import quad  # imported here: scipy costs ~1 s at CLI start-up

    e_max, _ = quad(lambda x: 1.0 - math.erf(math.sqrt(x / 2.0)) ** n, 0.0, math.inf)
    return (n - e_max) / (n - 1)


def compare_samples(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    *,
    baseline_clock: Sequence[float] | None = None,
    candidate_clock: Sequence[float] | None = None,
    history: float | None = None,
    rule: DecisionRule | None = None,
) -> SampleComparison:
    """Apply the decision rule to two sets of raw samples of one config.

    Args:
        baseline: baseline samples (ms), throttled ones already left out.
        candidate: candidate samples (ms), likewise.
        baseline_clock: the SM clock (MHz) of each baseline sample, or None/empty.
        candidate_clock: the SM clock of each candidate sample, or None/empty.
        history: run-to-run noise of ``log r`` from stored history (:func:`history_noise`).
        rule: the rule's parameters (defaults: :class:`DecisionRule`).

    Returns:
        The verdict with the evidence on the time scale and, when both sides carry clocks,
        on the cycle scale.

    Raises:
        ValueError: a sample is not a positive finite number, or clocks do not match samples.
    """
    rule = rule or DecisionRule()
    base, cand = _positive(baseline, "baseline"), _positive(candidate, "candidate")
    if min(len(base), len(cand)) < rule.min_samples:
        return SampleComparison(
            Verdict.NOT_COMPARABLE,
            None,
            None,
            history,
            f"too few samples ({len(base)} and {len(cand)}; {rule.min_samples} needed per side)",
        )
    rng = np.random.default_rng(rule.seed)
    time = _evidence(base, cand, history, rule, rng)
    cycles = None
    bc, cc = _clocks(baseline_clock, len(base)), _clocks(candidate_clock, len(cand))
    if bc is not None and cc is not None:
        cycles = _evidence(base * bc, cand * cc, history, rule, np.random.default_rng(rule.seed))
    if time.direction == 0:
        return SampleComparison(Verdict.SAME, time, cycles, history)
    if cycles is not None and cycles.direction != time.direction:
        note = (
            f"the time changed by {100 * (time.ratio - 1):+.1f}% but cycles by "
            f"{100 * (cycles.ratio - 1):+.1f}%: the SM clock explains the change"
        )
        return SampleComparison(Verdict.SAME, time, cycles, history, note)
    verdict = Verdict.SLOWER if time.direction > 0 else Verdict.FASTER
    return SampleComparison(verdict, time, cycles, history)


def _evidence(
    base: np.ndarray,
    cand: np.ndarray,
    history: float | None,
    rule: DecisionRule,
    rng: np.random.Generator,
) -> Evidence:
    ratio = float(np.median(cand) / np.median(base))
    log_ratios = _bootstrap_log_ratios(base, cand, rule.bootstrap, rng)
    tail = (1.0 - CI_LEVEL) / 2.0
    low, high = (float(v) for v in np.exp(np.quantile(log_ratios, [tail, 1.0 - tail])))
    tau = rule.threshold(history)
    p = _mann_whitney_p(base, cand)
    direction = 0
    if p < rule.alpha:
        floor = 1.0 + rule.floor
        if low >= floor and ratio >= 1.0 + tau:
            direction = 1
        elif high <= 1.0 / floor and ratio <= 1.0 / (1.0 + tau):
            direction = -1
    sampling = float(np.std(log_ratios, ddof=1))
    return Evidence(ratio, low, high, p, sampling, tau, direction)


def _mann_whitney_p(base: np.ndarray, cand: np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value.

    Up to :data:`EXACT_MAX` samples on a side: scipy's (exact without ties). Beyond: the
    tie-corrected normal approximation with continuity correction, which is scipy's
    ``method="asymptotic"`` computed directly (scipy's call costs ~7 ms of argument handling,
    which the power benchmark pays tens of thousands of times; a test pins the equality).
    """
    if np.all(base == base[0]) and np.all(cand == base[0]):
        return 1.0  # identical constants: scipy warns and returns nan
    n1, n2 = len(cand), len(base)
    if min(n1, n2) <= EXACT_MAX:
        from scipy.stats import mannwhitneyu  # imported here: see above

        return float(mannwhitneyu(cand, base, alternative="two-sided", method="auto").pvalue)
    _, inverse, counts = np.unique(
        np.concatenate([cand, base]), return_inverse=True, return_counts=True
    )
    average_rank = np.cumsum(counts) - (counts - 1) / 2.0
    u1 = float(np.sum(average_rank[inverse[:n1]])) - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    ties = float(np.sum(counts.astype(float) ** 3 - counts))
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))))
    if sigma == 0:
        return 1.0
    z = (max(u1, n1 * n2 - u1) - n1 * n2 / 2.0 - 0.5) / sigma
    return min(1.0, math.erfc(z / math.sqrt(2.0)))


def _bootstrap_log_ratios(
    base: np.ndarray, cand: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """``log(median(cand*) / median(base*))`` over ``n`` resamplings, in chunks of bounded size."""
    out = np.empty(n)
    chunk = max(1, 2_000_000 // max(len(base), len(cand)))
    sorted_base, sorted_cand = np.sort(base), np.sort(cand)
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        mb = _resampled_medians(sorted_base, k, rng)
        mc = _resampled_medians(sorted_cand, k, rng)
        out[start : start + k] = np.log(mc / mb)
    return out


def _resampled_medians(sorted_x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``k`` resamplings of ``sorted_x``: as ``sorted_x`` is ascending, the middle
    order statistics of a resampling are those of its sorted indices (no float sort needed)."""
    n = len(sorted_x)
    idx = rng.integers(0, n, (k, n), dtype=np.int32)
    idx.sort(axis=1)
    return 0.5 * (sorted_x[idx[:, (n - 1) // 2]] + sorted_x[idx[:, n // 2]])


def intact_samples(
    samples: Sequence[float], clocks: Sequence[float] = ()
) -> tuple[tuple[float, ...], tuple[float, ...], int]:
    """The samples that are times (positive finite numbers), the clocks of those samples
    (``clocks`` is empty or one per sample), and how many samples were not times.

    A NaN, zero or negative sample is a fault of the timer or the store, not a fast launch:
    left in, it makes :func:`compare_samples` refuse the whole set.
    """
    keep = [i for i, s in enumerate(samples) if _is_time(s)]
    kept_clocks = tuple(clocks[i] for i in keep) if len(clocks) == len(samples) else ()
    return tuple(samples[i] for i in keep), kept_clocks, len(samples) - len(keep)


def _is_time(sample: float) -> bool:
    return math.isfinite(sample) and sample > 0


def _positive(samples: Sequence[float] | np.ndarray, side: str) -> np.ndarray:
    values = np.asarray(samples, dtype=float)
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"{side} samples must be positive finite times")
    return values


def _clocks(clock: Sequence[float] | None, n: int) -> np.ndarray | None:
    """Per-sample clocks when every sample has a positive one, else None."""
    if clock is None or len(clock) == 0:
        return None
    values = np.asarray(clock, dtype=float)
    if len(values) != n:
        raise ValueError(f"{len(values)} clock readings for {n} samples")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        return None
    return values
