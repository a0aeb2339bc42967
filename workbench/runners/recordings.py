"""Recorded measurements: Kernel Tuner cache files, T4 files and the workbench's own recordings.

A :class:`Recording` is a brute-forced (or sampled) space measured on one device: its
parameters and their values, and per configuration an outcome and a value. It is what the
replay runner answers from and what ``workbench record`` writes. Every reader refuses damaged
input with a :class:`RecordingError` that names the file and what is wrong.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import gc
import gzip
import json
import math
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.jsontext import strict_dumps
from workbench.runners.base import (
    DeviceInfo,
    Measurement,
    Objective,
    TrialOutcome,
    is_correct,
    rank_key,
)
from workbench.runners.timing import summarize
from workbench.spaces.model import Config, SpaceSpec, Value
from workbench.spaces.variants import label_values

FORMAT_NAME = "workbench-recording"
FORMAT_VERSION = 1

#: Kernel Tuner's failure markers, stored in place of the time.
KT_FAILURES = {
    "CompilationFailedConfig": TrialOutcome.COMPILE_FAILED,
    "RuntimeFailedConfig": TrialOutcome.LAUNCH_FAILED,
    "InvalidConfig": TrialOutcome.LAUNCH_FAILED,
    "ErrorConfig": TrialOutcome.LAUNCH_FAILED,  # the base class of the three above
}
#: How a replayed failure's reason names the marker its recording holds.
RECORDED_AS = "recorded as "
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
#: The most bytes of JSON a recording may hold (decompressed): 32x the largest real cache at
#: hand (gemm_RTX_3090.json.gz, 17,956 configs: 3.5 MB of gzip, 16.5 MB of JSON). Parsed JSON
#: takes several times its size in memory; a 2.6 MB gzip bomb expanding to 2.5 GiB took 5.4 GB
#: before the format was even checked.
MAX_RECORDING_BYTES = 512 * 2**20
#: T4 ("Open Autotuning Results" schema 1.0.0) invalidity values.
T4_FAILURES = {
    "compile": TrialOutcome.COMPILE_FAILED,
    "runtime": TrialOutcome.LAUNCH_FAILED,
    "correctness": TrialOutcome.WRONG,
    "constraints": TrialOutcome.INFEASIBLE,
}


class RecordingError(WorkbenchError):
    """A recording file cannot be read or is inconsistent."""

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class RecordedEntry:
    """One recorded configuration."""

    config: Config
    outcome: TrialOutcome
    value: float | None = None
    samples: tuple[float, ...] = ()
    reason: str = ""
    #: the file's other numbers for this config (a Kernel Tuner cache's GFLOP/s, energy, its
    #: benchmark time as ``timing_seconds``), kept so that an export gives them back
    metrics: Mapping[str, float] = field(default_factory=dict)
    compile_seconds: float | None = None
    #: the 95 % interval of the median, where ``value`` is the median of ``samples``
    ci_low: float | None = None
    ci_high: float | None = None

    def to_measurement(self, source: str) -> Measurement:
        if self.outcome is TrialOutcome.OK:
            return Measurement(
                TrialOutcome.OK,
                value=self.value,
                samples=self.samples,
                ci_low=self.ci_low,
                ci_high=self.ci_high,
                reason=self.reason,  # (what the file held that could not be kept, if anything)
                replayed_from=source,
                metrics=dict(self.metrics),
                compile_seconds=self.compile_seconds,
            )
        return Measurement.failure(
            self.outcome,
            self.reason or f"{RECORDED_AS}{self.outcome.value}",
            replayed_from=source,
            metrics=dict(self.metrics),
            compile_seconds=self.compile_seconds,
        )


@dataclass(frozen=True)
class Recording:
    """A recorded space on one device."""

    path: Path
    format: str  #: "kt-cache", "t4" or "workbench"
    kernel: str
    device: DeviceInfo
    problem: str  #: the problem size as recorded ("[4096, 4096]", "M=1,N=4096,K=4096")
    parameters: tuple[tuple[str, tuple[Value, ...]], ...]
    objective: Objective
    entries: Mapping[tuple[Value, ...], RecordedEntry]
    date: str | None = None
    arch: str | None = None
    shape: Mapping[str, int] | None = None
    space_sha256: str | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    note: str | None = None  #: how the file was read, when the user should know (the banner)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parameters)

    @property
    def source(self) -> str:
        """How a replayed value is labelled: device and file."""
        when = f", {self.date[:10]}" if self.date else ""
        return f"{self.device.name} ({self.path.name}{when})"

    def for_space(self, spec: SpaceSpec) -> Recording:
        """This recording as one of ``spec``'s space, which may have gained parameters since
        it was made: a parameter it lacks that is a problem variant (``tunable: false``) or has
        one value is taken to hold, in every recorded config, the value the recording's kernel
        label names (``reduce_f16[OP=sum]``: its variant's values, its bracketed ones), else
        the space's default (the problem the kernel solved before the parameter existed); a
        tunable one that declares ``before:`` (the value every config had before it existed:
        gemm_int8's SCHED=static) holds that value.

        Raises:
            RecordingError: it lacks a tunable parameter of several values without ``before``:
                it is not a recording of this space.
        """
        missing = [p for p in spec.parameters if p.name not in self.parameter_names]
        if not missing:
            return self
        tunable = [p.name for p in missing if p.tunable and len(p.values) > 1 and p.before is None]
        if tunable:
            raise RecordingError(
                self.path,
                f"does not record parameter(s) {', '.join(tunable)} of {spec.name}: it is not a "
                "recording of this space",
            )
        named = label_values(spec, self.kernel)
        default = spec.default_config(self.arch, named)
        return self.with_values(
            {p.name: default[p.name] if p.before is None else p.before for p in missing}
        )

    def with_values(self, values: Mapping[str, Value]) -> Recording:
        """This recording with parameters it lacks added, each holding one value in every
        recorded config."""
        entries = {}
        for key, e in self.entries.items():
            config = {**e.config, **values}
            new_key = (*key, *values.values())
            entries[new_key] = dataclasses.replace(e, config=config)
        added = tuple((name, (value,)) for name, value in values.items())
        return dataclasses.replace(self, parameters=(*self.parameters, *added), entries=entries)

    def key(self, config: Mapping[str, Value]) -> tuple[Value, ...]:
        return tuple(config[name] for name in self.parameter_names)

    def lookup(self, config: Mapping[str, Value]) -> RecordedEntry | None:
        return self.entries.get(self.key(config))

    def optimum(self, fixed: Mapping[str, Value] | None = None) -> RecordedEntry | None:
        """The best entry under the store's best-config rule (:func:`rank_key`: correct, the
        lowest median, then the lowest upper bound of its interval, then the first in the
        file), among those with the ``fixed`` values (a pinned problem variant) when given, or
        None when none of them succeeded."""
        correct = [
            e
            for e in self.entries.values()
            if is_correct(e.outcome, e.value)
            and all(e.config.get(k) == v for k, v in (fixed or {}).items())
        ]
        return min(correct, key=lambda e: rank_key(e.value, e.ci_high, True), default=None)  # type: ignore[arg-type]

    def cartesian_size(self) -> int:
        return math.prod(len(values) for _, values in self.parameters)


# ---- reading ---------------------------------------------------------------------------------


def load_recording(path: str | Path) -> Recording:
    """Read any supported recording (format detected from the content).

    Raises:
        RecordingError: unreadable, truncated, not JSON, unknown format, inconsistent entries.
    """
    path = Path(path)
    with _collector_paused():
        data = _read_json(path)
        if not isinstance(data, dict):
            raise RecordingError(path, "expected a JSON object at the top level")
        recording = None
        try:
            if data.get("format") == FORMAT_NAME:
                recording = _from_workbench(path, data)
            elif "cache" in data and "tune_params_keys" in data:
                unclosed = bool(data.pop(_UNCLOSED, False))
                recording = _from_kt_cache(path, data)
                if unclosed:
                    note = f"{recording.note}; {UNCLOSED_NOTE}" if recording.note else UNCLOSED_NOTE
                    recording = dataclasses.replace(recording, note=note)
            elif "schema_version" in data and "results" in data:
                recording = _from_t4(path, data)
        except RecordingError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            # a field of the wrong JSON type somewhere the checks above do not look: named,
            # not a traceback
            raise RecordingError(
                path, f"malformed {_format_of(data)} ({type(exc).__name__}: {exc})"
            ) from exc
    if recording is not None:
        if not recording.entries:  # nothing to replay or import: said, for every command
            raise RecordingError(path, "holds no measured configs (its entries are empty)")
        return recording
    raise RecordingError(
        path,
        "unknown format: expected a Kernel Tuner cache file (cache, tune_params_keys), a T4 "
        "file (schema_version, results) or a workbench recording",
    )


def _format_of(data: dict) -> str:
    if data.get("format") == FORMAT_NAME:
        return "workbench recording"
    return "Kernel Tuner cache" if "cache" in data else "T4 file"


def _value(value: object) -> float | None:
    """A recorded time or sample as a finite float, None where it is not one (a bool, a string,
    NaN, an infinity, an integer past a float's range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _samples(times: object) -> tuple[float, ...]:
    """The finite numbers of a recorded list of samples (NaN and infinities left out: JSON
    has no such numbers, and PostgreSQL's JSON refuses them)."""
    if not isinstance(times, list):
        return ()
    return tuple(v for v in map(_value, times) if v is not None)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a recording is read: parsing and building
    allocate hundreds of thousands of containers, none of them garbage, and each full pass
    over them rescans the whole parse (about a quarter of building the entries of an 18k-config
    cache, measured)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_json(path: Path) -> object:
    raw = _read_capped(path)
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise RecordingError(path, f"not text (JSON is UTF-8): {exc}") from exc
    except json.JSONDecodeError as exc:
        if (closed := _closed_kt_cache(exc.doc)) is not None:
            return closed
        # JSON that stops short ends in "Expecting ..." at its very end
        cut = " (truncated?)" if exc.pos >= len(exc.doc.rstrip()) else ""
        raise RecordingError(path, f"not valid JSON at byte {exc.pos}{cut}: {exc}") from exc


def _read_capped(path: Path) -> bytes:
    """The file's bytes, decompressed when it is gzip, read up to MAX_RECORDING_BYTES (a
    stream: a larger file or gzip bomb costs no more memory than the cap).

    Raises:
        RecordingError: unreadable, corrupt gzip, or larger than the cap.
    """
    cap = MAX_RECORDING_BYTES
    try:
        with path.open("rb") as f:
            compressed = f.peek(2)[:2] == b"\x1f\x8b"  # (no seek: a pipe works too)
            try:
                raw = (gzip.GzipFile(fileobj=f) if compressed else f).read(cap + 1)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise RecordingError(path, f"corrupt or truncated gzip data ({exc})") from exc
    except OSError as exc:
        raise RecordingError(path, f"cannot read: {exc.strerror or exc}") from exc
    if len(raw) > cap:
        what = "decompresses to" if compressed else "holds"
        raise RecordingError(
            path,
            f"{what} more than {cap // 2**20} MiB of JSON, the most a recording may hold "
            "(the largest real Kernel Tuner caches hold tens of MB): not read",
        )
    return raw


#: How a cache file read as if closed is described (in the replay banner).
UNCLOSED_NOTE = (
    "the file was never closed (a Kernel Tuner run that stopped early): read as if it were, "
    "as Kernel Tuner reads it"
)


def _closed_kt_cache(text: str) -> dict | None:
    """A Kernel Tuner cache that a stopped run left open (entries appended as ``"key": {...},``
    with no closing braces), read the way Kernel Tuner reads it: the trailing comma dropped and
    the cache and the document closed. None when that does not give a cache."""
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


_UNCLOSED = "__workbench_unclosed__"


def _from_kt_cache(path: Path, data: dict) -> Recording:
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
    objective, note = _kt_objective(str(data.get("objective") or "time"))
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
    parameters = tuple((k, (*params[k], *added.get(k, ()))) for k in keys)
    if added:
        listed = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in added.items())
        grown = f"entries hold values tune_params does not list ({listed}): they join the space"
        note = f"{note}; {grown}" if note else grown
    device = DeviceInfo(name=str(data.get("device_name") or "unknown device"))
    return Recording(
        path=path,
        format="kt-cache",
        kernel=str(data.get("kernel_name") or _stem(path)),
        device=device,
        problem=label
        if isinstance(label := data.get(SHAPE_LABEL_KEY), str)
        else _problem_label(data.get("problem_size")),
        parameters=parameters,
        objective=objective,
        entries=entries,
        date=_latest_timestamp(cache.values()),
        note=note,
    )


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


def _stem(path: Path) -> str:
    """A file's name without .json / .gz: ``pnpoly_RTX_3090.json.gz`` -> ``pnpoly_RTX_3090``."""
    name = path.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name or path.name


def _latest_timestamp(records: Iterable[object]) -> str | None:
    """When a Kernel Tuner or T4 file's measurements ended: the latest of its entries'
    ``timestamp`` (ISO text, so the latest sorts last), or None when they have none."""
    stamps = [
        t
        for r in records
        if isinstance(r, dict) and isinstance(t := r.get("timestamp"), str) and _ISO.match(t)
    ]
    return max(stamps) if stamps else None


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}")


def _problem_label(size: object) -> str:
    """A cache file's problem size as a study's shape label: a string as it is (so that a
    file the workbench exported, which writes the label, reads back to the same study), a
    number or list as JSON, none as empty (the study is then labelled 'recorded')."""
    if size is None:
        return ""
    return size if isinstance(size, str) else json.dumps(size)


#: Kernel Tuner objectives by direction (its ``objective_default_map``): the workbench
#: minimises, so a cache whose objective is higher-is-better (or of unknown direction) is tuned
#: on the time Kernel Tuner records for every entry, and says so.
KT_LOWER_IS_BETTER = {"time": "ms", "energy": "J", "cost": "", "loss": ""}
KT_HIGHER_IS_BETTER = frozenset(
    ("fitness", "GFLOP/s", "TFLOP/s", "GB/s", "TB/s", "GFLOPS/W", "TFLOPS/W", "GFLOP/J", "TFLOP/J")
)


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
    number = _value(value)
    if number is None:
        raise RecordingError(path, f"cache[{key!r}]: {objective} is {value!r}, not a number")
    if number <= 0:
        raise RecordingError(path, f"cache[{key!r}]: {objective} is {value!r}, not above zero")
    times = record.get("times") or ()
    if isinstance(times, list) and set(map(type, times)) <= {float}:
        samples = tuple(times)  # (JSON numbers: the common case)
        if not all(map(math.isfinite, samples)):
            samples = _samples(times)
    else:
        samples = _samples(times)
    note = f"recorded but not finite, left out: {lost}" if lost else ""
    return RecordedEntry(config, TrialOutcome.OK, number, samples, note, metrics, compile_s)


def _from_t4(path: Path, data: dict) -> Recording:
    results = data.get("results")
    if not isinstance(results, list) or not results:
        raise RecordingError(path, "T4 file without results")
    names: list[str] = []
    seen: dict[str, list[Value]] = {}
    entries: dict[tuple[Value, ...], RecordedEntry] = {}
    objective_name = "time"
    rows = []
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
    first: dict[tuple[Value, ...], int] = {}
    for i, r, cfg in rows:
        values = tuple(cfg[k] for k in names)
        if values in first:
            raise RecordingError(
                path, f"results[{i}] repeats the configuration of results[{first[values]}]"
            )
        first[values] = i
        invalidity = r.get("invalidity", "correct")
        if invalidity == "correct":
            value = _t4_measurement(path, i, r, objective_name)
            times = r.get("times") or {}
            runtimes = times.get("runtimes") if isinstance(times, dict) else None
            entries[values] = RecordedEntry(dict(cfg), TrialOutcome.OK, value, _samples(runtimes))
        else:
            outcome = T4_FAILURES.get(invalidity)
            if outcome is None:
                raise RecordingError(path, f"results[{i}]: unknown invalidity {invalidity!r}")
            entries[values] = RecordedEntry(dict(cfg), outcome, reason=f"{RECORDED_AS}{invalidity}")
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
        kernel=str(meta.get("kernel") or _stem(path)),
        device=device,
        problem=str(meta.get("problem_size", "")),
        parameters=parameters,
        objective=Objective(objective_name, "ms"),
        entries=entries,
        date=_latest_timestamp(results),
    )


def _t4_measurement(path: Path, i: int, r: dict, name: str) -> float:
    measurements = r.get("measurements")
    for m in measurements if isinstance(measurements, list) else ():
        if isinstance(m, dict) and m.get("name") == name:
            value = _value(m.get("value"))
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


def _from_workbench(path: Path, data: dict) -> Recording:
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
            config = {k: e["config"][k] for k in names}
            outcome = TrialOutcome(e["outcome"])
            value = e.get("value")
            if (outcome is TrialOutcome.OK) != (value is not None):
                raise RecordingError(
                    path, f"entries[{i}]: outcome {outcome.value} with value {value!r}"
                )
            number = None if value is None else _value(value)
            if value is not None and (number is None or number <= 0):
                raise RecordingError(path, f"entries[{i}]: value {value!r} is not above zero")
            samples = _samples(e.get("samples", []))
            low, high = median_interval_of(number, samples)
            entries[tuple(config.values())] = RecordedEntry(
                config,
                outcome,
                number,
                samples,
                str(e.get("reason", "")),
                ci_low=low,
                ci_high=high,
            )
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


# ---- writing ---------------------------------------------------------------------------------


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
