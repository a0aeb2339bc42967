"""Compile results of a study's configs (the ``compile_results`` table).

Whatever compiles for a study writes here: the live tune (each config the CUDA runner
compiles), the no-GPU compile stage of ``workbench tune`` and ``workbench compile --storage``.
The report's compile-resources figure reads here. One row per (study, config, arch); compiling
a config again (a resumed tune, a second sweep) replaces its row, so the table says what the
latest compile said.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import select

from workbench.store.models import CompileRecord
from workbench.store.records import StudyInfo
from workbench.store.store import Store

if TYPE_CHECKING:
    from workbench.static.sweep import StaticRecord

#: Longest compile log kept per row (a failing template can print megabytes).
MAX_LOG_CHARS = 20_000


def save_compiles(store: Store, study: StudyInfo, records: Sequence[StaticRecord]) -> int:
    """Store (or replace) one row per record, in one transaction; returns how many.

    Raises:
        StoreError: the database failed.
    """
    if not records:
        return 0
    with store.session() as s:
        found = {
            (r.config_key, r.arch): r
            for r in s.scalars(select(CompileRecord).where(CompileRecord.study_id == study.id))
        }
        for rec in records:
            row = found.get((rec.label, rec.arch))
            if row is None:
                row = CompileRecord(study_id=study.id, config_key=rec.label, arch=rec.arch)
                s.add(row)
                found[(rec.label, rec.arch)] = row
            row.cache_key = rec.cache_key
            row.ok = rec.ok
            row.registers = rec.registers
            row.static_smem = rec.static_smem
            row.stack_frame = rec.stack_frame
            row.spill_stores = rec.spill_stores
            row.spill_loads = rec.spill_loads
            row.occupancy = rec.occupancy
            row.seconds = rec.compile_seconds
            text = rec.log if rec.ok or not rec.error else f"{rec.error}\n{rec.log}"
            row.log = text[-MAX_LOG_CHARS:]  # the end of a log says why it failed
    return len(records)


def load_compiles(store: Store, study_id: int) -> list[CompileRecord]:
    """Every compile row of a study, in the order they were first stored.

    Raises:
        StoreError: the database failed.
    """
    with store.session() as s:
        query = (
            select(CompileRecord)
            .where(CompileRecord.study_id == study_id)
            .order_by(CompileRecord.id)
        )
        return list(s.scalars(query))
