"""The search loop: Optuna proposes, the runner measures, the store keeps, the budget decides.

* A proposal outside the space is told to the sampler as a constraint violation (never run).
* A proposal already evaluated in this study is answered from the store (never re-measured).
* A failed evaluation (compile error, crash, timeout, wrong result) counts against the budget
  and is told to the sampler as a constraint violation, so it learns to avoid the region.
* Every evaluation is committed to the store before the next one starts; a re-run of the same
  study resumes from what the store holds (the sampler is warm-started with it).
* The budget counts unique evaluations (failed ones included); wall time and patience (no
  improvement in N evaluations) can stop earlier.
* With ``drift_every`` and a live runner, the run's first correct config is timed again every
  that many correct evaluations and compared with its first timing
  (:mod:`workbench.search.drift`); the checks are stored with the run.
"""

from __future__ import annotations

import contextlib
import enum
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from workbench.errors import WorkbenchError
from workbench.runners.base import Measurement, Runner, TrialOutcome
from workbench.search.drift import DriftCheck, DriftWatch
from workbench.search.problem import Problem
from workbench.search.samplers import DEFAULT_SAMPLER, make_proposer
from workbench.spaces.model import Config
from workbench.store import Store, StoredEvaluation, StudyInfo
from workbench.store.best import best_of, ranked

#: After this many proposals in a row that bring no new evaluation (repeats, infeasible
#: points), the tuner evaluates an unvisited valid config chosen at random instead.
MAX_STALLED_PROPOSALS = 25
#: What the proposer is told about a proposal outside the space.
INFEASIBLE = Measurement.failure(TrialOutcome.INFEASIBLE, "outside the space")


class StopReason(enum.Enum):
    BUDGET = "budget"  #: the evaluation budget is used
    TIME = "time"  #: the wall-time budget is used
    PATIENCE = "patience"  #: no improvement in the last N evaluations
    EXHAUSTED = "exhausted"  #: every valid config is evaluated
    INTERRUPTED = "interrupted"  #: Ctrl-C


@dataclass(frozen=True)
class Budget:
    """When to stop; ``None`` means no limit of that kind (at least one must be set)."""

    evaluations: int | None = None
    seconds: float | None = None
    patience: int | None = None

    def __post_init__(self) -> None:
        if self.evaluations is None and self.seconds is None and self.patience is None:
            raise WorkbenchError("a budget needs --budget N, --time SECONDS or --patience N")
        if self.evaluations is not None and self.evaluations < 1:
            raise WorkbenchError(f"--budget {self.evaluations}: the budget must be at least 1")
        if self.seconds is not None and self.seconds <= 0:
            raise WorkbenchError(f"--time {self.seconds}: the time budget must be positive")
        if self.patience is not None and self.patience < 1:
            raise WorkbenchError(f"--patience {self.patience}: patience must be at least 1")

    def as_dict(self) -> dict[str, object]:
        return {"evaluations": self.evaluations, "seconds": self.seconds, "patience": self.patience}


@dataclass
class TuneResult:
    """What a tune produced (everything is also in the store)."""

    study: StudyInfo
    run_id: int
    stop: StopReason
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

    @property
    def drifted(self) -> list[DriftCheck]:
        return [c for c in self.drift if c.drifted]

    def top(self, n: int = 10) -> list[StoredEvaluation]:
        return ranked(self.history)[:n]


OnEvaluation = Callable[[StoredEvaluation, StoredEvaluation | None], None]


class Tuner:
    """Search one study: ``problem`` for validity, ``runner`` for measurements."""

    def __init__(
        self,
        problem: Problem,
        runner: Runner,
        store: Store,
        study: StudyInfo,
        *,
        environment_id: int | None = None,
        sampler: str = DEFAULT_SAMPLER,
        seed: int | None = 0,
        enqueue: Sequence[Config] = (),
        on_evaluation: OnEvaluation | None = None,
        command: str | None = None,
        drift_every: int | None = None,
        on_drift: Callable[[DriftCheck], None] | None = None,
    ) -> None:
        self.problem = problem
        self.runner = runner
        self.store = store
        self.study_info = study
        self.environment_id = environment_id
        self.sampler_name = sampler
        self.seed = seed
        self.enqueue = list(enqueue)
        self.on_evaluation = on_evaluation
        self.command = command
        self.drift_every = drift_every
        self.on_drift = on_drift
        self.rng = random.Random(seed)
        self.seen: dict[str, StoredEvaluation] = {}
        self.history: list[StoredEvaluation] = []
        #: valid configs the runner cannot evaluate (absent from the recording it replays):
        #: never retried, and the space is exhausted without them
        self.unanswered: set[str] = set()

    # -- bookkeeping -----------------------------------------------------------------------
    def _visited(self, config: Config) -> bool:
        return self.problem.key(config) in self.seen

    def _best(self) -> StoredEvaluation | None:
        return best_of(self.history)

    def _open(self, config: Config) -> bool:
        """Neither evaluated nor known to be unanswerable."""
        key = self.problem.key(config)
        return key not in self.seen and key not in self.unanswered

    def _unvisited_valid(self) -> Config | None:
        valid = self.problem.valid_configs()
        if valid is not None:
            left = [c for c in valid if self._open(c)]
            return self.rng.choice(left) if left else None
        for _ in range(10_000):  # large space: sample the cartesian product
            config = {p.name: self.rng.choice(p.values) for p in self.problem.params}
            if self._open(config) and not self.problem.violations(config):
                return config
        return None

    # -- the loop --------------------------------------------------------------------------
    def run(self, budget: Budget) -> TuneResult:
        """Search until the budget is used, the space is exhausted, or Ctrl-C.

        Raises:
            ConfigError: no config of the space is valid.
            StoreError: the store failed (what was committed stays), or another process is
                tuning the same study in a SQLite store (shared studies need PostgreSQL).
        """
        with self.store.exclusive(self.study_info):
            return self._run(budget)

    def _run(self, budget: Budget) -> TuneResult:
        self.problem.check_not_empty()
        self.history = self.store.evaluations(self.study_info)
        self.seen = {self.problem.key(e.config): e for e in self.history}
        run_id = self.store.start_run(
            self.study_info,
            self.environment_id,
            sampler=self.sampler_name,
            seed=self.seed,
            budget=budget.as_dict(),
            command=self.command,
        )
        watch = DriftWatch.of(self.runner, self.drift_every)
        proposer = make_proposer(self.sampler_name, self.problem, self.seed)
        proposer.start(self.history)
        proposer.plan(budget.evaluations)
        for config in self.enqueue:
            if not self._visited(config) and not self.problem.violations(config):
                proposer.enqueue(config)
        valid = self.problem.valid_configs()
        n_valid = len(valid) if valid is not None else None
        started = time.perf_counter()
        new = proposals = stalled = 0
        best = self._best()
        since_best = 0
        stop = StopReason.EXHAUSTED
        status = "failed"  # unless the loop ends normally or by Ctrl-C
        try:
            while True:
                if budget.evaluations is not None and len(self.history) >= budget.evaluations:
                    stop = StopReason.BUDGET
                    break
                if budget.seconds is not None and time.perf_counter() - started >= budget.seconds:
                    stop = StopReason.TIME
                    break
                if budget.patience is not None and new and since_best >= budget.patience:
                    stop = StopReason.PATIENCE
                    break
                if n_valid is not None and len(self.seen) + len(self.unanswered) >= n_valid:
                    stop = StopReason.EXHAUSTED
                    break
                config = proposer.next() if stalled < MAX_STALLED_PROPOSALS else None
                if config is None:  # the strategy is stuck or done: an unvisited valid config
                    config = self._unvisited_valid()
                    if config is None:
                        stop = StopReason.EXHAUSTED
                        break
                    stalled = 0
                proposals += 1
                key = self.problem.key(config)
                if key in self.seen:
                    proposer.observe(config, self.seen[key].measurement)
                    stalled += 1
                    continue
                if key in self.unanswered or self.problem.violations(config):
                    proposer.observe(config, INFEASIBLE)
                    stalled += 1
                    continue
                m = self.runner.evaluate(config)
                if m.outcome is TrialOutcome.INFEASIBLE:  # e.g. missing from a recording
                    self.unanswered.add(key)
                    proposer.observe(config, m)
                    stalled += 1
                    continue
                elapsed = time.perf_counter() - started
                self.store.record(
                    self.study_info, run_id, self.environment_id, config, m, elapsed_s=elapsed
                )
                stored = StoredEvaluation(len(self.history), config, m, run_id, elapsed)
                self.history.append(stored)
                self.seen[key] = stored
                proposer.observe(config, m)
                new += 1
                stalled = 0
                if watch is not None and (check := watch.observe(config, m)) is not None:
                    self.store.record_drift(run_id, [c.to_json() for c in watch.checks])
                    if self.on_drift is not None:
                        self.on_drift(check)
                if m.outcome is TrialOutcome.OK and (
                    best is None or m.value < best.measurement.value  # type: ignore[operator]
                ):
                    best = stored
                    since_best = 0
                else:
                    since_best += 1
                if self.on_evaluation is not None:
                    self.on_evaluation(stored, best)
            status = "finished"
        except KeyboardInterrupt:
            stop, status = StopReason.INTERRUPTED, "interrupted"
            # the interrupt may land between a commit and its bookkeeping: what counts is
            # what the store holds
            with contextlib.suppress(WorkbenchError):
                stored = self.store.evaluations(self.study_info)
                new += len(stored) - len(self.history)
                self.history = stored
        finally:
            with contextlib.suppress(WorkbenchError):  # the store may be what failed
                self.store.finish_run(run_id, status)
        return TuneResult(
            study=self.study_info,
            run_id=run_id,
            stop=stop,
            evaluations=len(self.history),
            new_evaluations=new,
            proposals=proposals,
            best=self._best(),
            history=list(self.history),
            moves=proposer.moves(),
            unanswered=self.problem.unanswered(len(self.unanswered)),
            drift=tuple(watch.checks) if watch is not None else (),
        )
