"""JSON text that every parser reads: what the CLI prints with ``--json`` and the JSON files it
writes.

Python's ``json`` writes a float past a finite number as ``NaN``, ``Infinity`` or ``-Infinity``,
which are not JSON: ``jq``, JavaScript's ``JSON.parse`` and most CI tools refuse the whole
document. Such a number (an energy-delay product that overflowed, stored by a workbench that
did not yet refuse it) is written as ``null`` here, and a document that is an object says which
fields were and what they held, under :data:`NON_FINITE_KEY`, so that a null is never mistaken
for "not measured".
"""

from __future__ import annotations

import json
import math
from typing import Any

#: The key under which a document lists the fields written as null: ``{"studies[0].best_value":
#: "inf"}``.
NON_FINITE_KEY = "non_finite"


def strict_dumps(doc: object, **kwargs: Any) -> str:
    """``json.dumps(doc, **kwargs)`` with every non-finite float written as null (listed under
    :data:`NON_FINITE_KEY` when ``doc`` is a dict), and ``allow_nan=False`` as the backstop.

    Args:
        doc: the document (left unchanged).
        kwargs: ``json.dumps``'s (``indent``, ``default``, ``separators``, ...).

    Returns:
        The JSON text.
    """
    found: dict[str, str] = {}
    clean = _finite(doc, "", found)
    if found and isinstance(clean, dict):
        clean[NON_FINITE_KEY] = found
    return json.dumps(clean, allow_nan=False, **kwargs)


def _finite(value: object, path: str, found: dict[str, str]) -> object:
    """``value`` with each non-finite float replaced by None, its path noted in ``found``."""
    if isinstance(value, float) and not math.isfinite(value):
        found[path or "$"] = repr(value)  # 'inf', '-inf', 'nan'
        return None
    if isinstance(value, dict):
        return {k: _finite(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value
