"""Profiles in the store: one row of the ``profiles`` table per profiled kernel launch.

Kept beside the profiler rather than in :class:`~workbench.store.Store` so the store's own
module stays untouched; both go through :meth:`Store.session`, so errors become
:class:`~workbench.store.StoreError` the same way.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select

from workbench.errors import ConfigError
from workbench.store import Store, StudyInfo
from workbench.store.best import StudySelection, Variants, select_studies, study_best
from workbench.store.mapping import record_from_row, row_from_record
from workbench.store.models import Profile


@dataclass(frozen=True)
class ProfileRecord:
    """A profile as written to and read from the store.

    ``source`` is ``ncu`` (profiled here), ``import`` (a report made elsewhere) or
    ``event-timing`` (no counters: CUDA-event time and the work model).
    """

    kernel: str
    source: str
    metric_set: str
    metrics: Mapping[str, float | None]
    config_key: str | None = None
    params: Mapping[str, object] | None = None
    shape_label: str | None = None
    study_id: int | None = None
    source_file: str | None = None
    source_sha256: str | None = None
    report_index: int | None = None
    function_name: str | None = None
    demangled_name: str | None = None
    mangled_name: str | None = None
    device: str | None = None
    chip: str | None = None
    cc: int | None = None
    strings: Mapping[str, str] = field(default_factory=dict)
    missing: Sequence[str] = ()
    notes: Sequence[str] = ()
    command: str | None = None
    id: int | None = None
    created_at: dt.datetime | None = None


def _finite(metrics: Mapping[str, float | None]) -> dict[str, float | None]:
    """NaN and infinities become None: PostgreSQL's JSON has no NaN."""
    return {
        k: (None if v is None or not math.isfinite(float(v)) else float(v))
        for k, v in metrics.items()
    }


def find_import(store: Store, record: ProfileRecord) -> int | None:
    """The id of a stored profile imported from the same report (same file content, same
    launch in it) under the same kernel, config, shape and study, or None: importing a
    report twice stores its launches once."""
    if record.source_sha256 is None:
        return None
    with store.session() as s:
        return s.scalars(
            select(Profile.id)
            .where(
                Profile.source_sha256 == record.source_sha256,
                Profile.report_index == record.report_index,
                Profile.kernel == record.kernel,
                Profile.config_key == record.config_key,
                Profile.shape_label == record.shape_label,
                Profile.study_id == record.study_id,
            )
            .order_by(Profile.id)
            .limit(1)
        ).first()


def save_profile(store: Store, record: ProfileRecord) -> int:
    """Insert one profile; returns its id.

    Raises:
        StoreError: the database failed.
    """
    row = row_from_record(
        Profile, record, skip=("id", "created_at"), metrics=_finite(record.metrics)
    )
    with store.session() as s:
        s.add(row)
        s.flush()
        return row.id


def load_profiles(
    store: Store,
    *,
    kernel: str | None = None,
    config_key: str | None = None,
    shape_label: str | None = None,
    profile_id: int | None = None,
) -> list[ProfileRecord]:
    """Profiles matching every given filter, oldest first.

    Raises:
        StoreError: the database failed.
    """
    query = select(Profile).order_by(Profile.id)
    if kernel is not None:
        query = query.where(Profile.kernel == kernel)
    if config_key is not None:
        query = query.where(Profile.config_key == config_key)
    if shape_label is not None:
        query = query.where(Profile.shape_label == shape_label)
    if profile_id is not None:
        query = query.where(Profile.id == profile_id)
    with store.session() as s:
        return [_record(row) for row in s.scalars(query)]


def _record(row: Profile) -> ProfileRecord:
    return record_from_row(ProfileRecord, row)


def best_config(
    store: Store, kernel: str, shape: str, study: str | None = None, device: str | None = None
) -> tuple[dict[str, object], StudyInfo]:
    """The best config (:mod:`workbench.store.best`) of ``kernel`` at ``shape`` in the store,
    and its study: a study of one of its problem variants, ``reduce[OP=sum]``, counts as the
    kernel's, unless ``kernel`` names the variant itself (:attr:`Variants.AS_NAMED`).

    With several studies (one per device or variant), ``study`` names one (by name, id or a
    unique part of the name), else the one of ``device`` is taken.

    Raises:
        ConfigError: no such study, several and none chosen, or no correct evaluation.
        StoreError: the database failed.
    """
    if study is not None:
        try:
            found = [store.find_study(study)]
        except ConfigError as exc:
            raise ConfigError(f"`config` best: {exc}") from None
    else:
        found = select_studies(store, StudySelection(kernel, Variants.AS_NAMED, shape))
    if len(found) > 1 and device is not None:
        found = [s for s in found if s.device_key == device] or found
    if not found:
        what = repr(study) if study else f"of {kernel} at {shape}"
        raise ConfigError(
            f"`config` best: the store has no study {what}; tune first or give a `config`"
        )
    if len(found) > 1:
        names = "; ".join(s.name for s in found)
        raise ConfigError(f"`config` best: several studies match ({names}); name one as `study`")
    chosen = found[0]
    best = study_best(store, chosen)
    if best is None:
        raise ConfigError(f"`config` best: study {chosen.name!r} has no correct evaluation")
    return dict(best.config), chosen
