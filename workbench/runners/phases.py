"""Where a tune's time goes: wall seconds per phase, summed over its evaluations.

The runner times what it does for a config (compile, module load, inputs, verification,
warm-up, timing, and the rest of its round trips to the worker), the search loop what it does
around the runner (the proposer, the store), and the run's wall time less all of them is idle.
On the H200 (2026-12-04) a tune spent 2-5 % of its wall time in timed launches and nothing
said where the rest went: these phases are printed, put in ``--json`` and stored with the run.
"""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class Phase(enum.Enum):
    """One kind of work in a tune (the order is the order they are shown in)."""

    COMPILE = "compile"  #: NVRTC, or the compile cache; waiting for a compile made ahead
    MODULE_LOAD = "module_load"  #: cuModuleLoadData and the launch attributes, in the worker
    INPUTS = "inputs"  #: drawing inputs, uploading them, the reference's outputs
    VERIFICATION = "verification"  #: the verification launch and the comparison
    WARMUP = "warmup"  #: launches before the first sample
    TIMING = "timing"  #: timed samples, their L2 flushes and clock readings
    ENERGY = "energy"  #: back-to-back launches read by the NVML energy counter
    WORKER = "worker"  #: the rest of the runner's time: round trips to the worker, job setup
    SEARCH = "search"  #: the proposer: proposing, learning, drawing open configs
    STORE = "store"  #: writing evaluations, compile records and drift checks
    IDLE = "idle"  #: the run's wall time that no phase above accounts for

    @property
    def on_gpu(self) -> bool:
        """Candidate kernels run on the GPU in this phase (what "GPU busy" counts)."""
        return self in (Phase.WARMUP, Phase.TIMING, Phase.ENERGY)


@dataclass
class PhaseTimes:
    """Seconds per phase (wall time), added up as work is done.

    Exclusive: time added inside a :meth:`timed` block (a nested block, or an :meth:`add`) is
    taken out of that block's phase, so that every second is counted once.
    """

    seconds: dict[Phase, float] = field(default_factory=dict)
    #: the open ``timed`` blocks: [phase, start, seconds added inside it]
    _open: list[list] = field(default_factory=list, repr=False, compare=False)

    def add(self, phase: Phase, seconds: float) -> None:
        if seconds <= 0:
            return
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds
        if self._open:
            self._open[-1][2] += seconds

    @contextlib.contextmanager
    def timed(self, phase: Phase) -> Iterator[None]:
        """Add the wall time of the ``with`` block to ``phase`` (less what is added inside)."""
        block: list[Any] = [phase, time.perf_counter(), 0.0]  # (phase, start, added inside)
        self._open.append(block)
        try:
            yield
        finally:
            self._open.pop()
            self.add(phase, time.perf_counter() - block[1] - block[2])
            if self._open:  # the whole block counts as added inside the enclosing one
                self._open[-1][2] += block[2]

    def get(self, phase: Phase) -> float:
        return self.seconds.get(phase, 0.0)

    @property
    def total(self) -> float:
        return sum(self.seconds.values())

    def copy(self) -> PhaseTimes:
        return PhaseTimes(dict(self.seconds))

    def since(self, before: PhaseTimes) -> PhaseTimes:
        """What was added after ``before`` (a snapshot of this one) was taken."""
        return PhaseTimes(
            {p: s - before.get(p) for p, s in self.seconds.items() if s > before.get(p)}
        )

    def merged(self, other: PhaseTimes) -> PhaseTimes:
        out = self.copy()
        for phase, seconds in other.seconds.items():
            out.add(phase, seconds)
        return out

    def with_idle(self, wall_s: float) -> PhaseTimes:
        """These phases and the rest of ``wall_s`` as idle (none when they cover it)."""
        out = self.copy()
        out.seconds.pop(Phase.IDLE, None)
        out.add(Phase.IDLE, wall_s - out.total)
        return out

    @property
    def gpu_busy(self) -> float | None:
        """The share of the total spent running candidate kernels (None when nothing counted)."""
        total = self.total
        if total <= 0:
            return None
        return sum(s for p, s in self.seconds.items() if p.on_gpu) / total

    def to_json(self) -> dict[str, float]:
        """``{phase: seconds}`` in the phases' order, zeros left out."""
        return {p.value: round(self.seconds[p], 6) for p in Phase if self.seconds.get(p)}

    @classmethod
    def from_json(cls, doc: Mapping[str, object] | None) -> PhaseTimes:
        """The phases of :meth:`to_json` (unknown names ignored: a newer workbench's)."""
        known = {p.value: p for p in Phase}
        out = cls()
        for name, seconds in (doc or {}).items():
            if name in known and isinstance(seconds, int | float):
                out.add(known[name], float(seconds))
        return out

    def describe(self) -> str:
        """One line: each phase's seconds and share, the largest first."""
        total = self.total
        if total <= 0:
            return "no time recorded"
        parts = sorted(self.seconds.items(), key=lambda item: -item[1])
        return ", ".join(f"{p.value} {s:.2f} s ({s / total:.0%})" for p, s in parts)
