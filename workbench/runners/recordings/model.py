"""What a recording is: a space measured on one device, its entries, and its error.

A :class:`Recording` is a brute-forced (or sampled) space measured on one device: its
parameters and their values, and per configuration an outcome and a value. It is what the
replay runner answers from and what ``workbench record`` writes; the readers in this package
build one from each format.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workbench.errors import WorkbenchError
from workbench.runners.base import (
    DeviceInfo,
    Measurement,
    Objective,
    TrialOutcome,
    is_correct,
    rank_key,
)
from workbench.spaces.model import Config, SpaceSpec, Value
from workbench.spaces.variants import label_values

#: How a replayed failure's reason names the marker its recording holds.
RECORDED_AS = "recorded as "


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
