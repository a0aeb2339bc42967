"""The workbench's own recording format: what ``workbench record`` writes, read back.

A JSON document (gzip when the name ends in ``.gz``) that names its format and version, the
kernel, device, arch, shape and space it measured, its parameters and their values, and per
config its outcome, value, samples and reason.
"""

from __future__ import annotations

import datetime as dt
import gzip
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from workbench.jsontext import strict_dumps
from workbench.runners.base import DeviceInfo, Measurement, Objective, TrialOutcome
from workbench.runners.recordings.fields import finite_samples, finite_value
from workbench.runners.recordings.model import RecordedEntry, Recording, RecordingError
from workbench.runners.timing import summarize
from workbench.spaces.model import Config, Value

FORMAT_NAME = "workbench-recording"
FORMAT_VERSION = 1


def median_interval_of(
    value: float | None, samples: tuple[float, ...]
) -> tuple[float | None, float | None]:
    """The 95 % confidence interval of the median of ``samples`` (the timing protocol's:
    :func:`~workbench.runners.timing.summarize`) where ``value`` is that median, as a workbench
    recording keeps it; (None, None) without samples, or where ``value`` is another statistic
    of them (an interval of their median would not bracket it)."""
    if value is None or not samples:
        return None, None
    summary = summarize(samples)
    if not math.isclose(summary.median, value, rel_tol=1e-12, abs_tol=0.0):
        return None, None
    return summary.ci_low, summary.ci_high


def read_workbench_recording(path: Path, data: dict) -> Recording:
    """The recording a workbench recording's parsed JSON holds.

    Raises:
        RecordingError: another version, a malformed field, or a value that contradicts its
            outcome.
    """
    if data.get("version") != FORMAT_VERSION:
        raise RecordingError(
            path,
            f"recording version {data.get('version')!r}; this workbench "
            f"reads version {FORMAT_VERSION}",
        )
    try:
        params = tuple((str(k), tuple(v)) for k, v in data["parameters"].items())
        names = [k for k, _ in params]
        entries: dict[tuple[Value, ...], RecordedEntry] = {}
        for i, e in enumerate(data["entries"]):
            entry = _entry(path, i, e, names)
            entries[tuple(entry.config.values())] = entry
        device = DeviceInfo(**data["device"])
        objective = Objective(**data.get("objective", {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordingError(
            path, f"malformed workbench recording: {type(exc).__name__}: {exc}"
        ) from exc
    return Recording(
        path=path,
        format="workbench",
        kernel=str(data.get("kernel")),
        device=device,
        problem=str(data.get("problem", "")),
        parameters=params,
        objective=objective,
        entries=entries,
        date=data.get("date"),
        arch=data.get("arch"),
        shape=data.get("shape"),
        space_sha256=data.get("space_sha256"),
        extra=data.get("extra", {}),
    )


def _entry(path: Path, i: int, e: dict, names: list[str]) -> RecordedEntry:
    """``entries[i]``: its config (of the parameters ``names``), outcome, value and samples,
    with the interval of their median where the value is that median."""
    config = {k: e["config"][k] for k in names}
    outcome = TrialOutcome(e["outcome"])
    value = e.get("value")
    if (outcome is TrialOutcome.OK) != (value is not None):
        raise RecordingError(path, f"entries[{i}]: outcome {outcome.value} with value {value!r}")
    number = None if value is None else finite_value(value)
    if value is not None and (number is None or number <= 0):
        raise RecordingError(path, f"entries[{i}]: value {value!r} is not above zero")
    samples = finite_samples(e.get("samples", []))
    low, high = median_interval_of(number, samples)
    return RecordedEntry(
        config, outcome, number, samples, str(e.get("reason", "")), ci_low=low, ci_high=high
    )


def write_recording(
    path: str | Path,
    *,
    kernel: str,
    device: DeviceInfo,
    parameters: Sequence[tuple[str, Sequence[Value]]],
    entries: Iterable[tuple[Config, Measurement]],
    shape: Mapping[str, int] | None = None,
    arch: str | None = None,
    space_sha256: str | None = None,
    objective: Objective | None = None,
    extra: Mapping[str, object] | None = None,
) -> Path:
    """Write a workbench recording (gzip when the name ends in ``.gz``)."""
    path = Path(path)
    rows = []
    for config, m in entries:
        row: dict[str, object] = {"config": dict(config), "outcome": m.outcome.value}
        if m.value is not None:
            row["value"] = m.value
        if m.samples:
            row["samples"] = list(m.samples)
        if m.reason:
            row["reason"] = m.reason
        rows.append(row)
    shape_text = ",".join(f"{k}={v}" for k, v in (shape or {}).items())
    doc = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "kernel": kernel,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": asdict(device),
        "arch": arch,
        "shape": dict(shape or {}),
        "problem": shape_text,
        "space_sha256": space_sha256,
        "objective": asdict(objective or Objective()),
        "parameters": {name: list(values) for name, values in parameters},
        "extra": dict(extra or {}),
        "entries": rows,
    }
    blob = strict_dumps(doc, indent=None, separators=(",", ":")).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(gzip.compress(blob, mtime=0) if path.suffix == ".gz" else blob)
    tmp.replace(path)
    return path
