"""``check`` on stored runs: SM clock normalisation, history noise, shapes, the re-tune hint.

Samples are real: configs of a convolution kernel on an A100 with ~1 % noise, resampled.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from workbench.regress.check import check
from workbench.regress.noise import SampleSet, draw_run
from workbench.regress.records import MeasurementRecord, save_run
from workbench.runners.base import DeviceInfo, TrialOutcome
from workbench.stats.rule import Verdict
from workbench.store import Store

H200 = DeviceInfo(name="NVIDIA H200", cc=90, driver="550.54.15", cuda="12.4", toolkit="nvrtc 13.0")
NEW_TOOLKIT = DeviceInfo(
    name="NVIDIA H200", cc=90, driver="550.54.15", cuda="12.4", toolkit="nvrtc 13.1"
)


@pytest.fixture
def one_percent(one_percent_noise: list[SampleSet]) -> list[SampleSet]:
    return one_percent_noise[:20]


def measured(
    samples: np.ndarray,
    *,
    shape: str = "n=1024",
    clock: float | None = None,
    throttled: np.ndarray | None = None,
) -> MeasurementRecord:
    return MeasurementRecord(
        shape_label=shape,
        config_key="BLOCK=128",
        params={"BLOCK": 128},
        origin="best",
        outcome=TrialOutcome.OK,
        median=float(np.median(samples)),
        samples=tuple(float(x) for x in samples),
        sm_clock_mhz=() if clock is None else (clock,) * len(samples),
        throttled=() if throttled is None else tuple(bool(t) for t in throttled),
    )


def save(
    store: Store, env: int, *ms: MeasurementRecord, label: str | None = None, kernel: str = "conv"
) -> int:
    return save_run(store, kernel=kernel, environment_id=env, measurements=list(ms), label=label)


def test_a_slowdown_the_sm_clock_explains_is_not_a_regression(
    store: Store, one_percent: list[SampleSet]
) -> None:
    """8 % slower at an 8 % lower SM clock: the same cycles, so "same" with a note."""
    rng = np.random.default_rng(0)
    env = store.environment(H200)
    s = one_percent[0].samples
    save(store, env, measured(draw_run(s, rng, n=64), clock=1980.0), label="base")
    save(store, env, measured(draw_run(s, rng, n=64, factor=1.08), clock=1980.0 / 1.08))
    report = check(store, "base", "latest")
    (row,) = report.rows
    assert row.verdict is Verdict.SAME and report.exit_status == 0
    assert row.comparison is not None and row.comparison.cycles is not None
    assert row.comparison.time is not None and row.comparison.time.direction == 1
    assert "SM clock explains" in row.note
    # the same slowdown at the same clock is the kernel's: a regression
    save(store, env, measured(draw_run(s, rng, n=64, factor=1.08), clock=1980.0))
    report = check(store, "base", "latest")
    assert report.rows[0].verdict is Verdict.SLOWER and report.exit_status == 1
    assert report.hint is None  # nothing changed in the environment: no re-tune hint


def test_throttled_samples_are_left_out(store: Store, one_percent: list[SampleSet]) -> None:
    rng = np.random.default_rng(1)
    env = store.environment(H200)
    s = one_percent[1].samples
    save(store, env, measured(draw_run(s, rng, n=64)), label="base")
    cand = draw_run(s, rng, n=64)
    flags = np.arange(64) % 4 != 0
    cand[flags] *= 1.3  # three samples in four ran throttled, and slow
    save(store, env, measured(cand))
    assert check(store, "base").rows[0].verdict is Verdict.SLOWER  # unflagged, they count
    save(store, env, measured(cand, throttled=flags))
    report = check(store, "base")
    assert report.rows[0].verdict is Verdict.SAME
    assert report.to_json()["rows"][0]["samples"] == [64, 64]  # stored, but not compared


def test_the_threshold_follows_the_measured_run_to_run_noise(
    store: Store, one_percent: list[SampleSet]
) -> None:
    """A 4 % step is a regression after steady runs, not after runs that moved by ~2 %."""
    s = one_percent[2].samples
    for drift, expected in ((0.0, Verdict.SLOWER), (0.02, Verdict.SAME)):
        rng = np.random.default_rng(2)
        env, kernel = store.environment(H200), f"conv{drift}"  # a separate series each time
        levels = [1.0, 1.0 + drift, 1.0 - drift, 1.0 + drift, 1.0 - drift, 1.0 + drift, 1.0]
        base = 0
        for level in levels:
            run = draw_run(s, rng, n=200, factor=level)
            base = save(store, env, measured(run), kernel=kernel)
        save(store, env, measured(draw_run(s, rng, n=200, factor=1.04)), kernel=kernel)
        report = check(store, str(base), "latest", kernel=kernel)
        (row,) = report.rows
        assert row.verdict is expected, (drift, row.to_json())
        noise = row.comparison.history_noise if row.comparison else None
        assert noise is not None
        if drift:
            assert noise > 0.015 and row.to_json()["threshold"] > 0.04
        else:
            assert row.to_json()["threshold"] == pytest.approx(0.02)


def test_different_shapes_are_not_comparable(store: Store, one_percent: list[SampleSet]) -> None:
    rng = np.random.default_rng(3)
    env = store.environment(H200)
    s = one_percent[3].samples
    save(store, env, measured(draw_run(s, rng, n=64), shape="n=1024"))
    save(store, env, measured(draw_run(s, rng, n=64, factor=1.5), shape="n=2048"))
    report = check(store)
    assert [(r.shape_label, r.verdict) for r in report.rows] == [
        ("n=1024", Verdict.NOT_COMPARABLE),
        ("n=2048", Verdict.NOT_COMPARABLE),
    ]
    assert report.exit_status == 0
    assert {r.note for r in report.rows} == {
        "not measured in the candidate",
        "not measured in the baseline",
    }


def test_retune_hint_only_when_the_environment_changed_and_something_got_slower(
    store: Store, one_percent: list[SampleSet]
) -> None:
    rng = np.random.default_rng(4)
    old, new = store.environment(H200), store.environment(NEW_TOOLKIT)
    s = one_percent[4].samples
    save(store, old, measured(draw_run(s, rng, n=64)), label="base")
    save(store, new, measured(draw_run(s, rng, n=64)))
    report = check(store, "base")
    assert report.rows[0].verdict is Verdict.SAME and report.hint is None
    assert [c.text() for c in report.changes] == ["toolkit nvrtc 13.0 -> nvrtc 13.1"]
    save(store, new, measured(draw_run(s, rng, n=64, factor=1.07)))
    report = check(store, "base")
    assert report.rows[0].verdict is Verdict.SLOWER
    assert report.hint is not None
    assert "toolkit nvrtc 13.0 -> nvrtc 13.1" in report.hint
    assert "workbench tune conv" in report.hint
    assert "--spaces DIR" in report.hint  # conv is not a kernel of the library
    # a run replayed from a recording: no GPU to tune on, but the recording can be searched
    replayed = save_run(
        store,
        kernel="conv",
        environment_id=new,
        measurements=[measured(draw_run(s, rng, n=64, factor=1.07))],
        replayed_from="NVIDIA H200 (conv_h200.json.gz, 2026-11-30)",
    )
    report = check(store, "base", str(replayed))
    assert report.hint is not None and "workbench tune --replay conv_h200.json.gz" in report.hint
    assert "--spaces DIR" not in report.hint
    # another kernel on another GPU: "different kernels" is the reason, and no re-tune hint
    a100 = store.environment(DeviceInfo(name="NVIDIA A100", cc=80, driver="550.54.15"))
    other = save(store, a100, measured(draw_run(s, rng, n=64)), kernel="gemm")
    report = check(store, "1", str(other))  # by id: the runs of two kernels
    assert {r.note for r in report.rows} == {"different kernels: conv vs gemm"}
    assert report.hint is None


def test_one_change_among_many_configs_must_survive_the_family_step(
    store: Store, one_percent: list[SampleSet]
) -> None:
    """4.5 % slower after ten runs that moved by +-0.75 %: a regression when it is the only config
    compared, not when it is one of 30 that did not move (one false alarm in five checks of 30
    configs otherwise); when all 30 moved by 4.5 %, every one is a regression."""
    rng = np.random.default_rng(5)
    env = store.environment(H200)
    levels = [1.0, 1.0075, 0.9925] * 3 + [1.0, 1.0]  # ten earlier runs and the baseline

    def config(i: int, level: float) -> MeasurementRecord:
        s = one_percent[i % len(one_percent)].samples
        m = measured(draw_run(s, rng, n=200, factor=level))
        return dataclasses.replace(m, config_key=f"BLOCK={i}", params={"BLOCK": i})

    for rows, kernel in ((1, "alone"), (30, "many")):
        for level in levels:
            base = save(store, env, *(config(i, level) for i in range(rows)), kernel=kernel)
        save(store, env, config(0, 1.045), *(config(i, 1.0) for i in range(1, rows)), kernel=kernel)
        report = check(store, str(base), "latest", kernel=kernel)
        first = report.rows[[r.config_key for r in report.rows].index("BLOCK=0")]
        p = first.family_p
        assert p is not None and 0.05 / 30 < p < 0.05  # a discovery alone, not among 30
        if rows == 1:
            assert first.verdict is Verdict.SLOWER and report.exit_status == 1
        else:
            assert first.verdict is Verdict.SAME and report.exit_status == 0
            assert "not among the 30 configs compared (Benjamini-Hochberg" in first.note
            assert first.comparison is not None and first.comparison.verdict is Verdict.SLOWER
    save(store, env, *(config(i, 1.045) for i in range(30)), kernel="many")
    report = check(store, str(base), "latest", kernel="many")
    assert report.count(Verdict.SLOWER) == 30, [r.to_json() for r in report.rows]
    assert report.to_json()["rule"]["family_q"] == 0.05  # type: ignore[index]


def damaged(samples: np.ndarray, bad: float, count: int) -> MeasurementRecord:
    """``samples`` with the first ``count`` replaced by ``bad`` (NaN, zero, negative): what a
    broken timer or a store edited by hand leaves; the median is the intact samples'."""
    intact = float(np.median(samples[count:]))
    values = samples.copy()
    values[:count] = bad
    return dataclasses.replace(measured(values), median=intact)


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -1.0])
def test_a_damaged_sample_is_dropped_with_a_warning_and_the_rest_compared(
    store: Store, one_percent: list[SampleSet], bad: float
) -> None:
    """1.93x slower over 384 samples stays a regression when one sample is NaN, 0 or negative:
    the sample is dropped, the row and the report's warnings name the run and the count."""
    rng = np.random.default_rng(6)
    env = store.environment(H200)
    s = one_percent[5].samples
    save(store, env, measured(draw_run(s, rng, n=384)), label="base")
    cand = save(store, env, damaged(draw_run(s, rng, n=384, factor=1.93), bad, 1))
    report = check(store, "base")
    (row,) = report.rows
    assert row.verdict is Verdict.SLOWER and report.exit_status == 1
    assert row.dropped == (0, 1)
    assert f"candidate run {cand}" in row.note and "1 of 384 samples" in row.note
    (warning,) = report.warnings
    assert f"candidate run {cand}" in warning and "1 of 384" in warning
    assert report.to_json()["rows"][0]["dropped_samples"] == [0, 1]  # type: ignore[index]


@pytest.mark.parametrize("side", ["baseline", "candidate"])
def test_a_measurement_too_damaged_to_compare_fails_the_check_naming_the_run(
    store: Store, one_percent: list[SampleSet], side: str
) -> None:
    """60 of 64 samples NaN leaves 4, under the rule's 7: exit 2, never a silent pass."""
    rng = np.random.default_rng(7)
    env = store.environment(H200)
    s = one_percent[6].samples
    good, bad = measured(draw_run(s, rng, n=64)), damaged(draw_run(s, rng, n=64), np.nan, 60)
    first = save(store, env, bad if side == "baseline" else good, label="base")
    second = save(store, env, good if side == "baseline" else bad)
    report = check(store, "base")
    (row,) = report.rows
    assert row.verdict is Verdict.DAMAGED and report.exit_status == 2
    run = first if side == "baseline" else second
    assert f"{side} run {run}: 60 of 64 samples" in row.note
    left = "4 baseline and 64 candidate" if side == "baseline" else "64 baseline and 4 candidate"
    assert f"{left} samples left, 7 needed on each side" in row.note
    assert report.to_json()["exit_status"] == 2
