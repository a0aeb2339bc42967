"""A worker of a shared study: the tune loop of :mod:`workbench.search.tuner`, coordinated
through Optuna's RDB storage and the claims table (see :mod:`workbench.search.shared`).

Each round: read what changed (one query: completions since the last read, keys in flight,
counts), stop if the global budget is complete, take a re-queued trial or propose a new config
(the keys in flight elsewhere held back from the proposer), claim its key, and only then create
its trial; answer it from the store if any worker already measured it, else measure it, store
it with its raw samples, and complete the trial. A claim that conflicts costs one round trip
and the worker proposes again at once. Proposers are the same as for one process
(``--sampler``); the study's history is fed to them as it grows.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from optuna.trial import TrialState

from workbench.errors import WorkbenchError
from workbench.runners.base import Measurement, TrialOutcome
from workbench.search.drift import DriftWatch
from workbench.search.proposers import Proposer
from workbench.search.samplers import make_proposer
from workbench.search.session import TunePlan
from workbench.search.shared import (
    CLAIM,
    Pulse,
    SharedStudy,
    Skip,
    WorkerId,
    trial_value,
)
from workbench.search.tuner import INFEASIBLE, Budget, OnEvaluation, StopReason, TuneResult
from workbench.spaces.model import Config
from workbench.store import Store, StoredEvaluation, StoreError
from workbench.store.best import best_of

#: After this many proposals in a row that another worker holds or finished, take a random
#: config nobody holds (a proposer may ignore what it is told is held elsewhere).
MAX_TAKEN_PROPOSALS = 3
#: Told to a proposer about a config another worker is measuring right now.
IN_FLIGHT = Measurement.failure(TrialOutcome.INFEASIBLE, "being measured by another worker")


@dataclass
class WorkerStats:
    """What this worker did (the study's totals are in the database)."""

    completed: int = 0  #: trials it completed (each one counts against the budget)
    measured: int = 0  #: configs its runner measured
    from_store: int = 0  #: trials answered from the store (measured before, never again)
    skipped: dict[str, int] = field(default_factory=dict)
    recovered: int = 0  #: re-queued trials of dead workers that it completed
    lost: int = 0  #: trials failed as stale while it held them (answered by the retry)
    seconds: float = 0.0  #: time in the loop
    runner_seconds: float = 0.0  #: ... of which measuring (the rest is coordination)
    cpu_seconds: float = 0.0  #: this process's CPU time in the loop (all threads)
    runner_cpu_seconds: float = 0.0  #: ... of which measuring


class SharedTuner:
    """Work on one shared study until its budget is complete."""

    def __init__(
        self,
        plan: TunePlan,
        store: Store,
        shared: SharedStudy,
        worker: WorkerId,
        *,
        sampler: str,
        seed: int | None,
        on_evaluation: OnEvaluation | None = None,
        command: str | None = None,
        drift_every: int | None = None,
    ) -> None:
        self.plan = plan
        self.problem = plan.problem
        self.store = store
        self.shared = shared
        self.worker = worker
        self.sampler = sampler
        # workers of one study start from different seeds, or they all propose the same configs
        self.seed = None if seed is None else seed * 7919 + worker.pid + 31 * (worker.gpu or 0)
        self.rng = random.Random(self.seed)
        self.on_evaluation = on_evaluation
        self.command = command
        self.dists = self.problem.distributions()
        self.results: dict[str, Measurement] = {}  #: config key -> outcome, of complete trials
        #: valid configs the runner cannot evaluate (absent from the recording it replays): not
        #: proposed again, and the space is exhausted without them
        self.unanswered: set[str] = set()
        self.values: list[float] = []  #: complete trials' values in completion order (patience)
        self._since = 0  #: completion order of the last completion read
        self.stats = WorkerStats()
        self.db = shared.db
        #: this worker's drift checks: the first config it measured, timed again (its own GPU)
        self.watch = DriftWatch.of(plan.runner, drift_every)

    # -- the study as seen from here ---------------------------------------------------------
    def _learn(
        self, proposer: Proposer, done: Sequence[tuple[int, str, dict, float | None]]
    ) -> None:
        """Tell the proposer every trial completed (elsewhere) since the last round."""
        new = []
        for order, key, params, value in done:
            self._since = max(self._since, order)
            self.values.append(math.inf if value is None else value)
            if key in self.results:
                continue  # this worker's own (observed already)
            try:
                config = self.problem.decode(params)
            except (KeyError, IndexError, ValueError):
                continue  # not a config of this problem
            m = _measurement(value)
            self.results[key] = m
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

    @staticmethod
    def _since_best(values: Sequence[float]) -> int:
        best, since = math.inf, 0
        for v in values:
            if v < best:
                best, since = v, 0
            else:
                since += 1
        return since

    # -- proposals ---------------------------------------------------------------------------
    def _propose(self, proposer: Proposer, taken: set[str]) -> Config | None:
        for _ in range(MAX_TAKEN_PROPOSALS):
            config = proposer.next()
            if config is None:
                break
            key = self.problem.key(config)
            if key in self.results:
                proposer.observe(config, self.results[key])
            elif key in taken:
                proposer.observe(config, IN_FLIGHT)
            elif key in self.unanswered or self.problem.violations(config):
                proposer.observe(config, INFEASIBLE)
            else:
                return config
        return self._unheld_valid(taken)

    def _unheld_valid(self, taken: set[str]) -> Config | None:
        valid = self.problem.valid_configs()
        if valid is not None:
            left = [c for c in valid if self._open(self.problem.key(c), taken)]
            return self.rng.choice(left) if left else None
        for _ in range(10_000):
            config = {p.name: self.rng.choice(p.values) for p in self.problem.params}
            key = self.problem.key(config)
            if self._open(key, taken) and not self.problem.violations(config):
                return config
        return None

    def _open(self, key: str, taken: set[str]) -> bool:
        """Not in flight elsewhere, not complete, not known to be unanswerable."""
        return key not in taken and key not in self.results and key not in self.unanswered

    # -- the loop ----------------------------------------------------------------------------
    def run(self, budget: Budget) -> TuneResult:
        """Work until the study's budget is complete, the space is exhausted, this worker's
        time budget is used, or Ctrl-C.

        Raises:
            ConfigError: no config of the space is valid.
            DatabaseUnavailable: the database stayed unavailable past the wait limit.
            StoreError, WorkbenchError: the store or the runner cannot go on.
        """
        self.problem.check_not_empty()
        call = self.db.outage.call
        study = self.plan.study
        run_id = call(
            self.store.start_run,
            study,
            self.plan.environment_id,
            kind="worker",
            sampler=self.sampler,
            seed=self.seed,
            budget=budget.as_dict(),
            command=self.command,
            label=self.worker.key,
        )
        info = {
            "state": "working",
            "device_class": self.plan.runner.device.device_class(),
            "run_id": run_id,
            "started": time.time(),
            "completed": 0,
        }
        pulse = Pulse(self.shared, self.worker, info)
        call(pulse.start)
        proposer = make_proposer(self.sampler, self.problem, self.seed)
        proposer.plan(budget.evaluations)  # the study's budget: every worker's results count
        valid = self.problem.valid_configs()
        n_valid = len(valid) if valid is not None else None
        started = time.perf_counter()
        cpu_started = time.process_time()
        last_stale_check = -math.inf
        proposals = 0
        stop = StopReason.EXHAUSTED
        state = "failed"
        trial_id: int | None = None
        pending: tuple[str, int] | None = None  # a claim whose trial is not created yet
        try:
            while True:
                view = self.shared.progress(self._since)
                self._learn(proposer, view.done)
                taken = self._hold(proposer, view.in_flight)
                if budget.evaluations is not None and view.complete >= budget.evaluations:
                    if self.shared.settled():
                        stop = StopReason.BUDGET
                        break
                    # a dead worker's trial has no heartbeat yet: released within the grace
                    # period, so that no trial is left RUNNING
                    time.sleep(self.db.settings.poll_s)
                    continue
                if budget.seconds is not None and time.perf_counter() - started >= budget.seconds:
                    stop = StopReason.TIME
                    break
                if (
                    budget.patience is not None
                    and self.values
                    and self._since_best(self.values) >= budget.patience
                ):
                    stop = StopReason.PATIENCE
                    break
                # live claims have distinct keys (an unanswerable config holds none): as many as
                # the valid configs means none is left
                exhausted = n_valid is not None and view.live + len(self.unanswered) >= n_valid
                if exhausted and view.live == view.complete:
                    stop = StopReason.EXHAUSTED
                    break
                full = budget.evaluations is not None and view.live >= budget.evaluations
                now = time.perf_counter()
                if now - last_stale_check >= self.db.settings.heartbeat_s:
                    # a dead worker's trial is failed and re-queued here (its slot comes back);
                    # nothing is stale before the grace period, so once a heartbeat is enough
                    self.shared.fail_stale()
                    last_stale_check = now
                trial = self.shared.pop_waiting(view.waiting) if view.waiting else None
                if trial is None and (full or exhausted):
                    time.sleep(self.db.settings.poll_s)  # others are finishing the last slots
                    continue
                proposal = None
                if trial is not None:  # a re-queued trial of a dead worker (or an enqueued one)
                    trial_id = trial._trial_id
                    config = self.problem.decode(trial.params)
                    key = self.problem.key(config)
                    pulse.watch(trial_id)
                    claim = self.shared.claim(
                        key, trial.params, self.worker.key, budget.evaluations, trial_id
                    )
                    if claim.skip is not None:
                        self._skip(trial_id, claim.skip)
                        pulse.watch(trial_id := None)
                        continue
                    with _suppress_db():  # who holds it, for status and tests (best effort)
                        call(
                            self.shared.storage.set_trial_system_attr,
                            trial_id,
                            CLAIM,
                            self.worker.key,
                        )
                else:
                    proposal = self._propose(proposer, taken)
                    if proposal is None:
                        time.sleep(self.db.settings.poll_s)
                        continue
                    config = proposal
                    key = self.problem.key(config)
                    params = self.problem.encode(config)
                    # the key first: a conflict costs this round trip and no trial
                    claim = self.shared.claim(key, params, self.worker.key, budget.evaluations)
                    if claim.skip is not None:
                        self._count_skip(claim.skip)
                        proposer.observe(proposal, self.results.get(key, IN_FLIGHT))
                        continue  # the next round reads what is in flight and proposes again
                    assert claim.claim_id is not None
                    pending = (key, claim.claim_id)
                    trial_id = self.shared.create_trial(
                        params, self.dists, system_attrs={CLAIM: self.worker.key}
                    )
                    pending = None
                    pulse.watch(trial_id)  # a heartbeat before the link: it can go stale
                    if not self.shared.link(key, claim.claim_id, trial_id):
                        self._skip(trial_id, Skip.SURPLUS)  # stalled past the grace period
                        pulse.watch(trial_id := None)
                        proposer.observe(proposal, IN_FLIGHT)
                        continue
                proposals += 1
                # only a re-queued trial or a dead worker's key can have a stored result (a
                # study's stored results were seeded as complete claims when workers joined)
                m = self._evaluate(
                    study, run_id, config, started, trial is not None or claim.reclaimed
                )
                if m is None:  # the runner rejects it: never counts, never asked again
                    self.unanswered.add(key)
                    self._skip(trial_id, Skip.INFEASIBLE)
                    pulse.watch(trial_id := None)
                    if proposal is not None:
                        proposer.observe(proposal, INFEASIBLE)
                    continue
                value = trial_value(m.value)
                if self.shared.finish(trial_id, value):
                    self.shared.done(key, claim.claim_id, value)  # type: ignore[arg-type]
                    self.stats.completed += 1
                    self.stats.recovered += int(
                        trial is not None and "failed_trial" in trial.system_attrs
                    )
                    info["completed"] = self.stats.completed
                else:
                    self.stats.lost += 1
                pulse.watch(trial_id := None)
                self.results[key] = m
                if proposal is not None:
                    proposer.observe(proposal, m)
                else:
                    proposer.start([StoredEvaluation(-1, config, m, run_id, None)])
                if self.on_evaluation is not None:
                    self.on_evaluation(StoredEvaluation(-1, config, m, run_id, None), None)
            state = "finished"
        except KeyboardInterrupt:
            stop, state = StopReason.INTERRUPTED, "interrupted"
        finally:
            self.stats.seconds = time.perf_counter() - started
            self.stats.cpu_seconds = time.process_time() - cpu_started
            if trial_id is not None:  # stopped mid-trial: hand it back at once
                with _suppress_db():
                    self.shared.release(trial_id)
            if pending is not None:  # claimed, no trial yet: the slot returns at once
                with _suppress_db():
                    self.shared.unclaim(*pending)
            pulse.stop("stopped")
            with _suppress_db():
                self.store.finish_run(run_id, state)
        history = call(self.store.evaluations, study)
        best = best_of(history)
        return TuneResult(
            study=study,
            run_id=run_id,
            stop=stop,
            evaluations=len(history),
            new_evaluations=self.stats.measured,
            proposals=proposals,
            best=best,
            history=history,
            moves=proposer.moves(),
            unanswered=self.problem.unanswered(len(self.unanswered)),
            drift=tuple(self.watch.checks) if self.watch is not None else (),
        )

    def _count_skip(self, why: Skip) -> None:
        self.stats.skipped[why.value] = self.stats.skipped.get(why.value, 0) + 1

    def _skip(self, trial_id: int, why: Skip) -> None:
        self.shared.skip(trial_id, why)
        self._count_skip(why)

    def _evaluate(
        self, study, run_id: int, config: Config, started: float, look: bool = True
    ) -> Measurement | None:
        """The stored measurement of ``config`` if any worker made one (looked up when ``look``),
        else a new one, stored with its samples before the trial completes. None: the runner
        rejects the config."""
        call = self.db.outage.call
        stored = call(self.store.lookup, study, config) if look else None
        if stored is not None:
            self.stats.from_store += 1
            return stored.measurement
        t0, c0 = time.perf_counter(), time.process_time()
        m = self.plan.runner.evaluate(config)
        self.stats.runner_seconds += time.perf_counter() - t0
        self.stats.runner_cpu_seconds += time.process_time() - c0
        if m.outcome is TrialOutcome.INFEASIBLE:
            return None
        self.stats.measured += 1
        elapsed = time.perf_counter() - started
        try:
            call(
                self.store.record,
                study,
                run_id,
                self.plan.environment_id,
                config,
                m,
                elapsed_s=elapsed,
            )
        except StoreError as exc:  # only a concurrent retry of a stale trial gets here
            stored = call(self.store.lookup, study, config)
            if stored is None:
                raise WorkbenchError(f"storing {self.problem.key(config)}: {exc}") from exc
            return stored.measurement
        if self.watch is not None and self.watch.observe(config, m) is not None:
            call(self.store.record_drift, run_id, [c.to_json() for c in self.watch.checks])
        return m


def _measurement(value: float | None) -> Measurement:
    """What a proposer needs to know of a trial completed elsewhere."""
    if value is not None and math.isfinite(value):
        return Measurement(TrialOutcome.OK, value=value)
    return Measurement.failure(
        TrialOutcome.LAUNCH_FAILED, "failed on another worker (see the store)"
    )


class _suppress_db:
    """Best effort on the way out: the database may be what stopped the worker."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)  # type: ignore[arg-type]


def seed_from_store(shared: SharedStudy, store: Store, plan: TunePlan) -> int:
    """Give every evaluation the store holds for the study a complete, claimed trial (a study
    copied from SQLite, or tuned before by one process): workers never measure them again and
    the budget counts them, as a resumed single-process tune does. Returns how many."""
    problem = plan.problem
    # the store first, then the claims: a worker claims before it stores, so every stored config
    # whose worker is still at it has a live claim, and is skipped below (that worker completes
    # it; if it dies, the retry is answered from the store)
    stored = shared.db.outage.call(store.evaluations, plan.study, with_samples=False)
    view = shared.progress(0)
    have = {key for _, key, _, _ in view.done} | set(view.in_flight)
    dists = problem.distributions()
    added = 0
    for e in stored:
        try:
            key = problem.key(e.config)
            if key in have or problem.violations(e.config):
                continue
            params = problem.encode(e.config)
        except (KeyError, ValueError):
            continue  # a config of an older version of the space
        claim = shared.claim(key, params, "store", None)
        if claim.skip is not None or claim.claim_id is None:
            continue
        value = trial_value(e.measurement.value)
        trial_id = shared.create_trial(
            params, dists, state=TrialState.COMPLETE, value=value, system_attrs={CLAIM: "store"}
        )
        if shared.link(key, claim.claim_id, trial_id):
            shared.done(key, claim.claim_id, value)
        have.add(key)
        added += 1
    return added


def enqueue_first(shared: SharedStudy, plan: TunePlan, configs: Sequence[Config]) -> None:
    """Known-good configs as WAITING trials of a new study, taken before any proposal."""
    if shared.trials():
        return
    dists = plan.problem.distributions()
    for config in configs:
        if not plan.problem.violations(config):
            shared.create_trial(plan.problem.encode(config), dists, state=TrialState.WAITING)
