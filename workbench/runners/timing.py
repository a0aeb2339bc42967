"""When to stop timing a kernel, and what the samples say: a noise-based stopping rule and a
robust summary (median with a distribution-free confidence interval).

The rule follows nvbench's ``stdrel`` criterion (``nvbench/detail/stdrel_criterion.cxx``):
named, defaulted parameters; at least ``min_samples`` samples and ``min_time_s`` of measured
time; stop when the noise is below ``max_noise``; give up at a sample count or wall-time cap.
Two differences, both deliberate:

- the default noise statistic is the **relative standard error of the mean**
  (``stdev / (mean * sqrt(n))``), not nvbench's relative standard deviation. The standard
  deviation of a kernel's time is a property of the kernel and the GPU and does not shrink
  with more samples, so a kernel with 1 % jitter never reaches nvbench's 0.5 % and runs to the
  timeout (nvbench added a "noise has converged" escape for that case). The standard error
  measures how well the samples pin the typical time down, which is what a search compares.
  ``Noise.REL_STDEV`` gives nvbench's statistic.
- the time budget is scaled down for a search, where one evaluation should cost about as much
  as a compile (FACTS.md: ~10 ms kernel evaluations), not nvbench's 0.5 s minimum and 15 s cap.

Throttled samples (SM clock below ``THROTTLE_FRACTION`` of the maximum, as nvbench's
``--throttle-threshold``) are kept but left out of the noise, the median and its interval.
"""

from __future__ import annotations

import bisect
import enum
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

#: nvbench's ``--min-samples`` default: fewer samples say little about the spread.
MIN_SAMPLES = 10
#: nvbench's ``--max-noise`` default (0.5 %); here applied to the relative standard error.
MAX_NOISE = 0.005
#: At least this much measured kernel time (s): ten samples of a 2 µs kernel are 20 µs of
#: evidence, too little to see slow drifts (clock ramps, other tenants).
MIN_TIME_S = 0.01
#: Wall-time cap per configuration (s), flushes and synchronisation included: a search must
#: move on from a noisy config (nvbench's cap is 15 s per benchmark, not per search point).
MAX_TIME_S = 2.0
#: Sample cap: at a thousand samples the median's 95 % interval spans ranks 469 to 532, and
#: more samples only cost time.
MAX_SAMPLES = 1000
#: nvbench's ``--throttle-threshold`` default: a sample taken below 75 % of the maximum SM
#: clock is throttled.
THROTTLE_FRACTION = 0.75
#: Confidence level of the median's interval.
CI_LEVEL = 0.95
#: Warm-up before timing (s of wall time and a minimum launch count): Triton's ``do_bench``
#: warms up for 25 ms; the first launch of a module also pays for lazy loading.
WARMUP_S = 0.025
WARMUP_MIN_LAUNCHES = 2


class Noise(enum.Enum):
    """Which relative spread the stopping rule compares with ``max_noise``."""

    REL_STDERR = "rel_stderr"  #: stdev / (mean * sqrt(n)): precision of the mean
    REL_STDEV = "rel_stdev"  #: stdev / mean: nvbench's stdrel criterion
    #: half-width of the median's distribution-free CI / median: precision of the reported
    #: value itself, and blind to rare outliers (one 10x sample among 20 keeps the standard
    #: error above 0.5 % for about two thousand samples; it moves the median's interval by at
    #: most one rank)
    MEDIAN_CI = "median_ci"


class TimingStopReason(enum.Enum):
    """Why a timing loop ended."""

    CONVERGED = "converged"  #: enough samples, enough time, noise below the threshold
    MAX_SAMPLES = "max_samples"
    TIME_CAP = "time_cap"


@dataclass(eq=False)
class StoppingRule:
    """Decides when enough samples have been taken: ``reset()``, then ``add()`` each sample
    until ``done()``.

    Args:
        min_samples: unthrottled samples needed before the noise can stop the loop.
        max_noise: stop once the noise (see ``noise``) is below this fraction.
        noise: the statistic compared with ``max_noise``.
        min_time_s: measured time (sum of samples) needed before the noise can stop the loop.
        max_time_s: wall time after ``reset()`` at which the loop stops regardless.
        max_samples: sample count (throttled ones included) at which the loop stops regardless.
        clock: the wall clock (seconds) that ``max_time_s`` is measured with.
    """

    min_samples: int = MIN_SAMPLES
    max_noise: float = MAX_NOISE
    noise: Noise = Noise.REL_STDERR
    min_time_s: float = MIN_TIME_S
    max_time_s: float = MAX_TIME_S
    max_samples: int = MAX_SAMPLES
    clock: Callable[[], float] = time.perf_counter
    _count: int = field(default=0, init=False, repr=False)
    _used: int = field(default=0, init=False, repr=False)
    _mean: float = field(default=0.0, init=False, repr=False)
    _m2: float = field(default=0.0, init=False, repr=False)
    _total_ms: float = field(default=0.0, init=False, repr=False)
    _sorted: list[float] = field(default_factory=list, init=False, repr=False)
    _started: float = field(default=0.0, init=False, repr=False)
    _reason: TimingStopReason | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_samples < 2:
            raise ValueError("min_samples must be at least 2 (a spread needs two samples)")
        if self.max_samples < self.min_samples:
            raise ValueError("max_samples must be at least min_samples")
        if not self.max_noise > 0 or not self.max_time_s > 0 or self.min_time_s < 0:
            raise ValueError("max_noise and max_time_s must be positive, min_time_s >= 0")
        self.reset()

    def clone(self) -> StoppingRule:
        """A fresh rule with the same parameters."""
        return replace(self)

    def reset(self) -> None:
        """Forget every sample and restart the wall clock."""
        self._count = self._used = 0
        self._mean = self._m2 = self._total_ms = 0.0
        self._sorted = []
        self._reason = None
        self._started = self.clock()

    def add(self, sample_ms: float, *, throttled: bool = False) -> None:
        """Record one sample in milliseconds; a throttled one counts toward the caps only.

        Raises:
            ValueError: the sample is negative or not finite.
        """
        if not math.isfinite(sample_ms) or sample_ms < 0:
            raise ValueError(f"a sample must be a finite time >= 0, got {sample_ms!r}")
        self._count += 1
        self._total_ms += sample_ms
        if throttled:
            return
        self._used += 1  # Welford's update: one pass, no catastrophic cancellation
        delta = sample_ms - self._mean
        self._mean += delta / self._used
        self._m2 += delta * (sample_ms - self._mean)
        if self.noise is Noise.MEDIAN_CI:
            bisect.insort(self._sorted, sample_ms)

    @property
    def count(self) -> int:
        """Samples added since ``reset()``, throttled ones included."""
        return self._count

    @property
    def current_noise(self) -> float:
        """The noise statistic of the unthrottled samples (inf with fewer than two)."""
        if self._used < 2 or self._mean <= 0:
            return math.inf
        if self.noise is Noise.MEDIAN_CI:
            ci = median_interval(self._used)
            low, high = self._sorted[ci.low_rank], self._sorted[ci.high_rank]
            median = _median_of_sorted(self._sorted)
            return 0.5 * (high - low) / median if median > 0 else math.inf
        rel_stdev = math.sqrt(self._m2 / (self._used - 1)) / self._mean
        if self.noise is Noise.REL_STDEV:
            return rel_stdev
        return rel_stdev / math.sqrt(self._used)

    def done(self) -> bool:
        """True once the loop should stop; ``stop_reason`` then says why."""
        if self._reason is not None:
            return True
        if (
            self._used >= self.min_samples
            and self._total_ms >= self.min_time_s * 1e3
            and self.current_noise < self.max_noise
        ):
            self._reason = TimingStopReason.CONVERGED
        elif self._count >= self.max_samples:
            self._reason = TimingStopReason.MAX_SAMPLES
        elif self._count > 0 and self.clock() - self._started >= self.max_time_s:
            self._reason = TimingStopReason.TIME_CAP
        return self._reason is not None

    @property
    def stop_reason(self) -> TimingStopReason | None:
        """Why ``done()`` returned True (None while the loop should go on)."""
        return self._reason


@dataclass(frozen=True, eq=False)
class TimingOptions:
    """How the runner times one configuration.

    Args:
        rule: the stopping rule (cloned for every configuration).
        warmup_s: wall time of launches before the first sample.
        warmup_min_launches: launches before the first sample, at least.
        flush_l2: write a buffer larger than L2 before every sample (cold-cache timing).
        throttle_fraction: a sample below this fraction of the maximum SM clock is throttled.
        ci_level: confidence level of the median's interval.
    """

    rule: StoppingRule = field(default_factory=StoppingRule)
    warmup_s: float = WARMUP_S
    warmup_min_launches: int = WARMUP_MIN_LAUNCHES
    flush_l2: bool = True
    throttle_fraction: float = THROTTLE_FRACTION
    ci_level: float = CI_LEVEL


def is_throttled(
    clock_mhz: float | None, max_clock_mhz: float | None, fraction: float = THROTTLE_FRACTION
) -> bool:
    """Whether a sample taken at ``clock_mhz`` is throttled (False when either is unknown)."""
    if clock_mhz is None or not max_clock_mhz or math.isnan(clock_mhz):
        return False
    return clock_mhz < fraction * max_clock_mhz


@dataclass(frozen=True)
class MedianInterval:
    """0-based ranks into the sorted samples bounding the median, and the true coverage."""

    low_rank: int
    high_rank: int
    coverage: float


@functools.lru_cache(maxsize=4096)
def median_interval(n: int, level: float = CI_LEVEL) -> MedianInterval:
    """The narrowest symmetric order-statistic interval for the median with coverage >= level.

    Distribution-free: the count of samples below the true median is Binomial(n, 1/2), so
    ``[x_(k), x_(n+1-k)]`` (1-based) covers it with probability ``1 - 2 P(B <= k - 1)``. With
    too few samples for ``level`` (n <= 5 at 95 %) the interval is the whole range, and
    ``coverage`` says how much less than ``level`` it is.

    Raises:
        ValueError: ``n < 1`` or ``level`` not in (0, 1).
    """
    if n < 1:
        raise ValueError("the median of no samples has no interval")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    log_half_n = -n * math.log(2.0)
    tail = 0.0  # P(B <= k - 1)
    best = MedianInterval(0, n - 1, 1.0 - 2.0 * math.exp(log_half_n) if n > 1 else 0.0)
    for k in range(1, (n + 1) // 2 + 1):
        # move from k to k + 1: the tail gains P(B = k - 1)
        tail += math.exp(_log_comb(n, k - 1) + log_half_n)
        coverage = 1.0 - 2.0 * tail
        if coverage < level:
            break
        best = MedianInterval(k - 1, n - k, coverage)
    return best


def _median_of_sorted(values: Sequence[float]) -> float:
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def used_samples(
    samples: Sequence[float], throttled: Sequence[bool], clocks: Sequence[float]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The samples a summary rests on, as :func:`summarize` picks them (the unthrottled ones,
    or all when every one was throttled), and their SM clocks (empty unless every sample has
    one). Flags of another length than the samples count as none."""
    flags = throttled if len(throttled) == len(samples) else ()
    keep = [i for i, t in enumerate(flags) if not t]
    if not keep:
        keep = list(range(len(samples)))
    clocks = clocks if len(clocks) == len(samples) else ()
    return (
        tuple(samples[i] for i in keep),
        tuple(clocks[i] for i in keep) if clocks else (),
    )


@dataclass(frozen=True)
class TimingSummary:
    """What a series of samples says. Every statistic is over the unthrottled samples, unless
    all were throttled (``all_throttled``): then over all of them."""

    samples: tuple[float, ...]
    throttled: tuple[bool, ...]
    median: float
    ci_low: float
    ci_high: float
    ci_coverage: float
    mean: float
    stdev: float
    rel_stderr: float
    n_used: int
    all_throttled: bool

    @property
    def n(self) -> int:
        return len(self.samples)


def summarize(
    samples: Sequence[float], throttled: Sequence[bool] | None = None, *, level: float = CI_LEVEL
) -> TimingSummary:
    """Median, its confidence interval, mean and spread of ``samples`` (ms).

    Raises:
        ValueError: no samples, or ``throttled`` of another length.
    """
    values = tuple(float(s) for s in samples)
    flags = tuple(bool(t) for t in throttled) if throttled is not None else (False,) * len(values)
    if not values:
        raise ValueError("no samples to summarize")
    if len(flags) != len(values):
        raise ValueError(f"{len(flags)} throttle flags for {len(values)} samples")
    used = sorted(v for v, t in zip(values, flags, strict=True) if not t)
    all_throttled = not used
    if all_throttled:
        used = sorted(values)
    n = len(used)
    median = _median_of_sorted(used)
    ci = median_interval(n, level)
    mean = math.fsum(used) / n
    stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in used) / (n - 1)) if n > 1 else 0.0
    rel_stderr = stdev / (mean * math.sqrt(n)) if n > 1 and mean > 0 else math.inf
    return TimingSummary(
        samples=values,
        throttled=flags,
        median=median,
        ci_low=used[ci.low_rank],
        ci_high=used[ci.high_rank],
        ci_coverage=ci.coverage,
        mean=mean,
        stdev=stdev,
        rel_stderr=rel_stderr,
        n_used=n,
        all_throttled=all_throttled,
    )
