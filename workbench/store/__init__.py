"""The store: studies, runs, configurations, measurements and raw samples (SQLAlchemy)."""

from __future__ import annotations

from workbench.store.models import RunStatus
from workbench.store.store import (
    RunSummary,
    Store,
    StoredEvaluation,
    StoreError,
    StudyInfo,
    default_store_url,
    study_name,
)

__all__ = [
    "RunStatus",
    "RunSummary",
    "Store",
    "StoreError",
    "StoredEvaluation",
    "StudyInfo",
    "default_store_url",
    "study_name",
]
