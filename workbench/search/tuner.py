"""One process tunes one study: the search loop (:mod:`workbench.search.loop`) over the store.

* Every evaluation is committed to the store before the next one starts; a re-run of the same
  study resumes from what the store holds (the sampler is warm-started with it), and a config
  already evaluated in the study is answered from the store, never re-measured.
* The budget counts the study's unique evaluations (failed ones included); patience counts this
  run's evaluations since the best improved.
* A SQLite store holds one such process per study (:meth:`Store.exclusive`); several processes
  share a study through PostgreSQL (:mod:`workbench.fleet.worker`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from workbench.errors import WorkbenchError
from workbench.runners.base import Measurement, Runner, TrialOutcome
from workbench.search.loop import (
    INFEASIBLE,
    Ledger,
    OnEvaluation,
    Search,
    SearchSettings,
    SearchStopReason,
    Slot,
    Standing,
    TuneResult,
    best_of,
)
from workbench.search.problem import SearchProblem
from workbench.search.proposers import Proposer
from workbench.search.request import Budget
from workbench.spaces.model import Config
from workbench.store import RunStatus, Store, StoredEvaluation, StudyInfo

__all__ = [
    "INFEASIBLE",
    "Budget",
    "OnEvaluation",
    "SearchSettings",
    "SearchStopReason",
    "StoreLedger",
    "TuneResult",
    "Tuner",
]

#: After this many proposals in a row that bring no new evaluation (repeats, infeasible
#: points), the tuner evaluates an unvisited valid config chosen at random instead.
MAX_STALLED_PROPOSALS = 25


class StoreLedger(Ledger):
    """A study searched by one process: its evaluations in the store, read once at the start."""

    max_stalled = MAX_STALLED_PROPOSALS

    def __init__(
        self, problem: SearchProblem, store: Store, study: StudyInfo, environment_id: int | None
    ) -> None:
        super().__init__(problem, study)
        self.store = store
        self.environment_id = environment_id
        self.history: list[StoredEvaluation] = []
        self.seen: dict[str, StoredEvaluation] = {}
        self.new = 0  #: evaluations this run added
        self.since = 0  #: ... since the best improved
        self.run_id = 0

    def open_run(self, settings: Mapping[str, object], proposer: Proposer) -> int:
        self.history = self.store.evaluations(self.study)
        self.seen = {self.problem.key(e.config): e for e in self.history}
        self.best = best_of(self.history)
        self.run_id = self.store.start_run(self.study, self.environment_id, **settings)  # type: ignore[arg-type]
        proposer.start(self.history)  # a resumed study warm-starts the search
        return self.run_id

    def close(self, status: RunStatus) -> None:
        if status is RunStatus.INTERRUPTED:
            # the interrupt may land between a commit and its bookkeeping: what counts is
            # what the store holds
            with contextlib.suppress(WorkbenchError):
                stored = self.store.evaluations(self.study)
                self.new += len(stored) - len(self.history)
                self.history = stored
        with contextlib.suppress(WorkbenchError):  # the store may be what failed
            self.store.finish_run(self.run_id, status)

    def evaluations(self) -> list[StoredEvaluation]:
        return list(self.history)

    @property
    def new_evaluations(self) -> int:
        return self.new

    def refresh(self, proposer: Proposer, budget: Budget) -> Standing:
        done = self.n_valid is not None and len(self.seen) + len(self.unanswered) >= self.n_valid
        return Standing(len(self.history), self.since if self.new else 0, done)

    def known(self, key: str) -> Measurement | None:
        if key in self.seen:
            return self.seen[key].measurement
        return INFEASIBLE if key in self.unanswered else None

    def reserve(self, config: Config, key: str, budget: Budget) -> Slot:
        return Slot(config, key)

    def record(self, slot: Slot, m: Measurement, elapsed: float, fresh: bool) -> StoredEvaluation:
        self.store.record(
            self.study, self.run_id, self.environment_id, slot.config, m, elapsed_s=elapsed
        )
        stored = StoredEvaluation(len(self.history), slot.config, m, self.run_id, elapsed)
        self.history.append(stored)
        self.seen[slot.key] = stored
        self.new += 1
        best = self.best
        if m.outcome is TrialOutcome.OK and (best is None or m.value < best.measurement.value):  # type: ignore[operator]
            self.best, self.since = stored, 0
        else:
            self.since += 1
        return stored

    def reject(self, slot: Slot) -> None:
        self.unanswered.add(slot.key)

    def record_drift(self, checks: list[dict[str, object]]) -> None:
        self.store.record_drift(self.run_id, checks)

    def record_phases(self, phases: Mapping[str, float]) -> None:
        self.store.record_phases(self.run_id, phases)


class Tuner:
    """Search one study: ``problem`` for validity, ``runner`` for measurements, as
    ``settings`` say (sampler, seed, first configs, drift checks, hooks)."""

    def __init__(
        self,
        problem: SearchProblem,
        runner: Runner,
        store: Store,
        study: StudyInfo,
        settings: SearchSettings | None = None,
        *,
        environment_id: int | None = None,
    ) -> None:
        self.ledger = StoreLedger(problem, store, study, environment_id)
        self.search = Search(self.ledger, runner, settings)

    @property
    def history(self) -> list[StoredEvaluation]:
        """The study's evaluations so far (this run's included)."""
        return self.ledger.history

    def run(self, budget: Budget) -> TuneResult:
        """Search until the budget is used, the space is exhausted, or Ctrl-C.

        Raises:
            ConfigError: no config of the space is valid.
            StoreError: the store failed (what was committed stays), or another process is
                tuning the same study in a SQLite store (shared studies need PostgreSQL).
        """
        with self.ledger.store.exclusive(self.ledger.study):
            return self.search.run(budget)
