"""Where the public datasets are: ``$WORKBENCH_DATASETS``, else ``../shared/datasets`` beside the
repository (Kernel Tuner caches in ``tuning-caches/``, Nsight Compute reports in
``ncu-reports/``; see their SOURCES.md). Tests that need them skip, saying where they looked.

The ``datasets`` fixture (conftest.py) gives the root; the markers below serve tests whose
parameters or module constants name a dataset file, which collection reads before fixtures run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATASETS = Path(os.environ.get("WORKBENCH_DATASETS") or REPO.parent / "shared" / "datasets")
CACHES = DATASETS / "tuning-caches"
REPORTS = DATASETS / "ncu-reports"
#: the lent-GPU runs kept beside the repository (the H200 run's store, logs, reports)
DEVICE_RUNS = REPO.parent / "shared" / "device-runs"


def missing(path: Path) -> str:
    """The skip reason for a dataset folder or file that is not there."""
    return f"public dataset not found: {path} (set WORKBENCH_DATASETS to the datasets folder)"


needs_caches = pytest.mark.skipif(not CACHES.is_dir(), reason=missing(CACHES))
needs_reports = pytest.mark.skipif(not REPORTS.is_dir(), reason=missing(REPORTS))
