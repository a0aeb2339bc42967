"""The store's error."""

from __future__ import annotations

from workbench.errors import WorkbenchError


class StoreError(WorkbenchError):
    """The store cannot be opened, is locked, damaged, or from a newer workbench."""
