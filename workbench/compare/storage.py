"""Comparisons in the store: one ``comparisons`` row per contender per shape per command, and
one ``comparison_variants`` row per configuration of a baseline that offers several (the
CUTLASS operators it timed).

Reading them back (:func:`load_comparisons`, :func:`load_variants`) is what the report uses:
the latest batch of a kernel gives one table per shape, the tuned row first.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from workbench.compare.table import ContenderEntry, ShapeComparison
from workbench.spaces.model import config_label
from workbench.store import Store
from workbench.store.mapping import record_from_row
from workbench.store.models import Comparison, ComparisonVariant


@dataclass(frozen=True)
class ComparisonRecord:
    """One stored row (see :class:`~workbench.store.models.Comparison` for the fields)."""

    id: int
    batch: str
    kernel: str
    device: str | None
    shape_label: str
    shape: dict[str, int]
    config_key: str
    params: dict[str, Any]
    config_origin: str
    contender: str
    title: str
    library: str | None
    status: str
    reason: str
    median_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    samples: tuple[float, ...]
    throughput: float | None
    unit: str | None
    bound_fraction: float | None
    bound: str | None
    ceilings: tuple[str, ...]
    speedup: float | None
    verify_max_error: float | None
    study_id: int | None
    created_at: dt.datetime | None
    #: the command that timed it, or where a replay read it (:mod:`workbench.compare.replayed`)
    command: str | None = None


@dataclass(frozen=True)
class VariantRecord:
    """One stored variant (see :class:`~workbench.store.models.ComparisonVariant`)."""

    batch: str
    kernel: str
    device: str | None
    shape_label: str
    contender: str
    variant: str
    label: str
    config: dict[str, Any]
    status: str
    reason: str
    median_ms: float | None
    ci_low_ms: float | None
    ci_high_ms: float | None
    samples: tuple[float, ...]
    compile_s: float | None
    compile_note: str
    chosen: bool


def _finite(value: float | None) -> float | None:
    """NaN and infinities become None: PostgreSQL's JSON has no NaN."""
    return None if value is None or not math.isfinite(value) else float(value)


def save_comparisons(
    store: Store,
    comparisons: Sequence[ShapeComparison],
    *,
    device: str | None,
    study_ids: Sequence[int | None] = (),
    command: str | None = None,
) -> str:
    """Store every row of ``comparisons`` under one new batch id; returns the batch id.

    Raises:
        StoreError: the database failed.
    """
    batch = uuid.uuid4().hex
    rows: list[Comparison | ComparisonVariant] = []
    for i, c in enumerate(comparisons):
        study_id = study_ids[i] if i < len(study_ids) else None
        for entry in c.entries:
            r = c.row(entry)
            bound_labels = _bound_labels(c, entry)
            rows.append(
                Comparison(
                    batch=batch,
                    kernel=c.problem.kernel,
                    study_id=study_id,
                    device=device,
                    shape_label=c.shape_label,
                    shape=dict(c.problem.shape),
                    config_key=config_label(c.config),
                    params=dict(c.config),
                    config_origin=c.config_origin,
                    contender=entry.contender,
                    title=entry.title,
                    library=entry.library,
                    status=entry.status.value,
                    reason=entry.reason,
                    median_ms=_finite(entry.median_ms),
                    ci_low_ms=_finite(entry.ci_low_ms),
                    ci_high_ms=_finite(entry.ci_high_ms),
                    samples=[float(s) for s in entry.samples] or None,
                    sm_clock_mhz=[_finite(x) for x in entry.sm_clock_mhz] or None,
                    throttled=[bool(t) for t in entry.throttled] or None,
                    throughput=_finite(r["throughput"]),
                    unit=r["unit"],
                    bound_fraction=_finite(r["bound_fraction"]),
                    bound=r["bound"],
                    ceilings=bound_labels or None,
                    speedup=_finite(r["speedup"]),
                    verify_max_error=_finite(entry.verify_max_error),
                    command=command,
                )
            )
            rows += _variant_rows(batch, c, entry, device)
    with store.session() as s:
        s.add_all(rows)
    return batch


def _variant_rows(
    batch: str, c: ShapeComparison, entry: ContenderEntry, device: str | None
) -> list[ComparisonVariant]:
    return [
        ComparisonVariant(
            batch=batch,
            kernel=c.problem.kernel,
            device=device,
            shape_label=c.shape_label,
            contender=entry.contender,
            variant=v.name,
            label=v.label,
            config=dict(v.config),
            status=v.status.value,
            reason=v.reason,
            median_ms=_finite(v.median_ms),
            ci_low_ms=_finite(v.ci_low_ms),
            ci_high_ms=_finite(v.ci_high_ms),
            samples=[float(x) for x in v.samples] or None,
            compile_s=_finite(v.compile_s),
            compile_note=v.compile_note,
            chosen=v.chosen,
        )
        for v in entry.variants
    ]


def _bound_labels(c: ShapeComparison, entry: Any) -> list[str]:
    b = c.bound(entry)
    return list(b.ceilings) if b else []


def load_comparisons(
    store: Store, *, kernel: str | None = None, batch: str | None = None, latest: bool = False
) -> list[ComparisonRecord]:
    """Stored comparison rows, oldest first; ``latest``: only the newest batch (of ``kernel``).

    Raises:
        StoreError: the database failed.
    """
    query = select(Comparison).order_by(Comparison.id)
    if kernel is not None:
        query = query.where(Comparison.kernel == kernel)
    if batch is not None:
        query = query.where(Comparison.batch == batch)
    with store.session() as s:
        rows = [_record(row) for row in s.scalars(query)]
    if latest and rows:
        newest = rows[-1].batch
        rows = [r for r in rows if r.batch == newest]
    return rows


def load_variants(store: Store, batches: Sequence[str]) -> list[VariantRecord]:
    """The stored variants of the comparison batches ``batches``, in the order stored.

    Raises:
        StoreError: the database failed.
    """
    if not batches:
        return []
    query = (
        select(ComparisonVariant)
        .where(ComparisonVariant.batch.in_(list(batches)))
        .order_by(ComparisonVariant.id)
    )
    with store.session() as s:
        return [
            VariantRecord(
                batch=r.batch,
                kernel=r.kernel,
                device=r.device,
                shape_label=r.shape_label,
                contender=r.contender,
                variant=r.variant,
                label=r.label,
                config=dict(r.config or {}),
                status=r.status,
                reason=r.reason or "",
                median_ms=r.median_ms,
                ci_low_ms=r.ci_low_ms,
                ci_high_ms=r.ci_high_ms,
                samples=tuple(r.samples or ()),
                compile_s=r.compile_s,
                compile_note=r.compile_note or "",
                chosen=bool(r.chosen),
            )
            for r in s.scalars(query)
        ]


def _record(row: Comparison) -> ComparisonRecord:
    return record_from_row(ComparisonRecord, row)
