"""Warm starts: the fastest config found for the same kernel in another study of the store
(another GPU, another shape, another problem variant), fitted to the problem being tuned.

Such a config is a cheap first guess (``tune --enqueue best``): it costs one evaluation, and
tile and block sizes often carry over between shapes and between GPUs. Often is not always:
another GPU's optimum can sit in a deceptive basin here, where the default sampler's local moves
then stay (measured on the recorded convolutions: docs/search.md). So warm starts are asked
for, not made by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.errors import ConfigError
from workbench.spaces.model import Config, Value, config_label

if TYPE_CHECKING:  # (light to import: tune --help names MAX_WARM_STARTS)
    from workbench.search.problem import SearchProblem
    from workbench.store import Store, StudyInfo

#: ``--enqueue best`` evaluates the best of this many other studies at most (the nearest
#: first: same GPU, then by age): each costs an evaluation, and misleading ones add up (on the
#: recorded A100 convolution, the A4000's fastest config first scores 0.431 at 200
#: evaluations, its three fastest -0.052, against 0.818 from nothing).
MAX_WARM_STARTS = 3


@dataclass(frozen=True)
class WarmStart:
    """Another study's fastest config, as this problem would evaluate it."""

    source: StudyInfo
    value: float | None  #: its time in the source study (None: it has no correct evaluation)
    config: Config | None  #: fitted to this problem; None when it does not fit
    reason: str | None  #: why there is no config to try (None when there is)

    def describe(self) -> str:
        if self.config is None:
            return f"{self.source.name!r}: not used, {self.reason}"
        return (
            f"{config_label(self.config)} ({self.value:.4g} {self.source.unit} in "
            f"{self.source.name!r})"
        )


def fit_config(
    problem: SearchProblem, config: Mapping[str, Value]
) -> tuple[Config | None, str | None]:
    """``config`` as a config of ``problem``, or None and why it is not one.

    Parameters this problem does not tune (one value: a pinned problem variant) take this
    problem's value; every other parameter must be in the other config, with a value of this
    problem's domain, and the result must satisfy the problem's constraints."""
    fitted: Config = {}
    missing, outside = [], []
    for p in problem.params:
        if len(p.values) == 1:
            fitted[p.name] = p.values[0]
        elif p.name not in config:
            missing.append(p.name)
        elif config[p.name] not in p.values:
            outside.append(f"{p.name}={config[p.name]!r}")
        else:
            fitted[p.name] = config[p.name]
    if missing:
        return None, f"it has no {', '.join(missing)}"
    if outside:
        return None, f"{', '.join(outside)} outside this space"
    violations = problem.violations(fitted)
    if violations:
        return None, f"{config_label(fitted)} is invalid here: {'; '.join(violations)}"
    return fitted, None


def best_elsewhere(
    store: Store, problem: SearchProblem, study: StudyInfo, source: str | None = None
) -> list[WarmStart]:
    """The best config (:mod:`workbench.store.best`) of each other measured study of the same
    kernel, any problem variant (studies on the same device first, then in the order they were
    created), or of the study ``source`` names (by name, id or a unique part of the name; any
    kernel), each fitted to ``problem``.

    Raises:
        ConfigError: ``source`` names no study in the store, several, or this one.
        StoreError: the database failed.
    """
    from workbench.store.best import StudySelection, Variants, select_studies, study_best

    if source is None:
        family = select_studies(store, StudySelection(study.kernel, Variants.FAMILY))
        chosen = [s for s in family if s.id != study.id]
        chosen.sort(key=lambda s: (s.device_key != study.device_key, s.id))
    else:
        try:
            chosen = [store.find_study(source, unlisted=study.id)]
        except ConfigError as exc:
            raise ConfigError(f"`enqueue` best:{source}: {exc}") from None
        if chosen[0].id == study.id:
            raise ConfigError(
                f"`enqueue` best:{source} names the study being tuned; its evaluations are "
                "already the search's history"
            )
    found = []
    for other in chosen:
        best = study_best(store, other)
        if best is None:
            found.append(WarmStart(other, None, None, "it has no correct evaluation"))
            continue
        config, reason = fit_config(problem, best.config)
        found.append(WarmStart(other, best.measurement.value, config, reason))
    return found
