"""What a runner is: something that turns one configuration into a verified measurement.

Two runners pass the same contract: :class:`~workbench.runners.cuda.CudaRunner` compiles,
verifies and times on a GPU; :class:`~workbench.runners.replay.ReplayRunner` answers from a
recording made elsewhere (and says where). The search, the store and the reports only see
:class:`Measurement` objects.
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from workbench.runners.phases import PhaseTimes
from workbench.spaces.model import Config


class TrialOutcome(enum.Enum):
    """How an evaluation ended. Only ``OK`` carries a value that can become "best"."""

    OK = "ok"
    WRONG = "wrong"  #: ran, but the output differs from the reference
    COMPILE_FAILED = "compile_failed"
    LAUNCH_FAILED = "launch_failed"  #: launch error, illegal address, worker crash
    TIMEOUT = "timeout"  #: the kernel did not finish in time; the worker was restarted
    INFEASIBLE = "infeasible"  #: rejected by a constraint (or absent from a recorded space)

    @property
    def failed(self) -> bool:
        """An evaluation that ran (or tried to) and gave no usable value."""
        return self not in (TrialOutcome.OK, TrialOutcome.INFEASIBLE)


@dataclass(frozen=True)
class DeviceInfo:
    """Where a measurement comes from: the GPU and software that produced it."""

    name: str
    cc: int | None = None
    uuid: str | None = None
    driver: str | None = None
    cuda: str | None = None
    toolkit: str | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_mhz: int | None = None

    def key(self) -> str:
        """Device class for grouping results: timings of different GPUs never mix."""
        return self.name

    def device_class(self) -> str:
        """GPU model + driver + toolkit: workers on a shared study must agree on it, since a
        driver or toolkit change can move timings as much as a tuning parameter."""
        parts = [self.name]
        if self.driver:
            parts.append(f"driver {self.driver}")
        if self.toolkit or self.cuda:
            parts.append(f"CUDA {self.toolkit or self.cuda}")
        return " / ".join(parts)


#: a measurement's place under the best-config rule (:func:`rank_key`); lower is better
RankKey = tuple[bool, float, bool, float]


def is_correct(outcome: TrialOutcome, value: float | None) -> bool:
    """Correct, with a value: the only results that can be best (rule 1 of store/best.py)."""
    return outcome is TrialOutcome.OK and value is not None and not math.isnan(value)


def rank_key(value: float, ci_high: float | None, replayed: bool) -> RankKey:
    """The best-config rule as a sort key for a correct result (rules 2 to 4 of
    store/best.py): measured before replayed, then the median, then the lowest upper bound of
    its confidence interval (none last). Rule 5, the earliest first among equals, is the
    caller's: a stable sort, or ``min``, of a list in commit (or file) order."""
    high = ci_high if ci_high is not None and not math.isnan(ci_high) else math.inf
    return (replayed, float(value), high == math.inf, high)


@dataclass(frozen=True)
class Measurement:
    """The result of evaluating one configuration.

    ``value`` is the objective (milliseconds per launch, the median of ``samples``) when
    ``outcome`` is OK. ``replayed_from`` names the recording when the number was not measured
    by this process: a replayed value is never presented as measured here.
    """

    outcome: TrialOutcome
    value: float | None = None
    samples: tuple[float, ...] = ()
    ci_low: float | None = None
    ci_high: float | None = None
    reason: str = ""
    sm_clock_mhz: tuple[float, ...] = ()
    throttled: tuple[bool, ...] = ()
    compile_seconds: float | None = None
    verify_max_error: float | None = None
    replayed_from: str | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.outcome is TrialOutcome.OK and self.value is None:
            raise ValueError("an OK measurement needs a value")
        if self.outcome is not TrialOutcome.OK and self.value is not None:
            raise ValueError(f"a {self.outcome.value} measurement carries no value")

    @classmethod
    def failure(cls, outcome: TrialOutcome, reason: str, **kwargs: object) -> Measurement:
        """A measurement that carries no value, and why."""
        return cls(outcome=outcome, reason=reason, **kwargs)  # type: ignore[arg-type]

    @property
    def correct(self) -> bool:
        """Whether it can be best (:func:`is_correct`)."""
        return is_correct(self.outcome, self.value)

    def rank_key(self) -> RankKey:
        """Its place under the best-config rule (:func:`rank_key`); only for a correct one."""
        return rank_key(self.value, self.ci_high, self.replayed_from is not None)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Objective:
    """What is minimised, in which unit (``time``, ``ms``)."""

    name: str = "time"
    unit: str = "ms"


_R = TypeVar("_R", bound="Runner")


class Runner(ABC):
    """Evaluates configurations of one problem (kernel, shape) on one device.

    Runners are used by one thread at a time. ``evaluate`` never raises for a problem of the
    configuration (compile error, crash, timeout, wrong result): it returns a failed
    :class:`Measurement` with the reason. It raises only when the runner itself cannot go on
    (no device, unreadable recording), as a :class:`~workbench.errors.WorkbenchError`.
    """

    objective: Objective = Objective()

    @property
    @abstractmethod
    def device(self) -> DeviceInfo:
        """The device the measurements come from (for replay: the recorded device)."""

    @property
    def replay_source(self) -> str | None:
        """The recording this runner answers from, or None when it measures live."""
        return None

    @abstractmethod
    def evaluate(self, config: Config) -> Measurement:
        """Measure one configuration (valid in its space)."""

    def prepare(self, config: Config) -> None:  # noqa: B027 - optional hook
        """Start what can be done for ``config`` before it is evaluated (compile it in the
        background while other configs are measured); evaluating it later is the same."""

    def phase_times(self) -> PhaseTimes | None:
        """Where this runner's evaluations spent their time so far, summed (None: not kept;
        the search then counts the runner's time as :attr:`Phase.WORKER`)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release devices and worker processes."""

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
