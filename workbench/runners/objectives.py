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

A source that gives no energy at all (a GPU without the counter, a recording without energy)
cannot be searched on it: :class:`NoEnergyError`. One config whose reading is missing or
damaged (NaN, an infinity, zero, negative: a counter that did not move, a cache entry written
by a failing run) or whose EDP overflows a float is a failed evaluation of that config
(:data:`UNUSABLE_READING`, the reason naming the reading), and the search goes on.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from workbench.errors import WorkbenchError
from workbench.runners.base import DeviceInfo, Measurement, Runner, TrialOutcome
from workbench.runners.objective_kind import ObjectiveKind
from workbench.runners.phases import PhaseTimes
from workbench.runners.replay import ReplayRunner
from workbench.spaces.model import Config

#: The metrics an energy reading comes as: a live runner's, a Kernel Tuner cache's.
ENERGY_METRICS = ("energy_j", "energy")
#: The outcome of a config whose objective cannot be computed from its reading: the launch
#: ran and was timed, but gave no value to minimise (no outcome names a damaged reading, and
#: LAUNCH_FAILED is the one for "ran, and failed"; the reason says which reading and why).
UNUSABLE_READING = TrialOutcome.LAUNCH_FAILED


class NoEnergyError(WorkbenchError):
    """An energy objective and a measurement without an energy reading."""


def energy_of(m: Measurement) -> float | None:
    """The joules per launch a measurement carries (None: no reading that is a positive
    finite number)."""
    return _energy_in(m.metrics)


def _energy_in(metrics: Mapping[str, object]) -> float | None:
    for name in ENERGY_METRICS:
        value = metrics.get(name)
        if isinstance(value, int | float) and math.isfinite(value) and value > 0:
            return float(value)
    return None


def on_objective(
    m: Measurement, kind: ObjectiveKind, where: str, *, source_gives_energy: bool = False
) -> Measurement:
    """``m`` with the objective's value (its time kept as ``time_ms``); failures unchanged; a
    correct measurement whose objective cannot be computed, a failure of its config.

    Args:
        m: the inner runner's measurement.
        kind: the objective.
        where: the device or recording, for the error.
        source_gives_energy: the source is known to give energy readings (a recording with
            energy, a GPU that gave one before): a config without one has a missing reading.

    Raises:
        NoEnergyError: a correct measurement without an energy reading from a source not known
            to give any (the runner cannot search on energy: the GPU has no counter, or the
            recording no energy).
    """
    if kind is ObjectiveKind.TIME or m.outcome is not TrialOutcome.OK:
        return m
    assert m.value is not None
    energy = energy_of(m)
    if energy is None:
        if not source_gives_energy and not any(n in m.metrics for n in ENERGY_METRICS):
            raise NoEnergyError(
                f"`objective` {kind.value}: {where} gives no energy reading (NVML's total energy "
                "counter, nvidia-ml-py, on a GPU that has one; or a recording with energy)"
            )
        return _unusable(m, kind, _energy_problem(m))
    value = energy if kind is ObjectiveKind.ENERGY else energy * m.value / 1e3
    if not math.isfinite(value):
        why = f"the EDP overflows a float ({energy:g} J x {m.value:g} ms)"
        return _unusable(m, kind, why)
    metrics = {**m.metrics, "time_ms": m.value, "energy_j": energy}
    return dataclasses.replace(m, value=value, ci_low=None, ci_high=None, metrics=metrics)


def _energy_problem(m: Measurement) -> str:
    """What is wrong with a correct measurement's energy reading, for its failure's reason."""
    for name in ENERGY_METRICS:
        if name in m.metrics:
            return f"its energy reading ({name}) is {m.metrics[name]!r} J, not a positive number"
    # a replayed entry's reason says what its recording held that could not be read
    recorded = f" ({m.reason})" if m.replayed_from and m.reason else ""
    return f"no energy reading for this config{recorded}"


def _unusable(m: Measurement, kind: ObjectiveKind, why: str) -> Measurement:
    """The failure of a config whose launch ran (its time kept as ``time_ms``) but whose
    ``kind`` cannot be computed."""
    return Measurement.failure(
        UNUSABLE_READING,
        f"--objective {kind.value}: {why}; the launch ran ({m.value:.4g} ms) but gives no "
        f"{kind.value} to minimise",
        replayed_from=m.replayed_from,
        compile_seconds=m.compile_seconds,
        # a NaN or infinite reading is said in the reason, not kept: PostgreSQL's JSON refuses it
        metrics={**{k: v for k, v in m.metrics.items() if math.isfinite(v)}, "time_ms": m.value},
    )


class ObjectiveRunner(Runner):
    """``inner``'s measurements with the value of ``kind`` (see the module)."""

    def __init__(self, inner: Runner, kind: ObjectiveKind) -> None:
        self.inner = inner
        self.kind = kind
        self.objective = kind.objective
        #: whether the source gives energy readings: a recording says so up front (one entry
        #: with a reading); a live GPU once it gave one. Until then a correct measurement
        #: without a reading means the source has none (NoEnergyError), not a damaged config.
        self.gives_energy = isinstance(inner, ReplayRunner) and any(
            _energy_in(e.metrics) is not None for e in inner.recording.entries.values()
        )

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
        m = self.inner.evaluate(config)
        out = on_objective(m, self.kind, where, source_gives_energy=self.gives_energy)
        self.gives_energy = self.gives_energy or energy_of(m) is not None
        return out

    def close(self) -> None:
        self.inner.close()
