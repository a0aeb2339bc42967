"""Joining a shared study: ``workbench tune ... --storage postgresql://...`` creates or joins
it and works on it as one worker; ``workbench worker`` joins it. Either way, under the study
set-up lock: plan as the study's request says (:func:`~workbench.search.start.plan_tune`),
keep the study's search (a joiner's sampler, seed, coordination and, unless --budget is given,
budget are the study's), give the store's evaluations of the study complete trials, and put the
``--enqueue`` configs first. Then :class:`~workbench.fleet.worker.SharedTuner` works.
"""

from __future__ import annotations

import dataclasses
import math
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from workbench.errors import ConfigError
from workbench.fleet.claims import WorkerId
from workbench.fleet.connection import Database
from workbench.fleet.sql import CLAIM, SETUP_LOCK
from workbench.fleet.status import trial_value
from workbench.fleet.study import SharedStudy
from workbench.fleet.worker import SharedTuner
from workbench.search.enqueue import Say, enqueued_configs
from workbench.search.loop import SearchSettings
from workbench.search.request import Measuring, StudyChoice, TuneRequest
from workbench.search.start import plan_tune
from workbench.search.tune_plan import TunePlan
from workbench.spaces.model import Config
from workbench.store import Store


@dataclass
class SharedSetup:
    """A shared study this process works on, as it joined it."""

    request: TuneRequest  #: the study's (what a joiner keeps of it included)
    plan: TunePlan
    shared: SharedStudy
    seeded: int = 0  #: evaluations already in the store that joined the study now
    #: what the study kept otherwise than this process asked (its values, by spec key)
    kept: dict[str, Any] = field(default_factory=dict)

    def tuner(self, store: Store, gpu: int | None, command: str | None) -> SharedTuner:
        """This process's worker of the study (``gpu``: the GPU it measures on), which reserves
        one config at a time (the claims hold what other workers take)."""
        strategy = self.request.strategy
        settings = SearchSettings(
            sampler=strategy.sampler,
            seed=strategy.seed,
            drift_every=strategy.drift_every,
            command=command,
        )
        return SharedTuner(self.plan, store, self.shared, WorkerId.here(gpu), settings)


def create_or_join(db: Database, store: Store, request: TuneRequest, say: Say) -> SharedSetup:
    """``workbench tune`` on PostgreSQL: the study of ``request``, created, or joined when it
    exists (its search kept, see the module); ``say`` tells what the user must know.

    Raises:
        WorkbenchError: the plan cannot be made here, the study holds timings of another
            device class, or an ``--enqueue`` item is refused.
    """
    with db.lock(SETUP_LOCK):
        plan = plan_tune(request, store, shared=True).plans[0]
        name = plan.study.name
        device_class = plan.runner.device.device_class()
        kept: dict[str, Any] = {}
        if SharedStudy.exists(db, name):
            existing = SharedStudy(db, name)
            existing.check_device_class(device_class)
            request, kept = request.joining(existing.spec())
            if kept:  # joining does not change how the study searches for its other workers
                values = ", ".join(str(v) for v in kept.values())
                say(
                    f"joining study {name!r}: its {', '.join(kept)} ({values}) are kept; "
                    "a new --study to search otherwise"
                )
        shared = SharedStudy.create(db, name, request.to_spec(), device_class)
        seeded = seed_from_store(shared, store, plan)
        enqueue_first(shared, plan, enqueued_configs(plan, request.strategy.enqueue, store, say))
    return SharedSetup(request, plan, shared, seeded, kept)


@dataclass(frozen=True)
class WorkerOptions:
    """What ``workbench worker`` adds to the study's request: this process's own."""

    study: str
    replay: Path | None = None  #: its copy of the recording the study replays
    replay_delay: float = 0.0
    seconds: float | None = None  #: its wall-time budget
    cache_dir: Path | None = None


def join_as_worker(db: Database, store: Store, options: WorkerOptions) -> SharedSetup:
    """``workbench worker``: the existing study ``options.study``, joined as its spec says.

    Raises:
        WorkbenchError: the plan cannot be made here (no GPU, no recording), the study holds
            timings of another device class, or its budget has no limit and no --time is given.
    """
    # every worker judges staleness alike: the study's heartbeat and grace period
    db.adopt(SharedStudy(db, options.study).spec())
    with db.lock(SETUP_LOCK):
        shared = SharedStudy(db, options.study)
        request = TuneRequest.from_spec(shared.spec(), seconds=options.seconds)
        replay = options.replay or request.measuring.replay
        request = dataclasses.replace(
            request,
            measuring=Measuring(replay=replay, replay_delay=options.replay_delay),
            study=StudyChoice(name=options.study),
            coordination=db.settings,
            compile=dataclasses.replace(request.compile, cache_dir=options.cache_dir),
        )
        plan = plan_tune(request, store, shared=True).plans[0]
        shared.check_device_class(plan.runner.device.device_class())
        seeded = seed_from_store(shared, store, plan)
    return SharedSetup(request, plan, shared, seeded)


def wait_for_study(db: Database, name: str, seconds: float | None, say: Say) -> None:
    """Wait until the study exists: up to the database wait (--db-wait), or ``seconds``.

    Raises:
        ConfigError: no study of that name came in time.
    """
    wait = min(db.settings.db_wait_s, seconds if seconds is not None else math.inf)
    deadline = time.monotonic() + wait
    told = False
    while not SharedStudy.exists(db, name):
        if time.monotonic() >= deadline:
            raise ConfigError(
                f"no shared study {name!r} in {db.outage.where} after {wait:.0f} s: create it "
                f"with a tune of `study` {shlex.quote(name)} on this `storage` (which also works "
                "as the first worker)"
            )
        if not told:
            say(
                f"waiting for study {name!r} to be created (up to {wait:.0f} s: --db-wait, or "
                "--time) ..."
            )
            told = True
        time.sleep(db.settings.poll_s)


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
    have = {c.key for c in view.done} | set(view.in_flight)
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
            m = e.measurement
            reason = m.reason if m.outcome.failed else None
            shared.done(key, claim.claim_id, value, m.outcome.value, reason)
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
