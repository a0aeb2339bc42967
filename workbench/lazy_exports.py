"""A package's names, imported from its modules when first used (PEP 562).

``from workbench.profile import MetricSet`` used to import the whole package first, the
profiles table (SQLAlchemy) with it; the command line builds its ``--help`` from such light
names, and a package that imports its heavy modules up front made ``workbench --help`` take
seconds (issue 53). A package lists its exports by module instead; each module is imported by
the first use of one of its names. (Type checkers read the same names from an
``if TYPE_CHECKING:`` import beside the table.)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each module (its full name)
    to the names of it that the package offers.

    Raises (the returned function):
        AttributeError: a name the package does not export (as for any module).
    """
    home = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> object:
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
