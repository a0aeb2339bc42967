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

import contextlib
import enum
import json
import math
import os
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import optuna
from optuna.distributions import BaseDistribution
from optuna.exceptions import StorageInternalError, UpdateFinishedTrialError
from optuna.storages import RDBStorage, fail_stale_trials
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from workbench.errors import WorkbenchError
from workbench.search.request import DEFAULT_GRACE_S, DEFAULT_HEARTBEAT_S, spec_timing
from workbench.store.store import StoreError, shown_url, sqlalchemy_url

optuna.logging.set_verbosity(optuna.logging.WARNING)

#: PostgreSQL schema of Optuna's tables (the store's tables stay in ``public``).
OPTUNA_SCHEMA = "optuna"
#: Trial system attributes.
CLAIM = "workbench:claim"  #: the worker holding a budget slot for it ("store": seeded)
SKIPPED = "workbench:skipped"  #: why a trial was pruned without a measurement
#: Study user attributes.
SPEC = "workbench:spec"  #: what the study tunes (a worker needs nothing else)
DEVICE_CLASS = "workbench:device_class"
#: Study system attributes, one per worker: its host, pid, GPU and when it was last seen.
PRESENCE = "workbench:worker:"
#: Advisory lock key for setting up studies (schema, tables, store rows): "wbsetup".
SETUP_LOCK = 0x7762736574757000
#: Advisory lock key for creating the claims table and its functions (apart from SETUP_LOCK,
#: which callers may hold on another connection while they open the storage): "wbddl".
DDL_LOCK = 0x7762646466000000
#: Class of the per-study claim locks, ``pg_advisory_xact_lock(CLAIM_LOCK_CLASS, study_id)``.
CLAIM_LOCK_CLASS = 0x7762

# The claims: one row per (study, config key); ``done`` orders completions (what workers read
# since their last read). Functions run in one round trip each; PL/pgSQL takes a new snapshot
# per statement, so what the claim reads after taking the lock includes every earlier claim.
CLAIMS_DDL = f"""
CREATE SEQUENCE IF NOT EXISTS {OPTUNA_SCHEMA}.workbench_claim_seq;
CREATE TABLE IF NOT EXISTS {OPTUNA_SCHEMA}.workbench_claims (
    study_id integer NOT NULL,
    config_key text NOT NULL,
    params text NOT NULL,
    worker text NOT NULL,
    claim_id bigint NOT NULL,
    trial_id integer,
    claimed_at timestamptz NOT NULL,
    value double precision,
    done bigint,
    outcome text,
    reason text,
    PRIMARY KEY (study_id, config_key)
);
CREATE INDEX IF NOT EXISTS workbench_claims_done
    ON {OPTUNA_SCHEMA}.workbench_claims (study_id, done);
-- a failed config's outcome and reason (a table made before they were kept lacks them)
ALTER TABLE {OPTUNA_SCHEMA}.workbench_claims ADD COLUMN IF NOT EXISTS outcome text,
    ADD COLUMN IF NOT EXISTS reason text;

-- 'complete', 'running' or 'dead': a claim lives while its trial is RUNNING or COMPLETE, or,
-- before its trial exists, for the grace period
CREATE OR REPLACE FUNCTION {OPTUNA_SCHEMA}.workbench_claim_state(
    p_trial integer, p_claimed timestamptz, p_done bigint, p_grace double precision
) RETURNS text LANGUAGE sql VOLATILE AS $$
    SELECT CASE
        WHEN p_done IS NOT NULL THEN 'complete'
        WHEN p_trial IS NULL THEN CASE
            WHEN p_claimed > clock_timestamp() - make_interval(secs => p_grace) THEN 'running'
            ELSE 'dead' END
        ELSE coalesce((
            SELECT CASE t.state::text WHEN 'RUNNING' THEN 'running'
                WHEN 'COMPLETE' THEN 'complete' ELSE 'dead' END
            FROM {OPTUNA_SCHEMA}.trials t WHERE t.trial_id = p_trial), 'dead')
    END
$$;

-- claim p_key for p_worker (with its trial p_trial if it exists already: a re-queued one):
-- 'ok' (and the claim id), 'reclaimed' (ok, in place of a dead claim: its worker may have
-- stored a result), 'duplicate' (a live claim has the key) or 'surplus' (no slot)
CREATE OR REPLACE FUNCTION {OPTUNA_SCHEMA}.workbench_claim(
    p_study integer, p_key text, p_params text, p_worker text, p_budget integer,
    p_trial integer, p_grace double precision
) RETURNS TABLE (outcome text, claim bigint) LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    c {OPTUNA_SCHEMA}.workbench_claims%ROWTYPE;
    live bigint;
    id bigint;
    outcome text := 'ok';
BEGIN
    PERFORM pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, p_study);
    SELECT * INTO c FROM {OPTUNA_SCHEMA}.workbench_claims
        WHERE study_id = p_study AND config_key = p_key;
    IF FOUND AND {OPTUNA_SCHEMA}.workbench_claim_state(c.trial_id, c.claimed_at, c.done, p_grace)
            <> 'dead' THEN
        -- the same claim again (a retry after the reply was lost) is still this worker's
        IF c.worker = p_worker AND c.done IS NULL
                AND (c.trial_id IS NULL OR c.trial_id = p_trial) THEN
            RETURN QUERY SELECT 'ok'::text, c.claim_id;
        ELSE
            RETURN QUERY SELECT 'duplicate'::text, NULL::bigint;
        END IF;
        RETURN;
    END IF;
    IF FOUND THEN
        outcome := 'reclaimed';
    END IF;
    IF p_budget IS NOT NULL THEN
        SELECT count(*) INTO live FROM {OPTUNA_SCHEMA}.workbench_claims w
            WHERE w.study_id = p_study AND (w.done IS NOT NULL OR
                {OPTUNA_SCHEMA}.workbench_claim_state(w.trial_id, w.claimed_at, NULL, p_grace)
                <> 'dead');
        IF live >= p_budget THEN
            RETURN QUERY SELECT 'surplus'::text, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    id := nextval('{OPTUNA_SCHEMA}.workbench_claim_seq');
    INSERT INTO {OPTUNA_SCHEMA}.workbench_claims AS w
        (study_id, config_key, params, worker, claim_id, trial_id, claimed_at)
        VALUES (p_study, p_key, p_params, p_worker, id, p_trial, clock_timestamp())
        ON CONFLICT (study_id, config_key) DO UPDATE SET params = EXCLUDED.params,
            worker = EXCLUDED.worker, claim_id = EXCLUDED.claim_id,
            trial_id = EXCLUDED.trial_id, claimed_at = EXCLUDED.claimed_at,
            value = NULL, done = NULL, outcome = NULL, reason = NULL;
    RETURN QUERY SELECT outcome, id;
END
$$;

-- give claim p_claim its new trial; false when the claim expired meanwhile (the trial is then
-- skipped: another worker may have the slot or the key)
CREATE OR REPLACE FUNCTION {OPTUNA_SCHEMA}.workbench_link(
    p_study integer, p_key text, p_claim bigint, p_trial integer, p_grace double precision
) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({CLAIM_LOCK_CLASS}, p_study);
    UPDATE {OPTUNA_SCHEMA}.workbench_claims SET trial_id = p_trial
        WHERE study_id = p_study AND config_key = p_key AND claim_id = p_claim
        AND (trial_id = p_trial OR (trial_id IS NULL
            AND claimed_at > clock_timestamp() - make_interval(secs => p_grace)));
    RETURN FOUND;
END
$$;
"""

# What a worker reads each round (see :meth:`SharedStudy.progress`).
PROGRESS_SQL = f"""
WITH c AS (
    SELECT config_key, params, value, done, outcome, reason,
        {OPTUNA_SCHEMA}.workbench_claim_state(trial_id, claimed_at, done, :grace) AS st
    FROM {OPTUNA_SCHEMA}.workbench_claims WHERE study_id = :study
)
SELECT 'done' AS kind, config_key, params, value, done AS n, outcome, reason
    FROM c WHERE done > :since
UNION ALL SELECT 'flight', config_key, params, NULL, NULL, NULL, NULL FROM c WHERE st = 'running'
UNION ALL SELECT 'complete', NULL, NULL, NULL, count(*), NULL, NULL FROM c WHERE st = 'complete'
UNION ALL SELECT 'live', NULL, NULL, NULL, count(*), NULL, NULL FROM c WHERE st <> 'dead'
UNION ALL SELECT 'waiting', NULL, NULL, NULL, trial_id, NULL, NULL FROM {OPTUNA_SCHEMA}.trials
    WHERE study_id = :study AND state::text = 'WAITING'
"""

T = TypeVar("T")


class Skip(enum.Enum):
    """Why a trial ends PRUNED without being measured (it never counts against the budget)."""

    DUPLICATE = "duplicate"  #: another live claimed trial has the same config
    SURPLUS = "surplus"  #: the budget's slots were all taken when it tried to claim one
    INFEASIBLE = "infeasible"  #: the runner rejects the config (absent from a recording)
    RELEASED = "released"  #: its worker stopped (Ctrl-C) before measuring it


#: RUNNING trials of a study that have no heartbeat (see SharedStudy.fail_stale).
UNBEATEN_SQL = f"""
SELECT t.trial_id FROM {OPTUNA_SCHEMA}.trials t
WHERE t.study_id = :study AND t.state::text = 'RUNNING'
    AND NOT EXISTS (SELECT 1 FROM {OPTUNA_SCHEMA}.trial_heartbeats h WHERE h.trial_id = t.trial_id)
"""


@dataclass(frozen=True)
class Coordination:
    """Timing of the shared study. ``grace_s`` should exceed the longest database outage to
    ride out without re-queueing running trials; ``db_wait_s`` bounds how long a worker waits
    for an unavailable database before it stops."""

    heartbeat_s: int = DEFAULT_HEARTBEAT_S
    grace_s: int = DEFAULT_GRACE_S
    max_retry: int = 3
    db_wait_s: float = 300.0
    # waiting for the last slots costs one query of the claims table per poll
    poll_s: float = 0.25

    def __post_init__(self) -> None:
        if self.heartbeat_s < 1 or self.grace_s <= self.heartbeat_s:
            raise WorkbenchError(
                f"--heartbeat {self.heartbeat_s} / --grace {self.grace_s}: need heartbeat >= 1 s "
                "and a grace period longer than the heartbeat"
            )


class DatabaseUnavailable(WorkbenchError):
    """The database stayed unreachable longer than the worker was told to wait."""


#: Connection errors that waiting does not cure: the URL names what is not there.
_PERMANENT = (
    "does not exist",  # database "x" / role "x" does not exist
    "password authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
)


def is_unavailable(exc: BaseException) -> bool:
    """A lost connection or a server that refuses connections (not a bad query, nor a
    database or user that does not exist: waiting would not bring those)."""
    if any(p in str(exc) for p in _PERMANENT):
        return False
    seen = 0
    while exc is not None and seen < 6:
        if isinstance(exc, OperationalError | InterfaceError):
            return True
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            return True
        name = type(exc).__module__ + "." + type(exc).__name__
        if name.startswith("psycopg") and type(exc).__name__ in (
            "OperationalError",
            "InterfaceError",
            "AdminShutdown",
            "ConnectionTimeout",
        ):
            return True
        if isinstance(exc, StorageInternalError | StoreError | DBAPIError):
            exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
            seen += 1
            continue
        return False
    return False


class Outage:
    """Runs database calls, waiting and retrying while the database is unavailable."""

    def __init__(self, where: str, wait_s: float, log: Callable[[str], None] | None = None):
        self.where = where
        self.wait_s = wait_s
        self.log = log or (lambda line: print(line, file=sys.stderr, flush=True))
        self.outages = 0  #: how many times this worker waited for the database
        self.reached = False  #: whether a call has succeeded yet (else: a wrong URL?)

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, retried with backoff while the database is unavailable.

        Raises:
            DatabaseUnavailable: still unavailable after ``wait_s`` seconds.
        """
        start = None
        delay = 0.25
        while True:
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                if not is_unavailable(exc):
                    raise
                now = time.monotonic()
                if start is None:
                    start = now
                    self.outages += 1
                    self.log(
                        f"database at {self.where} unavailable ({_first_line(exc)}); waiting "
                        f"and retrying for up to {self.wait_s:.0f} s (--db-wait; Ctrl-C stops)"
                    )
                if now - start >= self.wait_s:
                    then = (
                        "this worker stops, and its running trial is re-queued by the others "
                        "once its heartbeat is stale"
                        if self.reached
                        else "never reached: check the URL (host, port, database, user)"
                    )
                    raise DatabaseUnavailable(
                        f"the database at {self.where} was unavailable for {self.wait_s:.0f} s "
                        f"(last error: {_first_line(exc)}); {then}"
                    ) from exc
                time.sleep(delay)
                delay = min(2 * delay, 2.0)  # retries are cheap: notice a return soon
                continue
            if start is not None:
                self.log(f"database at {self.where} back after {time.monotonic() - start:.1f} s")
            self.reached = True
            return result


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "orig", None) or exc.__cause__ or exc
    return (str(inner).strip().splitlines() or [type(inner).__name__])[0][:200]


def is_postgresql(url: str) -> bool:
    return url.startswith(("postgresql", "postgres://"))


@dataclass(frozen=True)
class WorkerId:
    """Who a worker is: host, process, GPU. ``key`` names it in trials and in the study."""

    host: str
    pid: int
    gpu: int | None

    @classmethod
    def here(cls, gpu: int | None) -> WorkerId:
        return cls(socket.gethostname(), os.getpid(), gpu)

    @property
    def key(self) -> str:
        gpu = "replay" if self.gpu is None else f"gpu{self.gpu}"
        return f"{self.host}:{self.pid}:{gpu}"


@dataclass
class Claim:
    """The outcome of a claim: ``skip`` None means the key holds a budget slot (``claim_id``)."""

    skip: Skip | None
    claim_id: int | None = None
    reclaimed: bool = False  #: in place of a dead claim (its result may be in the store)


@dataclass(frozen=True)
class Completion:
    """A claim whose trial completed: what the other workers learn from."""

    order: int  #: completions are read in this order (and after the last one read)
    key: str
    params: dict[str, Any]
    value: float | None  #: the objective, or +inf for a failed config
    outcome: str | None = None  #: how it ended (TrialOutcome's value); None: not kept
    reason: str | None = None  #: why it failed


@dataclass
class Progress:
    """A shared study as one worker's round sees it (one query of the claims table)."""

    done: list[Completion]  #: completions since the last read, in order
    in_flight: dict[str, dict[str, Any]]  #: key -> params of live claims not complete yet
    complete: int  #: claims whose trial is COMPLETE (they count against the budget)
    live: int  #: claims holding a budget slot (complete or running)
    waiting: list[int]  #: ids of WAITING trials (re-queued ones to take first)


class Database:
    """The engines a shared study needs besides the store's: advisory locks, Optuna's storage."""

    def __init__(self, url: str, settings: Coordination) -> None:
        if not is_postgresql(url):
            raise WorkbenchError(
                f"{shown_url(url)}: several workers on one study need PostgreSQL "
                "(--storage postgresql://USER@HOST/DB); a SQLite store serves one process per study"
            )
        self.url = sqlalchemy_url(url)
        self.settings = settings
        self.outage = Outage(shown_url(url), settings.db_wait_s)
        try:
            self.locks: Engine = create_engine(self.url, pool_pre_ping=True, pool_size=2)
        except ImportError as exc:
            raise WorkbenchError(
                f"no PostgreSQL driver: pip install 'psycopg[binary]' ({exc})"
            ) from None
        # the claims' engine: autocommit and no pre-ping (each call is one statement, one round
        # trip; a dropped connection fails the call, which Outage retries on a new one)
        self.claims: Engine = create_engine(self.url, isolation_level="AUTOCOMMIT", pool_size=2)
        self._storage: RDBStorage | None = None

    @contextlib.contextmanager
    def lock(self, key: int) -> Iterator[None]:
        """A PostgreSQL advisory lock held for the block (released at commit, or when the
        holder's connection dies: a killed worker never leaves it held)."""
        with self.locks.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            yield

    def storage(self) -> RDBStorage:
        """Optuna's RDB storage in its own schema, with heartbeats and the retry callback."""
        if self._storage is None:
            # Workers starting together would race to create Optuna's tables (and its version
            # row) and ours: one session-level lock over all of it, released by the session's
            # end if this process dies. Always taken last (callers may hold SETUP_LOCK).
            with self.claims.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": DDL_LOCK})
                try:
                    conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {OPTUNA_SCHEMA}"))
                    storage = self._open_optuna()
                    # after Optuna's tables, which the functions read; psycopg runs several
                    # statements only without parameters: the driver's own call
                    conn.connection.driver_connection.execute(CLAIMS_DDL)  # type: ignore[union-attr]
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": DDL_LOCK})
            self._storage = storage
        return self._storage

    def _open_optuna(self) -> RDBStorage:
        s = self.settings
        retry = _retry_callback(s.max_retry)
        callback_arg = (
            "heartbeat_stale_trial_callback"
            if hasattr(optuna.storages, "RetryHeartbeatStaleTrialCallback")
            else "failed_trial_callback"  # Optuna < 4.9
        )
        with _quiet_experimental():
            return RDBStorage(
                self.url,
                engine_kwargs={
                    "pool_pre_ping": True,
                    "connect_args": {"options": f"-c search_path={OPTUNA_SCHEMA}"},
                },
                heartbeat_interval=s.heartbeat_s,
                grace_period=s.grace_s,
                **{callback_arg: retry},  # type: ignore[arg-type]  # (its name varies by optuna)
            )

    def configure(self, heartbeat_s: int, grace_s: int) -> None:
        """Adopt a study's heartbeat and grace period (every worker must judge staleness
        alike); reopens Optuna's storage."""
        self.settings = Coordination(
            heartbeat_s=heartbeat_s,
            grace_s=grace_s,
            max_retry=self.settings.max_retry,
            db_wait_s=self.settings.db_wait_s,
            poll_s=self.settings.poll_s,
        )
        if self._storage is not None:
            self._storage.engine.dispose()
            self._storage = None

    def now(self) -> float:
        """The database server's clock (epoch seconds): hosts' clocks may disagree."""
        with self.locks.connect() as conn:
            return float(conn.execute(text("SELECT extract(epoch FROM now())")).scalar_one())

    def close(self) -> None:
        if self._storage is not None:
            self._storage.engine.dispose()
        self.locks.dispose()
        self.claims.dispose()


@contextlib.contextmanager
def _quiet_experimental() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _retry_callback(max_retry: int) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Optuna's retry callback, with the dead trial's claim left behind: the slot returns to
    the budget, and whichever trial runs the retry claims it again."""
    cls = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    cls = cls or optuna.storages.RetryFailedTrialCallback
    with _quiet_experimental():
        inner = cls(max_retry=max_retry)

    def retry(study: optuna.Study, trial: FrozenTrial) -> None:
        trial.system_attrs.pop(CLAIM, None)
        with _quiet_experimental():
            inner(study, trial)

    return retry


class SharedStudy:
    """One Optuna study on the RDB storage, seen through the operations a worker needs."""

    def __init__(self, db: Database, name: str) -> None:
        self.db = db
        self.name = name
        # Whole-study reads (status, seeding, tests) go through Optuna's cache: finished trials
        # never change. A worker's rounds read the claims table instead (:meth:`progress`).
        # Trials are created on the RDB storage itself: the cache would keep a trial it created
        # as it was then.
        self.rdb = db.storage()
        self.storage = optuna.storages._CachedStorage(self.rdb)
        self.study_id = db.outage.call(self.storage.get_study_id_from_name, name)
        with _quiet_experimental():  # the study (for fail_stale_trials) has a cache of its own
            self.study = optuna.load_study(study_name=name, storage=self.rdb)
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
                f"workers a study of their own (--study '{self.name} | {device_class}')"
            )

    # -- trials ------------------------------------------------------------------------------
    def trials(self, states: Sequence[TrialState] | None = None) -> list[FrozenTrial]:
        return self.db.outage.call(
            self.storage.get_all_trials,
            self.study_id,
            deepcopy=False,
            states=tuple(states) if states else None,
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
        return self.db.outage.call(self.rdb.create_new_trial, self.study_id, template)

    def pop_waiting(self, trial_ids: Sequence[int]) -> FrozenTrial | None:
        """Take one of the WAITING trials ``trial_ids`` (re-queued or enqueued) as RUNNING."""
        for trial_id in trial_ids:
            try:
                if self.db.outage.call(
                    self.rdb.set_trial_state_values, trial_id, TrialState.RUNNING
                ):
                    return self.db.outage.call(self.rdb.get_trial, trial_id)
            except UpdateFinishedTrialError:
                continue
        return None

    # -- claims (see the module) --------------------------------------------------------------
    def progress(self, since: int) -> Progress:
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
                done.append(Completion(int(n), key, json.loads(params), value, outcome, reason))
            elif kind == "flight":
                flight[key] = json.loads(params)
            elif kind == "waiting":
                waiting.append(int(n))
            else:
                counts[kind] = int(n)
        done.sort(key=lambda d: d.order)
        return Progress(done, flight, counts["complete"], counts["live"], sorted(waiting))

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
        with _quiet_experimental():
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


class Pulse:
    """A worker's background beat: the running trial's heartbeat and the worker's presence,
    every ``heartbeat_s``. Database errors are noted and retried at the next beat (the loop's
    own calls do the waiting)."""

    def __init__(self, shared: SharedStudy, worker: WorkerId, info: dict[str, Any]) -> None:
        self.shared = shared
        self.worker = worker
        self.info = info
        self.trial_id: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="workbench-pulse", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def watch(self, trial_id: int | None) -> None:
        """Beat for ``trial_id`` from now on (None: no trial); the first beat is immediate, so
        a trial is never claimed before it can be found stale."""
        with self._lock:
            self.trial_id = trial_id
        if trial_id is not None:
            self.shared.db.outage.call(self.shared.heartbeat, trial_id)

    def beat(self) -> None:
        with self._lock:
            trial_id = self.trial_id
        if trial_id is not None:
            self.shared.heartbeat(trial_id)
        self.shared.announce(self.worker, self.info)

    def _loop(self) -> None:
        interval = self.shared.db.settings.heartbeat_s
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):  # an outage: the next beat tries again
                self.beat()

    def stop(self, state: str) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.info["state"] = state
        with self._lock:
            self.trial_id = None
        with contextlib.suppress(Exception):
            self.shared.announce(self.worker, self.info)


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
    grace = float(spec_timing(spec)[1])
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
