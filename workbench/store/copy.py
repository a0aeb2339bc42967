"""Copy a whole store into another (``workbench store copy SRC DST``): the way from a local
SQLite file to a shared PostgreSQL database.

Every table of the schema is copied in dependency order, in one transaction on the destination.
Rows get new ids there and foreign keys follow them; a row whose unique key already exists in
the destination (the same environment, a study of the same name, a config already evaluated in
it; for a table without a unique key, such as runs, the same values in every column) is not
copied again, and rows that refer to it use the existing one. Copying twice adds nothing. The
shared (Optuna) side of a study needs no copy: the first worker on the destination gives every
stored evaluation a complete trial, so nothing is measured again.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

from sqlalchemy import Table, UniqueConstraint, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from workbench.store import models
from workbench.store.database import explain, shown_url, sqlalchemy_url
from workbench.store.errors import StoreError
from workbench.store.store import Store

#: Rows read and written per batch.
BATCH = 2000


@dataclass
class CopyReport:
    """Per table: rows copied and rows already in the destination."""

    copied: dict[str, int] = field(default_factory=dict)
    existing: dict[str, int] = field(default_factory=dict)


def _unique_keys(table: Table) -> list[tuple[str, ...]]:
    keys = [
        tuple(c.name for c in con.columns)
        for con in table.constraints
        if isinstance(con, UniqueConstraint)
    ]
    return keys + [(c.name,) for c in table.columns if c.unique]


def copy_store(src: Store, dst: Store) -> CopyReport:
    """Copy every row of ``src`` into ``dst`` (see the module docstring).

    Raises:
        StoreError: the source and destination are the same database, or a database failed
            (the destination is then unchanged).
    """
    refuse_same(src.url, dst.url)
    _refuse_clashing_studies(src, dst)
    report = CopyReport()
    id_maps: dict[str, dict[int, int]] = {}
    try:
        with src.engine.connect() as read, dst.engine.begin() as write:
            for table in models.Base.metadata.sorted_tables:
                if table.name == "meta":
                    continue  # the destination keeps its own schema version
                copied, existing = _copy_table(table, read, write, id_maps)
                report.copied[table.name] = copied
                report.existing[table.name] = existing
    except SQLAlchemyError as exc:
        raise StoreError(f"store copy to {dst.shown_url}: {explain(exc)}") from exc
    return report


def refuse_same(src_url: str, dst_url: str) -> None:
    """Raises:
    StoreError: the source and destination URLs name the same database."""
    if sqlalchemy_url(src_url) == sqlalchemy_url(dst_url):
        raise StoreError(f"store copy: source and destination are the same ({shown_url(dst_url)})")


def _refuse_clashing_studies(src: Store, dst: Store) -> None:
    """A study of the source whose name the destination holds for another kernel or other
    parameters would receive evaluations it cannot read (as tune and import refuse it).

    Raises:
        StoreError: naming the first such study.
    """
    there = {s.name: s for s in dst.studies()}
    for study in src.studies():
        other = there.get(study.name)
        if other is None:
            continue
        names = [p[0] for p in study.parameters]
        other_names = [p[0] for p in other.parameters]
        if (study.kernel, names) != (other.kernel, other_names):
            raise StoreError(
                f"store copy: study {study.name!r} exists in {dst.shown_url} for kernel "
                f"{other.kernel} with parameters {other_names}; the source's is for "
                f"{study.kernel} with {names}. Nothing was copied: rename one of them "
                "(a tune with a new `study` name makes a new study)"
            )


def _hashable(value: object) -> object:
    """A column's value as a key part: JSON as sorted text, a time as naive UTC (SQLite
    returns naive times, PostgreSQL aware ones)."""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _copy_table(
    table: Table, read: Connection, write: Connection, id_maps: dict[str, dict[int, int]]
) -> tuple[int, int]:
    fks = {fk.parent.name: fk.column.table.name for fk in table.foreign_keys}
    # A table without a unique key (runs, profiles, comparisons: events) matches on every
    # column but the id, its references mapped: a row copied before is not copied again.
    keys = _unique_keys(table) or [tuple(c.name for c in table.columns if c.name != "id")]
    has_id = "id" in table.columns
    # per unique key: its values -> id of the row the destination holds (0: table without id)
    known: list[dict[tuple, int]] = []
    for key in keys:
        cols = [table.c[k] for k in key] + ([table.c.id] if has_id else [])
        known.append(
            {
                tuple(map(_hashable, r[: len(key)])): (r[-1] if has_id else 0)
                for r in write.execute(select(*cols))
            }
        )
    id_map = id_maps.setdefault(table.name, {})
    insert = table.insert()
    if has_id:
        insert = insert.returning(table.c.id, sort_by_parameter_order=True)
    copied = existing = 0
    result = read.execute(select(table).order_by(*table.primary_key.columns))
    while rows := result.mappings().fetchmany(BATCH):
        batch, old_ids = [], []
        for row in rows:
            values = dict(row)
            for col, parent in fks.items():
                if values[col] is not None:
                    values[col] = id_maps.get(parent, {}).get(values[col], values[col])
            match = _match(values, keys, known)
            if match is not None:
                existing += 1
                if has_id:
                    id_map[row["id"]] = match
                continue
            old_ids.append(values.pop("id", None))
            batch.append(values)
        if not batch:
            continue
        out = write.execute(insert, batch)
        new_ids = [r[0] for r in out] if has_id else [0] * len(batch)
        for values, old, new in zip(batch, old_ids, new_ids, strict=True):
            if has_id:
                id_map[old] = new
            for k, key in zip(known, keys, strict=True):
                k[tuple(_hashable(values[c]) for c in key)] = new
        copied += len(batch)
    return copied, existing


def _match(values: dict, keys: list[tuple[str, ...]], known: list[dict[tuple, int]]) -> int | None:
    for key, k in zip(keys, known, strict=True):
        found = k.get(tuple(_hashable(values[c]) for c in key))
        if found is not None:
            return found
    return None
