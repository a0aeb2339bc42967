"""The one way a store is opened from what a user gives: a database URL or a SQLite file's path
(``storage``; None: ``$WORKBENCH_STORE`` or ``.workbench/store.sqlite``). Every command, a
tune's start and a shared study's database open their store here."""

from __future__ import annotations

from pathlib import Path

from workbench.errors import ConfigError
from workbench.store.database import default_store_url
from workbench.store.store import Store


def open_store(storage: str | None, *, read_only: bool = False) -> Store:
    """The store at ``storage`` (see the module); ``read_only`` for what only reads it (a file
    the user may not write is read, and none is created).

    Raises:
        ConfigError: ``storage`` names no file a store can be (see :func:`storage_url`).
        StoreError: the store cannot be opened (see :class:`~workbench.store.store.Store`).
    """
    return Store(storage_url(storage), read_only=read_only)


def storage_url(storage: str | None) -> str:
    """The URL of ``storage`` (a URL, or a SQLite file's path; None: the default store).

    Raises:
        ConfigError: an empty path, a directory, or a path a URL would misread.
    """
    if storage is None:
        return default_store_url()
    if "://" in storage:
        return storage
    if not storage.strip():
        raise ConfigError("`storage` is empty: give a SQLite file's path or a database URL")
    if Path(storage).is_dir():
        raise ConfigError(
            f"`storage` {storage} is a directory: give a SQLite file, e.g. "
            f"{Path(storage) / 'store.sqlite'}"
        )
    if odd := [c for c in "?#%" if c in storage]:
        # a URL reads them as a query, a fragment or an escape: the data would go to another
        # file than the one named
        raise ConfigError(
            f"`storage` {storage}: a SQLite path with {' or '.join(odd)} in it is not "
            "supported (a database URL gives them other meanings); rename the file"
        )
    return f"sqlite:///{Path(storage).absolute()}"


def is_postgresql(storage: str) -> bool:
    """Whether ``storage`` is a PostgreSQL URL (a store several processes can share)."""
    return storage.startswith(("postgresql", "postgres://"))
