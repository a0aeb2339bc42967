"""A worker of a shared study: the search loop of :mod:`workbench.search.loop` over the claims
table of the study's database (see :mod:`workbench.fleet.study`).

Each round: read what changed (one query: completions since the last read, with each failed
config's outcome and reason; keys in flight; counts), stop if the global budget is complete,
take a re-queued trial or propose a new config (the keys in flight elsewhere held back from the
proposer), claim its key, and only then create its trial; answer it from the store if any
worker already measured it, else measure it, store it with its raw samples, and complete the
trial. A claim that conflicts costs one round trip and the worker proposes again at once.
Proposers are the same as for one process (``--sampler``); the study's history is fed to them
as it grows.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import WorkbenchError
from workbench.fleet.claims import CompletedClaim, WorkerId
from workbench.fleet.heartbeat import Pulse
from workbench.fleet.sql import CLAIM, Skip
from workbench.fleet.status import trial_value
from workbench.fleet.study import SharedStudy
from workbench.runners.base import Measurement, TrialOutcome
from workbench.search.loop import (
    IN_FLIGHT,
    INFEASIBLE,
    Ledger,
    RunStats,
    Search,
    SearchSettings,
    Slot,
    Standing,
    TuneResult,
    since_best,
)
from workbench.search.proposers import Proposer
from workbench.search.request import Budget
from workbench.search.tune_plan import TunePlan
from workbench.spaces.model import Config
from workbench.store import RunStatus, Store, StoredEvaluation, StoreError

#: After this many proposals in a row that another worker holds or finished, take a random
#: config nobody holds (a proposer may ignore what it is told is held elsewhere).
MAX_TAKEN_PROPOSALS = 3


@dataclass
class WorkerStats(RunStats):
    """What this worker did (the study's totals are in the database)."""

    completed: int = 0  #: trials it completed (each one counts against the budget)
    skipped: dict[str, int] = field(default_factory=dict)
    recovered: int = 0  #: re-queued trials of dead workers that it completed
    lost: int = 0  #: trials failed as stale while it held them (answered by the retry)


@dataclass
class TrialSlot(Slot):
    """A config this worker holds: its claim and its Optuna trial."""

    trial_id: int = 0
    claim_id: int = 0
    look: bool = False  #: its result may be stored already (a re-queued or reclaimed trial)
    recovered: bool = False  #: the retry of a dead worker's trial


class ClaimsLedger(Ledger):
    """A shared study as one worker sees it: each round, one read of the claims table."""

    max_stalled = MAX_TAKEN_PROPOSALS

    def __init__(self, plan: TunePlan, store: Store, shared: SharedStudy, worker: WorkerId) -> None:
        super().__init__(plan.problem, plan.study, WorkerStats())
        self.stats: WorkerStats
        self.plan = plan
        self.store = store
        self.shared = shared
        self.worker = worker
        self.db = shared.db
        self.call = self.db.outage.call
        self.dists = self.problem.distributions()
        self.results: dict[str, Measurement] = {}  #: config key -> outcome, of complete trials
        self.values: list[float] = []  #: complete trials' values in completion order (patience)
        self.taken: set[str] = set()  #: keys in flight elsewhere this round
        self.waiting: list[int] = []  #: re-queued trials this round
        self._since = 0  #: completion order of the last completion read
        self._swept = -math.inf  #: when this worker last failed stale trials
        self.run_id = 0
        self.new = 0  #: evaluations this run stored
        self.info: dict[str, Any] = {}
        self.pulse: Pulse | None = None
        self.trial_id: int | None = None  #: the trial held (handed back if the worker stops)
        self.pending: tuple[str, int] | None = None  #: a claim whose trial is not created yet

    # -- the run ------------------------------------------------------------------------------
    def open_run(self, settings: Mapping[str, object], proposer: Proposer) -> int:
        """This worker's run, and its presence in the study (the study's results reach the
        proposer round by round: the first round's read holds them all)."""
        self.run_id = self.call(
            self.store.start_run,
            self.study,
            self.plan.environment_id,
            kind="worker",
            label=self.worker.key,
            **settings,
        )
        self.info = {
            "state": "working",
            "device_class": self.plan.runner.device.device_class(),
            "run_id": self.run_id,
            "started": time.time(),
            "completed": 0,
        }
        self.pulse = Pulse(self.shared, self.worker, self.info)
        self.call(self.pulse.start)
        return self.run_id

    def close(self, status: RunStatus) -> None:
        if self.trial_id is not None:  # stopped mid-trial: hand it back at once
            with _suppress_db():
                self.shared.release(self.trial_id)
        if self.pending is not None:  # claimed, no trial yet: the slot returns at once
            with _suppress_db():
                self.shared.unclaim(*self.pending)
        if self.pulse is not None:
            self.pulse.stop("stopped")
        if status is RunStatus.INTERRUPTED:
            # the interrupt may land between a commit and its bookkeeping: what counts is
            # what the store holds of this run
            with _suppress_db():
                runs = self.store.runs(self.study)
                self.new = next((r.evaluations for r in runs if r.id == self.run_id), self.new)
        with _suppress_db():
            self.store.finish_run(self.run_id, status)

    def evaluations(self) -> list[StoredEvaluation]:
        return self.call(self.store.evaluations, self.study)

    @property
    def new_evaluations(self) -> int:
        return self.new

    # -- each round ---------------------------------------------------------------------------
    def refresh(self, proposer: Proposer, budget: Budget) -> Standing:
        view = self.shared.progress(self._since)
        self._learn(proposer, view.done)
        self.taken = self._hold(proposer, view.in_flight)
        self.waiting = view.waiting
        now = time.perf_counter()
        if now - self._swept >= self.db.settings.heartbeat_s:
            # a dead worker's trial is failed and re-queued here (its slot comes back); nothing
            # is stale before the grace period, so once a heartbeat is enough
            self.shared.fail_stale()
            self._swept = now
        # live claims have distinct keys (an unanswerable config holds none): as many as the
        # valid configs means none is left
        claimed = self.n_valid is not None and view.live + len(self.unanswered) >= self.n_valid
        full = budget.evaluations is not None and view.live >= budget.evaluations
        return Standing(
            complete=view.complete,
            since_best=since_best(self.values),
            exhausted=claimed and view.live == view.complete,
            busy=full or claimed,  # others are finishing the last slots
        )

    def settled(self) -> bool:
        # a dead worker's trial has no heartbeat yet: released within the grace period, so
        # that no trial is left RUNNING
        return self.shared.settled()

    def wait(self) -> bool:
        time.sleep(self.db.settings.poll_s)
        return True

    def known(self, key: str) -> Measurement | None:
        if key in self.results:
            return self.results[key]
        if key in self.taken:
            return IN_FLIGHT
        return INFEASIBLE if key in self.unanswered else None

    def requeued(self, budget: Budget) -> TrialSlot | None:
        """A re-queued trial of a dead worker (or an enqueued one), claimed for this one."""
        popped = self.shared.pop_waiting(self.waiting) if self.waiting else None
        if popped is None:
            return None
        trial_id, trial = popped
        self._hold_trial(trial_id)
        config = self.problem.decode(trial.params)
        key = self.problem.key(config)
        claim = self.shared.claim(key, trial.params, self.worker.key, budget.evaluations, trial_id)
        if claim.skip is not None:
            self._skip(claim.skip)
            return None
        with _suppress_db():  # who holds it, for status and tests (best effort)
            self.call(self.shared.storage.set_trial_system_attr, trial_id, CLAIM, self.worker.key)
        recovered = "failed_trial" in trial.system_attrs
        return TrialSlot(config, key, False, trial_id, claim.claim_id or 0, True, recovered)

    def reserve(self, config: Config, key: str, budget: Budget) -> TrialSlot | None:
        params = self.problem.encode(config)
        # the key first: a conflict costs this round trip and no trial
        claim = self.shared.claim(key, params, self.worker.key, budget.evaluations)
        if claim.skip is not None:
            self._count_skip(claim.skip)
            return None
        assert claim.claim_id is not None
        self.pending = (key, claim.claim_id)
        trial_id = self.shared.create_trial(
            params, self.dists, system_attrs={CLAIM: self.worker.key}
        )
        self.pending = None
        self._hold_trial(trial_id)  # a heartbeat before the link: it can go stale
        if not self.shared.link(key, claim.claim_id, trial_id):
            self._skip(Skip.SURPLUS)  # stalled past the grace period
            return None
        # only a dead worker's key can have a stored result (a study's stored results were
        # seeded as complete claims when workers joined)
        return TrialSlot(config, key, True, trial_id, claim.claim_id, claim.reclaimed)

    def stored(self, slot: Slot) -> Measurement | None:
        assert isinstance(slot, TrialSlot)
        found = self.call(self.store.lookup, self.study, slot.config) if slot.look else None
        if found is None:
            return None
        self.stats.from_store += 1
        return found.measurement

    def record(self, slot: Slot, m: Measurement, elapsed: float, fresh: bool) -> StoredEvaluation:
        assert isinstance(slot, TrialSlot)
        if fresh:
            m = self._store(slot, m, elapsed)
        value = trial_value(m.value)
        if self.shared.finish(slot.trial_id, value):
            reason = m.reason if m.outcome.failed else None
            self.shared.done(slot.key, slot.claim_id, value, m.outcome.value, reason)
            self.stats.completed += 1
            self.stats.recovered += int(slot.recovered)
            self.info["completed"] = self.stats.completed
        else:
            self.stats.lost += 1
        self._hold_trial(None)
        self.results[slot.key] = m
        return StoredEvaluation(-1, slot.config, m, self.run_id, None)

    def reject(self, slot: Slot) -> None:
        self.unanswered.add(slot.key)
        self._skip(Skip.INFEASIBLE)

    def record_drift(self, checks: list[dict[str, object]]) -> None:
        self.call(self.store.record_drift, self.run_id, checks)

    def record_phases(self, phases: Mapping[str, float]) -> None:
        self.call(self.store.record_phases, self.run_id, phases)

    # -- helpers ------------------------------------------------------------------------------
    def _learn(self, proposer: Proposer, done: Sequence[CompletedClaim]) -> None:
        """Tell the proposer every trial completed (elsewhere) since the last round."""
        new = []
        for c in done:
            self._since = max(self._since, c.order)
            self.values.append(math.inf if c.value is None else c.value)
            if c.key in self.results:
                continue  # this worker's own (observed already)
            try:
                config = self.problem.decode(c.params)
            except (KeyError, IndexError, ValueError):
                continue  # not a config of this problem
            m = completed_measurement(c)
            self.results[c.key] = m
            new.append(StoredEvaluation(-1, config, m, -1, None))
        if new:
            proposer.start(new)

    def _hold(self, proposer: Proposer, in_flight: dict[str, dict]) -> set[str]:
        """Tell the proposer the configs in flight elsewhere; returns their keys."""
        held = []
        for params in in_flight.values():
            try:
                held.append(self.problem.decode(params))
            except (KeyError, IndexError, ValueError):
                continue
        proposer.hold(held)
        return set(in_flight)

    def _hold_trial(self, trial_id: int | None) -> None:
        """Beat for ``trial_id`` (None: no trial), and hand it back if the worker stops."""
        self.trial_id = trial_id
        assert self.pulse is not None
        self.pulse.watch(trial_id)

    def _store(self, slot: TrialSlot, m: Measurement, elapsed: float) -> Measurement:
        """Store a new measurement with its samples before the trial completes; returns what
        the store holds."""
        try:
            self.call(
                self.store.record,
                self.study,
                self.run_id,
                self.plan.environment_id,
                slot.config,
                m,
                elapsed_s=elapsed,
            )
            self.new += 1
        except StoreError as exc:  # only a concurrent retry of a stale trial gets here
            stored = self.call(self.store.lookup, self.study, slot.config)
            if stored is None:
                raise WorkbenchError(f"storing {slot.key}: {exc}") from exc
            return stored.measurement
        return m

    def _count_skip(self, why: Skip) -> None:
        self.stats.skipped[why.value] = self.stats.skipped.get(why.value, 0) + 1

    def _skip(self, why: Skip) -> None:
        """Prune the trial held, unmeasured (it never counts against the budget)."""
        assert self.trial_id is not None
        self.shared.skip(self.trial_id, why)
        self._count_skip(why)
        self._hold_trial(None)


class SharedTuner:
    """Work on one shared study until its budget is complete, as ``settings`` say (the seed
    is this worker's own: see below)."""

    def __init__(
        self,
        plan: TunePlan,
        store: Store,
        shared: SharedStudy,
        worker: WorkerId,
        settings: SearchSettings,
    ) -> None:
        self.worker = worker
        # workers of one study start from different seeds, or they all propose the same configs
        seed = settings.seed
        self.seed = None if seed is None else seed * 7919 + worker.pid + 31 * (worker.gpu or 0)
        self.ledger = ClaimsLedger(plan, store, shared, worker)
        # drift checks re-time the first config this worker measured (on its own GPU)
        own = dataclasses.replace(settings, seed=self.seed)
        self.search = Search(self.ledger, plan.runner, own)

    @property
    def stats(self) -> WorkerStats:
        return self.ledger.stats

    def run(self, budget: Budget) -> TuneResult:
        """Work until the study's budget is complete, the space is exhausted, this worker's
        time budget is used, or Ctrl-C.

        Raises:
            ConfigError: no config of the space is valid.
            DatabaseUnavailable: the database stayed unavailable past the wait limit.
            StoreError, WorkbenchError: the store or the runner cannot go on.
        """
        return self.search.run(budget)


def completed_measurement(c: CompletedClaim) -> Measurement:
    """What a proposer needs to know of a trial completed elsewhere: its value, or how it
    failed and why (a claim completed by an older version says only that it failed)."""
    if c.value is not None and math.isfinite(c.value):
        return Measurement(TrialOutcome.OK, value=c.value)
    try:
        outcome = TrialOutcome(c.outcome)
    except ValueError:
        outcome = None
    if outcome is not None and outcome.failed:
        return Measurement.failure(outcome, c.reason or "")
    return Measurement.failure(
        TrialOutcome.LAUNCH_FAILED, "failed on another worker (see the store)"
    )


class _suppress_db:
    """Best effort on the way out: the database may be what stopped the worker."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)  # type: ignore[arg-type]
