"""Proposers: what the tuner asks for the next configuration and tells the outcome to.

A :class:`Proposer` hides the strategy: Optuna's samplers (TPE, GP, ...) run behind
:class:`OptunaProposer` through ask/tell, with infeasible and failed points told as constraint
violations; strategies that know the enumerated valid set (random order, brute force, the
portfolio) run natively, which keeps the per-trial cost of the default path far below Optuna's
(an Optuna ask/tell with fifteen parameters costs tens of milliseconds here).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence

import optuna
from optuna.samplers import BaseSampler
from optuna.trial import TrialState, create_trial

from workbench.runners.base import Measurement, TrialOutcome
from workbench.search.problem import SearchProblem
from workbench.spaces.model import Config
from workbench.store import StoredEvaluation

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: Constraint value told to Optuna for infeasible and failed points (feasible: <= 0).
VIOLATION = 1.0


class Proposer(ABC):
    """Proposes configs of ``problem`` and learns from what they gave.

    The tuner calls :meth:`start` once with the study's history, then :meth:`next` and
    :meth:`observe` (for every proposal: new, repeated or infeasible). Several proposals may be
    in flight (a search that compiles the next ones while one is timed): each is observed once,
    by its config, in any order.
    """

    def __init__(self, problem: SearchProblem) -> None:
        self.problem = problem
        self._queue: deque[Config] = deque()

    def start(self, history: Sequence[StoredEvaluation]) -> None:  # noqa: B027 - optional
        """Learn from evaluations made before (a resumed study)."""

    def hold(self, configs: Sequence[Config]) -> None:  # noqa: B027 - optional
        """Configs being measured elsewhere right now (other workers of a shared study): not
        results yet, and not to be proposed meanwhile. Replaces what was held before."""

    def plan(self, evaluations: int | None) -> None:  # noqa: B027 - optional
        """The run's budget of unique evaluations, the study's earlier ones included (None: a
        budget of wall time or patience only), told once, before the first proposal (a shared
        study's budget counts every worker's evaluations, which reach it through :meth:`start`)."""

    def enqueue(self, config: Config) -> None:
        """Propose ``config`` before anything else."""
        self._queue.append(dict(config))

    def next(self) -> Config | None:
        """The next config to try (queued ones first); None when there is nothing left."""
        if self._queue:
            return self._queue.popleft()
        return self.propose()

    def moves(self) -> dict[str, dict[str, int]] | None:
        """Per search move of a strategy that has several: how many configs it proposed and
        how many of them improved the best value (None: a single strategy)."""
        return None

    @abstractmethod
    def propose(self) -> Config | None:
        """The strategy's next config, or None when it has nothing more to propose."""

    @abstractmethod
    def observe(self, config: Config, m: Measurement) -> None:
        """The outcome of ``config``, returned by :meth:`next` and not observed yet."""


class OptunaProposer(Proposer):
    """Any Optuna sampler, through ask/tell on an in-memory study."""

    def __init__(self, problem: SearchProblem, sampler: BaseSampler) -> None:
        super().__init__(problem)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.dists = problem.distributions()
        #: trials asked and not told, by config key (a sampler may propose a config in flight)
        self._pending: dict[str, list[optuna.Trial]] = {}
        self._worst_ok = 0.0

    def _penalty(self) -> float:
        return 2.0 * self._worst_ok if self._worst_ok > 0 else 1.0

    def _note(self, m: Measurement) -> None:
        if m.outcome is TrialOutcome.OK and m.value is not None:
            self._worst_ok = max(self._worst_ok, m.value)

    def start(self, history: Sequence[StoredEvaluation]) -> None:
        for e in history:
            self._note(e.measurement)
        trials = []
        for e in history:
            try:
                params = self.problem.encode(e.config)
            except (KeyError, ValueError):
                continue  # a config from an older version of the space
            ok = e.measurement.outcome is TrialOutcome.OK
            trials.append(
                create_trial(
                    params=params,
                    distributions=self.dists,
                    state=TrialState.COMPLETE,
                    value=e.measurement.value if ok else self._penalty(),
                    # named as observe() names it: Optuna refuses a study whose trials'
                    # constraint names differ (a resumed GP search failed on "0" vs "feasible")
                    system_attrs={"constraints:feasible": 0.0 if ok else VIOLATION},
                )
            )
        self.study.add_trials(trials)

    def next(self) -> Config | None:
        if self._queue:  # an enqueued trial keeps the sampler's bookkeeping consistent
            self.study.enqueue_trial(self.problem.encode(self._queue.popleft()))
        return self.propose()

    def propose(self) -> Config | None:
        trial = self.study.ask(self.dists)
        config = self.problem.decode(trial.params)
        self._pending.setdefault(self.problem.key(config), []).append(trial)
        return config

    def observe(self, config: Config, m: Measurement) -> None:
        key = self.problem.key(config)
        trials = self._pending.get(key)
        if not trials:
            return
        trial = trials.pop()  # the latest: an earlier one of the same config is still out
        if not trials:
            del self._pending[key]
        self._note(m)
        if m.outcome is TrialOutcome.OK:
            trial.set_constraint("feasible", 0.0)
            self.study.tell(trial, m.value)
        else:
            trial.set_constraint("feasible", VIOLATION)
            self.study.tell(trial, self._penalty())


class ValidOrderProposer(Proposer):
    """Unvisited valid configs in a fixed order: shuffled (random search without replacement,
    the baseline of the autotuning-methodology score) or in domain order (brute force)."""

    def __init__(
        self, problem: SearchProblem, configs: Sequence[Config], *, shuffle: bool, seed: int | None
    ) -> None:
        super().__init__(problem)
        self.order = list(configs)
        if shuffle:
            random.Random(seed).shuffle(self.order)
        self.position = 0
        self.visited: set[str] = set()

    def start(self, history: Sequence[StoredEvaluation]) -> None:
        self.visited.update(self.problem.key(e.config) for e in history)

    def propose(self) -> Config | None:
        while self.position < len(self.order):
            config = self.order[self.position]
            self.position += 1
            if self.problem.key(config) not in self.visited:
                return config
        return None

    def observe(self, config: Config, m: Measurement) -> None:
        self.visited.add(self.problem.key(config))


class RandomProposer(Proposer):
    """Uniform random configs of the cartesian product (for spaces too large to enumerate;
    the tuner rejects the invalid ones)."""

    def __init__(self, problem: SearchProblem, seed: int | None) -> None:
        super().__init__(problem)
        self.rng = random.Random(seed)

    def propose(self) -> Config | None:
        return {p.name: self.rng.choice(p.values) for p in self.problem.params}

    def observe(self, config: Config, m: Measurement) -> None:
        pass
