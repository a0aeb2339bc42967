"""Getting results out of the store and recorded spaces into it.

Exports: a pandas DataFrame (one row per evaluation, one column per parameter), CSV, Parquet,
and the Kernel Tuner cache format (so Kernel Tuner can replay what the workbench measured).
Imports: any recording :func:`~workbench.runners.recordings.load_recording` reads (Kernel
Tuner caches, T4 files, workbench recordings) becomes a study of its own.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
from pathlib import Path

import pandas as pd

from workbench.errors import ConfigError, WorkbenchError
from workbench.jsontext import strict_dumps
from workbench.runners.base import Measurement, TrialOutcome
from workbench.runners.recordings import RECORDED_AS, Recording, load_recording
from workbench.runners.recordings.kt_cache import KT_BOOKKEEPING, KT_FAILURES, SHAPE_LABEL_KEY
from workbench.spaces.model import parse_shape_label
from workbench.store.models import RunStatus
from workbench.store.records import StoredEvaluation, StudyInfo
from workbench.store.store import Store

#: Kernel Tuner's failure markers for our outcomes (KT has no "wrong" or "timeout").
KT_MARKERS = {
    TrialOutcome.COMPILE_FAILED: "CompilationFailedConfig",
    TrialOutcome.LAUNCH_FAILED: "RuntimeFailedConfig",
    TrialOutcome.TIMEOUT: "RuntimeFailedConfig",
    TrialOutcome.WRONG: "RuntimeFailedConfig",
    TrialOutcome.INFEASIBLE: "InvalidConfig",
}


def kt_marker(m: Measurement) -> str:
    """The Kernel Tuner failure marker of a failed measurement: the one a Kernel Tuner cache
    recorded (kept in its reason on import: InvalidConfig and ErrorConfig come back as
    themselves), else the closest to its outcome."""
    recorded = m.reason.removeprefix(RECORDED_AS)
    if m.reason.startswith(RECORDED_AS) and recorded in KT_FAILURES:
        return recorded
    return KT_MARKERS[m.outcome]


def to_dataframe(store: Store, study: StudyInfo) -> pd.DataFrame:
    """One row per evaluation, in the order they were made."""
    rows = []
    for e in store.evaluations(study):
        m = e.measurement
        rows.append(
            {
                "sequence": e.sequence,
                **e.config,
                "outcome": m.outcome.value,
                "value": m.value,
                "ci_low": m.ci_low,
                "ci_high": m.ci_high,
                "n_samples": len(m.samples),
                "reason": m.reason,
                "replayed_from": m.replayed_from,
                "elapsed_s": e.elapsed_s,
                "run_id": e.run_id,
            }
        )
    columns = [
        "sequence",
        *(name for name, _ in study.parameters),
        "outcome",
        "value",
        "ci_low",
        "ci_high",
        "n_samples",
        "reason",
        "replayed_from",
        "elapsed_s",
        "run_id",
    ]
    return pd.DataFrame(rows, columns=columns)


def export_table(store: Store, study: StudyInfo, path: Path) -> Path:
    """CSV or Parquet by the file's suffix.

    Raises:
        ConfigError: another suffix (a table written under a name that says otherwise).
    """
    if path.suffix not in (".csv", ".parquet"):
        raise ConfigError(
            f"{path}: a table is written as .csv or .parquet (a Kernel Tuner cache file as "
            ".json or .json.gz, by `export_kt_cache`)"
        )
    df = to_dataframe(store, study)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_csv(path, index=False)
    return path


def export_kt_cache(store: Store, study: StudyInfo, path: Path) -> Path:
    """A Kernel Tuner cache file of the study's evaluations (readable by ``tune_cache``),
    gzipped when the name ends in .gz, as the recorded caches are.

    Raises:
        ConfigError: a name that does not end in .json or .json.gz.
    """
    if not path.name.endswith((".json", ".json.gz")):
        raise ConfigError(f"{path}: a Kernel Tuner cache file is written as .json or .json.gz")
    keys = [name for name, _ in study.parameters]
    cache: dict[str, dict] = {}
    for e in store.evaluations(study):
        m = e.measurement
        entry: dict[str, object] = dict(e.config)
        if m.outcome is TrialOutcome.OK:
            entry["time"] = m.value
            entry["times"] = list(m.samples)
        else:
            entry["time"] = kt_marker(m)
        entry.update(
            {
                k: v
                for k, v in m.metrics.items()
                if k not in KT_BOOKKEEPING and k not in entry and k != "timing_seconds"
            }
        )
        entry.update(
            {
                "compile_time": 1e3 * (m.compile_seconds or 0.0),
                "verification_time": 0,
                "benchmark_time": 1e3 * float(m.metrics.get("timing_seconds", 0.0)),
                "strategy_time": 0,
                "framework_time": 0,
            }
        )
        if (when := measured_at(e)) is not None:
            entry["timestamp"] = when
        cache[",".join(str(e.config[k]) for k in keys)] = entry
    doc = {
        "device_name": study.device_key,
        "kernel_name": study.kernel,
        **kt_problem_size(study.shape_label),
        "tune_params_keys": keys,
        "tune_params": {name: list(values) for name, values in study.parameters},
        "objective": study.objective,
        "cache": cache,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    text = strict_dumps(doc, indent=1)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def kt_problem_size(label: str) -> dict[str, object]:
    """A study's shape label as a Kernel Tuner cache's header gives it: ``problem_size`` as the
    number or list Kernel Tuner compares with the one it is asked for (``[4096, 4096]``,
    ``n=16777216`` -> 16777216), and the workbench's label beside it when that differs, so
    that importing the file finds the same study."""
    try:
        size = json.loads(label)
    except ValueError:
        size = None
    if isinstance(size, int | list):
        return {"problem_size": size}
    shape = parse_shape_label(label) if label else None
    if not shape:  # a label of the workbench's own, or none
        return {SHAPE_LABEL_KEY: label} if label in ("", "recorded") else {"problem_size": label}
    numbers = list(shape.values())
    return {"problem_size": numbers[0] if len(numbers) == 1 else numbers, SHAPE_LABEL_KEY: label}


#: the date a replayed value's label carries: ``DEVICE (file, 2023-12-22)``
_REPLAYED_DATE = re.compile(r", (\d{4}-\d{2}-\d{2})\)$")


def measured_at(e: StoredEvaluation) -> str | None:
    """When the value was measured, as Kernel Tuner writes ``timestamp``: the time it was
    stored for a live measurement, the recording's day for a replayed one (None if unknown)."""
    replayed = e.measurement.replayed_from
    if replayed is None:
        return str(e.created_at) if e.created_at is not None else None
    day = _REPLAYED_DATE.search(replayed)
    return f"{day.group(1)} 00:00:00+00:00" if day else None


def recording_study(
    store: Store, recording: Recording, *, name: str | None = None, fresh: bool = False
) -> StudyInfo:
    """The study of a recording's own space (kernel | problem | device), created if new (or
    ``fresh``: see :meth:`Store.study`): the one an import fills and a ``tune --replay FILE``
    searches.

    Raises:
        StoreError: a study of that name exists with other parameters.
    """
    optimum = recording.optimum()
    return store.study(
        kernel=recording.kernel,
        shape_label=recording.problem or "recorded",
        device_key=recording.device.key(),
        parameters=recording.parameters,
        objective=recording.objective.name,
        unit=recording.objective.unit,
        replay_source=recording.source,
        replay_note=recording.note,
        recorded_optimum=optimum.value if optimum else None,
        arch=recording.arch,
        name=name,
        fresh=fresh,
    )


def import_recording(store: Store, path: Path | Recording) -> tuple[StudyInfo, int]:
    """Store every entry of a recording (a file, or one already read) as a study of its own;
    returns (study, new entries).

    Entries already in the study are skipped, so importing twice adds nothing.
    """
    recording = path if isinstance(path, Recording) else load_recording(path)
    path = recording.path
    study = recording_study(store, recording)
    with store.exclusive(study):  # not into a study a tune is writing (SQLite)
        known = {
            tuple(e.config[k] for k in recording.parameter_names)
            for e in store.evaluations(study, with_samples=False)
        }
        items = [
            (e.config, e.to_measurement(recording.source), None)
            for key, e in recording.entries.items()
            if key not in known
        ]
        if not items:  # imported before: no empty import run either
            return study, 0
        env = store.environment(recording.device, replay_source=recording.source)
        run = store.start_run(study, env, kind="import", command=f"import {path}")
        try:
            added = store.record_many(study, run, env, items)
        except BaseException:  # (Ctrl-C included) the run says it did not finish
            with contextlib.suppress(WorkbenchError):
                store.finish_run(run, RunStatus.FAILED)
            raise
        store.finish_run(run, RunStatus.FINISHED)
    return study, added
