"""Comparisons a GPU run kept beside a kernel's recordings, stored by the replay of that run.

``workbench compare K --json`` prints, per shape, every contender's median time, interval,
throughput, share of the roofline bound and speedup. Kept in ``recordings/K/compare/`` beside
the recordings of the same run (``gemm_int8-nvidia-h200-2026-12-04.json``), it is what a
replayed tune of K stores, as the GPU run stored it: one batch of ``comparisons`` rows per
file, the numbers as the file holds them (nothing is recomputed), each row's ``command``
naming the file it was read from (:data:`REPLAYED_FROM`), so that the report says so. The
JSON holds each contender's sample count, not its samples: the rows keep none.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from workbench.errors import WorkbenchError
from workbench.spaces.model import SpaceSpec, base_kernel, config_label
from workbench.store import Store
from workbench.store.models import Comparison, ComparisonVariant

#: The folder of a kernel's recordings that holds the kept ``workbench compare --json`` files.
KEPT_FOLDER = "compare"
#: How a stored row's ``command`` says it was read from a kept file, not timed by a command.
REPLAYED_FROM = "replayed from "


class KeptComparisonError(WorkbenchError):
    """A kept comparison file cannot be read or is not a ``workbench compare --json`` output."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class KeptComparison:
    """One kept ``workbench compare --json`` output of a GPU run."""

    path: Path
    kernel: str
    device: str
    shapes: tuple[Mapping[str, Any], ...]  #: as the file holds them (``label``, ``results``)

    @property
    def source(self) -> str:
        """Device and file, as a replayed evaluation names its recording."""
        return f"{self.device} ({self.path.name})"

    @property
    def command(self) -> str:
        """What the stored rows' ``command`` holds."""
        return f"{REPLAYED_FROM}{self.source}"


def replayed_source(command: str | None) -> str | None:
    """The device and file a stored comparison row was read from, None for one timed by
    ``workbench compare``."""
    if command is None or not command.startswith(REPLAYED_FROM):
        return None
    return command.removeprefix(REPLAYED_FROM)


def kept_comparisons(recordings: Path) -> list[KeptComparison]:
    """The kept comparison files in ``recordings/compare/`` (none when there is no folder).

    Raises:
        KeptComparisonError: a file there is damaged (it is not silently skipped).
    """
    folder = recordings / KEPT_FOLDER
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [load_kept_comparison(p) for p in paths]


def load_kept_comparison(path: Path) -> KeptComparison:
    """Read one ``workbench compare --json`` output of a GPU run.

    Raises:
        KeptComparisonError: unreadable, not JSON, or not a measured comparison.
    """
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KeptComparisonError(path, f"cannot read it as JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("measured") is not True:
        raise KeptComparisonError(
            path,
            "not a comparison measured on a GPU (compare's JSON document with 'measured': true)",
        )
    shapes = doc.get("shapes")
    if not isinstance(shapes, list) or not all(_is_shape(s) for s in shapes):
        raise KeptComparisonError(path, "'shapes' is not a list of shapes with their results")
    device, kernel = doc.get("device"), doc.get("kernel")
    if not isinstance(device, str) or not isinstance(kernel, str):
        raise KeptComparisonError(path, "names no device or kernel")
    return KeptComparison(path, kernel, device, tuple(shapes))


def _is_shape(s: object) -> bool:
    return (
        isinstance(s, dict)
        and isinstance(s.get("label"), str)
        and isinstance(s.get("results"), list)
        and all(isinstance(r, dict) and isinstance(r.get("name"), str) for r in s["results"])
    )


def store_kept_comparison(
    store: Store, kept: KeptComparison, spec: SpaceSpec | None = None
) -> str | None:
    """Store ``kept`` as one comparison batch, each shape's rows linked to the store's study of
    the kernel at that shape on that device where there is one; returns the batch id, or None
    when the file's rows are already stored (a second replay stores nothing). With the
    kernel's ``spec``, a tuned config that predates some of its parameters gets their
    ``before:`` values (as the replayed recording's configs do).

    Raises:
        KeptComparisonError: a result holds a field of the wrong type.
        StoreError: the database failed.
    """
    with store.session() as s:
        held = s.scalars(
            select(Comparison.id)
            .where(Comparison.kernel == kept.kernel, Comparison.command == kept.command)
            .limit(1)
        ).first()
    if held is not None:
        return None
    studies = {
        (st.shape_label, st.device_key): st.id
        for st in store.studies()
        if base_kernel(st.kernel) == kept.kernel
    }
    batch = uuid.uuid4().hex
    try:
        rows = [
            row
            for shape in kept.shapes
            for row in _shape_rows(
                kept, shape, batch, studies.get((shape["label"], kept.device)), spec
            )
        ]
    except (TypeError, ValueError, KeyError) as exc:
        raise KeptComparisonError(kept.path, f"malformed result ({exc})") from exc
    with store.session() as s:
        s.add_all(rows)
    return batch


def _shape_rows(
    kept: KeptComparison,
    shape: Mapping[str, Any],
    batch: str,
    study_id: int | None,
    spec: SpaceSpec | None,
) -> list[Comparison | ComparisonVariant]:
    config = dict(shape.get("config") or {})
    if spec is not None and config:
        config = spec.with_before_values(config)
    common = {
        "batch": batch,
        "kernel": kept.kernel,
        "device": kept.device,
        "shape_label": shape["label"],
    }
    rows: list[Comparison | ComparisonVariant] = []
    for r in shape["results"]:
        low, high = _interval(r.get("ci_ms"))
        rows.append(
            Comparison(
                **common,
                study_id=study_id,
                shape=dict(shape.get("shape") or {}),
                config_key=config_label(config),
                params=config,
                config_origin=str(shape.get("config_origin", "")),
                contender=r["name"],
                title=str(r.get("title") or r["name"]),
                library=r.get("library"),
                status=str(r["status"]),
                reason=str(r.get("reason") or ""),
                median_ms=_number(r.get("median_ms")),
                ci_low_ms=low,
                ci_high_ms=high,
                throughput=_number(r.get("throughput")),
                unit=r.get("unit"),
                bound_fraction=_number(r.get("bound_fraction")),
                bound=r.get("bound"),
                speedup=_number(r.get("speedup")),
                verify_max_error=_number(r.get("verify_max_error")),
                command=kept.command,
            )
        )
        rows += [_variant_row(common, r["name"], v) for v in r.get("variants") or ()]
    return rows


def _variant_row(
    common: Mapping[str, str], contender: str, v: Mapping[str, Any]
) -> ComparisonVariant:
    low, high = _interval(v.get("ci_ms"))
    return ComparisonVariant(
        **common,
        contender=contender,
        variant=str(v["name"]),
        label=str(v.get("label") or v["name"]),
        config=dict(v.get("config") or {}),
        status=str(v["status"]),
        reason=str(v.get("reason") or ""),
        median_ms=_number(v.get("median_ms")),
        ci_low_ms=low,
        ci_high_ms=high,
        compile_s=_number(v.get("compile_s")),
        compile_note=str(v.get("compile_note") or ""),
        chosen=bool(v.get("chosen")),
    )


def _interval(ci: object) -> tuple[float | None, float | None]:
    if not isinstance(ci, Sequence) or isinstance(ci, str) or len(ci) != 2:
        return None, None
    return _number(ci[0]), _number(ci[1])


def _number(value: object) -> float | None:
    """A finite number as a float; None for null (and for NaN: PostgreSQL's JSON has none).

    Raises:
        TypeError: ``value`` is neither a number nor null.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{value!r} is not a number")
    return float(value) if math.isfinite(value) else None
