"""A database brought to this workbench's schema when a store opens it: its version read, a
newer one refused, an older one migrated (:mod:`~workbench.store.migrations`), a layout that
lacks this version's columns refused, missing tables created."""

from __future__ import annotations

from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection

from workbench.store import models
from workbench.store.database import (
    make_engine,
    opening_errors,
    shown_url,
    sqlalchemy_url,
    storage_option,
)
from workbench.store.errors import StoreError
from workbench.store.migrations import migrate
from workbench.store.models import SCHEMA_VERSION, Meta, table_of

#: Advisory lock key serialising schema creation/migration on PostgreSQL ("wbschema").
_PREPARE_LOCK = 0x7762736368656D61


def prepare_schema(conn: Connection, shown: str, *, read_only: bool) -> None:
    """Create, check or migrate the tables of the store ``shown`` in ``conn``'s transaction;
    ``read_only``: only check that it is a store of this schema version.

    Raises:
        StoreError: not a workbench store, a newer schema, a damaged meta table, a layout that
            lacks this version's columns; read-only: an empty database, an older schema, or
            missing tables.
    """
    # processes opening a store together create (or migrate) its tables once: the first
    # one holds the lock until its tables are committed, the others then find them
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PREPARE_LOCK})
    elif conn.dialect.name == "sqlite" and not read_only:
        # the write lock up front (waiting up to the lock timeout), and the DDL inside
        # the transaction: Python's sqlite3 runs CREATE TABLE outside one otherwise
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    tables, version = read_version(conn, shown)
    if version is not None and version > SCHEMA_VERSION:
        raise StoreError(
            f"{shown} has schema version {version}, newer than this workbench's "
            f"{SCHEMA_VERSION}: upgrade the workbench"
        )
    if read_only:
        if version is None:
            raise StoreError(f"{shown} is empty: not a workbench store yet")
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"{shown} is schema version {version}; reading it needs "
                f"version {SCHEMA_VERSION}: run workbench store upgrade"
                f"{storage_option(shown)} (it backs the store up first)"
            )
        _check_layout(conn, tables, shown, creating=False)
        return
    if version is not None and version < SCHEMA_VERSION:
        migrate(conn, version)
    elif version is not None:
        _check_layout(conn, tables, shown, creating=True)
    models.Base.metadata.create_all(conn)
    if version is None:
        conn.execute(
            table_of(Meta).insert().values(key="schema_version", value=str(SCHEMA_VERSION))
        )
    conn.execute(
        table_of(Meta)
        .update()
        .where(Meta.key == "schema_version")
        .values(value=str(SCHEMA_VERSION))
    )


def _check_layout(conn: Connection, tables: set[str], shown: str, *, creating: bool) -> None:
    """Refuse a store whose tables lack columns this schema version has (written by a
    development build with the same version number) instead of failing later with "no such
    column" halfway through a command. Missing tables are created by a writing open; a
    read-only one cannot, and says so."""
    inspector = inspect(conn)
    columns: list[str] = []
    absent: list[str] = []
    for name, table in models.Base.metadata.tables.items():
        if name not in tables:
            absent.append(name)
            continue
        present = {c["name"] for c in inspector.get_columns(name)}
        columns += [f"{name}.{c.name}" for c in table.columns if c.name not in present]
    if columns:
        raise StoreError(
            f"{shown} says schema version {SCHEMA_VERSION} but lacks the columns "
            f"{', '.join(columns)}: it was written by a development build of the workbench "
            "with the same version number; start a new store (another `storage`) or export "
            "it with the build that wrote it"
        )
    if absent and not creating:
        raise StoreError(
            f"{shown} lacks the tables {', '.join(absent)}, which this workbench "
            f"adds: run workbench store upgrade{storage_option(shown)}, or copy it "
            "where it may be written"
        )


def read_version(conn: Connection, shown: str) -> tuple[set[str], int | None]:
    """The database's tables and its schema version (None: an empty database).

    Raises:
        StoreError: a database of other tables, or a meta table without a readable version.
    """
    tables = set(conn.dialect.get_table_names(conn))
    if tables and "meta" not in tables:
        raise StoreError(
            f"{shown} is a database, but not a workbench store "
            f"(tables: {', '.join(sorted(tables))})"
        )
    if "meta" not in tables:
        return tables, None
    row = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).first()
    if row is None:  # (created with its row in one transaction: one lost since)
        raise StoreError(
            f"{shown}: its meta table has no schema version, so which workbench wrote its "
            "tables cannot be told: the meta table is damaged (nothing was changed)"
        )
    try:
        return tables, int(row[0])
    except (TypeError, ValueError):
        raise StoreError(
            f"{shown}: its schema version reads {row[0]!r}, not a number: the meta table is damaged"
        ) from None


def schema_version(url: str) -> int | None:
    """The schema version of the store at ``url`` as it stands (None: an empty database), read
    without migrating, writing or creating anything (``store upgrade`` and ``store copy`` ask
    before they choose how to open it).

    Raises:
        StoreError: no store there, not a workbench store, a damaged meta table, or the
            database cannot be reached.
    """
    url = sqlalchemy_url(url)
    with opening_errors(shown_url(url)):
        engine = make_engine(url, 10.0, read_only=True)
        try:
            with engine.connect() as conn:
                return read_version(conn, shown_url(url))[1]
        finally:
            engine.dispose()
