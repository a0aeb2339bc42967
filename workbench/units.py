"""Numbers as people read them: SI prefixes for rates, sizes and durations."""

from __future__ import annotations

import math

#: Prefix factors, largest first; values below the smallest keep it (``0.5 ns``).
_PREFIXES = (
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
    (1e-3, "m"),
    (1e-6, "µ"),
    (1e-9, "n"),
)


def si(value: float | None, unit: str, *, missing: str = "-") -> str:
    """``4.8 TB/s``, ``12.5 µs``: three significant digits and the largest prefix that leaves
    the number at 1 or more; ``missing`` for None."""
    if value is None:
        return missing
    if value == 0 or not math.isfinite(value):
        return f"{value:.3g} {unit}"
    factor, prefix = next((f, p) for f, p in _PREFIXES if abs(value) >= f or f == _PREFIXES[-1][0])
    return f"{value / factor:.3g} {prefix}{unit}"
