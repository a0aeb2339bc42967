"""Regression runs in the store: write one run with every raw sample, read runs back.

A regression run is one ``workbench regress record``: for each problem shape, the tracked
configs of one kernel measured once (or replayed from a recording, and labelled so), with the
environment they ran in. Tables: ``regress_runs`` and ``regress_measurements``
(:mod:`workbench.store.models`). Everything read back is checked: a damaged row is a
:class:`~workbench.store.StoreError` naming the row, never a traceback.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select

from workbench.errors import WorkbenchError
from workbench.runners.base import Measurement, TrialOutcome
from workbench.runners.timing import summarize, used_samples
from workbench.spaces.model import Config, config_label
from workbench.store import Store
from workbench.store.environments import EnvironmentInfo, environment_info
from workbench.store.models import Environment, RegressMeasurement, RegressRun


class RegressError(WorkbenchError):
    """A regression command cannot do what was asked (no such run, no baseline, ...)."""


class MissingBaselineError(RegressError):
    """The candidate has no earlier run to compare with (the first run of a kernel)."""


#: A change of one of these can move the best config: a regression after it suggests re-tuning.
RETUNE_FIELDS = frozenset({"gpu_name", "driver", "cuda", "toolkit"})


UNKNOWN_ENVIRONMENT = EnvironmentInfo(id=None, gpu_name="unknown GPU")


@dataclass(frozen=True)
class RunInfo:
    """A regression run as read back from the store."""

    id: int
    kernel: str
    label: str | None
    created_at: dt.datetime
    environment: EnvironmentInfo
    replayed_from: str | None
    shape_set: str | None

    def describe(self) -> str:
        """``run 7 'nightly' (2026-01-03 10:22, replayed from ...)``."""
        label = f" {self.label!r}" if self.label else ""
        replay = f", replayed from {self.replayed_from}" if self.replayed_from else ""
        return f"run {self.id}{label} ({self.created_at:%Y-%m-%d %H:%M}{replay})"


@dataclass(frozen=True)
class MeasurementRecord:
    """One config on one shape in a run: every raw sample, and the summary."""

    shape_label: str
    config_key: str
    params: Mapping[str, object]
    origin: str  #: best (from a tune study), default (the space's), previous, recorded-best
    outcome: TrialOutcome
    reason: str = ""
    median: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    samples: tuple[float, ...] = ()
    sm_clock_mhz: tuple[float, ...] = ()
    throttled: tuple[bool, ...] = ()
    replayed_from: str | None = None
    shape: Mapping[str, int] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.shape_label, self.config_key)

    def used(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The samples (and their clocks, empty when not recorded for every sample) that the
        comparison uses: the unthrottled ones, or all when every one was throttled."""
        return used_samples(self.samples, self.throttled, self.sm_clock_mhz)

    @classmethod
    def from_measurement(
        cls,
        shape_label: str,
        config: Config,
        origin: str,
        m: Measurement,
        shape: Mapping[str, int] | None = None,
    ) -> MeasurementRecord:
        """Summarize a runner's measurement (median and its 95 % interval from the samples).

        Args:
            shape_label: the problem shape's key.
            config: the configuration measured.
            origin: why it was measured.
            m: the measurement (live or replayed).
            shape: the problem shape, when known.

        Returns:
            The record to store.
        """
        median, low, high = m.value, m.ci_low, m.ci_high
        samples = tuple(float(s) for s in m.samples)
        if m.outcome is TrialOutcome.OK and samples:
            flags = m.throttled if len(m.throttled) == len(samples) else None
            summary = summarize(samples, flags)
            median, low, high = summary.median, summary.ci_low, summary.ci_high
        return cls(
            shape_label=shape_label,
            config_key=config_label(config),
            params=dict(config),
            origin=origin,
            outcome=m.outcome,
            reason=m.reason,
            median=median,
            ci_low=low,
            ci_high=high,
            samples=samples,
            sm_clock_mhz=tuple(float(c) for c in m.sm_clock_mhz),
            throttled=tuple(bool(t) for t in m.throttled),
            replayed_from=m.replayed_from,
            shape=dict(shape) if shape else None,
        )


def save_run(
    store: Store,
    *,
    kernel: str,
    environment_id: int | None,
    measurements: Sequence[MeasurementRecord],
    label: str | None = None,
    shape_set: str | None = None,
    replayed_from: str | None = None,
    command: str | None = None,
) -> int:
    """Store one regression run and all its measurements in one transaction.

    Args:
        store: the open store.
        kernel: the kernel (with its pinned variant, as tune names it).
        environment_id: from :meth:`Store.environment`.
        measurements: one per (shape, config); keys must be unique.
        label: a free text label (``nightly``, ``driver-550``).
        shape_set: the named shape set measured, if any.
        replayed_from: the recording, when nothing was measured live.
        command: the command line.

    Returns:
        The new run's id.

    Raises:
        RegressError: two measurements share a (shape, config).
        StoreError: the database failed.
    """
    keys = [m.key for m in measurements]
    if len(set(keys)) != len(keys):
        raise RegressError(f"{kernel}: a (shape, config) is measured twice in one run")
    with store.session() as s:
        run = RegressRun(
            kernel=kernel,
            label=label,
            environment_id=environment_id,
            shape_set=shape_set,
            replayed_from=replayed_from,
            command=command,
        )
        s.add(run)
        s.flush()
        for m in measurements:
            s.add(_row(run.id, m))
        return run.id


def _row(run_id: int, m: MeasurementRecord) -> RegressMeasurement:
    return RegressMeasurement(
        run_id=run_id,
        shape_label=m.shape_label,
        shape=dict(m.shape) if m.shape else None,
        config_key=m.config_key,
        params=dict(m.params),
        origin=m.origin,
        outcome=m.outcome.value,
        reason=m.reason,
        median=m.median,
        ci_low=m.ci_low,
        ci_high=m.ci_high,
        n_samples=len(m.samples),
        samples=list(m.samples) or None,
        sm_clock_mhz=list(m.sm_clock_mhz) or None,
        throttled=list(m.throttled) or None,
        replayed_from=m.replayed_from,
    )


def kernel_matches(stored: str, wanted: str) -> bool:
    """``reduce`` matches ``reduce`` and its pinned variants (``reduce[OP=max]``)."""
    return stored == wanted or stored.startswith(wanted + "[")


def list_runs(store: Store, kernel: str | None = None) -> list[RunInfo]:
    """Regression runs, oldest first (of ``kernel`` and its variants when given).

    Raises:
        StoreError: the store is damaged.
    """
    with store.reading("regress_runs"), store.session() as s:
        rows = s.execute(
            select(RegressRun, Environment)
            .outerjoin(Environment, RegressRun.environment_id == Environment.id)
            .order_by(RegressRun.created_at, RegressRun.id)
        ).all()
        runs = [_run_info(run, env) for run, env in rows]
    return [r for r in runs if kernel is None or kernel_matches(r.kernel, kernel)]


def run_measurements(store: Store, run_ids: Sequence[int]) -> dict[int, list[MeasurementRecord]]:
    """The measurements of these runs, by run id (in the order they were stored).

    Raises:
        StoreError: the store is damaged (a row names what is wrong).
    """
    out: dict[int, list[MeasurementRecord]] = {i: [] for i in run_ids}
    if not run_ids:
        return out
    with store.reading("regress_measurements"), store.session() as s:
        rows = s.scalars(
            select(RegressMeasurement)
            .where(RegressMeasurement.run_id.in_(list(run_ids)))
            .order_by(RegressMeasurement.id)
        ).all()
        for row in rows:
            out[row.run_id].append(_measurement(row))
    return out


def _run_info(run: RegressRun, env: Environment | None) -> RunInfo:
    created = run.created_at
    if not isinstance(created, dt.datetime):
        raise ValueError(f"regress_runs row {run.id}: created_at is {created!r}")
    return RunInfo(
        id=run.id,
        kernel=str(run.kernel),
        label=run.label,
        created_at=created,
        environment=environment_info(env) if env is not None else UNKNOWN_ENVIRONMENT,
        replayed_from=run.replayed_from,
        shape_set=run.shape_set,
    )


def _measurement(row: RegressMeasurement) -> MeasurementRecord:
    where = f"regress_measurements row {row.id}"
    samples = _numbers(row.samples, where, "samples")
    clocks = _numbers(row.sm_clock_mhz, where, "sm_clock_mhz")
    throttled = row.throttled or []
    if not isinstance(throttled, list):
        raise ValueError(f"{where}: throttled is not a list")
    if not isinstance(row.params, dict):
        raise ValueError(f"{where}: params is not an object")
    outcome = TrialOutcome(row.outcome)
    if outcome is TrialOutcome.OK and not (
        isinstance(row.median, int | float) and math.isfinite(row.median) and row.median > 0
    ):
        raise ValueError(f"{where}: an ok measurement with median {row.median!r}")
    return MeasurementRecord(
        shape_label=str(row.shape_label),
        config_key=str(row.config_key),
        params=row.params,
        origin=str(row.origin),
        outcome=outcome,
        reason=row.reason or "",
        median=row.median,
        ci_low=row.ci_low,
        ci_high=row.ci_high,
        samples=samples,
        sm_clock_mhz=clocks,
        throttled=tuple(bool(t) for t in throttled),
        replayed_from=row.replayed_from,
        shape=row.shape if isinstance(row.shape, dict) else None,
    )


def _numbers(value: object, where: str, column: str) -> tuple[float, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"{where}: {column} is not a list of numbers")
    return tuple(float(v) for v in value)
