"""Search strategies by name (``--sampler``), each built as a :class:`Proposer`.

Naming them costs nothing: ``workbench tune --help`` lists them, and each strategy imports
Optuna and its proposers only when it is built.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.search.problem import SearchProblem
    from workbench.search.proposers import Proposer

ProposerFactory = Callable[["SearchProblem", "int | None"], "Proposer"]


def _tpe(problem: SearchProblem, seed: int | None) -> Proposer:
    import optuna

    from workbench.search.proposers import OptunaProposer

    # Optuna 5 samplers read the constraints set with trial.set_constraint
    return OptunaProposer(problem, optuna.samplers.TPESampler(seed=seed, multivariate=True))


#: Packages a sampler needs beyond the base install (checked before anything runs).
EXTRA_PACKAGES = {"gp": (("torch", "scipy"), "pip install 'workbench[gp]'")}


def _gp(problem: SearchProblem, seed: int | None) -> Proposer:
    import optuna

    from workbench.search.proposers import OptunaProposer

    return OptunaProposer(problem, optuna.samplers.GPSampler(seed=seed))


def _random(problem: SearchProblem, seed: int | None) -> Proposer:
    from workbench.search.proposers import RandomProposer, ValidOrderProposer

    valid = problem.valid_configs()
    if valid is None:
        return RandomProposer(problem, seed)
    return ValidOrderProposer(problem, valid, shuffle=True, seed=seed)


def _brute(problem: SearchProblem, seed: int | None) -> Proposer:
    from workbench.search.proposers import ValidOrderProposer

    valid = problem.valid_configs()
    if valid is None or (problem.valid_total or 0) > len(valid):
        size = f" ({problem.valid_total:,} valid configs)" if problem.valid_total else ""
        raise WorkbenchError(
            f"{problem.kernel}: the space is too large to enumerate for brute force{size}; use "
            "portfolio, tpe or random"
        )
    return ValidOrderProposer(problem, valid, shuffle=False, seed=seed)


def _portfolio(problem: SearchProblem, seed: int | None) -> Proposer:
    from workbench.search.portfolio import PortfolioProposer

    valid = problem.valid_configs()
    if valid is None:  # too large to enumerate: TPE with constraints instead
        return _tpe(problem, seed)
    return PortfolioProposer(problem, valid, seed=seed)


SAMPLERS: dict[str, tuple[ProposerFactory, str]] = {
    "portfolio": (
        _portfolio,
        "bandit over random, two models (Thompson sampling of pairwise regressions, ordinal "
        "values smoothed or a random walk; the walk model's posterior mean too), crossover and "
        "one- or two-parameter moves on the valid set (TPE when the space is too large to "
        "enumerate)",
    ),
    "tpe": (_tpe, "Optuna TPE (multivariate), constraints learned from infeasible/failed points"),
    "gp": (_gp, "Optuna Gaussian-process sampler with constraints (needs PyTorch)"),
    "random": (_random, "uniform over valid configs, without replacement"),
    "brute": (_brute, "every valid config, in domain order"),
}


def check_sampler(name: str) -> None:
    """Refuse a name that no strategy is registered under (before anything runs).

    Raises:
        WorkbenchError: unknown name, or a package the sampler needs is not installed.
    """
    if name not in SAMPLERS:
        raise WorkbenchError(f"unknown sampler {name!r}; samplers: {', '.join(SAMPLERS)}")
    packages, how = EXTRA_PACKAGES.get(name, ((), ""))
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    if missing:
        raise WorkbenchError(f"the {name} sampler needs {' and '.join(missing)}: {how}")


def make_proposer(name: str, problem: SearchProblem, seed: int | None) -> Proposer:
    """The strategy registered under ``name``.

    Raises:
        WorkbenchError: unknown name.
    """
    check_sampler(name)
    factory, _ = SAMPLERS[name]
    return factory(problem, seed)
