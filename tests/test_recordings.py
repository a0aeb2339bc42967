"""Reading recorded spaces: Kernel Tuner caches, T4 files, workbench recordings; damaged input."""

from __future__ import annotations

import gc
import gzip
import json
import tracemalloc
from pathlib import Path

import pytest
from dataset_paths import CACHES, needs_caches

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import RecordingError, load_recording, reading, write_recording
from workbench.runners.replay import ReplayRunner
from workbench.runners.timing import summarize
from workbench.search.kept_recordings import replay_banner
from workbench.spaces.registry import builtin_spaces_dir
from workbench.store import Store

KT_FILES = sorted(p for p in CACHES.glob("*.json*") if "_T4" not in p.name)


@needs_caches
@pytest.mark.parametrize("path", KT_FILES, ids=lambda p: p.name)
def test_every_kernel_tuner_cache_loads(path: Path) -> None:
    rec = load_recording(path)
    raw = json.loads(
        gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    )
    assert rec.format == "kt-cache"
    assert rec.device.name == raw["device_name"]
    assert rec.parameter_names == tuple(raw["tune_params_keys"])
    assert len(rec.entries) == len(raw["cache"])
    ok = [v["time"] for v in raw["cache"].values() if not isinstance(v["time"], str)]
    assert rec.optimum().value == min(ok)
    assert sum(e.outcome is TrialOutcome.OK for e in rec.entries.values()) == len(ok)


@needs_caches
def test_t4_and_kt_versions_of_the_same_data_agree() -> None:
    kt = load_recording(CACHES / "convolution_milo_A100.json.gz")
    t4 = load_recording(CACHES / "convolution_milo_A100_T4.json.gz")
    assert t4.format == "t4"
    assert set(t4.parameter_names) == set(kt.parameter_names)
    assert len(t4.entries) == len(kt.entries)
    assert t4.optimum().value == pytest.approx(kt.optimum().value)
    assert t4.optimum().config == kt.optimum().config
    failed = {
        o: sum(e.outcome is o for e in kt.entries.values())
        for o in (TrialOutcome.COMPILE_FAILED, TrialOutcome.LAUNCH_FAILED)
    }
    assert failed == {TrialOutcome.COMPILE_FAILED: 6, TrialOutcome.LAUNCH_FAILED: 155}
    assert {o: sum(e.outcome is o for e in t4.entries.values()) for o in failed} == failed
    # both name the day the measurements ended (their latest entry), for the replay banner
    assert kt.date == t4.date == "2023-12-22 13:17:23.719843+00:00"
    assert t4.kernel == "convolution_milo_A100_T4"  # the file's name without .json.gz


@needs_caches
def test_replay_runner_answers_with_its_source() -> None:
    rec = load_recording(CACHES / "pnpoly_RTX_3090.json.gz")
    runner = ReplayRunner(rec)
    best = rec.optimum()
    m = runner.evaluate(best.config)
    assert m.outcome is TrialOutcome.OK and m.value == best.value and m.samples
    assert m.replayed_from == "NVIDIA GeForce RTX 3090 (pnpoly_RTX_3090.json.gz, 2023-01-26)"
    failed = next(e for e in rec.entries.values() if e.outcome is not TrialOutcome.OK)
    assert runner.evaluate(failed.config).outcome is TrialOutcome.LAUNCH_FAILED
    absent = {**best.config, "block_size_x": 99999}
    assert runner.evaluate(absent).outcome is TrialOutcome.INFEASIBLE


def test_workbench_recording_round_trip(tmp_path: Path) -> None:
    device = DeviceInfo("NVIDIA H200", cc=90, driver="580.1")
    entries = [
        ({"A": 1, "B": "x"}, Measurement(TrialOutcome.OK, value=0.5, samples=(0.5, 0.51))),
        ({"A": 2, "B": "x"}, Measurement.failure(TrialOutcome.WRONG, "mismatch at 3")),
    ]
    path = write_recording(
        tmp_path / "r.json.gz",
        kernel="k",
        device=device,
        parameters=[("A", [1, 2]), ("B", ["x"])],
        entries=entries,
        shape={"n": 8},
        arch="sm_90",
    )
    rec = load_recording(path)
    assert rec.format == "workbench" and rec.device == device and rec.shape == {"n": 8}
    assert rec.lookup({"A": 1, "B": "x"}).samples == (0.5, 0.51)
    assert rec.lookup({"A": 2, "B": "x"}).reason == "mismatch at 3"
    assert rec.date is not None and rec.arch == "sm_90"


def test_a_workbench_recording_replays_the_interval_of_each_median(tmp_path: Path) -> None:
    """A workbench recording keeps every sample and their median as the value: a replayed
    measurement carries the median's 95 % interval, as the timing protocol gives it on the GPU
    (the H200 recording of gemm_int8: its best config's 79 samples). A value that is not the
    median of its samples gets none (an interval of the median would not bracket it)."""
    path = (
        builtin_spaces_dir()
        / "recordings/gemm_int8/gemm_int8-nvidia-h200-M4096_N4096_K4096.json.gz"
    )
    rec = load_recording(path)
    best = rec.optimum()
    m = ReplayRunner(rec).evaluate(best.config)
    expected = summarize(best.samples)
    assert m.value == expected.median and len(m.samples) == 79
    assert (m.ci_low, m.ci_high) == (expected.ci_low, expected.ci_high)
    assert m.ci_low < m.value < m.ci_high
    other = write_recording(
        tmp_path / "r.json",
        kernel="k",
        device=DeviceInfo("GPU"),
        parameters=[("A", [1])],
        entries=[({"A": 1}, Measurement(TrialOutcome.OK, value=0.5, samples=(0.4, 0.6, 0.7)))],
    )
    assert ReplayRunner(load_recording(other)).evaluate({"A": 1}).ci_low is None


def t4(configurations: list[dict]) -> dict:
    """A T4 file whose configurations all ran correctly in 1 ms."""
    results = [
        {
            "configuration": c,
            "invalidity": "correct",
            "measurements": [{"name": "time", "value": 1}],
        }
        for c in configurations
    ]
    return {"schema_version": "1.0.0", "results": results}


def kt_entry(time: str) -> str:
    """A one-entry Kernel Tuner cache whose time is the JSON text ``time``."""
    cache = '{"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {"1": {"time": T}}}'
    return cache.replace("T", time)


def t4_with(field: str, value: object) -> dict:
    """A one-result T4 file with ``field`` of its result replaced."""
    data = t4([{"a": 1}])
    data["results"][0][field] = value
    return data


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda p: p.write_bytes(b""), "not valid JSON"),
        (lambda p: p.write_bytes(b"\x1f\x8b\x08\x00garbage"), "gzip"),
        (lambda p: p.write_text('{"cache": {'), "truncated"),
        (lambda p: p.write_bytes(b'{"cache": "\xff"}'), r"not text \(JSON is UTF-8\)"),
        (lambda p: p.write_text('{"cache": }'), "not valid JSON at byte 10: "),
        (lambda p: p.write_text("[1, 2]"), "JSON object"),
        (lambda p: p.write_text('{"hello": 1}'), "unknown format"),
        (
            lambda p: p.write_text(
                '{"tune_params_keys": ["a"], "tune_params": {"a": [1]}, "cache": {}}'
            ),
            "holds no measured configs",
        ),
        (
            lambda p: p.write_text(
                json.dumps(
                    {
                        "tune_params_keys": ["a"],
                        "tune_params": {"a": [1]},
                        "cache": {"1,2": {"time": 1.0}},
                    }
                )
            ),
            "does not match",
        ),
        (
            lambda p: p.write_text(
                json.dumps(
                    {
                        "tune_params_keys": ["a"],
                        "tune_params": {"a": [1]},
                        "cache": {"1": {"time": "Exploded"}},
                    }
                )
            ),
            "unknown failure",
        ),
        (
            lambda p: p.write_text(json.dumps({"format": "workbench-recording", "version": 99})),
            "version 99",
        ),
        (
            lambda p: p.write_text(
                json.dumps(
                    {
                        "tune_params_keys": ["a"],
                        "tune_params": {"a": [1]},
                        "cache": {"1": {"a": 1, "time": -0.5}},
                    }
                )
            ),
            "time is -0.5, not above zero",
        ),
        *(
            (lambda p, bad=bad: p.write_text(kt_entry(bad)), message)
            for bad, message in [
                ("0", "time is 0, not above zero"),  # (a ratio to the optimum divides by it)
                ("true", "time is True, not a number"),
                ("1" + "0" * 400, "not a number"),  # an integer past a float's range
            ]
        ),
        (
            lambda p: p.write_text(
                json.dumps(
                    {
                        "tune_params_keys": ["a"],
                        "tune_params": {"a": [[1, 2]]},
                        "cache": {"[1, 2]": {"time": 1.0}},
                    }
                )
            ),
            r"tune_params\['a'\] holds \[1, 2\]: values are numbers or strings",
        ),
        *(
            (lambda p, field=field, bad=bad: p.write_text(json.dumps(t4_with(field, bad))), message)
            for field, bad, message in [
                ("measurements", 3, "has no numeric 'time' measurement"),
                ("measurements", [{"name": "time", "value": -5}], "time is -5.0, not above zero"),
                ("invalidity", ["compile"], "malformed T4 file"),
            ]
        ),
        (
            lambda p: p.write_text(
                json.dumps({"tune_params_keys": [], "tune_params": {}, "cache": {}})
            ),
            "tune_params_keys is empty",
        ),
        (
            lambda p: p.write_text(
                json.dumps({"tune_params_keys": ["a"], "tune_params": {"a": []}, "cache": {}})
            ),
            r"tune_params \['a'\]: each needs a non-empty list",
        ),
        (lambda p: p.write_text(json.dumps(t4([{"a": 1}, {"a": [1, 2]}]))), "a is \\[1, 2\\]"),
        (lambda p: p.write_text(json.dumps(t4([{}]))), r"results\[0\] has no configuration"),
        # an entry that is not an object, an entry without a time: said as such
        (
            lambda p: p.write_text(kt_entry("1").replace('{"time": 1}', '"fast"')),
            r"cache\['1'\] is a string, not an entry",
        ),
        (
            lambda p: p.write_text(kt_entry("1").replace('"time": 1', '"times": [1.0]')),
            r"cache\['1'\] has no time: nothing was measured",
        ),
        (
            lambda p: p.write_text(json.dumps(t4([{"a": 1}, {"a": 2}, {"a": 1}]))),
            r"results\[2\] repeats the configuration of results\[0\]",
        ),
    ],
)
def test_damaged_recordings_are_refused(tmp_path: Path, make, message: str) -> None:
    path = tmp_path / "bad.json"
    make(path)
    with pytest.raises(RecordingError, match=message) as info:
        load_recording(path)
    assert str(path) in str(info.value)


@needs_caches
def test_truncated_gzip_of_a_real_cache(tmp_path: Path) -> None:
    data = (CACHES / "pnpoly_RTX_3090.json.gz").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordingError, match="gzip"):
        load_recording(path)
    with pytest.raises(RecordingError, match="cannot read"):
        load_recording(tmp_path / "missing.json")


@needs_caches
def test_reading_a_recording_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    good = CACHES / "pnpoly_RTX_3090.json.gz"
    bad = tmp_path / "bad.json"
    bad.write_text('{"cache": {"1,2": {"time": 1.0}}, "tune_params_keys": ["a"]}')
    assert gc.isenabled()
    try:
        load_recording(good)
        assert gc.isenabled()
        with pytest.raises(RecordingError):
            load_recording(bad)
        assert gc.isenabled()
        gc.disable()  # a caller that paused it keeps it paused
        load_recording(good)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_kernel_tuner_times_become_the_samples_and_non_numbers_are_dropped(tmp_path: Path) -> None:
    path = tmp_path / "cache.json"
    cache = {
        "1": {"a": 1, "time": 1.5, "times": [1, 2.5, 1.0]},
        "2": {"a": 2, "time": 2.0, "times": [2.0, "n/a", 2.25]},
        "3": {"a": 3, "time": 3.0},
    }
    path.write_text(
        json.dumps({"tune_params_keys": ["a"], "tune_params": {"a": [1, 2, 3]}, "cache": cache})
    )
    rec = load_recording(path)
    assert rec.lookup({"a": 1}).samples == (1.0, 2.5, 1.0)
    assert all(type(t) is float for t in rec.lookup({"a": 1}).samples)
    assert rec.lookup({"a": 2}).samples == (2.0, 2.25)
    assert rec.lookup({"a": 3}).samples == ()


@pytest.mark.parametrize(
    "objective,tuned_on,unit,note",
    [
        ("time", "time", "ms", None),
        ("energy", "energy", "J", None),
        ("GFLOP/s", "time", "ms", "GFLOP/s (higher is better)"),  # 9 GFLOP/s beats 5
        ("my_metric", "time", "ms", "my_metric (its direction is unknown)"),
    ],
)
def test_a_kernel_tuner_objective_is_minimised_or_replaced_by_time(
    tmp_path: Path, objective: str, tuned_on: str, unit: str, note: str | None
) -> None:
    path = tmp_path / "cache.json"
    cache = {
        "1": {"a": 1, "time": 1.0, "energy": 7.0, "GFLOP/s": 5.0, "my_metric": 1.0},
        "2": {"a": 2, "time": 2.0, "energy": 3.0, "GFLOP/s": 9.0, "my_metric": 0.5},
    }
    header = {"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "objective": objective}
    path.write_text(json.dumps({**header, "cache": cache}))
    rec = load_recording(path)
    assert (rec.objective.name, rec.objective.unit) == (tuned_on, unit)
    assert rec.lookup({"a": 1}).value == cache["1"][tuned_on]
    if note is None:
        assert rec.note is None
    else:  # tuned on time, and the replay banner says why
        assert note in rec.note and "tunes on the time" in rec.note  # type: ignore[operator]
        assert rec.optimum().config == {"a": 1}  # type: ignore[union-attr]
        assert note in replay_banner(rec)


# -- Kernel Tuner caches as Kernel Tuner itself reads them ----------------------------------------

ENERGY = CACHES / "kernel_tuner_test_cache_time_energy_RTX4000Ada.json"


def _as_left_open(source: Path, path: Path, *, trailing_comma: bool) -> Path:
    """``source`` rewritten the way a Kernel Tuner run appends to its cache, stopped before it
    closed the file: the header, then one ``"key": {...},`` line per entry, no closing braces."""
    doc = json.loads(source.read_text())
    header = json.dumps({k: v for k, v in doc.items() if k != "cache"})[:-1]
    lines = [f"\n{json.dumps(k)}: {json.dumps(v)}" for k, v in doc["cache"].items()]
    text = header + ', "cache": {' + ",".join(lines) + ("," if trailing_comma else "")
    path.write_text(text)
    return path


@needs_caches
@pytest.mark.parametrize("trailing_comma", [True, False])
def test_a_cache_left_open_by_a_stopped_run_reads_as_kernel_tuner_reads_it(
    tmp_path: Path, trailing_comma: bool
) -> None:
    path = _as_left_open(ENERGY, tmp_path / "open.json", trailing_comma=trailing_comma)
    with pytest.raises(json.JSONDecodeError):
        json.loads(path.read_text())  # not JSON as it stands
    recording = load_recording(path)
    closed = load_recording(ENERGY)
    assert recording.entries == closed.entries and len(recording.entries) == 15
    assert recording.note is not None and "never closed" in recording.note
    assert closed.note is None


def test_kernel_tuner_markers_extra_values_and_metrics(tmp_path: Path) -> None:
    path = tmp_path / "grown.json"
    path.write_text(
        json.dumps(
            {
                "tune_params_keys": ["bx", "by"],
                "tune_params": {"bx": [32, 64], "by": [1]},
                "cache": {
                    "32,1": {
                        "bx": 32,
                        "by": 1,
                        "time": 2.0,
                        "GFLOP/s": 10.0,
                        "compile_time": 500.0,
                        "benchmark_time": 20.0,
                    },
                    "64,1": {"bx": 64, "by": 1, "time": "ErrorConfig"},
                    # a value added to tune_params after the cache was started
                    "128,1": {"bx": 128, "by": 1, "time": 1.0},
                },
            }
        )
    )
    recording = load_recording(path)
    assert recording.parameters == (("bx", (32, 64, 128)), ("by", (1,)))
    assert recording.note is not None and "bx: 128" in recording.note
    assert recording.optimum().config == {"bx": 128, "by": 1}
    failed = recording.lookup({"bx": 64, "by": 1})
    assert failed.outcome is TrialOutcome.LAUNCH_FAILED and "ErrorConfig" in failed.reason
    m = recording.lookup({"bx": 32, "by": 1}).to_measurement(recording.source)
    assert m.metrics == {"GFLOP/s": 10.0, "timing_seconds": 0.02} and m.compile_seconds == 0.5


def test_samples_that_are_not_finite_numbers_are_left_out(tmp_path: Path) -> None:
    """NaN and infinities in a recorded list of samples are not measurements (and PostgreSQL's
    JSON cannot store them): the finite samples are kept."""
    path = tmp_path / "nan.json"
    path.write_text(
        '{"tune_params_keys": ["a"], "tune_params": {"a": [1, 2]}, "cache": {'
        '"1": {"time": 1.0, "times": [NaN, 1.0, Infinity, 1.5]},'
        '"2": {"time": 2.0, "times": [2.0, 2.5]}}}'
    )
    entries = list(load_recording(path).entries.values())
    assert [e.samples for e in entries] == [(1.0, 1.5), (2.0, 2.5)]


def test_a_gzip_bomb_is_refused_without_expanding_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """64 MiB of zeros in 64 KB of gzip, against a cap of 1 MiB (the real cap, 512 MiB, is
    too slow to fill in a test): refused by size, and reading it costs about the cap."""
    monkeypatch.setattr(reading, "MAX_RECORDING_BYTES", 2**20)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as f:
        for _ in range(64):
            f.write(bytes(2**20))
    assert bomb.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(RecordingError, match="decompresses to more than 1 MiB of JSON"):
            load_recording(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20
    # a plain file past the cap (sparse: no disk) is refused the same way
    plain = tmp_path / "big.json"
    with plain.open("wb") as f:
        f.truncate(2**20 + 1)
    with pytest.raises(RecordingError, match="holds more than 1 MiB of JSON"):
        load_recording(plain)


@needs_caches
def test_the_cap_holds_the_largest_real_caches() -> None:
    gzipped = [p for p in KT_FILES if p.suffix == ".gz"]
    largest = max(gzipped, key=lambda p: len(gzip.decompress(p.read_bytes())))
    assert len(gzip.decompress(largest.read_bytes())) * 20 < reading.MAX_RECORDING_BYTES
    assert load_recording(largest).entries


def test_the_recorded_optimum_is_the_best_config_rule_of_the_store(
    project: Path, store: Store
) -> None:
    """Equal medians: the tighter interval wins over the earlier entry, an entry without an
    interval comes after those with one, then the first in the file; a wrong entry never wins.
    The optimum (which a replayed tune's "best found is 1.000x" and the regression recorder
    read) is the entry the store names best once the recording is imported."""
    from recording_helpers import record_space

    from workbench.spaces import Space, load_space
    from workbench.store.best import study_best
    from workbench.store.exchange import import_recording

    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    a, b, c, d, e = [dict(space.spec.default_config(), BLOCK=n) for n in (32, 64, 128, 256, 32)]
    e["SCALE"] = 1

    def median_1(spread: float) -> Measurement:  # 21 samples around a median of 1.0
        samples = tuple(1.0 + spread * (i - 10) / 10 for i in range(21))
        return Measurement(TrialOutcome.OK, value=1.0, samples=samples)

    path = record_space(
        space,
        project / "ties.json",
        [
            (a, 1.0),  # no samples, so no interval: after those with one
            (b, median_1(0.2)),
            (c, median_1(0.05)),  # the tightest
            (d, median_1(0.05)),  # as tight, later in the file
            (e, Measurement.failure(TrialOutcome.WRONG, "max error 3")),
        ],
    )
    recording = load_recording(path)
    highs = [recording.lookup(x).ci_high for x in (a, b, c, d)]  # type: ignore[union-attr]
    assert highs[0] is None and highs[1] > highs[2] == highs[3], highs  # type: ignore[operator]
    optimum = recording.optimum()
    assert optimum is not None and optimum.config == c
    study, _ = import_recording(store, recording)
    best = study_best(store, study)
    assert best is not None and best.config == optimum.config
    # without the intervals the first in the file is best, in both
    plain = record_space(space, project / "plain.json", [(x, 1.0) for x in (b, a, c)])
    assert load_recording(plain).optimum().config == b  # type: ignore[union-attr]
