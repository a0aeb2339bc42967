"""Warp divergence, stall reasons and memory access per profiled variant, from the figures
:mod:`workbench.profile.derive` computes out of stored Nsight Compute metrics.

A figure the profile lacks the metrics for is left out of the chart (never drawn as zero) and
the missing metric names are listed under it. Launches are named on the charts' axes by the
parameters that differ between them; :func:`shared_caption` says the rest once.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.compare.replayed import replayed_source
from workbench.profile.derive import WARP_SIZE, Divergence, MemoryAccess, divergence, memory_access
from workbench.profile.storage import ProfileRecord
from workbench.profile.summary import summarize
from workbench.report.labels import short_labels
from workbench.report.page import esc
from workbench.report.roofline import device_ceilings
from workbench.roofline import Ceilings

#: Stall reasons shown per variant (the largest ones; the rest are summed as "other").
TOP_STALLS = 8


@dataclass(frozen=True)
class DramShare:
    """Achieved DRAM bandwidth of a launch as a share of the DRAM roof, and which roof."""

    fraction: float
    bytes_per_s: float
    roof: str  #: the ceiling's label (value and source: measured, ncu, datasheet)


@dataclass(frozen=True)
class LaunchCounters:
    """One profiled launch and its derived counter figures."""

    label: str
    divergence: Divergence
    memory: MemoryAccess
    dram: DramShare | None = None
    short: str = ""  #: what sets it apart from the other variants drawn (the charts' axis)

    @property
    def axis(self) -> str:
        return self.short or self.label


def variant_label(p: ProfileRecord) -> str:
    """The config when the profile has one, else the launch's short name and position (short
    names repeat: every CUTLASS kernel is ``Kernel``)."""
    what = p.config_key or f"{p.function_name or p.kernel} #{p.report_index}"
    return f"{what} [{p.device or 'unknown GPU'}]"


def gather_variants(
    profiles: list[ProfileRecord], measured: Ceilings | None = None
) -> list[LaunchCounters]:
    """Counter figures of every profile that has hardware counters (not event timing); the
    DRAM share against the most trusted DRAM roof (``measured``, the profile's own peak, then
    the GPU's datasheet)."""
    counted = [p for p in profiles if p.source != "event-timing"]
    return [
        LaunchCounters(
            variant_label(p),
            divergence(p.metrics),
            memory_access(p.metrics),
            _dram(p, measured),
            short,
        )
        for p, short in zip(counted, _short(counted), strict=True)
    ]


def _short(profiles: list[ProfileRecord]) -> list[str]:
    """Per profile: the parameters that set its config apart (the kernel where kernels differ,
    the GPU where GPUs differ), each label once on an axis."""
    configs = short_labels([p.config_key for p in profiles]).labels
    several_kernels = len({p.kernel for p in profiles}) > 1
    several_gpus = len({p.device for p in profiles}) > 1
    seen: dict[str, int] = {}
    out = []
    for p, text in zip(profiles, configs, strict=True):
        if not p.config_key:
            text = f"{p.function_name or p.kernel} #{p.report_index}"
        elif several_kernels or not text:
            text = f"{p.kernel}: {text}" if text else p.kernel
        if several_gpus:
            text += f" [{p.device or 'unknown GPU'}]"
        seen[text] = seen.get(text, 0) + 1
        out.append(text if seen[text] == 1 else f"{text} ({seen[text]})")
    return out


def shared_caption(profiles: list[ProfileRecord]) -> str | None:
    """``Every launch drawn: gemm_int8 on NVIDIA H200, PATH=wgmma, BM=128, ...``: what the
    charts' short labels leave out; None without a launch."""
    counted = [p for p in profiles if p.source != "event-timing"]
    if not counted:
        return None
    kernels = sorted({p.kernel for p in counted})
    gpus = sorted({p.device or "unknown GPU" for p in counted})
    parts = [" or ".join(kernels) + (f" on {gpus[0]}" if len(gpus) == 1 else "")]
    shared = short_labels([p.config_key for p in counted]).shared_text
    return f"Every launch drawn: {', '.join(parts + ([shared] if shared else []))}."


def replayed_sources(profiles: list[ProfileRecord]) -> list[str]:
    """The kept reports (device and file) that replayed profiles were read from, once each."""
    return list(dict.fromkeys(s for p in profiles if (s := replayed_source(p.command))))


def replayed_note(profiles: list[ProfileRecord]) -> str | None:
    """A sentence naming the kept reports replayed profiles were read from; None for none."""
    sources = replayed_sources(profiles)
    if not sources:
        return None
    return (
        "Replayed, not measured here: Nsight Compute counted these on the GPU named and they "
        f"were read from {'; '.join(sources)}, kept with the recordings of the same run."
    )


def _dram(p: ProfileRecord, measured: Ceilings | None) -> DramShare | None:
    ceilings, _ = device_ceilings(p.device, measured)  # the datasheet's when nothing better
    summary = summarize(p, ceilings)
    fraction = summary.bandwidth_fraction.get("dram")
    roof = next((c for c in summary.ceilings if c.name == "dram"), None)
    if fraction is None or roof is None:
        return None
    return DramShare(fraction, summary.achieved.bytes_per_s["dram"], roof.legend)


def has_divergence(v: LaunchCounters) -> bool:
    d = v.divergence
    return d.threads_per_inst is not None or d.branch_uniform_pct is not None


def has_memory(v: LaunchCounters) -> bool:
    m = v.memory
    return any(
        x is not None
        for x in (
            m.loads.sectors_per_request,
            m.stores.sectors_per_request,
            m.l1_hit_rate_pct,
            m.l2_hit_rate_pct,
        )
    )


def _bars(
    fig: go.Figure,
    name: str,
    labels: list[str],
    values: list[float | None],
    text: str | None = None,
) -> None:
    """One bar per variant with a value; ``text``: a plotly texttemplate written on each bar."""
    keep = [(lab, v) for lab, v in zip(labels, values, strict=True) if v is not None]
    if keep:
        bar = go.Bar(name=name, x=[k for k, _ in keep], y=[v for _, v in keep])
        if text:
            bar.update(texttemplate=text, textposition="outside")
        fig.add_trace(bar)


def draw_divergence(variants: list[LaunchCounters]) -> go.Figure:
    """Active and predicated-on threads per warp instruction (of 32), per variant."""
    labels = [esc(v.axis) for v in variants]
    fig = go.Figure()
    _bars(
        fig,
        "active threads / warp instruction",
        labels,
        [v.divergence.threads_per_inst for v in variants],
        "%{y:.1f}",
    )
    _bars(
        fig,
        "predicated-on threads / warp instruction",
        labels,
        [v.divergence.pred_on_threads_per_inst for v in variants],
    )
    fig.add_hline(
        y=24,
        line_dash="dash",
        line_color="firebrick",
        annotation_text="24 of 32: NVIDIA's divergence rule",
    )
    fig.update_layout(
        barmode="group",
        title="warp divergence: threads doing work per instruction",
        yaxis={"title": "threads (of 32)", "range": [0, WARP_SIZE + 2]},
        height=440,
    )
    return fig


def draw_uniformity(variants: list[LaunchCounters]) -> go.Figure:
    labels = [esc(v.axis) for v in variants]
    fig = go.Figure()
    _bars(
        fig,
        "uniform branch targets (%)",
        labels,
        [v.divergence.branch_uniform_pct for v in variants],
    )
    fig.update_layout(
        title="branch uniformity (share of branch targets taken by the whole warp)",
        yaxis={"title": "%", "range": [0, 105]},
        height=380,
    )
    return fig


def draw_stalls(variants: list[LaunchCounters]) -> go.Figure:
    """Warps stalled per issued instruction by reason, stacked per variant."""
    totals: dict[str, float] = {}
    for v in variants:
        for reason, value in v.divergence.stalls:
            totals[reason] = totals.get(reason, 0.0) + value
    top = sorted(totals, key=lambda r: -totals[r])[:TOP_STALLS]
    labels = [esc(v.axis) for v in variants]
    fig = go.Figure()
    for reason in top:
        values = [dict(v.divergence.stalls).get(reason) for v in variants]
        _bars(fig, esc(reason), labels, values)
    others: list[float | None] = [
        sum(x for r, x in v.divergence.stalls if r not in top) for v in variants
    ]
    if any(others):
        _bars(fig, "other", labels, others)
    fig.update_layout(
        barmode="stack",
        title="warp stall reasons (warps stalled per issued instruction)",
        yaxis_title="cycles per issue",
        height=460,
    )
    return fig


def draw_dram_share(variants: list[LaunchCounters]) -> go.Figure:
    """Achieved DRAM bandwidth as a share of the DRAM roof, per variant (labelled in %)."""
    shares = [v.dram for v in variants if v.dram is not None]
    roofs = sorted({d.roof for d in shares})
    fig = go.Figure(
        go.Bar(
            x=[esc(v.axis) for v in variants if v.dram is not None],
            y=[100 * d.fraction for d in shares],
            text=[f"{d.fraction:.0%} ({d.bytes_per_s / 1e12:.2f} TB/s)" for d in shares],
            textposition="outside",
            name="DRAM bandwidth (% of roof)",
        )
    )
    fig.update_layout(
        title="DRAM bandwidth achieved, % of the DRAM roof"
        + "".join(f"<br><sup>{esc(r)}</sup>" for r in roofs),
        yaxis={"title": "% of DRAM roof", "range": [0, 115]},
        height=400,
    )
    return fig


def draw_memory(variants: list[LaunchCounters]) -> go.Figure:
    """Sectors per request (loads, stores) and bytes used per sector."""
    labels = [esc(v.axis) for v in variants]
    fig = go.Figure()
    _bars(
        fig,
        "global load sectors / request",
        labels,
        [v.memory.loads.sectors_per_request for v in variants],
    )
    _bars(
        fig,
        "global store sectors / request",
        labels,
        [v.memory.stores.sectors_per_request for v in variants],
    )
    _bars(
        fig,
        "load bytes used / 32-byte sector",
        labels,
        [v.memory.loads.bytes_per_sector for v in variants],
    )
    fig.update_layout(
        barmode="group",
        title="global memory access (4 sectors per request and "
        "32 bytes per sector: coalesced 4-byte loads)",
        height=420,
    )
    return fig


def draw_hit_rates(variants: list[LaunchCounters]) -> go.Figure:
    labels = [esc(v.axis) for v in variants]
    fig = go.Figure()
    _bars(fig, "L1 hit rate (%)", labels, [v.memory.l1_hit_rate_pct for v in variants])
    _bars(fig, "L2 hit rate (%)", labels, [v.memory.l2_hit_rate_pct for v in variants])
    fig.update_layout(
        barmode="group",
        title="cache hit rates",
        yaxis={"title": "%", "range": [0, 105]},
        height=380,
    )
    return fig


def missing_lines(variants: list[LaunchCounters]) -> list[str]:
    """One line per variant that lacks metrics for a figure above."""
    out = []
    for v in variants:
        if v.divergence.missing:
            out.append(f"{v.axis}: no {', '.join(v.divergence.missing)}")
    return out
