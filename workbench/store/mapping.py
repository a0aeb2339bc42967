"""Stored rows to typed records and back, field by field, by name: written once.

A record (a frozen dataclass) and its ORM model (:mod:`workbench.store.models`) share field
names; the mapping between them is read from both (``dataclasses.fields`` and SQLAlchemy's
column list) instead of being repeated by hand per table. A record field without a column of
its name must be given by the caller (``given``), so that a field added on one side and not the
other fails at once, not as a silently dropped value.

Conversions follow the record's declared types: a JSON list becomes a tuple, a JSON object a
dict; a column read back as NULL gives the field's empty value (``()``, ``{}``, ``""``) where
the field's type does not allow None. Written back, empty containers are stored as NULL where
the column allows it.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, Union

from sqlalchemy import inspect as sa_inspect

from workbench.errors import InternalError

R = TypeVar("R")
M = TypeVar("M")


@functools.cache
def _columns(model: type) -> dict[str, bool]:
    """Column name -> whether it may be NULL, of an ORM model."""
    columns: Any = sa_inspect(model).columns
    return {c.key: bool(c.nullable) for c in columns}


@functools.cache
def _kinds(cls: type) -> dict[str, tuple[type | None, bool]]:
    """Field name -> (container kind: tuple, dict or str, else None; whether None is allowed),
    of a dataclass, from its resolved type hints."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        out[f.name] = _kind(hints[f.name])
    return out


def _kind(hint: Any) -> tuple[type | None, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType):
        optional = type(None) in args
        rest = [a for a in args if a is not type(None)]
        kind, _ = _kind(rest[0]) if len(rest) == 1 else (None, False)
        return kind, optional
    origin = typing.get_origin(hint) or hint
    if origin in (tuple, list, Sequence) or (
        isinstance(origin, type) and issubclass(origin, Sequence) and origin is not str
    ):
        return tuple, False
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return dict, False
    if origin is str:
        return str, False
    return None, False


def record_from_row(cls: type[R], row: object, **given: Any) -> R:
    """A ``cls`` record from an ORM row: each field from the column of its name (converted as
    the field's type says), or from ``given``.

    Raises:
        InternalError: a field of ``cls`` has neither a column nor a given value.
    """
    columns = _columns(type(row))  # type: ignore[arg-type]  # (classes hash; typeshed says no)
    values = {}
    for name, (kind, optional) in _kinds(cls).items():  # type: ignore[arg-type]
        if name in given:
            values[name] = given[name]
        elif name in columns:
            values[name] = _read(getattr(row, name), kind, optional)
        else:
            raise InternalError(
                f"internal error: {cls.__name__}.{name} has no column in "
                f"{type(row).__name__} and was not given"
            )
    return cls(**values)


def _read(value: Any, kind: type | None, optional: bool) -> Any:
    if value is None:
        return None if optional or kind is None else kind()
    if kind is tuple:
        return tuple(value)
    if kind is dict:
        return dict(value)
    return value


def row_from_record(model: type[M], record: object, *, skip: Sequence[str] = (), **given: Any) -> M:
    """A new ``model`` row from a record: each column from the record's field of its name (a
    tuple stored as a list; an empty container of a field that cannot be None as NULL where the
    column allows it), or from ``given``; the record's fields in ``skip`` are not written (ids
    and times the database sets).

    Raises:
        InternalError: a field of the record has no column (and is neither given nor skipped).
    """
    columns = _columns(model)  # type: ignore[arg-type]
    values = dict(given)
    for name, (_, optional) in _kinds(type(record)).items():  # type: ignore[arg-type]
        if name in given or name in skip:
            continue
        if name not in columns:
            raise InternalError(
                f"internal error: {type(record).__name__}.{name} has no column in {model.__name__}"
            )
        empty_is_null = columns[name] and not optional
        values[name] = _write(getattr(record, name), empty_is_null)
    return model(**values)


def _write(value: Any, empty_is_null: bool) -> Any:
    if isinstance(value, (tuple, list)):
        value = list(value)
    elif isinstance(value, Mapping):
        value = dict(value)
    else:
        return value
    return None if empty_is_null and not value else value
