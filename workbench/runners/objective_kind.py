"""``--objective``: what a search minimises, by name (light: a tune's request and its ``--help``
name it; :mod:`workbench.runners.objectives` computes it)."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.runners.base import Objective


class ObjectiveKind(enum.Enum):
    """``--objective``: what the search minimises."""

    TIME = "time"
    ENERGY = "energy"
    EDP = "edp"

    @property
    def objective(self) -> Objective:
        from workbench.runners.base import Objective  # (it brings the space model)

        units = {"time": "ms", "energy": "J", "edp": "J*s"}
        return Objective(self.value, units[self.value])
