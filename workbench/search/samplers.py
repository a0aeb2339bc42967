"""Samplers by name: Optuna's, and ones that know the valid set of a discrete space.

Every sampler is an :class:`optuna.samplers.BaseSampler`; the tuner drives it through
ask/tell, reports infeasible and failed points as constraint violations, and answers repeated
proposals from the store.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from workbench.errors import WorkbenchError
from workbench.search.problem import Problem
from workbench.spaces.model import Config

IsVisited = Callable[[Config], bool]


class ValidSetSampler(BaseSampler):
    """Proposes unvisited configs from the enumerated valid set: random order or in order.

    ``shuffle=True`` is random search without replacement over valid configs (the baseline the
    autotuning-methodology score is measured against); ``shuffle=False`` is brute force.
    """

    def __init__(
        self, problem: Problem, is_visited: IsVisited, *, shuffle: bool, seed: int | None = None
    ) -> None:
        valid = problem.valid_configs()
        if valid is None:
            raise WorkbenchError(
                f"{problem.kernel}: the space is too large to enumerate for this sampler; "
                "use tpe, gp or random-sample"
            )
        self.problem = problem
        self.order = list(valid)
        if shuffle:
            random.Random(seed).shuffle(self.order)
        self.is_visited = is_visited
        self.position = 0
        self._fallback = optuna.samplers.RandomSampler(seed=seed)

    def infer_relative_search_space(
        self, study: Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.problem.distributions()

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        while self.position < len(self.order):
            config = self.order[self.position]
            self.position += 1
            if not self.is_visited(config):
                return self.problem.encode(config)
        return {}  # exhausted: the tuner notices that every valid config was visited

    def sample_independent(
        self,
        study: Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)


SamplerFactory = Callable[[Problem, IsVisited, int | None], BaseSampler]


def _tpe(problem: Problem, is_visited: IsVisited, seed: int | None) -> BaseSampler:
    # Optuna 5 samplers read the constraints the tuner sets with trial.set_constraint
    return optuna.samplers.TPESampler(seed=seed, multivariate=True)


def _gp(problem: Problem, is_visited: IsVisited, seed: int | None) -> BaseSampler:
    try:
        import scipy  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise WorkbenchError(
            "the gp sampler needs PyTorch and SciPy: pip install 'workbench[gp]'"
        ) from None
    return optuna.samplers.GPSampler(seed=seed)


def _random(problem: Problem, is_visited: IsVisited, seed: int | None) -> BaseSampler:
    if problem.valid_configs() is None:
        return optuna.samplers.RandomSampler(seed=seed)
    return ValidSetSampler(problem, is_visited, shuffle=True, seed=seed)


def _brute(problem: Problem, is_visited: IsVisited, seed: int | None) -> BaseSampler:
    return ValidSetSampler(problem, is_visited, shuffle=False, seed=seed)


def _portfolio(problem: Problem, is_visited: IsVisited, seed: int | None) -> BaseSampler:
    from workbench.search.portfolio import PortfolioSampler

    valid = problem.valid_configs()
    if valid is None:  # too large to enumerate: TPE with constraints instead
        return _tpe(problem, is_visited, seed)
    return PortfolioSampler(problem, valid, seed=seed)


SAMPLERS: dict[str, tuple[SamplerFactory, str]] = {
    "portfolio": (
        _portfolio,
        "bandit over random, model (TPE-like), crossover and coordinate "
        "moves on the valid set (TPE when the space is too large to enumerate)",
    ),
    "tpe": (_tpe, "Optuna TPE (multivariate), constraints learned from infeasible/failed points"),
    "gp": (_gp, "Optuna Gaussian-process sampler with constraints"),
    "random": (_random, "uniform over valid configs, without replacement"),
    "brute": (_brute, "every valid config, in domain order"),
}

DEFAULT_SAMPLER = "portfolio"


def make_sampler(
    name: str, problem: Problem, is_visited: IsVisited, seed: int | None
) -> BaseSampler:
    """The sampler registered under ``name``.

    Raises:
        WorkbenchError: unknown name.
    """
    try:
        factory, _ = SAMPLERS[name]
    except KeyError:
        known = ", ".join(SAMPLERS)
        raise WorkbenchError(f"unknown sampler {name!r}; samplers: {known}") from None
    return factory(problem, is_visited, seed)
