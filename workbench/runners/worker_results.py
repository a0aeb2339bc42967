"""A worker's answers as measurements: a timing (its median and interval, rates, energy and how
the samples were taken) or a fault."""

from __future__ import annotations

from typing import Any

from workbench.errors import ConfigError
from workbench.roofline.timed import rate_in_unit
from workbench.runners.base import Measurement, TrialOutcome
from workbench.runners.protocol import Timing
from workbench.runners.timing import TimingSummary, summarize
from workbench.spaces.launch import work_counts
from workbench.spaces.model import Config
from workbench.spaces.space import Space
from workbench.supervisor import WorkerFault, WorkerTimeout


def timed_measurement(
    space: Space,
    config: Config,
    timing: Timing,
    ci_level: float,
    notes: tuple[str, ...],
    **extra: Any,
) -> Measurement:
    """``config``'s timing as an OK measurement: the median of the samples with its interval at
    ``ci_level``, their statistics, rates and energy as metrics, and how they were taken (with
    the runner's ``notes``) as its reason; ``extra`` fields as given (compile time, error)."""
    summary = summarize(timing.samples_ms, timing.throttled, level=ci_level)
    metrics = {
        "mean_ms": summary.mean,
        "stdev_ms": summary.stdev,
        "rel_stderr": summary.rel_stderr,
        "ci_coverage": summary.ci_coverage,
        "samples_used": float(summary.n_used),
        "samples_throttled": float(sum(summary.throttled)),
        "warmup_launches": float(timing.warmup_launches),
        "timing_seconds": timing.seconds,
    }
    metrics.update(throughput(space, config, summary.median))
    metrics.update(energy_metrics(timing))
    clocks = tuple(float("nan") if c is None else float(c) for c in timing.sm_clock_mhz)
    return Measurement(
        outcome=TrialOutcome.OK,
        value=summary.median,
        samples=summary.samples,
        ci_low=summary.ci_low,
        ci_high=summary.ci_high,
        reason=timing_note(summary, timing, notes),
        sm_clock_mhz=clocks,
        throttled=summary.throttled,
        metrics=metrics,
        **extra,
    )


def fault_measurement(fault: WorkerFault, label: str, **extra: Any) -> Measurement:
    """A worker fault as a failed measurement: TIMEOUT for a hang, LAUNCH_FAILED otherwise."""
    hung = isinstance(fault, WorkerTimeout)
    outcome = TrialOutcome.TIMEOUT if hung else TrialOutcome.LAUNCH_FAILED
    stage = f" during {fault.stage}" if fault.stage and fault.stage not in str(fault) else ""
    restarted = "; the worker was restarted" if fault.restarted else ""
    return Measurement.failure(outcome, f"{fault}{stage} [{label}]{restarted}", **extra)


def throughput(space: Space, config: Config, median_ms: float) -> dict[str, float]:
    """Achieved rates at the median time, from the space's work model, in GB/s and TOPS
    whatever the space's unit ({} when the model fails or the time is not positive)."""
    try:
        ops, nbytes = work_counts(space, config)
    except ConfigError:
        return {}
    if not median_ms > 0:
        return {}
    seconds = median_ms * 1e-3
    return {
        "gb_per_s": rate_in_unit(ops, nbytes, seconds, "GB/s"),
        "tera_ops_per_s": rate_in_unit(ops, nbytes, seconds, "TOPS"),
    }


def energy_metrics(timing: Timing) -> dict[str, float]:
    """Joules per sample (the L2 flush before it included) and the mean power over the
    samples, from the GPU's energy counter ({} without one, or when it did not move: a
    window shorter than the counter's update period)."""
    if not timing.energy_mj or timing.energy_mj <= 0 or not timing.samples_ms:
        return {}
    joules = timing.energy_mj / 1e3
    out = {"energy_j": joules / len(timing.samples_ms)}
    if timing.sampling_seconds > 0:
        out["power_w"] = joules / timing.sampling_seconds
    return out


def timing_note(summary: TimingSummary, timing: Timing, notes: tuple[str, ...]) -> str:
    """How the samples were taken, for an OK measurement's ``reason``."""
    parts = [
        f"median of {summary.n_used} samples ({timing.stop_reason.value}, rel. stderr "
        f"{100 * summary.rel_stderr:.2f} %, {100 * summary.ci_coverage:.1f} % CI)"
    ]
    if any(summary.throttled):
        parts.append(f"{sum(summary.throttled)} throttled samples left out")
    if summary.all_throttled:
        parts.append("every sample was throttled: the median includes them")
    parts.extend(n for n in notes if n)
    return "; ".join(parts)
