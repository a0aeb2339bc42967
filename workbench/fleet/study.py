"""Shared studies: many workers (one per GPU, on any number of hosts) search one study.

Built on Optuna's RDB storage on PostgreSQL; nothing here schedules work by itself:

* Optuna's trials are the ledger. Every evaluation is a trial with fixed parameters; the worker
  that holds it records heartbeats, and every worker fails stale trials (Optuna's
  ``fail_stale_trials``), whose retry callback re-queues them as WAITING trials that the next
  free worker pops before proposing anything new.
* The global budget and "never measure a config twice" are one decision, the claim of a config
  key, made *before* its trial is created (a conflict costs one round trip, no trial): under a
  PostgreSQL advisory lock per study, a key takes a budget slot only while fewer than
  ``budget`` live claims exist and no live claim has the same key. A claim lives while its
  trial is RUNNING or COMPLETE (Optuna's ``trials`` table says so), or, before its trial
  exists, for the grace period. Exactly ``budget`` trials complete, each with a config of its
  own; a killed worker's slot returns when its trial is failed as stale.
* The claims table (``optuna.workbench_claims``, one row per study and key) is also what
  workers read each round: one query returns the claims completed since the last read, the
  keys in flight and the counts, so no worker re-reads the study's trials.
* Results (every raw sample) go to the workbench store, the same schema as on SQLite, in the same
  database; Optuna's tables live in their own PostgreSQL schema (both have a ``studies`` table).
* Every database call goes through :class:`Outage`: a database that is briefly unavailable
  makes workers wait and retry, for a bounded time, then stop with a clear message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import fail_stale_trials
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import text

from workbench.errors import WorkbenchError
from workbench.fleet.claims import Claim, CompletedClaim, StudyProgress, WorkerId
from workbench.fleet.connection import Database, quiet_experimental
from workbench.fleet.sql import (
    DEVICE_CLASS,
    OPTUNA_SCHEMA,
    PRESENCE,
    PROGRESS_SQL,
    SKIPPED,
    SPEC,
    UNBEATEN_SQL,
    Skip,
)


class SharedStudy:
    """One Optuna study on the RDB storage, seen through the operations a worker needs."""

    def __init__(self, db: Database, name: str) -> None:
        self.db = db
        self.name = name
        # Writes and single reads go to the RDB storage. Whole-study reads (status, seeding,
        # tests) go through the Study, which Optuna gives a cache of its trials (finished
        # trials never change; it reads only the new ones). A worker's rounds read the claims
        # table instead (:meth:`progress`).
        self.storage = db.storage()
        self.study_id = db.outage.call(self.storage.get_study_id_from_name, name)
        with quiet_experimental():
            self.study = optuna.load_study(study_name=name, storage=self.storage)
        # RUNNING trials seen without a heartbeat, and when (this process's clock)
        self._unbeaten: dict[int, float] = {}

    @classmethod
    def exists(cls, db: Database, name: str) -> bool:
        try:
            db.outage.call(db.storage().get_study_id_from_name, name)
        except KeyError:
            return False
        return True

    @classmethod
    def create(
        cls, db: Database, name: str, spec: Mapping[str, object], device_class: str
    ) -> SharedStudy:
        """Create the study (or update the spec of an existing one) and open it."""
        storage = db.storage()
        try:
            study_id = db.outage.call(storage.get_study_id_from_name, name)
        except KeyError:
            study_id = db.outage.call(
                storage.create_new_study, [optuna.study.StudyDirection.MINIMIZE], name
            )
            db.outage.call(storage.set_study_user_attr, study_id, DEVICE_CLASS, device_class)
        db.outage.call(storage.set_study_user_attr, study_id, SPEC, dict(spec))
        return cls(db, name)

    # -- study attributes -------------------------------------------------------------------
    def user_attrs(self) -> dict[str, Any]:
        return self.db.outage.call(self.storage.get_study_user_attrs, self.study_id)

    def spec(self) -> dict[str, Any]:
        return dict(self.user_attrs().get(SPEC) or {})

    def check_device_class(self, device_class: str) -> None:
        """Refuse a worker whose device class differs from the study's.

        Raises:
            WorkbenchError: the classes differ (timings of different GPUs never mix).
        """
        theirs = self.user_attrs().get(DEVICE_CLASS)
        if theirs is not None and theirs != device_class:
            raise WorkbenchError(
                f"study {self.name!r} holds timings of {theirs}; this worker measures on "
                f"{device_class}. Timings of different device classes never mix: give these "
                f"workers a study of their own (`study` '{self.name} | {device_class}')"
            )

    # -- trials ------------------------------------------------------------------------------
    def trials(self, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        return self.db.outage.call(
            self.study.get_trials, deepcopy=False, states=tuple(states) if states else None
        )

    def create_trial(
        self,
        params: Mapping[str, Any],
        distributions: Mapping[str, BaseDistribution],
        *,
        state: TrialState = TrialState.RUNNING,
        value: float | None = None,
        system_attrs: Mapping[str, Any] | None = None,
    ) -> int:
        """One trial with fixed params, created in one transaction; returns its id."""
        now = datetime.now()
        template = FrozenTrial(
            number=0,
            state=state,
            value=value,
            datetime_start=now,
            datetime_complete=now if state.is_finished() else None,
            params=dict(params),
            distributions=dict(distributions),
            user_attrs={},
            system_attrs=dict(system_attrs or {}),
            intermediate_values={},
            trial_id=0,
        )
        return self.db.outage.call(self.storage.create_new_trial, self.study_id, template)

    def pop_waiting(self, trial_ids: Sequence[int]) -> tuple[int, FrozenTrial] | None:
        """Take one of the WAITING trials ``trial_ids`` (re-queued or enqueued) as RUNNING: its
        id and the trial."""
        for trial_id in trial_ids:
            try:
                if self.db.outage.call(
                    self.storage.set_trial_state_values, trial_id, TrialState.RUNNING
                ):
                    return trial_id, self.db.outage.call(self.storage.get_trial, trial_id)
            except UpdateFinishedTrialError:
                continue
        return None

    # -- claims (see the module) --------------------------------------------------------------
    def progress(self, since: int) -> StudyProgress:
        """Completions after order ``since``, the keys in flight and the counts, in one query."""

        def read() -> list[Any]:
            with self.db.claims.connect() as conn:
                return list(
                    conn.execute(
                        text(PROGRESS_SQL),
                        {"study": self.study_id, "since": since, "grace": self.grace},
                    )
                )

        done, flight, counts, waiting = [], {}, {"complete": 0, "live": 0}, []
        for kind, key, params, value, n, outcome, reason in self.db.outage.call(read):
            if kind == "done":
                done.append(CompletedClaim(int(n), key, json.loads(params), value, outcome, reason))
            elif kind == "flight":
                flight[key] = json.loads(params)
            elif kind == "waiting":
                waiting.append(int(n))
            else:
                counts[kind] = int(n)
        done.sort(key=lambda d: d.order)
        return StudyProgress(done, flight, counts["complete"], counts["live"], sorted(waiting))

    @property
    def grace(self) -> float:
        return float(self.db.settings.grace_s)

    def claim(
        self,
        key: str,
        params: Mapping[str, Any],
        worker: str,
        budget: int | None,
        trial_id: int | None = None,
    ) -> Claim:
        """Claim config ``key`` for ``worker`` (with ``trial_id`` when its trial exists: a
        re-queued one; else :meth:`link` the trial once created). One round trip."""

        def attempt() -> tuple[str, int | None]:
            with self.db.claims.connect() as conn:
                row = conn.execute(
                    text(
                        f"SELECT * FROM {OPTUNA_SCHEMA}.workbench_claim("
                        ":study, :key, :params, :worker, :budget, :trial, :grace)"
                    ),
                    {
                        "study": self.study_id,
                        "key": key,
                        "params": json.dumps(dict(params), sort_keys=True),
                        "worker": worker,
                        "budget": budget,
                        "trial": trial_id,
                        "grace": self.grace,
                    },
                ).one()
            return row[0], row[1]

        outcome, claim_id = self.db.outage.call(attempt)
        if outcome in ("ok", "reclaimed"):
            return Claim(None, claim_id, reclaimed=outcome == "reclaimed")
        return Claim(Skip(outcome), None)

    def link(self, key: str, claim_id: int, trial_id: int) -> bool:
        """Give claim ``claim_id`` its new trial; False if the claim expired meanwhile (a stall
        longer than the grace period: the trial must then be skipped)."""

        def attempt() -> bool:
            with self.db.claims.connect() as conn:
                return bool(
                    conn.execute(
                        text(
                            f"SELECT {OPTUNA_SCHEMA}.workbench_link("
                            ":study, :key, :claim, :trial, :grace)"
                        ),
                        {
                            "study": self.study_id,
                            "key": key,
                            "claim": claim_id,
                            "trial": trial_id,
                            "grace": self.grace,
                        },
                    ).scalar_one()
                )

        return self.db.outage.call(attempt)

    def done(
        self,
        key: str,
        claim_id: int,
        value: float,
        outcome: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Publish the value of a claim whose trial completed, and how it ended (what the
        others learn from: a failed config's outcome and reason, not only its +inf)."""

        def attempt() -> None:
            with self.db.claims.connect() as conn:
                conn.execute(
                    text(
                        f"UPDATE {OPTUNA_SCHEMA}.workbench_claims SET value = :value, "
                        f"done = nextval('{OPTUNA_SCHEMA}.workbench_claim_seq'), "
                        "outcome = :outcome, reason = :reason "
                        "WHERE study_id = :study AND config_key = :key AND claim_id = :claim "
                        "AND done IS NULL"
                    ),
                    {
                        "study": self.study_id,
                        "key": key,
                        "claim": claim_id,
                        "value": value,
                        "outcome": outcome,
                        "reason": reason,
                    },
                )

        self.db.outage.call(attempt)

    def unclaim(self, key: str, claim_id: int) -> None:
        """Drop a claim that never got its trial (the worker stops): its slot returns now."""
        with self.db.claims.connect() as conn:
            conn.execute(
                text(
                    f"DELETE FROM {OPTUNA_SCHEMA}.workbench_claims WHERE study_id = :study "
                    "AND config_key = :key AND claim_id = :claim AND trial_id IS NULL"
                ),
                {"study": self.study_id, "key": key, "claim": claim_id},
            )

    def heartbeat(self, trial_id: int) -> None:
        self.storage.record_heartbeat(trial_id)

    def finish(self, trial_id: int, value: float) -> bool:
        """COMPLETE with ``value`` (``inf`` for a failed config); False when the trial was
        already failed as stale (its retry is answered from the store)."""
        try:
            return self.db.outage.call(
                self.storage.set_trial_state_values, trial_id, TrialState.COMPLETE, [value]
            )
        except UpdateFinishedTrialError:
            return False

    def skip(self, trial_id: int, why: Skip) -> None:
        try:
            self.db.outage.call(self.storage.set_trial_system_attr, trial_id, SKIPPED, why.value)
            self.db.outage.call(self.storage.set_trial_state_values, trial_id, TrialState.PRUNED)
        except UpdateFinishedTrialError:
            pass

    def release(self, trial_id: int) -> None:
        """Give a claimed trial back (Ctrl-C, or its worker died before its first heartbeat):
        FAIL it and re-queue it, as a stale one would be."""
        # no waiting here: this runs on the way out, maybe because the database is gone (the
        # trial is then failed as stale by the other workers)
        try:
            if self.storage.set_trial_state_values(trial_id, TrialState.FAIL):
                callback = self.storage.get_heartbeat_stale_trial_callback()
                if callback is not None:
                    callback(self.study, self.storage.get_trial(trial_id))
        except UpdateFinishedTrialError:
            pass

    def fail_stale(self) -> None:
        """Fail trials whose worker stopped beating; Optuna's callback re-queues them.

        Optuna judges only trials that have a heartbeat. A worker killed between creating its
        trial and the first beat (a few milliseconds) leaves a RUNNING trial with none, which
        would stay RUNNING for ever (its budget slot returns anyway: its claim was not linked
        yet). Such a trial still without a heartbeat a grace period after this worker first saw
        it is released like a stale one (timed on this worker's clock: hosts' clocks differ)."""
        with quiet_experimental():
            self.db.outage.call(fail_stale_trials, self.study)

        def unbeaten() -> list[int]:
            with self.db.claims.connect() as conn:
                return list(conn.execute(text(UNBEATEN_SQL), {"study": self.study_id}).scalars())

        now = time.monotonic()
        seen = {t: self._unbeaten.get(t, now) for t in self.db.outage.call(unbeaten)}
        for trial_id, since in seen.items():
            if now - since >= self.grace:
                self.release(trial_id)
        self._unbeaten = {t: since for t, since in seen.items() if now - since < self.grace}

    def settled(self) -> bool:
        """Sweep (:meth:`fail_stale`); True when no trial without a heartbeat is left to
        release, so a worker may stop."""
        self.fail_stale()
        return not self._unbeaten

    # -- workers -----------------------------------------------------------------------------
    def announce(self, worker: WorkerId, info: Mapping[str, Any]) -> None:
        """Publish this worker's presence (host, pid, GPU, last seen by the database's clock)."""
        doc = {**asdict(worker), **info, "seen": self.db.now()}
        self.storage.set_study_system_attr(self.study_id, PRESENCE + worker.key, doc)

    def workers(self) -> list[dict[str, Any]]:
        attrs = self.db.outage.call(self.storage.get_study_system_attrs, self.study_id)
        return [dict(v, key=k[len(PRESENCE) :]) for k, v in attrs.items() if k.startswith(PRESENCE)]
