"""Stores written by an earlier workbench: ``workbench store upgrade`` migrates one in place,
after a backup (as ``optuna storage upgrade`` migrates an RDB storage), and ``store copy``
reads one through a migrated temporary copy.

Read commands (list, export, report) never migrate: they open a store read-only, and an older
one is refused with a message naming ``store upgrade``.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select

from workbench.store.database import shown_url, sqlite_file, storage_option
from workbench.store.errors import StoreError
from workbench.store.models import SCHEMA_VERSION, Evaluation, Study, StudySpace
from workbench.store.schema import schema_version
from workbench.store.store import Store


@dataclass(frozen=True)
class Upgraded:
    """What ``store upgrade`` did to one store."""

    url: str  #: as messages show it
    from_version: int
    to_version: int
    backup: Path | None  #: the copy taken before migrating (None: none was taken)
    studies: int
    evaluations: int
    #: studies with a space file, and how many of them keep it in the store (their pages need
    #: no file: schema 7)
    space_studies: int = 0
    spaces_kept: int = 0

    def summary(self) -> str:
        """One line: the versions, the backup, what the store holds."""
        held = f"{_many(self.studies, 'study', 'studies')}, " + _many(
            self.evaluations, "evaluation", "evaluations"
        )
        if self.space_studies:
            held += f"; {self.spaces_kept} of {self.space_studies} keep their space files"
        if self.from_version == self.to_version:
            return f"{self.url} is at schema version {self.to_version} already ({held})"
        backup = f"backup {self.backup}" if self.backup else "no backup taken"
        return (
            f"upgraded {self.url} from schema version {self.from_version} to "
            f"{self.to_version}; {backup}; {held}"
        )


def _many(n: int, one: str, more: str) -> str:
    return f"{n} {one if n == 1 else more}"


def upgrade_store(url: str, *, backup: bool = True) -> Upgraded:
    """Migrate the store at ``url`` to this workbench's schema version. A SQLite file is first
    copied beside itself (``store.schema3-20261204T120000Z.sqlite``: the old version and the
    time, UTC); a PostgreSQL database is not copied by the workbench, so ``backup`` must be
    False for it (the caller has made a ``pg_dump``). A store at the current version is only
    given the tables this build adds (no backup: nothing is migrated). Nothing is created.

    Raises:
        StoreError: no store there, an empty database, a newer schema, a PostgreSQL store with
            ``backup``, or the copy or the migration failed (a migration is one transaction:
            the store is then as it was).
    """
    shown = shown_url(url)
    version = schema_version(url)
    if version is None:
        raise StoreError(f"{shown} is empty: not a workbench store yet (nothing to upgrade)")
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{shown} has schema version {version}, newer than this workbench's "
            f"{SCHEMA_VERSION}: upgrade the workbench"
        )
    copy: Path | None = None
    if version < SCHEMA_VERSION and backup:
        copy = _backup(url, shown, version)
    store = Store(url)  # a writing open migrates, in one transaction
    try:
        counts = _counts(store)
    finally:
        store.close()
    return Upgraded(shown, version, SCHEMA_VERSION, copy, *counts)


def _backup(url: str, shown: str, version: int) -> Path:
    """The backup of a store about to be migrated.

    Raises:
        StoreError: not a SQLite file (PostgreSQL: the user backs it up), or the copy failed.
    """
    path = sqlite_file(url)
    if path is None:
        raise StoreError(
            f"{shown} is schema version {version}: the workbench backs up SQLite files only; "
            "back the database up yourself (pg_dump -Fc -f store-schema"
            f"{version}.dump DBNAME), then upgrade it without one (`backup=False`)"
        )
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.stem}.schema{version}-{stamp}{path.suffix or '.sqlite'}")
    if target.exists():  # (two upgrades within a second: the first one's backup is kept)
        raise StoreError(f"store upgrade: the backup {target} exists already; nothing was changed")
    try:
        copy_sqlite(path, target)
    except (sqlite3.Error, OSError) as exc:
        target.unlink(missing_ok=True)
        raise StoreError(f"store upgrade: cannot back {path} up to {target}: {exc}") from exc
    return target


def copy_sqlite(path: Path, target: Path) -> None:
    """Copy a SQLite store with SQLite's backup API: what its WAL file holds and a writer's
    commit in progress are copied as the database stands, where a plain file copy could take
    a half-written page.

    Raises:
        sqlite3.Error, OSError: the copy failed.
    """
    uri = f"{path.absolute().as_uri()}?mode=ro"
    if not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists():
        uri += "&immutable=1"  # (as a read-only open: no -shm file can be made beside it)
    source = sqlite3.connect(uri, uri=True)
    with closing(source), closing(sqlite3.connect(target)) as dest:
        source.backup(dest)


def _counts(store: Store) -> tuple[int, int, int, int]:
    """Studies, evaluations, studies with a space file, and those keeping it."""
    with store.session() as s:
        return (
            s.scalar(select(func.count(Study.id))) or 0,
            s.scalar(select(func.count(Evaluation.id))) or 0,
            s.scalar(select(func.count(Study.id)).where(Study.space_path.is_not(None))) or 0,
            s.scalar(select(func.count(StudySpace.id))) or 0,
        )


@contextmanager
def readable_store(url: str) -> Iterator[Store]:
    """The store at ``url``, open for reading whatever its schema version: a current one as it
    is (read-only), an older SQLite file through a migrated copy in a temporary folder (the
    file itself is not changed; the copy is deleted afterwards).

    Raises:
        StoreError: no store there, or an older store that is not a SQLite file (PostgreSQL:
            ``store upgrade`` it first).
    """
    version = schema_version(url)
    with ExitStack() as stack:
        if version is None or version >= SCHEMA_VERSION:
            store = Store(url, read_only=True)  # (names an empty or a newer store)
        else:
            store = Store(f"sqlite:///{_migrated_copy(url, version, stack)}")
        stack.callback(store.close)
        yield store


def _migrated_copy(url: str, version: int, stack: ExitStack) -> Path:
    """A copy of the older SQLite store at ``url`` in a temporary folder that ``stack``
    deletes (migrated when it is opened).

    Raises:
        StoreError: not a SQLite file, or the copy failed.
    """
    path = sqlite_file(url)
    if path is None:
        shown = shown_url(url)
        raise StoreError(
            f"{shown} is schema version {version}; reading it needs version {SCHEMA_VERSION}: "
            f"run workbench store upgrade{storage_option(shown)} first"
        )
    copy = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="workbench-"))) / path.name
    try:
        copy_sqlite(path, copy)
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"cannot copy {path} to read it: {exc}") from exc
    return copy
