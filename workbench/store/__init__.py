"""The store: studies, runs, configurations, measurements and raw samples (SQLAlchemy)."""

from __future__ import annotations

from workbench.store.database import default_store_url
from workbench.store.errors import StoreError
from workbench.store.models import RunStatus
from workbench.store.records import RunSummary, StoredEvaluation, StudyInfo, study_name
from workbench.store.store import Store

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
