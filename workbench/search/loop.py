"""The search loop, one for every tune: the proposer proposes, the runner measures, a ledger keeps.

A :class:`Ledger` holds what the loop needs to know of a study's trials: what is done, what is
held elsewhere, where a new result goes, what the budget counts. One process keeps them in its
store (:class:`~workbench.search.tuner.StoreLedger`); a worker of a shared study in the claims
table of its database (:class:`~workbench.fleet.worker.ClaimsLedger`). Each round:

* the ledger learns what changed (other workers' results, told to the proposer as they were:
  a WRONG config stays WRONG, with its reason) and says where the study stands;
* the loop stops when the evaluation budget is complete, the wall time is used, no evaluation
  improved the best in ``patience`` of them, or no valid config is left open;
* else it takes a trial re-queued by the ledger, or asks the proposer: a proposal the ledger
  knows (evaluated, held by another worker, unanswerable) is answered with what it knows and
  never measured again, one outside the space is told as a constraint violation; after
  ``max_stalled`` such proposals in a row an open valid config is drawn at random;
* the runner measures it, the ledger keeps the result before the next round, and the proposer
  learns it. A failed evaluation counts against the budget; a config the runner cannot answer
  (absent from a replayed recording) never counts and is not asked again.

With ``drift_every`` and a live runner, the run's first correct config is timed again every that
many correct evaluations (:mod:`workbench.search.drift`); the checks are stored with the run.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import math
import random
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from workbench.errors import WorkbenchError
from workbench.runners.base import Measurement, Runner, TrialOutcome
from workbench.runners.phases import Phase, PhaseTimes
from workbench.search.drift import DriftCheck, DriftWatch
from workbench.search.problem import SearchProblem
from workbench.search.proposers import Proposer
from workbench.search.request import DEFAULT_SAMPLER, Budget
from workbench.search.samplers import make_proposer
from workbench.spaces.model import Config
from workbench.store import RunStatus, StoredEvaluation, StudyInfo
from workbench.store.best import best_of, ranked

#: Random draws of the cartesian product that look for an open valid config in a space too
#: large to enumerate, before the draw gives up.
MAX_DRAWS = 10_000
#: What the proposer is told about a proposal outside the space, or one the runner cannot answer.
INFEASIBLE = Measurement.failure(TrialOutcome.INFEASIBLE, "outside the space")
#: What the proposer is told about a config another worker is measuring right now.
IN_FLIGHT = Measurement.failure(TrialOutcome.INFEASIBLE, "being measured by another worker")


class SearchStopReason(enum.Enum):
    BUDGET = "budget"  #: the evaluation budget is used
    TIME = "time"  #: the wall-time budget is used
    PATIENCE = "patience"  #: no improvement in the last N evaluations
    EXHAUSTED = "exhausted"  #: every valid config is evaluated
    INTERRUPTED = "interrupted"  #: Ctrl-C


@dataclass
class TuneResult:
    """What a tune produced (everything is also in the store)."""

    study: StudyInfo
    run_id: int
    stop: SearchStopReason
    evaluations: int  #: unique configs evaluated in the study, failed ones included
    new_evaluations: int  #: ... of which by this run
    proposals: int  #: sampler proposals in this run (repeats and infeasible included)
    best: StoredEvaluation | None
    history: list[StoredEvaluation] = field(default_factory=list)
    #: per search move of the sampler (the default has five): proposed, improved
    moves: dict[str, dict[str, int]] | None = None
    #: valid configs the runner could not evaluate (absent from the recording replayed): asked
    #: in this run, or left out of a replay's search; None when those were not counted
    unanswered: int | None = 0
    #: re-timings of the run's reference config (none unless drift checks were asked for)
    drift: tuple[DriftCheck, ...] = ()
    #: where this run's wall time went (runner, search, store, idle)
    phases: PhaseTimes = field(default_factory=PhaseTimes)

    @property
    def drifted(self) -> list[DriftCheck]:
        return [c for c in self.drift if c.drifted]

    def top(self, n: int = 10) -> list[StoredEvaluation]:
        return ranked(self.history)[:n]


OnEvaluation = Callable[[StoredEvaluation, StoredEvaluation | None], None]
OnDrift = Callable[[DriftCheck], None]


@dataclass(frozen=True)
class SearchSettings:
    """How one run of the loop searches, and whom it tells as it goes.

    Attributes:
        sampler, seed: the proposer (:mod:`workbench.search.samplers`) and its seed.
        enqueue: configs evaluated first (known-good ones: defaults, other studies' best).
        drift_every: with a live runner, re-time the run's first correct config every that
            many correct evaluations (None or 0: never).
        ahead: proposals reserved before their turn; more than one: the runner prepares them
            (compiles them in the background) while the one before is measured.
        command: the command line the run is stored with.
        on_evaluation: told each evaluation kept, with the best so far.
        on_drift: told each re-timing of the reference.
    """

    sampler: str = DEFAULT_SAMPLER
    seed: int | None = 0
    enqueue: Sequence[Config] = ()
    drift_every: int | None = None
    ahead: int = 1
    command: str | None = None
    on_evaluation: OnEvaluation | None = None
    on_drift: OnDrift | None = None


def since_best(values: Sequence[float]) -> int:
    """Values after the lowest (the first lowest): evaluations without improvement."""
    best, since = math.inf, 0
    for v in values:
        if v < best:
            best, since = v, 0
        else:
            since += 1
    return since


@dataclass
class Slot:
    """A config the loop is to measure, as its ledger holds it."""

    config: Config
    key: str
    #: asked of the proposer (else a trial re-queued by a shared study, which the proposer
    #: learns of as another worker's result)
    proposed: bool = True


@dataclass(frozen=True)
class Standing:
    """Where the study stands at the start of a round, as the ledger sees it."""

    complete: int  #: evaluations the evaluation budget counts
    #: evaluations since the best improved: one process counts this run's (0 before its
    #: first), a worker of a shared study every worker's
    since_best: int
    exhausted: bool  #: every valid config is evaluated or unanswerable: the search is over
    busy: bool = False  #: nothing can be taken now (other workers are finishing the last ones)


@dataclass
class RunStats:
    """Where one run's answers came from and where its time went."""

    measured: int = 0  #: configs its runner measured
    from_store: int = 0  #: trials answered from the store (measured before, never again)
    seconds: float = 0.0  #: time in the loop
    runner_seconds: float = 0.0  #: ... of which measuring (the rest is search and bookkeeping)
    cpu_seconds: float = 0.0  #: this process's CPU time in the loop (all threads)
    runner_cpu_seconds: float = 0.0  #: ... of which measuring
    #: the loop's own phases (search, store); the runner's are added when the run ends
    phases: PhaseTimes = field(default_factory=PhaseTimes)


class Ledger(ABC):
    """The trials of one search, as the loop asks about them (see the module).

    Methods are called from the loop's thread only, in the order the module describes.
    """

    #: proposals in a row that bring nothing to measure before an open config is drawn
    max_stalled: int = 25
    #: the best evaluation so far, told with each new one (None where it is not tracked)
    best: StoredEvaluation | None = None

    def __init__(
        self, problem: SearchProblem, study: StudyInfo, stats: RunStats | None = None
    ) -> None:
        self.problem = problem
        self.study = study
        self.stats = stats or RunStats()
        #: valid configs the runner cannot evaluate (absent from the recording it replays):
        #: never asked again, and the space is exhausted without them
        self.unanswered: set[str] = set()

    @functools.cached_property
    def n_valid(self) -> int | None:
        """Valid configs of the search (None: too many to enumerate)."""
        valid = self.problem.valid_configs()
        return len(valid) if valid is not None else None

    # -- the run ------------------------------------------------------------------------------
    @abstractmethod
    def open_run(self, settings: Mapping[str, object], proposer: Proposer) -> int:
        """Start the run in the store (``settings``: sampler, seed, budget, command) and teach
        the proposer what the study held before it (here, or in the first :meth:`refresh`,
        before the first proposal); the run's id."""

    @abstractmethod
    def close(self, status: RunStatus) -> None:
        """Hand back what is held and finish the run; never raises for the store's sake."""

    @abstractmethod
    def evaluations(self) -> list[StoredEvaluation]:
        """Every evaluation of the study, once the run is over."""

    @property
    @abstractmethod
    def new_evaluations(self) -> int:
        """Evaluations this run added."""

    # -- each round ---------------------------------------------------------------------------
    @abstractmethod
    def refresh(self, proposer: Proposer, budget: Budget) -> Standing:
        """Learn what changed since the last round (telling the proposer); where things stand."""

    def settled(self) -> bool:
        """Whether the run may stop on a complete budget (no trial is left to hand back)."""
        return True

    def wait(self) -> bool:
        """Nothing can be taken now: wait a moment and return True (others are finishing), or
        return False (nothing will come: the search is exhausted)."""
        return False

    @abstractmethod
    def known(self, key: str) -> Measurement | None:
        """What a proposal of ``key`` is answered with instead of a measurement (its result, or
        that it is held elsewhere or unanswerable); None when it is open."""

    def requeued(self, budget: Budget) -> Slot | None:
        """A trial to take before asking the proposer (a shared study's re-queued ones)."""
        return None

    @abstractmethod
    def reserve(self, config: Config, key: str, budget: Budget) -> Slot | None:
        """Hold ``config`` for this run; None when another worker took it meanwhile."""

    def stored(self, slot: Slot) -> Measurement | None:
        """A measurement of the slot's config already stored (a dead worker's), if any."""
        return None

    @abstractmethod
    def record(self, slot: Slot, m: Measurement, elapsed: float, fresh: bool) -> StoredEvaluation:
        """Keep the slot's result (``fresh``: measured by this run, to store) and complete it;
        returns the evaluation that counts (another worker's, if it stored one first)."""

    @abstractmethod
    def reject(self, slot: Slot) -> None:
        """The runner cannot evaluate the slot's config: it never counts, nor is asked again."""

    @abstractmethod
    def record_drift(self, checks: list[dict[str, object]]) -> None:
        """Store the run's drift checks so far."""

    @abstractmethod
    def record_phases(self, phases: Mapping[str, float]) -> None:
        """Store where the run's time went (``{phase: seconds}``)."""


def draw_open(
    problem: SearchProblem, rng: random.Random, is_open: Callable[[str], bool]
) -> Config | None:
    """A valid config whose key is open, at random: from the valid set when it is enumerated,
    else from up to MAX_DRAWS draws of the cartesian product; None when none was found."""
    valid = problem.valid_configs()
    if valid is not None:
        left = [c for c in valid if is_open(problem.key(c))]
        return rng.choice(left) if left else None
    for _ in range(MAX_DRAWS):
        config = {p.name: rng.choice(p.values) for p in problem.params}
        if is_open(problem.key(config)) and not problem.violations(config):
            return config
    return None


class Search:
    """One run of the loop over ``ledger`` (see the module), as ``settings`` say."""

    def __init__(
        self, ledger: Ledger, runner: Runner, settings: SearchSettings | None = None
    ) -> None:
        settings = settings or SearchSettings()
        self.ledger = ledger
        self.problem = ledger.problem
        self.runner = runner
        self.settings = settings
        self.watch = DriftWatch.of(runner, settings.drift_every)
        self.rng = random.Random(settings.seed)
        self.proposals = 0  #: proposer answers and random draws (repeats and infeasible too)
        self.stalled = 0  #: proposals in a row that brought nothing to measure
        self.started = 0.0
        self.ahead = max(1, settings.ahead)
        self.queue: deque[Slot] = deque()

    def run(self, budget: Budget) -> TuneResult:
        """Search until the budget is used, the space is exhausted, or Ctrl-C.

        Raises:
            ConfigError: no config of the space is valid.
            StoreError, WorkbenchError: the store, the database or the runner cannot go on
                (what was committed stays).
        """
        self.problem.check_not_empty()
        s = self.settings
        proposer = make_proposer(s.sampler, self.problem, s.seed)
        settings = {"sampler": s.sampler, "seed": s.seed, "budget": budget.as_dict()}
        run_id = self.ledger.open_run(settings | {"command": s.command}, proposer)
        proposer.plan(budget.evaluations)
        for config in s.enqueue:
            if self._answer(config) is None:
                proposer.enqueue(config)
        self.started, cpu_started = time.perf_counter(), time.process_time()
        runner_before = self._runner_phases().copy()
        stop, status = (
            SearchStopReason.EXHAUSTED,
            RunStatus.FAILED,
        )  # unless the loop ends or Ctrl-C
        phases = PhaseTimes()
        try:
            stop = self._loop(proposer, budget)
            status = RunStatus.FINISHED
        except KeyboardInterrupt:
            stop, status = SearchStopReason.INTERRUPTED, RunStatus.INTERRUPTED
        finally:
            stats = self.ledger.stats
            stats.seconds = time.perf_counter() - self.started
            stats.cpu_seconds = time.process_time() - cpu_started
            phases = self._run_phases(runner_before, stats.seconds)
            with contextlib.suppress(WorkbenchError):  # the store may be what failed
                self.ledger.record_phases(phases.to_json())
            self.ledger.close(status)
        history = self.ledger.evaluations()
        return TuneResult(
            study=self.ledger.study,
            run_id=run_id,
            stop=stop,
            evaluations=len(history),
            new_evaluations=self.ledger.new_evaluations,
            proposals=self.proposals,
            best=best_of(history),
            history=history,
            moves=proposer.moves(),
            unanswered=self.problem.unanswered(len(self.ledger.unanswered)),
            drift=tuple(self.watch.checks) if self.watch is not None else (),
            phases=phases,
        )

    def _runner_phases(self) -> PhaseTimes:
        return self.runner.phase_times() or PhaseTimes()

    def _run_phases(self, runner_before: PhaseTimes, wall_s: float) -> PhaseTimes:
        """The run's phases: the loop's, the runner's since the run began (its whole time as
        the worker's when it keeps none), and the rest of the wall time as idle."""
        stats = self.ledger.stats
        ran = self._runner_phases().since(runner_before)
        if self.runner.phase_times() is None:
            ran.add(Phase.WORKER, stats.runner_seconds)
        return stats.phases.merged(ran).with_idle(wall_s)

    def _loop(self, proposer: Proposer, budget: Budget) -> SearchStopReason:
        ledger, phases = self.ledger, self.ledger.stats.phases
        while True:
            with phases.timed(Phase.STORE):  # the ledger reads what changed
                standing = ledger.refresh(proposer, budget)
            if budget.evaluations is not None and standing.complete >= budget.evaluations:
                if ledger.settled():
                    return SearchStopReason.BUDGET
                ledger.wait()  # a dead worker's trial is handed back within the grace period
                continue
            if budget.seconds is not None and time.perf_counter() - self.started >= budget.seconds:
                return SearchStopReason.TIME
            if budget.patience is not None and standing.since_best >= budget.patience:
                return SearchStopReason.PATIENCE
            if standing.exhausted:
                return SearchStopReason.EXHAUSTED
            slot = ledger.requeued(budget)
            if slot is None:
                if standing.busy:
                    ledger.wait()
                    continue
                self._fill(proposer, budget, standing)
                if not self.queue:  # nothing open: others hold the rest, or the space is done
                    if ledger.wait():
                        continue
                    return SearchStopReason.EXHAUSTED
                slot = self.queue.popleft()
            self._measure(proposer, slot)

    def _fill(self, proposer: Proposer, budget: Budget, standing: Standing) -> None:
        """Reserve proposals up to ``ahead`` of them (within the evaluation budget), the runner
        preparing each when there are several; stops early when a reservation fails (taken
        meanwhile: the next round reads by whom)."""
        phases = self.ledger.stats.phases
        room = self.ahead - len(self.queue)
        if budget.evaluations is not None:
            room = min(room, budget.evaluations - standing.complete - len(self.queue))
        while room > 0 or not self.queue:
            with phases.timed(Phase.SEARCH):
                config = self._pick(proposer)
            if config is None:
                return
            key = self.problem.key(config)
            with phases.timed(Phase.STORE):
                slot = self.ledger.reserve(config, key, budget)
            if slot is None:
                with phases.timed(Phase.SEARCH):
                    proposer.observe(config, self.ledger.known(key) or IN_FLIGHT)
                self.stalled += 1
                return
            self.queue.append(slot)
            room -= 1
            if self.ahead > 1:
                self.runner.prepare(config)

    def _open(self, key: str) -> bool:
        """Nothing is known of ``key`` and it is not waiting for its turn."""
        return self.ledger.known(key) is None and all(s.key != key for s in self.queue)

    def _answer(self, config: Config) -> Measurement | None:
        """What a proposal is answered with instead of a measurement; None: measure it."""
        key = self.problem.key(config)
        if any(s.key == key for s in self.queue):
            return IN_FLIGHT
        known = self.ledger.known(key)
        if known is None and self.problem.violations(config):
            return INFEASIBLE
        return known

    def _pick(self, proposer: Proposer) -> Config | None:
        """The proposer's next config to measure; after ``max_stalled`` proposals in a row that
        bring nothing to measure (or when it has nothing left), an open config at random."""
        while self.stalled < self.ledger.max_stalled:
            config = proposer.next()
            if config is None:
                break
            self.proposals += 1
            answer = self._answer(config)
            if answer is None:
                return config
            proposer.observe(config, answer)
            self.stalled += 1
        config = draw_open(self.problem, self.rng, self._open)
        if config is not None:
            self.proposals += 1
            self.stalled = 0
        return config

    def _measure(self, proposer: Proposer, slot: Slot) -> None:
        """The slot's measurement (a stored one, else the runner's), kept, then learnt."""
        phases = self.ledger.stats.phases
        with phases.timed(Phase.STORE):
            m = self.ledger.stored(slot)
        fresh = m is None
        if m is None:
            m = self._evaluate(slot.config)
            if m.outcome is TrialOutcome.INFEASIBLE:  # e.g. missing from a recording
                with phases.timed(Phase.STORE):
                    self.ledger.reject(slot)
                if slot.proposed:
                    with phases.timed(Phase.SEARCH):
                        proposer.observe(slot.config, m)
                self.stalled += 1
                return
        elapsed = time.perf_counter() - self.started
        with phases.timed(Phase.STORE):
            stored = self.ledger.record(slot, m, elapsed, fresh)
        with phases.timed(Phase.SEARCH):
            if slot.proposed:
                proposer.observe(slot.config, stored.measurement)
            else:
                proposer.start([stored])
        self.stalled = 0
        if fresh and self.watch is not None:
            self._drift(slot.config, m)
        if self.settings.on_evaluation is not None:
            self.settings.on_evaluation(stored, self.ledger.best)

    def _evaluate(self, config: Config) -> Measurement:
        stats = self.ledger.stats
        t0, c0 = time.perf_counter(), time.process_time()
        m = self.runner.evaluate(config)
        stats.runner_seconds += time.perf_counter() - t0
        stats.runner_cpu_seconds += time.process_time() - c0
        stats.measured += int(m.outcome is not TrialOutcome.INFEASIBLE)
        return m

    def _drift(self, config: Config, m: Measurement) -> None:
        assert self.watch is not None
        check = self.watch.observe(config, m)
        if check is None:
            return
        with self.ledger.stats.phases.timed(Phase.STORE):
            self.ledger.record_drift([c.to_json() for c in self.watch.checks])
        if self.settings.on_drift is not None:
            self.settings.on_drift(check)
