"""Drift during a search: the run's first correct config, timed again now and then.

A search compares configs timed minutes apart. When the GPU warms up and its clock falls, or
another process starts using it, the configs timed later look slower than they are, and the
search's ranking is off by that much. Every ``every`` new correct evaluations the tuner times
the run's first correct config (the reference) again and compares the new samples with its
first ones by the regression check's decision rule (:mod:`workbench.stats.rule`: two-sided
Mann-Whitney U at p < 0.002, the ratio's interval wholly beyond 2 %) on the time scale: a
slowdown that the SM clock explains is still a drift for the search, so the clocks are only
quoted. A drift is reported (tune's output, ``--json``, the run's row in the store, the
report), never corrected: the measurements stand as measured.

The re-timing costs one evaluation's timing per ``every`` (the kernel is already compiled and
verified). A replay answers from a recording, which does not drift: the tuner watches live
runners only.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from workbench.runners.base import Measurement, Runner, TrialOutcome
from workbench.runners.timing import used_samples
from workbench.search.request import DEFAULT_EVERY
from workbench.spaces.model import Config, config_label
from workbench.stats.rule import Verdict, compare_samples


@dataclass(frozen=True)
class DriftCheck:
    """One re-timing of the reference config."""

    after: int  #: correct evaluations of the run when it was timed again
    config: str  #: the reference's label
    verdict: Verdict  #: slower / faster / same / not comparable (never broken: see ``note``)
    ratio: float | None  #: median now / median at first
    note: str
    samples: tuple[float, ...]  #: the new samples (ms), every one
    sm_clock_mhz: tuple[float, ...] = ()

    @property
    def drifted(self) -> bool:
        return self.verdict in (Verdict.SLOWER, Verdict.FASTER)

    def describe(self) -> str:
        """``after 50 evaluations, BM=64 ... ran 6.1% slower than at first (...)``."""
        if self.ratio is None:
            return f"after {self.after} evaluations, {self.config}: {self.note}"
        how = {Verdict.SLOWER: "slower", Verdict.FASTER: "faster"}.get(self.verdict)
        change = f"{100 * abs(self.ratio - 1):.1f}% {how} than" if how else "as"
        note = f" ({self.note})" if self.note else ""
        return f"after {self.after} evaluations, {self.config} ran {change} at first{note}"

    def to_json(self) -> dict[str, object]:
        return {
            "after": self.after,
            "config": self.config,
            "verdict": self.verdict.value,
            "ratio": self.ratio,
            "note": self.note,
            "samples": list(self.samples),
            "sm_clock_mhz": list(self.sm_clock_mhz),
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, object]) -> DriftCheck:
        """Read back from the run's row.

        Raises:
            KeyError, ValueError, TypeError: not a drift check (a damaged row).
        """
        ratio = doc["ratio"]
        return cls(
            after=int(doc["after"]),  # type: ignore[call-overload]
            config=str(doc["config"]),
            verdict=Verdict(doc["verdict"]),
            ratio=float(ratio) if ratio is not None else None,  # type: ignore[arg-type]
            note=str(doc["note"]),
            samples=tuple(float(x) for x in doc["samples"]),  # type: ignore[attr-defined]
            sm_clock_mhz=tuple(float(x) for x in doc.get("sm_clock_mhz") or ()),  # type: ignore[attr-defined]
        )


class DriftWatch:
    """Keeps the reference and times it again when due."""

    @classmethod
    def of(cls, runner: Runner, every: int | None) -> DriftWatch | None:
        """The watch a search of ``runner`` keeps: none when ``every`` is 0 or None, or when
        the runner replays a recording (a recording does not drift)."""
        return cls(runner, every) if every and runner.replay_source is None else None

    def __init__(self, runner: Runner, every: int = DEFAULT_EVERY) -> None:
        if every < 1:
            raise ValueError(f"drift checks every {every} evaluations: must be at least 1")
        self.runner = runner
        self.every = every
        self.reference: tuple[Config, Measurement] | None = None
        self.correct = 0
        self.checks: list[DriftCheck] = []

    def observe(self, config: Config, m: Measurement) -> DriftCheck | None:
        """Count a new evaluation of the run; re-time the reference when due (returned)."""
        if m.outcome is not TrialOutcome.OK:
            return None
        self.correct += 1
        if self.reference is None:
            if m.samples:
                self.reference = (config, m)
            return None
        if self.correct % self.every:
            return None
        check = self._check()
        self.checks.append(check)
        return check

    def _check(self) -> DriftCheck:
        assert self.reference is not None
        config, first = self.reference
        label = config_label(config)
        again = self.runner.evaluate(config)
        if again.outcome is not TrialOutcome.OK:
            why = f"timed again, it failed: {again.outcome.value} {again.reason}".rstrip()
            return DriftCheck(self.correct, label, Verdict.NOT_COMPARABLE, None, why, ())
        before, before_clock = used_samples(first.samples, first.throttled, first.sm_clock_mhz)
        now, now_clock = used_samples(again.samples, again.throttled, again.sm_clock_mhz)
        try:
            result = compare_samples(before, now)
        except ValueError as exc:  # a zero or non-finite sample
            return DriftCheck(self.correct, label, Verdict.NOT_COMPARABLE, None, str(exc), ())
        clocks = ""
        if before_clock and now_clock:
            clocks = (
                f"SM clock median {statistics.median(before_clock):.0f} -> "
                f"{statistics.median(now_clock):.0f} MHz"
            )
        note = "; ".join(n for n in (result.note, clocks) if n)
        ratio = result.time.ratio if result.time is not None else None
        return DriftCheck(
            self.correct, label, result.verdict, ratio, note, again.samples, again.sm_clock_mhz
        )
