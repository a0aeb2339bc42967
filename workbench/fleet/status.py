"""``workbench status``: the workers alive and the trials of a shared study."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from workbench.errors import WorkbenchError
from workbench.fleet.connection import Database
from workbench.fleet.sql import CLAIM, DEVICE_CLASS, SPEC
from workbench.fleet.study import SharedStudy
from workbench.store.database import shown_url


# -- status ------------------------------------------------------------------------------------
@dataclass
class StudyStatus:
    """``workbench status``: what a shared study is doing, from the database alone."""

    name: str
    device_class: str | None
    budget: int | None
    counts: dict[str, int]  #: complete, running, waiting, failed, skipped (claimed/other)
    workers: list[dict[str, Any]]  #: each with ``alive`` and ``seen_s_ago``
    best: dict[str, Any] | None  #: value, unit, config (from the store)
    spec: dict[str, Any] = field(default_factory=dict)

    @property
    def alive(self) -> list[dict[str, Any]]:
        return [w for w in self.workers if w["alive"]]


def count_trials(trials: Sequence[FrozenTrial]) -> dict[str, int]:
    counts = {"complete": 0, "running": 0, "waiting": 0, "failed": 0, "skipped": 0}
    for t in trials:
        if t.state is TrialState.COMPLETE:
            counts["complete"] += 1
        elif t.state is TrialState.RUNNING:
            counts["running"] += 1
        elif t.state is TrialState.WAITING:
            counts["waiting"] += 1
        elif t.state is TrialState.FAIL:
            counts["failed"] += 1
        else:
            counts["skipped"] += 1
    return counts


def gather_status(
    db: Database, name: str, best: Callable[[], dict[str, Any] | None]
) -> StudyStatus:
    """The status of shared study ``name``; ``best`` reads the best result from the store.

    Raises:
        WorkbenchError: no such shared study.
    """
    if not SharedStudy.exists(db, name):
        known = [s.study_name for s in db.outage.call(db.storage().get_all_studies)]
        raise WorkbenchError(
            f"no shared study {name!r} in {shown_url(db.url)}; shared studies: "
            + (", ".join(repr(k) for k in known) or "none")
        )
    shared = SharedStudy(db, name)
    attrs = shared.user_attrs()
    spec = dict(attrs.get(SPEC) or {})
    now = db.outage.call(db.now)
    # alive: seen within the study's grace period (what its workers re-queue by), not the
    # status command's own setting
    grace = float(db.settings.of_spec(spec).grace_s)
    trials = shared.trials()
    # each worker's completed trials, from the trials' claims: a killed worker's presence
    # stopped counting at its last beat
    completed = Counter(t.system_attrs.get(CLAIM) for t in trials if t.state is TrialState.COMPLETE)
    workers = []
    for w in shared.workers():
        ago = now - float(w.get("seen", 0.0))
        w["seen_s_ago"] = round(ago, 1)
        w["alive"] = w.get("state") == "working" and ago <= grace
        w["completed"] = completed.get(w["key"], 0)
        workers.append(w)
    budget = (spec.get("budget") or {}).get("evaluations")
    return StudyStatus(
        name=name,
        device_class=attrs.get(DEVICE_CLASS),
        budget=budget,
        counts=count_trials(trials),
        workers=sorted(workers, key=lambda w: (not w["alive"], w["key"])),
        best=best(),
        spec=spec,
    )


def trial_value(value: float | None) -> float:
    """What Optuna is told: the objective, or +inf for a config that failed."""
    return math.inf if value is None else float(value)
