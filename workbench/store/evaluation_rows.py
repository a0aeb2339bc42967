"""An evaluation as the row the ``evaluations`` table stores, written once per trial: one
prebuilt insert, and on SQLite the DB-API statement with the values encoded as SQLAlchemy's
JSON and DateTime types store them (read back by SQLAlchemy)."""

from __future__ import annotations

import datetime as dt
import json

from workbench.runners.base import Measurement
from workbench.spaces.model import Config, config_label
from workbench.store.models import Evaluation, table_of

INSERT_EVALUATION = table_of(Evaluation).insert()

_COLUMNS = (
    "study_id",
    "config_key",
    "params",
    "run_id",
    "environment_id",
    "outcome",
    "value",
    "ci_low",
    "ci_high",
    "n_samples",
    "samples",
    "sm_clock_mhz",
    "throttled",
    "reason",
    "compile_seconds",
    "verify_max_error",
    "replayed_from",
    "metrics",
    "elapsed_s",
    "created_at",
)
SQLITE_INSERT = (
    f"INSERT INTO evaluations ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
)


def _same(value: object) -> object:
    return value


def _json_or_null(value: object) -> str | None:
    return None if value is None else json.dumps(value)


#: How SQLAlchemy's JSON and DateTime types store values on SQLite (read back by SQLAlchemy).
_SQLITE_ENCODE = {
    "params": _json_or_null,
    "samples": _json_or_null,
    "sm_clock_mhz": _json_or_null,
    "throttled": _json_or_null,
    "metrics": _json_or_null,
    "created_at": lambda t: t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
}


def evaluation_row(
    study_id: int,
    run_id: int,
    environment_id: int | None,
    config: Config,
    m: Measurement,
    elapsed_s: float | None,
    now: object,
) -> dict[str, object]:
    return {
        "study_id": study_id,
        "config_key": config_label(config),
        "params": dict(config),
        "run_id": run_id,
        "environment_id": environment_id,
        "outcome": m.outcome.value,
        "value": m.value,
        "ci_low": m.ci_low,
        "ci_high": m.ci_high,
        "n_samples": len(m.samples),
        "samples": list(m.samples) or None,
        "sm_clock_mhz": list(m.sm_clock_mhz) or None,
        "throttled": list(m.throttled) or None,
        "reason": m.reason,
        "compile_seconds": m.compile_seconds,
        "verify_max_error": m.verify_max_error,
        "replayed_from": m.replayed_from,
        "metrics": dict(m.metrics) or None,
        "elapsed_s": elapsed_s,
        "created_at": now,
    }


def sqlite_values(row: dict[str, object]) -> list[object]:
    """``row``'s values for :data:`SQLITE_INSERT`, in its column order, encoded."""
    return [_SQLITE_ENCODE.get(col, _same)(row[col]) for col in _COLUMNS]
