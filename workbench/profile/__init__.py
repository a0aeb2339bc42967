"""Nsight Compute profiles: metric sets checked offline against the chip, ``ncu`` on exactly
one config's launch, ``.ncu-rep`` reading with no GPU, and the profiles table of the store.

Modules: :mod:`.metrics` (the sets), :mod:`.nvperf` (offline name check through
``libnvperf_host.so``), :mod:`.report` (reading reports), :mod:`.ncu` (the ncu command),
:mod:`.target` (the profiled process), :mod:`.profiler` (the whole run and its event-timing
fallback), :mod:`.importing` (``--import``), :mod:`.derive` (divergence, memory access,
occupancy), :mod:`.summary` (figures of a stored profile), :mod:`.storage` (the table).

The names below are imported when first used (:mod:`workbench.lazy_exports`): the metric sets
do not bring the profiles table's SQLAlchemy with them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from workbench.profile.errors import (
        MetricNameError,
        NcuProblem,
        NcuUnavailable,
        ProfileError,
        ReportError,
    )
    from workbench.profile.metrics import MetricSet, ResolvedSet, resolve, validate_names
    from workbench.profile.report import KernelProfile, Report, load_report
    from workbench.profile.storage import ProfileRecord, load_profiles, save_profile

__getattr__ = lazy_exports(
    __name__,
    {
        "workbench.profile.errors": (
            "MetricNameError",
            "NcuProblem",
            "NcuUnavailable",
            "ProfileError",
            "ReportError",
        ),
        "workbench.profile.metrics": ("MetricSet", "ResolvedSet", "resolve", "validate_names"),
        "workbench.profile.report": ("KernelProfile", "Report", "load_report"),
        "workbench.profile.storage": ("ProfileRecord", "load_profiles", "save_profile"),
    },
)

__all__ = [
    "KernelProfile",
    "MetricNameError",
    "MetricSet",
    "NcuProblem",
    "NcuUnavailable",
    "ProfileError",
    "ProfileRecord",
    "Report",
    "ReportError",
    "ResolvedSet",
    "load_profiles",
    "load_report",
    "resolve",
    "save_profile",
    "validate_names",
]
