"""Roofline math in one place: ceilings (measured, Nsight Compute, datasheet), achieved work
and bandwidth per memory level, arithmetic intensity, ridge points and bounds."""

from __future__ import annotations

from workbench.roofline.ceilings import (
    Ceiling,
    CeilingFileError,
    CeilingKind,
    Ceilings,
    CeilingSource,
    Reached,
    ShareAboveRoofError,
    attainable,
    checked_share,
    datasheet_ceilings,
    measured_ceilings,
    ncu_ceilings,
    raise_to_reached,
    ridge_point,
    sector_ceilings,
    share,
    unit_clock,
)
from workbench.roofline.model import (
    Achieved,
    RooflinePoint,
    achieved_from_metrics,
    achieved_from_timing,
    bandwidth_fractions,
    roofline_points,
)

__all__ = [
    "Achieved",
    "Ceiling",
    "CeilingFileError",
    "CeilingKind",
    "CeilingSource",
    "Ceilings",
    "Reached",
    "RooflinePoint",
    "ShareAboveRoofError",
    "achieved_from_metrics",
    "achieved_from_timing",
    "attainable",
    "bandwidth_fractions",
    "checked_share",
    "datasheet_ceilings",
    "measured_ceilings",
    "ncu_ceilings",
    "raise_to_reached",
    "ridge_point",
    "roofline_points",
    "sector_ceilings",
    "share",
    "unit_clock",
]
