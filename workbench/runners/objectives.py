"""What a search minimises: the time of a launch (the default), its energy, or both at once.

A live runner reads the GPU's total energy counter (NVML, ``nvmlDeviceGetTotalEnergyConsumption``)
around the timed samples and keeps the joules per sample as the ``energy_j`` metric; a Kernel
Tuner cache recorded with energy keeps it as ``energy``. :class:`ObjectiveRunner` turns either
into the value the search minimises:

* ``energy``: joules per launch (the L2 flush before each sample included, as it is in the
  counter's window);
* ``edp``: the energy-delay product, joules x seconds per launch (lower: faster and leaner).

The launch time stays in the measurement (``time_ms``, the samples), so a study tuned on
energy still shows how fast each config is, and the report draws the time-energy Pareto front.
"""

from __future__ import annotations

import dataclasses
import enum

from workbench.errors import WorkbenchError
from workbench.runners.base import DeviceInfo, Measurement, Objective, Runner, TrialOutcome
from workbench.runners.phases import PhaseTimes
from workbench.spaces.model import Config

#: The metrics an energy reading comes as: a live runner's, a Kernel Tuner cache's.
ENERGY_METRICS = ("energy_j", "energy")


class ObjectiveKind(enum.Enum):
    """``--objective``: what the search minimises."""

    TIME = "time"
    ENERGY = "energy"
    EDP = "edp"

    @property
    def objective(self) -> Objective:
        units = {"time": "ms", "energy": "J", "edp": "J*s"}
        return Objective(self.value, units[self.value])


class NoEnergyError(WorkbenchError):
    """An energy objective and a measurement without an energy reading."""


def energy_of(m: Measurement) -> float | None:
    """The joules per launch a measurement carries (None: no reading)."""
    for name in ENERGY_METRICS:
        value = m.metrics.get(name)
        if isinstance(value, int | float) and value > 0:
            return float(value)
    return None


def on_objective(m: Measurement, kind: ObjectiveKind, where: str) -> Measurement:
    """``m`` with the objective's value (its time kept as ``time_ms``); failures unchanged.

    Raises:
        NoEnergyError: a correct measurement without an energy reading (the runner cannot
            search on energy: the GPU has no counter, or the recording no energy).
    """
    if kind is ObjectiveKind.TIME or m.outcome is not TrialOutcome.OK:
        return m
    energy = energy_of(m)
    if energy is None:
        raise NoEnergyError(
            f"--objective {kind.value}: {where} gives no energy reading (NVML's total energy "
            "counter, nvidia-ml-py, on a GPU that has one; or a recording with energy)"
        )
    assert m.value is not None
    value = energy if kind is ObjectiveKind.ENERGY else energy * m.value / 1e3
    metrics = {**m.metrics, "time_ms": m.value, "energy_j": energy}
    return dataclasses.replace(m, value=value, ci_low=None, ci_high=None, metrics=metrics)


class ObjectiveRunner(Runner):
    """``inner``'s measurements with the value of ``kind`` (see the module)."""

    def __init__(self, inner: Runner, kind: ObjectiveKind) -> None:
        self.inner = inner
        self.kind = kind
        self.objective = kind.objective

    @property
    def device(self) -> DeviceInfo:
        return self.inner.device

    @property
    def replay_source(self) -> str | None:
        return self.inner.replay_source

    def prepare(self, config: Config) -> None:
        self.inner.prepare(config)

    def phase_times(self) -> PhaseTimes | None:
        return self.inner.phase_times()

    def evaluate(self, config: Config) -> Measurement:
        where = self.inner.replay_source or self.inner.device.name
        return on_objective(self.inner.evaluate(config), self.kind, where)

    def close(self) -> None:
        self.inner.close()
