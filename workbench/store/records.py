"""What the store gives back: a study, an evaluation, a run, as the tuner and the reports see
them, and how they are read from their rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from workbench.runners.base import Measurement, TrialOutcome
from workbench.spaces.model import Config, Value
from workbench.store.mapping import record_from_row
from workbench.store.models import Evaluation, Study

#: Device key of studies that hold compile results only (``workbench compile --storage``,
#: ``tune`` without a GPU): ``compile only (sm_90)``.
COMPILE_ONLY = "compile only"


@dataclass(frozen=True)
class StudyInfo:
    """A study as the tuner and the reports see it."""

    id: int
    name: str
    kernel: str
    shape_label: str
    device_key: str
    arch: str | None
    parameters: tuple[tuple[str, tuple[Value, ...]], ...]
    objective: str
    unit: str
    replay_source: str | None
    recorded_optimum: float | None
    work: Mapping[str, object] | None
    replay_note: str | None = None  #: the recording reader's note (another objective, cut short)
    space_path: str | None = None  #: the space file searched (None: a recorded space)
    space_sha256: str | None = None  #: its hash (with the kernel source's) when tuned

    @property
    def compile_only(self) -> bool:
        """Compile results only: nothing of the study ran (no time, no best config)."""
        return self.device_key.startswith(COMPILE_ONLY)


@dataclass(frozen=True)
class StoredEvaluation:
    """An evaluation read back from the store."""

    sequence: int
    config: Config
    measurement: Measurement
    run_id: int
    elapsed_s: float | None
    #: when it was stored (a replayed value was measured earlier: see ``replayed_from``)
    created_at: dt.datetime | None = None


@dataclass(frozen=True)
class RunSummary:
    """One run of a study (a tune, a worker, an import) and how many evaluations it stored."""

    id: int
    kind: str
    sampler: str | None
    seed: int | None
    status: str
    evaluations: int
    #: seconds per phase of its wall time (None: not recorded, e.g. a run before schema 5)
    phases: dict[str, float] | None = None


def study_name(kernel: str, shape_label: str, device_key: str) -> str:
    """The default study name: one study per (kernel, shape, device)."""
    return f"{kernel} | {shape_label} | {device_key}"


def stored_evaluation(sequence: int, ev: Evaluation, with_samples: bool) -> StoredEvaluation:
    m = Measurement(
        outcome=TrialOutcome(ev.outcome),
        value=ev.value,
        samples=tuple(ev.samples or ()) if with_samples else (),
        ci_low=ev.ci_low,
        ci_high=ev.ci_high,
        reason=ev.reason,
        sm_clock_mhz=tuple(ev.sm_clock_mhz or ()) if with_samples else (),
        throttled=tuple(ev.throttled or ()) if with_samples else (),
        compile_seconds=ev.compile_seconds,
        verify_max_error=ev.verify_max_error,
        replayed_from=ev.replayed_from,
        metrics=ev.metrics or {},
    )
    return StoredEvaluation(
        sequence, dict(ev.params), m, ev.run_id, ev.elapsed_s, _aware(ev.created_at)
    )


def _aware(when: dt.datetime | None) -> dt.datetime | None:
    """SQLite gives naive datetimes back; every stored time is UTC."""
    return when.replace(tzinfo=dt.timezone.utc) if when and when.tzinfo is None else when


def study_info(row: Study) -> StudyInfo:
    parameters = tuple((n, tuple(v)) for n, v in row.parameters)
    return record_from_row(StudyInfo, row, parameters=parameters)
