"""The database under a store: which one (``$WORKBENCH_STORE``, a URL, a SQLite file), how its
URL is shown (no password) and given back on a command line, its SQLAlchemy engine (SQLite in
WAL mode, read-only opening), and errors of reaching it explained."""

from __future__ import annotations

import os
import shlex
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import create_engine, event, make_url
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from workbench.store.errors import StoreError

STORE_ENV = "WORKBENCH_STORE"
DEFAULT_STORE = Path(".workbench") / "store.sqlite"


def default_store_url() -> str:
    """``$WORKBENCH_STORE`` (a URL or a path), else ``.workbench/store.sqlite`` here."""
    value = os.environ.get(STORE_ENV) or str(DEFAULT_STORE)
    return value if "://" in value else f"sqlite:///{Path(value).absolute()}"


def sqlalchemy_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` URLs go through psycopg 3 (SQLAlchemy's default
    PostgreSQL driver is psycopg2, which the workbench does not depend on)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def storage_option(shown: str) -> str:
    """`` --storage URL`` for a command line that has to reach the store shown as ``shown``
    (empty for the default store, which needs no option)."""
    return "" if shown == shown_url(default_store_url()) else f" --storage {shlex.quote(shown)}"


def shown_url(url: str) -> str:
    """A store's URL as messages and reports show it: the password masked, SQLAlchemy's
    driver tag left out (``postgresql://tuner:***@host/db``), so a log or a report page never
    holds a password."""
    try:
        parsed = make_url(url)
    except ArgumentError:  # not a URL SQLAlchemy can parse: keep what follows any credentials
        return url.split("@")[-1]
    if parsed.drivername.startswith("postgresql"):
        parsed = parsed.set(drivername="postgresql")
    return parsed.render_as_string(hide_password=True)


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None: another database, or SQLite in memory)."""
    if not sqlalchemy_url(url).startswith("sqlite"):
        return None
    path = url.split(":///", 1)[-1]
    return None if not path or path == ":memory:" else Path(path)


@contextmanager
def opening_errors(shown: str) -> Iterator[None]:
    """Errors of opening the store ``shown`` as one :class:`StoreError` naming it."""
    try:
        yield
    except StoreError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        raise StoreError(f"cannot open the store {shown}: {explain(exc)}") from exc
    except ImportError as exc:  # a URL whose database driver is not installed
        raise StoreError(
            f"cannot open the store {shown}: its database driver is not installed ({exc}); the "
            "workbench ships the drivers of SQLite and PostgreSQL (psycopg)"
        ) from exc


def make_engine(url: str, lock_timeout_s: float, read_only: bool = False) -> Engine:
    """The engine of ``url``: on SQLite, a file (its folder made) in WAL mode that waits
    ``lock_timeout_s`` for another writer's lock, or, ``read_only``, an existing file SQLite
    itself refuses to write; elsewhere, connections checked before use.

    Raises:
        StoreError: a SQLite path that is a directory, or (read-only) no file there.
    """
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        on_disk = bool(path) and path != ":memory:"
        if on_disk and Path(path).is_dir():  # ($WORKBENCH_STORE or a URL naming a directory)
            example = Path(path) / "store.sqlite"
            raise StoreError(f"{path} is a directory: a store is a SQLite file, e.g. {example}")
        if read_only and on_disk:
            if not Path(path).is_file():
                raise StoreError(f"no store at {path}")
            url = f"sqlite:///file:{path}?mode=ro&uri=true"  # SQLite itself refuses writes
            if not os.access(Path(path).parent, os.W_OK) and not Path(f"{path}-wal").exists():
                # reading a WAL-mode file needs a -shm file beside it, which a directory the
                # user may not write cannot take: with no WAL left to read, the file is all
                # there is, and SQLite reads it as it stands
                url += "&immutable=1"
        elif on_disk:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # wait this long for another writer's lock before failing with "database is locked"
        engine = create_engine(url, connect_args={"timeout": lock_timeout_s})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            if not read_only:  # (a store is written in WAL mode: reading it needs no change)
                _wal_mode(cur, lock_timeout_s)  # readers never block the writer
                cur.execute("PRAGMA synchronous=NORMAL")  # durable at every WAL checkpoint
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _wal_mode(cur: sqlite3.Cursor, lock_timeout_s: float) -> None:
    """Put the file in WAL mode. Switching a new file takes a lock SQLite does not wait for
    (it answered "database is locked" at once to 1 of 180 processes opening a new store
    together): retried until the lock timeout; on a file already in WAL mode it is a no-op."""
    deadline = time.monotonic() + lock_timeout_s
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def explain(exc: BaseException) -> str:
    """A database error's message, with what it likely means (a lock, a damaged file)."""
    text = str(getattr(exc, "orig", None) or exc)
    if "locked" in text:
        return f"{text} (another process holds a write lock; for parallel workers use PostgreSQL)"
    if "file is not a database" in text or "malformed" in text:
        return f"{text} (the file is damaged or not a SQLite database)"
    return text
