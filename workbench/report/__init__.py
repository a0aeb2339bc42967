"""HTML reports from the store: self-contained pages (plotly.js inlined once per page, no
network needed), opened in a real browser by the tests.

Modules, one job each: :mod:`.data` (a study's rows), :mod:`.history`, :mod:`.importance`
(PED-ANOVA), :mod:`.parallel`, :mod:`.compiled` (resources of evaluated configs),
:mod:`.roofline`, :mod:`.counters` (divergence, stalls, memory access), :mod:`.accuracy`,
:mod:`.baselines`, :mod:`.static` (compile-only pages), :mod:`.overview`, :mod:`.page` (HTML and
escaping), :mod:`.pages` (page composition), :mod:`.png` (kaleido export) and :mod:`.build`.
"""

from __future__ import annotations

from workbench.report.build import (
    DEFAULT_OUT,
    NothingToReport,
    ReportOptions,
    ReportResult,
    build_reports,
)
from workbench.report.png import PngUnavailable

__all__ = [
    "DEFAULT_OUT",
    "NothingToReport",
    "PngUnavailable",
    "ReportOptions",
    "ReportResult",
    "build_reports",
]
