"""Kernel Tuner cache files (``.json`` or ``.json.gz``) read as recordings.

A cache holds ``tune_params_keys``, ``tune_params`` and ``cache``: one entry per config, keyed
by its values joined with commas, with the time (or a failure marker) and the other numbers
Kernel Tuner measured. The store's export writes the same format back (``store.exchange``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from workbench.runners.base import DeviceInfo, Objective, TrialOutcome
from workbench.runners.recordings.fields import (
    file_stem,
    finite_samples,
    finite_value,
    latest_timestamp,
)
from workbench.runners.recordings.model import (
    RECORDED_AS,
    RecordedEntry,
    Recording,
    RecordingError,
)
from workbench.spaces.model import Config, Value

#: Kernel Tuner's failure markers, stored in place of the time.
KT_FAILURES = {
    "CompilationFailedConfig": TrialOutcome.COMPILE_FAILED,
    "RuntimeFailedConfig": TrialOutcome.LAUNCH_FAILED,
    "InvalidConfig": TrialOutcome.LAUNCH_FAILED,
    "ErrorConfig": TrialOutcome.LAUNCH_FAILED,  # the base class of the three above
}
#: Fields of a Kernel Tuner cache entry that are not results of the config (its bookkeeping);
#: every other number is kept as a metric of the measurement (GFLOP/s, energy, ...).
KT_BOOKKEEPING = frozenset(
    {
        "time",
        "times",
        "compile_time",
        "verification_time",
        "benchmark_time",
        "strategy_time",
        "framework_time",
        "timestamp",
    }
)
#: Header key of a Kernel Tuner cache the workbench exported: the study's shape label, when
#: ``problem_size`` (written as Kernel Tuner compares it) does not spell it.
SHAPE_LABEL_KEY = "workbench_shape_label"

#: Kernel Tuner objectives by direction (its ``objective_default_map``): the workbench
#: minimises, so a cache whose objective is higher-is-better (or of unknown direction) is tuned
#: on the time Kernel Tuner records for every entry, and says so.
KT_LOWER_IS_BETTER = {"time": "ms", "energy": "J", "cost": "", "loss": ""}
KT_HIGHER_IS_BETTER = frozenset(
    ("fitness", "GFLOP/s", "TFLOP/s", "GB/s", "TB/s", "GFLOPS/W", "TFLOPS/W", "GFLOP/J", "TFLOP/J")
)

#: How a cache file read as if closed is described (in the replay banner).
UNCLOSED_NOTE = (
    "the file was never closed (a Kernel Tuner run that stopped early): read as if it were, "
    "as Kernel Tuner reads it"
)
#: The mark :func:`closed_kt_cache` leaves on the cache it closed.
_UNCLOSED = "__workbench_unclosed__"


def read_kt_cache(path: Path, data: dict) -> Recording:
    """The recording a Kernel Tuner cache's parsed JSON holds.

    Raises:
        RecordingError: the header is inconsistent, or an entry is malformed.
    """
    unclosed = UNCLOSED_NOTE if data.pop(_UNCLOSED, False) else None
    keys, params, cache = _tune_params(path, data)
    objective, objective_note = _kt_objective(str(data.get("objective") or "time"))
    entries, added = _kt_entries(path, keys, params, cache, objective)
    parameters = tuple((k, (*params[k], *added.get(k, ()))) for k in keys)
    grown = None
    if added:
        listed = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in added.items())
        grown = f"entries hold values tune_params does not list ({listed}): they join the space"
    device = DeviceInfo(name=str(data.get("device_name") or "unknown device"))
    return Recording(
        path=path,
        format="kt-cache",
        kernel=str(data.get("kernel_name") or file_stem(path)),
        device=device,
        problem=label
        if isinstance(label := data.get(SHAPE_LABEL_KEY), str)
        else _problem_label(data.get("problem_size")),
        parameters=parameters,
        objective=objective,
        entries=entries,
        date=latest_timestamp(cache.values()),
        note="; ".join(n for n in (objective_note, grown, unclosed) if n) or None,
    )


def _tune_params(path: Path, data: dict) -> tuple[list[str], dict[str, list], dict]:
    """The cache's ``tune_params_keys``, ``tune_params`` and ``cache``, checked: every key has
    a non-empty list of numbers or strings."""
    keys = data.get("tune_params_keys")
    params = data.get("tune_params")
    cache = data.get("cache")
    if not isinstance(keys, list) or not isinstance(params, dict) or not isinstance(cache, dict):
        raise RecordingError(path, "tune_params_keys, tune_params and cache must be list/dict/dict")
    missing = [k for k in keys if k not in params]
    if missing:
        raise RecordingError(path, f"tune_params lacks {missing}")
    if not keys:
        raise RecordingError(path, "tune_params_keys is empty: nothing was tuned")
    empty = [k for k in keys if not isinstance(params[k], list) or not params[k]]
    if empty:
        raise RecordingError(path, f"tune_params {empty}: each needs a non-empty list of values")
    for k in keys:
        odd = [v for v in params[k] if not isinstance(v, int | float | str | bool)]
        if odd:
            raise RecordingError(
                path, f"tune_params[{k!r}] holds {odd[0]!r}: values are numbers or strings"
            )
    return keys, params, cache


def _kt_entries(
    path: Path, keys: list[str], params: dict[str, list], cache: dict, objective: Objective
) -> tuple[dict[tuple[Value, ...], RecordedEntry], dict[str, list[Value]]]:
    """The cache's entries by their values, and the values entries hold that ``tune_params``
    does not list (a cache continued after tune_params grew), by parameter."""
    entries: dict[tuple[Value, ...], RecordedEntry] = {}
    by_text = [{str(v): v for v in params[k]} for k in keys]  # each key's values by their text
    added: dict[str, list[Value]] = {}  # values entries hold that tune_params does not list
    for text_key, record in cache.items():
        parts = str(text_key).split(",")
        if not isinstance(record, dict):
            raise RecordingError(
                path,
                f"cache[{text_key!r}] is {_json_kind(record)}, not an entry (an object with the "
                "config's time)",
            )
        if len(parts) != len(keys):
            raise RecordingError(
                path,
                f"cache key {text_key!r} does not match tune_params_keys ({len(parts)} values "
                f"for {len(keys)} keys)",
            )
        try:
            values = tuple(map(dict.__getitem__, by_text, parts))  # (in C: 18k entries)
        except KeyError:  # a cache continued after tune_params grew, as Kernel Tuner allows
            values = tuple(
                _unlisted_value(k, part, record, known, added)
                for k, part, known in zip(keys, parts, by_text, strict=True)
            )
        config = dict(zip(keys, values, strict=True))
        entries[values] = _kt_entry(path, text_key, config, record, objective.name)
    return entries, added


def _json_kind(value: object) -> str:
    """``a string``, ``a list``, ... : what a JSON value is, for a message."""
    kinds = {str: "a string", list: "a list", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _unlisted_value(
    key: str, text: str, record: dict, known: dict[str, Value], added: dict[str, list[Value]]
) -> Value:
    """A cache key's value for ``key``: the listed one, else the entry's own (its field of that
    name, or the text read as a number), which then joins the parameter's values."""
    if text in known:
        return known[text]
    own: Any = record.get(key)
    value: Value = own if str(own) == text else _number_or_text(text)
    known[text] = value
    added.setdefault(key, []).append(value)
    return value


def _number_or_text(text: str) -> Value:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _problem_label(size: object) -> str:
    """A cache file's problem size as a study's shape label: a string as it is (so that a
    file the workbench exported, which writes the label, reads back to the same study), a
    number or list as JSON, none as empty (the study is then labelled 'recorded')."""
    if size is None:
        return ""
    return size if isinstance(size, str) else json.dumps(size)


def _kt_objective(name: str) -> tuple[Objective, str | None]:
    """What a Kernel Tuner cache is tuned on, and a note when that is not its own objective."""
    if name in KT_LOWER_IS_BETTER:
        return Objective(name, KT_LOWER_IS_BETTER[name]), None
    why = "higher is better" if name in KT_HIGHER_IS_BETTER else "its direction is unknown"
    return Objective("time", "ms"), (
        f"the file's objective is {name} ({why}); the workbench minimises, so it tunes on the "
        "time recorded for each config"
    )


def _kt_entry(path: Path, key: str, config: Config, record: dict, objective: str) -> RecordedEntry:
    value = record.get(objective, record.get("time"))
    if value is None:
        field = objective if objective == "time" else f"{objective} or time"
        raise RecordingError(path, f"cache[{key!r}] has no {field}: nothing was measured")
    numbers = {
        k: float(v)
        for k, v in record.items()
        if k not in KT_BOOKKEEPING
        and k not in config
        and isinstance(v, int | float)
        and not isinstance(v, bool)
    }
    metrics = {k: v for k, v in numbers.items() if math.isfinite(v)}
    # NaN and infinities are left out (PostgreSQL's JSON refuses them), and said, so that a
    # search on energy can name the reading its config lacks
    lost = ", ".join(f"{k}={v!r}" for k, v in numbers.items() if k not in metrics)
    bench = record.get("benchmark_time")
    if isinstance(bench, int | float) and bench > 0:
        metrics["timing_seconds"] = bench / 1e3
    compile_ms = record.get("compile_time")
    compile_s = compile_ms / 1e3 if isinstance(compile_ms, int | float) and compile_ms > 0 else None
    if isinstance(value, str):
        outcome = KT_FAILURES.get(value)
        if outcome is None:
            raise RecordingError(path, f"cache[{key!r}]: unknown failure marker {value!r}")
        return RecordedEntry(
            config,
            outcome,
            reason=f"{RECORDED_AS}{value}",
            metrics=metrics,
            compile_seconds=compile_s,
        )
    number = finite_value(value)
    if number is None:
        raise RecordingError(path, f"cache[{key!r}]: {objective} is {value!r}, not a number")
    if number <= 0:
        raise RecordingError(path, f"cache[{key!r}]: {objective} is {value!r}, not above zero")
    times = record.get("times") or ()
    if isinstance(times, list) and set(map(type, times)) <= {float}:
        samples = tuple(times)  # (JSON numbers: the common case)
        if not all(map(math.isfinite, samples)):
            samples = finite_samples(times)
    else:
        samples = finite_samples(times)
    note = f"recorded but not finite, left out: {lost}" if lost else ""
    return RecordedEntry(config, TrialOutcome.OK, number, samples, note, metrics, compile_s)


def closed_kt_cache(text: str) -> dict | None:
    """A Kernel Tuner cache that a stopped run left open (entries appended as ``"key": {...},``
    with no closing braces), read the way Kernel Tuner reads it: the trailing comma dropped and
    the cache and the document closed (and marked, so that its recording says so). None when
    that does not give a cache."""
    body = text.rstrip()
    if not body or body.endswith(("}\n}", "}}}")) or '"cache"' not in body:
        return None
    try:
        data = json.loads(body.removesuffix(",") + "}\n}")
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("cache"), dict):
        return None
    if "tune_params_keys" not in data:  # not a cache header: the file is just cut short
        return None
    data[_UNCLOSED] = True
    return data
