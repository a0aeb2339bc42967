"""HTML reports from the store: self-contained pages (plotly.js inlined once per page, no
network needed), opened in a real browser by the tests.

Modules, one job each: :mod:`.data` (a study's rows), :mod:`.history`, :mod:`.importance`
(PED-ANOVA), :mod:`.parallel`, :mod:`.compiled` (resources of evaluated configs),
:mod:`.roofline`, :mod:`.counters` (divergence, stalls, memory access), :mod:`.accuracy`,
:mod:`.baselines`, :mod:`.static` (compile-only pages), :mod:`.overview`, :mod:`.page` (HTML and
escaping), :mod:`.pages` (page composition), :mod:`.png` (kaleido export) and :mod:`.build`.

The names below are imported when first used (:mod:`workbench.lazy_exports`): ``workbench
report --help`` shows :data:`DEFAULT_OUT` without importing plotly, pandas and optuna.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from workbench.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from workbench.report.build import (
        NothingToReport,
        ReportOptions,
        ReportResult,
        build_reports,
    )
    from workbench.report.png import PngUnavailable

#: Where ``workbench report`` writes its pages unless told.
DEFAULT_OUT = Path("reports")

__getattr__ = lazy_exports(
    __name__,
    {
        "workbench.report.build": (
            "NothingToReport",
            "ReportOptions",
            "ReportResult",
            "build_reports",
        ),
        "workbench.report.png": ("PngUnavailable",),
    },
)

__all__ = [
    "DEFAULT_OUT",
    "NothingToReport",
    "PngUnavailable",
    "ReportOptions",
    "ReportResult",
    "build_reports",
]
