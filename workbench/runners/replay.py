"""The replay runner: answers evaluations from a recording, and says so on every answer."""

from __future__ import annotations

import time

from workbench.runners.base import DeviceInfo, Measurement, Objective, Runner, TrialOutcome
from workbench.runners.recordings import Recording
from workbench.spaces.model import Config


class ReplayRunner(Runner):
    """Evaluate configurations by looking them up in a :class:`Recording`.

    A configuration absent from the recording is INFEASIBLE (the recorded space excludes it);
    failed entries replay as failures with the recorded reason; every measurement carries
    ``replayed_from`` (device and file).
    """

    def __init__(self, recording: Recording, *, delay_s: float = 0.0) -> None:
        if delay_s < 0:
            raise ValueError(f"replay delay {delay_s} s: must be >= 0")
        self.recording = recording
        #: Simulated measurement time per answer: rehearses a fleet (heartbeats, a worker
        #: killed mid-measurement) at the pace of a real GPU; the answer itself is unchanged.
        self.delay_s = delay_s
        self.objective = Objective(recording.objective.name, recording.objective.unit)

    @property
    def device(self) -> DeviceInfo:
        return self.recording.device

    @property
    def replay_source(self) -> str:
        return self.recording.source

    def evaluate(self, config: Config) -> Measurement:
        if self.delay_s:
            time.sleep(self.delay_s)
        entry = self.recording.lookup(config)
        if entry is None:
            return Measurement.failure(
                TrialOutcome.INFEASIBLE,
                "not in the recorded space",
                replayed_from=self.recording.source,
            )
        return entry.to_measurement(self.recording.source)
