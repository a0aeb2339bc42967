"""The fields every recording format has, read one way: a time, its samples, the kernel's
name from the file, when the measurements ended."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path


def finite_value(value: object) -> float | None:
    """A recorded time or sample as a finite float, None where it is not one (a bool, a string,
    NaN, an infinity, an integer past a float's range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def finite_samples(times: object) -> tuple[float, ...]:
    """The finite numbers of a recorded list of samples (NaN and infinities left out: JSON
    has no such numbers, and PostgreSQL's JSON refuses them)."""
    if not isinstance(times, list):
        return ()
    return tuple(v for v in map(finite_value, times) if v is not None)


def file_stem(path: Path) -> str:
    """A file's name without .json / .gz: ``pnpoly_RTX_3090.json.gz`` -> ``pnpoly_RTX_3090``."""
    name = path.name
    for suffix in (".gz", ".json"):
        name = name.removesuffix(suffix)
    return name or path.name


def latest_timestamp(records: Iterable[object]) -> str | None:
    """When a Kernel Tuner or T4 file's measurements ended: the latest of its entries'
    ``timestamp`` (ISO text, so the latest sorts last), or None when they have none."""
    stamps = [
        t
        for r in records
        if isinstance(r, dict) and isinstance(t := r.get("timestamp"), str) and _ISO.match(t)
    ]
    return max(stamps) if stamps else None


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}")
