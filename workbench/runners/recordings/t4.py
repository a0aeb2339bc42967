"""T4 files ("Open Autotuning Results", schema 1.0.0) read as recordings.

A T4 file lists ``results``: per config its ``configuration``, an ``invalidity`` (``correct``
or why not) and its ``measurements`` by name; ``metadata`` names the device and kernel.
"""

from __future__ import annotations

from pathlib import Path

from workbench.runners.base import DeviceInfo, Objective, TrialOutcome
from workbench.runners.recordings.fields import (
    file_stem,
    finite_samples,
    finite_value,
    latest_timestamp,
)
from workbench.runners.recordings.model import RECORDED_AS, RecordedEntry, Recording, RecordingError
from workbench.spaces.model import Config, Value

#: T4 invalidity values.
T4_FAILURES = {
    "compile": TrialOutcome.COMPILE_FAILED,
    "runtime": TrialOutcome.LAUNCH_FAILED,
    "correctness": TrialOutcome.WRONG,
    "constraints": TrialOutcome.INFEASIBLE,
}
#: The measurement a T4 file is tuned on.
_OBJECTIVE = "time"


def read_t4(path: Path, data: dict) -> Recording:
    """The recording a T4 file's parsed JSON holds.

    Raises:
        RecordingError: no results, or a result is malformed or repeats another's config.
    """
    results = data.get("results")
    if not isinstance(results, list) or not results:
        raise RecordingError(path, "T4 file without results")
    names, seen, rows = _configurations(path, results)
    entries: dict[tuple[Value, ...], RecordedEntry] = {}
    first: dict[tuple[Value, ...], int] = {}
    for i, r, cfg in rows:
        values = tuple(cfg[k] for k in names)
        if values in first:
            raise RecordingError(
                path, f"results[{i}] repeats the configuration of results[{first[values]}]"
            )
        first[values] = i
        entries[values] = _t4_entry(path, i, r, cfg)
    parameters = tuple((k, tuple(_sorted_values(seen[k]))) for k in names)
    meta = data.get("metadata") or {}
    device = DeviceInfo(
        name=str(
            meta.get("device")
            or meta.get("device_name")
            or "unknown device (not stated in the T4 file)"
        )
    )
    return Recording(
        path=path,
        format="t4",
        kernel=str(meta.get("kernel") or file_stem(path)),
        device=device,
        problem=str(meta.get("problem_size", "")),
        parameters=parameters,
        objective=Objective(_OBJECTIVE, "ms"),
        entries=entries,
        date=latest_timestamp(results),
    )


def _configurations(
    path: Path, results: list
) -> tuple[list[str], dict[str, list[Value]], list[tuple[int, dict, Config]]]:
    """The parameter names (every result names the same, in the same order), each one's
    values in the order first seen, and each result with its index and configuration."""
    names: list[str] = []
    seen: dict[str, list[Value]] = {}
    rows: list[tuple[int, dict, Config]] = []
    for i, r in enumerate(results):
        cfg = r.get("configuration") if isinstance(r, dict) else None
        if not isinstance(cfg, dict) or not cfg:
            raise RecordingError(path, f"results[{i}] has no configuration")
        odd = [k for k, v in cfg.items() if not isinstance(v, int | float | str | bool)]
        if odd:
            raise RecordingError(
                path, f"results[{i}]: {odd[0]} is {cfg[odd[0]]!r}, not a number or a string"
            )
        if not names:
            names = list(cfg)
        if list(cfg) != names:
            raise RecordingError(path, f"results[{i}]: parameters differ from results[0]")
        for k, v in cfg.items():
            if v not in seen.setdefault(k, []):
                seen[k].append(v)
        rows.append((i, r, cfg))
    return names, seen, rows


def _t4_entry(path: Path, i: int, r: dict, cfg: Config) -> RecordedEntry:
    """``results[i]`` as an entry: its time and runtimes when correct, else its invalidity."""
    invalidity = r.get("invalidity", "correct")
    if invalidity == "correct":
        value = _t4_measurement(path, i, r, _OBJECTIVE)
        times = r.get("times") or {}
        runtimes = times.get("runtimes") if isinstance(times, dict) else None
        return RecordedEntry(dict(cfg), TrialOutcome.OK, value, finite_samples(runtimes))
    outcome = T4_FAILURES.get(invalidity)
    if outcome is None:
        raise RecordingError(path, f"results[{i}]: unknown invalidity {invalidity!r}")
    return RecordedEntry(dict(cfg), outcome, reason=f"{RECORDED_AS}{invalidity}")


def _t4_measurement(path: Path, i: int, r: dict, name: str) -> float:
    measurements = r.get("measurements")
    for m in measurements if isinstance(measurements, list) else ():
        if isinstance(m, dict) and m.get("name") == name:
            value = finite_value(m.get("value"))
            if value is not None and value > 0:
                return value
            if value is not None:
                raise RecordingError(path, f"results[{i}]: {name} is {value!r}, not above zero")
    raise RecordingError(path, f"results[{i}] is 'correct' but has no numeric {name!r} measurement")


def _sorted_values(values: list[Value]) -> list[Value]:
    try:
        return sorted(values)
    except TypeError:
        return values
