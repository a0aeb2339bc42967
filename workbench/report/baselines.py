"""Speedup against the vendor libraries: the rows ``workbench compare`` stored, read with
:func:`workbench.compare.storage.load_comparisons`; the latest comparison per (shape, device)
of a kernel and its variants.

:func:`gather_baselines` turns them into one short row per (shape, contender), with every
reason a contender was skipped or failed written once as a footnote and each contender's
library named once in a legend; :func:`draw_speedups` draws the speedup chart the section leads
with; :meth:`Baselines.headline` is a study's line on the index page. A baseline that timed
several configurations (the CUTLASS operators) brings them as :class:`VariantRow`, which the
section shows as a small table of its own: one row per configuration, one column per shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import plotly.graph_objects as go

from workbench.compare.baselines import contender_label
from workbench.compare.replayed import replayed_source
from workbench.compare.storage import (
    ComparisonRecord,
    VariantRecord,
    load_comparisons,
    load_variants,
)
from workbench.compare.table import TUNED
from workbench.report.data import kernel_matches
from workbench.report.page import esc
from workbench.roofline import ShareAboveRoofError, checked_share
from workbench.spaces.model import SpaceSpec, Value
from workbench.store import Store


@dataclass(frozen=True)
class ContenderRow:
    """One contender on one shape, as the section's table shows it."""

    shape: str
    device: str | None
    contender: str  #: short name: ``tuned``, ``cuBLAS``
    title: str  #: what ran in full: the library call, or the tuned config
    status: str  #: ``ok``, ``skipped``, ``failed``, ``wrong``
    footnote: int | None  #: number of its reason in :attr:`Baselines.footnotes` (from 1)
    median_ms: float | None
    throughput: float | None
    unit: str | None
    share: float | None  #: of the roofline bound, at most 1 (None: not timed, or refused)
    bound: str | None  #: ``compute`` or ``memory``
    speedup: float | None  #: baseline time / tuned time (None on the tuned row)
    max_error: float | None
    config: Mapping[str, object] = field(default_factory=dict)  #: the tuned config compared
    replayed_from: str | None = None  #: the kept file it was read from (None: timed)


@dataclass(frozen=True)
class VariantRow:
    """One configuration of a baseline (a CUTLASS operator) on one shape."""

    shape: str
    device: str | None
    contender: str  #: short name: ``CUTLASS``
    label: str  #: the configuration: ``tile 128x256x64, cluster 2x1x1``
    status: str
    reason: str
    median_ms: float | None
    compile_s: float | None
    compile_note: str
    chosen: bool  #: the fastest correct one: the contender's row at this shape


@dataclass(frozen=True)
class Baselines:
    """The latest stored comparison of a kernel per (shape, device)."""

    rows: tuple[ContenderRow, ...] = ()
    variants: tuple[VariantRow, ...] = ()  #: of the baselines that timed several configs
    footnotes: tuple[str, ...] = ()  #: every distinct reason, once
    legend: tuple[tuple[str, str], ...] = ()  #: (contender, what ran: title and library)
    devices: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()  #: why shares of the roofline bound are not shown
    #: the kept files (device and name) the rows were replayed from; empty: all timed by
    #: ``workbench compare``
    replayed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rows)

    def headline(self, shape: str, device: str | None) -> str | None:
        """``speedup 0.84x vs cuBLAS, 1.34x vs cuBLASLt`` of the tuned config at ``shape`` on
        ``device``; None when no baseline was timed there."""
        ratios = [
            f"{r.speedup:.2f}x vs {r.contender}"
            for r in self.rows
            if r.shape == shape and r.device == device and r.speedup is not None
        ]
        return "speedup " + ", ".join(ratios) if ratios else None


def gather_baselines(store: Store, kernel: str) -> Baselines:
    """The latest ``workbench compare`` of ``kernel`` per (shape, device), as table rows.

    Raises:
        StoreError: the database failed.
    """
    rows = [r for r in load_comparisons(store) if kernel_matches(r.kernel, kernel)]
    latest: dict[tuple[str, str | None], str] = {}
    for r in rows:  # oldest first: the last batch seen wins
        latest[(r.shape_label, r.device)] = r.batch
    chosen = [r for r in rows if latest[(r.shape_label, r.device)] == r.batch]
    kept = set(latest.items())
    variants = [
        v
        for v in load_variants(store, sorted(set(latest.values())))
        if ((v.shape_label, v.device), v.batch) in kept
    ]
    return baselines_of(chosen, variants)


@dataclass(frozen=True)
class RetimedBest:
    """A study's best config as ``workbench compare`` timed it again at the study's shape on
    its GPU: a second median of the same config, from compare's own samples, beside the
    tune's."""

    shape: str
    device: str | None
    median_ms: float
    throughput: float | None
    unit: str | None
    replayed_from: str | None


def retimed_best(
    b: Baselines,
    shape: str,
    devices: Sequence[str],
    config: Mapping[str, object],
    spec: SpaceSpec | None = None,
) -> RetimedBest | None:
    """The tuned row of ``b`` at ``shape`` on one of ``devices`` that timed ``config`` (the
    study's best), or None when compare timed another config there, or none. With the kernel's
    ``spec``, a row timed before some of its parameters existed (a stored comparison that
    lacks them) holds their ``before:`` values, as replayed recordings and kept comparisons
    do (:meth:`SpaceSpec.with_before_values`)."""
    best = _with_before_values(config, spec)
    for r in b.rows:
        if (
            r.contender == TUNED
            and r.shape == shape
            and r.device in devices
            and r.median_ms is not None
            and _with_before_values(r.config, spec) == best
        ):
            return RetimedBest(
                r.shape, r.device, r.median_ms, r.throughput, r.unit, r.replayed_from
            )
    return None


def _with_before_values(
    config: Mapping[str, object], spec: SpaceSpec | None
) -> Mapping[str, object]:
    if spec is None:
        return dict(config)
    return spec.with_before_values(cast("Mapping[str, Value]", config))


def baselines_of(
    records: Iterable[ComparisonRecord], variants: Iterable[VariantRecord] = ()
) -> Baselines:
    """Table rows of stored comparison rows (and of their baselines' variants); a batch holding
    a share above 100 % (stored before roofs were raised to the fastest contender) has its
    shares refused, and said so."""
    records = list(records)
    refused_batches = {r.batch for r in records if not _share_ok(r)}
    footnotes: dict[str, int] = {}
    rows = []
    for r in records:
        note = None
        if r.reason and r.status != "ok":
            note = footnotes.setdefault(r.reason, len(footnotes) + 1)
        shown = r.batch not in refused_batches and r.bound_fraction is not None
        rows.append(
            ContenderRow(
                shape=r.shape_label,
                device=r.device,
                contender=contender_label(r.contender),
                title=r.title + (f" ({r.library})" if r.library else ""),
                status=r.status,
                footnote=note,
                median_ms=r.median_ms,
                throughput=r.throughput,
                unit=r.unit,
                share=r.bound_fraction if shown else None,
                bound=r.bound if shown else None,
                speedup=r.speedup,
                max_error=r.verify_max_error,
                config=dict(r.params),
                replayed_from=replayed_source(r.command),
            )
        )
    sources = {r.batch: replayed_source(r.command) for r in records}
    refused = tuple(
        f"% of roofline bound not shown for the comparison {_batch_name(b, sources[b])}: a "
        "share in it is above 100 % (a roof below a contender it measured, stored before roofs "
        "were raised to the fastest measured); workbench compare again stores shares under the "
        "fastest measured"
        for b in sorted(refused_batches)
    )
    return Baselines(
        rows=tuple(rows),
        variants=tuple(_variant_row(v) for v in variants),
        footnotes=tuple(footnotes),
        legend=_legend(records),
        devices=tuple(sorted({r.device for r in records if r.device})),
        refused=refused,
        replayed=tuple(sorted({s for r in records if (s := replayed_source(r.command))})),
    )


def _batch_name(batch: str, replayed_from: str | None) -> str:
    return f"read from {replayed_from}" if replayed_from else f"stored as batch {batch[:12]}"


def _variant_row(v: VariantRecord) -> VariantRow:
    return VariantRow(
        shape=v.shape_label,
        device=v.device,
        contender=contender_label(v.contender),
        label=v.label,
        status=v.status,
        reason=v.reason,
        median_ms=v.median_ms,
        compile_s=v.compile_s,
        compile_note=v.compile_note,
        chosen=v.chosen,
    )


def _share_ok(r: ComparisonRecord) -> bool:
    if r.bound_fraction is None:
        return True
    try:
        checked_share(r.bound_fraction, f"the stored share of {r.contender} at {r.shape_label}")
    except ShareAboveRoofError:
        return False
    return True


def _legend(records: list[ComparisonRecord]) -> tuple[tuple[str, str], ...]:
    """What each contender is, once: the library call and the versions that ran it; for the
    tuned config, where its config came from (the full config: in its row's tooltip)."""
    titles: dict[str, dict[str, None]] = {}
    versions: dict[str, dict[str, None]] = {}
    for r in records:
        name = contender_label(r.contender)
        title = r.config_origin.split(" |")[0] if r.contender == TUNED else r.title
        titles.setdefault(name, {})[title] = None
        if r.library:
            versions.setdefault(name, {})[r.library] = None
    out = []
    for name, texts in titles.items():
        text = "; ".join(texts)
        if name == TUNED:
            text = f"the config compare timed at each shape: {text}"
        if name in versions:
            text += f" ({'; '.join(versions[name])})"
        out.append((name, text))
    return tuple(out)


def draw_speedups(baselines: Baselines) -> go.Figure | None:
    """Speedup of the tuned config over each baseline, per shape (above 1: tuned is faster)."""
    timed = [r for r in baselines.rows if r.speedup is not None]
    if not timed:
        return None
    several = len(baselines.devices) > 1
    fig = go.Figure()
    for contender in dict.fromkeys(r.contender for r in timed):
        mine = [r for r in timed if r.contender == contender]
        fig.add_trace(
            go.Bar(
                name=esc(contender),
                x=[esc(f"{r.shape} ({r.device})" if several else r.shape) for r in mine],
                y=[r.speedup for r in mine],
                text=[f"{r.speedup:.2f}x" for r in mine],
                textposition="outside",
            )
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color="#555")
    fig.update_layout(
        barmode="group",
        title="speedup of the tuned config over each baseline (baseline time / tuned time)",
        yaxis_title="speedup",
        height=420,
    )
    return fig
