"""Energy: the worker reads the GPU's energy counter around the timed samples, the runner keeps
joules per sample, ``--objective energy|edp`` searches on them (here: Kernel Tuner's cache
recorded with energy on an RTX 4000 Ada), and the report draws the time-energy Pareto front."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, needs_caches

from workbench.report.data import gather_study
from workbench.report.energy import gather_time_energy, pareto_front
from workbench.runners.base import DeviceInfo, Measurement, Runner, TrialOutcome
from workbench.runners.cuda.worker import measure
from workbench.runners.objective_kind import ObjectiveKind
from workbench.runners.objectives import (
    UNUSABLE_READING,
    NoEnergyError,
    ObjectiveRunner,
)
from workbench.runners.protocol import Timing
from workbench.runners.timing import StoppingRule, TimingOptions, TimingStopReason
from workbench.runners.worker_results import energy_metrics
from workbench.spaces.model import Config
from workbench.store import Store

ENERGY_CACHE = CACHES / "kernel_tuner_test_cache_time_energy_RTX4000Ada.json"


class Counter:
    """NVML's readings as the worker asks for them: a clock, and an energy counter that grows
    by ``watts`` for the wall time between readings (a stand-in for the driver)."""

    max_sm_clock_mhz = 1980.0

    def __init__(self, watts: float | None) -> None:
        self.watts = watts
        self.start = time.perf_counter()

    def sm_clock_mhz(self) -> float:
        return 1980.0

    def energy_mj(self) -> float | None:
        if self.watts is None:
            return None
        return 1e3 * self.watts * (time.perf_counter() - self.start)


def test_the_energy_counter_is_read_around_the_timed_samples() -> None:
    opts = TimingOptions(
        rule=StoppingRule(min_samples=10, max_samples=10, min_time_s=0.0), warmup_s=0.02
    )

    def sample() -> float:
        time.sleep(0.002)
        return 2.0

    timing = measure(
        opts,
        launch=lambda: time.sleep(0.001),
        timed_launch=sample,
        flush=lambda: None,
        clocks=Counter(300.0),  # type: ignore[arg-type]
        clock_note="",
        beat=lambda *a: None,  # type: ignore[arg-type]
    )
    assert timing.energy_mj is not None and timing.sampling_seconds >= 0.02
    # the counter's window is the samples', not the warm-up's: 300 W over it
    assert timing.energy_mj == pytest.approx(300.0 * 1e3 * timing.sampling_seconds, rel=0.05)
    metrics = energy_metrics(timing)
    assert metrics["power_w"] == pytest.approx(300.0, rel=0.05)
    assert metrics["energy_j"] == pytest.approx(timing.energy_mj / 1e3 / 10)

    none = measure(
        opts,
        launch=lambda: None,
        timed_launch=lambda: 1.0,
        flush=lambda: None,
        clocks=Counter(None),  # type: ignore[arg-type]
        clock_note="",
        beat=lambda *a: None,  # type: ignore[arg-type]
    )
    assert none.energy_mj is None and energy_metrics(none) == {}


def test_a_counter_that_did_not_move_gives_no_energy() -> None:
    timing = Timing(
        (1.0, 1.0), (), (False, False), None, TimingStopReason.CONVERGED, 2, 0.1, "", 0.0
    )
    assert energy_metrics(timing) == {}


def test_the_pareto_front_keeps_what_nothing_beats_on_both() -> None:
    times = [1.0, 2.0, 1.5, 3.0, 1.0]
    energy = [5.0, 1.0, 2.0, 0.5, 6.0]
    assert pareto_front(times, energy) == [0, 2, 1, 3]


@needs_caches
@pytest.mark.parametrize("objective", ["energy", "edp"])
def test_a_recording_with_energy_is_tuned_on_energy(tmp_path: Path, objective: str) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    cache = json.loads(ENERGY_CACHE.read_text())["cache"]
    code, out, err = invoke(
        "tune", "--replay", str(ENERGY_CACHE), "--objective", objective, "--budget", "15",
        "--json", "--storage", storage,
    )  # fmt: skip
    assert code == 0, out + err
    doc = json.loads(out)
    unit = {"energy": "J", "edp": "J*s"}[objective]
    assert doc["objective"] == {"name": objective, "unit": unit}
    assert doc["study"].endswith(f" | {objective}")

    # every recorded config was evaluated: the best is the recording's least energy (or EDP)
    def score(r: dict) -> float:
        return r["energy"] if objective == "energy" else r["energy"] * r["time"] / 1e3

    best = min(cache.values(), key=score)
    assert doc["best_value"] == pytest.approx(score(best))
    assert doc["best_config"]["block_size_x"] == best["block_size_x"]
    store = Store(storage, read_only=True)
    (study,) = [s for s in store.studies() if s.name == doc["study"]]
    assert (study.objective, study.unit) == (objective, unit)
    assert len(store.studies()) == 1  # no empty time study left behind
    te = gather_time_energy(gather_study(store, study))
    assert te is not None and len(te.labels) == 15
    assert te.time_ms[te.front[0]] == min(te.time_ms)  # the fastest is on the front


def test_energy_without_a_reading_is_one_clear_error(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    code, out, err = invoke(
        "tune", "reduce", "--objective", "energy", "--budget", "3", "--storage", storage
    )
    assert code != 0
    assert "--objective energy" in out + err and "no energy reading" in out + err


def damaged_cache(tmp_path: Path, key: str, energy: object) -> Path:
    """The energy cache with one entry's ``energy`` set to ``energy`` (``...``: removed), as
    Python's json writes it (NaN and Infinity are what Kernel Tuner's json.dump leaves)."""
    doc = json.loads(ENERGY_CACHE.read_text())
    if energy is ...:
        del doc["cache"][key]["energy"]
    else:
        doc["cache"][key]["energy"] = energy
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(doc))
    return path


def strict_json(text: str) -> dict:
    """``text`` parsed as JSON proper: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@needs_caches
@pytest.mark.parametrize(
    ("objective", "energy", "named"),
    [
        ("energy", float("nan"), "nan"),
        ("edp", float("inf"), "inf"),
        ("energy", -1.0, "-1"),
        ("edp", 0.0, "0"),
        ("energy", ..., "no energy"),
    ],
)
def test_a_damaged_energy_reading_fails_its_config_and_the_tune_goes_on(
    tmp_path: Path, objective: str, energy: object, named: str
) -> None:
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    key = "384,1080"
    cache = json.loads(ENERGY_CACHE.read_text())["cache"]
    code, out, err = invoke(
        "tune", "--replay", str(damaged_cache(tmp_path, key, energy)), "--objective", objective,
        "--budget", "15", "--json", "--storage", storage,
    )  # fmt: skip
    assert code == 0, out + err
    doc = strict_json(out)
    assert doc["evaluations"] == 15 and doc["failed"] == 1

    def score(r: dict) -> float:
        return r["energy"] if objective == "energy" else r["energy"] * r["time"] / 1e3

    best = min((r for k, r in cache.items() if k != key), key=score)
    assert doc["best_value"] == pytest.approx(score(best))
    store = Store(storage, read_only=True)
    (study,) = store.studies()
    (bad,) = [e for e in store.evaluations(study) if e.config["block_size_x"] == 384]
    assert bad.measurement.outcome.failed and bad.measurement.value is None
    assert "energy" in bad.measurement.reason and named in bad.measurement.reason


@needs_caches
def test_an_edp_that_overflows_fails_its_config(tmp_path: Path) -> None:
    """1e308 J x 3.2 ms is past a float: not a value a search may minimise (or JSON hold)."""
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    code, out, err = invoke(
        "tune", "--replay", str(damaged_cache(tmp_path, "384,1080", 1e308)), "--objective", "edp",
        "--budget", "15", "--json", "--storage", storage,
    )  # fmt: skip
    assert code == 0, out + err
    doc = strict_json(out)
    assert doc["failed"] == 1 and doc["best_value"] is not None
    store = Store(storage, read_only=True)
    (study,) = store.studies()
    (bad,) = [e for e in store.evaluations(study) if e.measurement.outcome.failed]
    assert "overflows" in bad.measurement.reason and "1e+308 J" in bad.measurement.reason


class Readings(Runner):
    """A live runner's answers, in order: the time, and the energy reading each came with
    (None: the counter gave none)."""

    def __init__(self, *energies: float | None) -> None:
        self.energies = list(energies)

    @property
    def device(self) -> DeviceInfo:
        return DeviceInfo("NVIDIA H200")

    def evaluate(self, config: Config) -> Measurement:
        energy = self.energies.pop(0)
        metrics = {} if energy is None else {"energy_j": energy}
        return Measurement(TrialOutcome.OK, value=2.0, samples=(2.0,), metrics=metrics)


def test_a_gpu_that_gave_energy_before_fails_only_the_config_without_it() -> None:
    """No reading at all from the first config: the GPU has no counter, and the tune stops.
    After a reading: a config without one (the counter did not move) is a failed config."""
    with pytest.raises(NoEnergyError, match="NVIDIA H200 gives no energy reading"):
        ObjectiveRunner(Readings(None), ObjectiveKind.ENERGY).evaluate({})
    runner = ObjectiveRunner(Readings(0.5, None, float("nan"), 0.25), ObjectiveKind.EDP)
    first, missing, nan, last = (runner.evaluate({}) for _ in range(4))
    assert first.value == pytest.approx(0.5 * 2.0 / 1e3) and last.outcome is TrialOutcome.OK
    assert missing.outcome is UNUSABLE_READING and "no energy reading" in missing.reason
    assert nan.outcome is UNUSABLE_READING and "nan J" in nan.reason
    assert missing.metrics["time_ms"] == 2.0  # the launch's time is kept
    assert "energy_j" not in nan.metrics  # (said in the reason; PostgreSQL refuses NaN)
