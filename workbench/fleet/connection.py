"""The database of a shared study: opening it with its store (:func:`open_database`), and riding
out a brief outage (:class:`Outage`: wait and retry for a bounded time, then stop with a clear
message)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import optuna
from optuna.exceptions import StorageInternalError
from optuna.storages import RDBStorage
from optuna.trial import FrozenTrial
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from workbench.errors import ConfigError, WorkbenchError
from workbench.fleet.sql import CLAIM, CLAIMS_DDL, DDL_LOCK, OPTUNA_SCHEMA, T
from workbench.search.request import Coordination
from workbench.store import Store
from workbench.store.database import shown_url
from workbench.store.errors import StoreError
from workbench.store.opening import is_postgresql, open_store


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


def open_database(storage: str, settings: Coordination) -> tuple[Database, Store]:
    """The database of the shared studies at ``storage`` (a PostgreSQL URL) and the store in
    it, opened through :func:`~workbench.store.opening.open_store` (waiting out an outage as
    ``settings`` say).

    Raises:
        ConfigError: ``storage`` is not a PostgreSQL URL (nothing is created).
        DatabaseUnavailable, StoreError: the database cannot be reached or opened.
    """
    if not is_postgresql(storage):
        raise ConfigError(
            f"{shown_url(storage)}: shared studies need PostgreSQL (`storage` "
            "postgresql://USER@HOST/DB); a SQLite store serves one process per study "
            "(docs/scale-out.md)"
        )
    outage = Outage(shown_url(storage), settings.db_wait_s)
    store = outage.call(open_store, storage)
    return Database(store, settings, outage), store


class Database:
    """What a shared study needs of its database besides the store's tables: advisory locks,
    the claims, Optuna's storage, on the database of ``store`` (see :func:`open_database`)."""

    def __init__(self, store: Store, settings: Coordination, outage: Outage) -> None:
        self.url = store.url
        self.settings = settings
        self.outage = outage
        # the locks' connections are the store's: a transaction holds each lock
        self.locks: Engine = store.engine
        # the claims' own pool: autocommit and no pre-ping (each call is one statement, one
        # round trip; a dropped connection fails the call, which Outage retries on a new one)
        self.claims: Engine = create_engine(
            store.engine.url, isolation_level="AUTOCOMMIT", pool_size=2
        )
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
        with quiet_experimental():
            # (RDBStorage takes a URL, not an engine: it builds its own, on its schema)
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

    def adopt(self, spec: Mapping[str, Any]) -> None:
        """Adopt the heartbeat and grace period of the shared study whose spec is ``spec``
        (every worker must judge staleness alike); reopens Optuna's storage."""
        self.settings = self.settings.of_spec(spec)
        if self._storage is not None:
            self._storage.engine.dispose()
            self._storage = None

    def now(self) -> float:
        """The database server's clock (epoch seconds): hosts' clocks may disagree."""
        with self.locks.connect() as conn:
            return float(conn.execute(text("SELECT extract(epoch FROM now())")).scalar_one())

    def close(self) -> None:
        """Close this database's own connections (the store's stay its owner's)."""
        if self._storage is not None:
            self._storage.engine.dispose()
        self.claims.dispose()


@contextlib.contextmanager
def quiet_experimental() -> Iterator[None]:
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
    with quiet_experimental():
        inner = cls(max_retry=max_retry)

    def retry(study: optuna.Study, trial: FrozenTrial) -> None:
        trial.system_attrs.pop(CLAIM, None)
        with quiet_experimental():
            inner(study, trial)

    return retry
