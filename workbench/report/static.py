"""Static pages: what the compiler says about a kernel nobody has run.

When the store holds no study and no profile of a library kernel, the report does what
``workbench tune K`` does on a machine without a GPU: it compiles the space's default config
and a seeded sample for the newest declared arch (a compile-cache lookup when that already ran)
and shows resources, occupancy, lints and the SASS opcode histogram. Nothing here is timed,
and the page says so on its first screen.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from workbench.compiler import CompileCache
from workbench.devices import device_for
from workbench.report.page import esc
from workbench.search.configs import select_configs
from workbench.spaces import Space
from workbench.spaces.model import SpaceSpec
from workbench.static.sweep import StaticRecord, static_sweep
from workbench.toolchain import Arch

#: Same as ``workbench tune K`` without a GPU: the default and 8 sampled configs, seed 0.
SAMPLE = 8
SEED = 0
#: Opcodes shown in the histogram (the most frequent across the compiled configs).
TOP_OPCODES = 24


@dataclass(frozen=True)
class StaticData:
    kernel: str
    arch: str
    device: str
    records: tuple[StaticRecord, ...]

    @property
    def cached(self) -> int:
        return sum(1 for r in self.records if r.cached)


def gather_static(
    spec: SpaceSpec, cache: CompileCache | None = None, workers: int | None = None
) -> StaticData:
    """Compile (or look up) the default and a sample of ``spec`` for its newest arch.

    Raises:
        ConfigError: the default config is invalid and nothing could be sampled.
        ToolchainError: the compiler is missing.
    """
    arch = Arch.parse(spec.arches[-1])
    space = Space(spec, arch=arch, device=device_for(arch))
    configs = select_configs(space, sample=SAMPLE, seed=SEED)
    records = static_sweep(space, configs, cache=cache or CompileCache(), workers=workers)
    return StaticData(spec.name, arch.sm, space.device.name, tuple(records))


RESOURCE_HEADER = (
    "#",
    "config",
    "ok",
    "registers",
    "static smem (B)",
    "dynamic smem (B)",
    "stack (B)",
    "spill st/ld (B)",
    "threads/block",
    "occupancy",
    "limited by",
    "SASS instructions",
    "global memory ops",
    "lints",
)


def resource_rows(records: tuple[StaticRecord, ...]) -> list[list[object]]:
    rows: list[list[object]] = []
    for i, r in enumerate(records, 1):
        rows.append(
            [
                f"#{i}",
                r.label,
                "yes" if r.ok else f"no: {r.error or 'failed'}",
                r.registers,
                r.static_smem,
                r.dynamic_smem,
                r.stack_frame,
                None if r.spill_stores is None else f"{r.spill_stores}/{r.spill_loads}",
                r.threads_per_block,
                None if r.occupancy is None else f"{r.occupancy:.0%}",
                r.limiting_factor,
                r.sass_instructions,
                " ".join(r.global_memory_ops) or None,
                "; ".join(x.text for x in r.lints) or None,
            ]
        )
    return rows


def draw_opcodes(data: StaticData) -> go.Figure | None:
    """SASS opcode counts per compiled config (rows ``#n`` as in the table), the most frequent
    opcodes overall as columns."""
    ok = [(i, r) for i, r in enumerate(data.records, 1) if r.ok and r.opcodes]
    if not ok:
        return None
    totals: dict[str, int] = {}
    for _, r in ok:
        for op, n in r.opcodes.items():
            totals[op] = totals.get(op, 0) + n
    top = sorted(totals, key=lambda op: -totals[op])[:TOP_OPCODES]
    fig = go.Figure(
        go.Heatmap(
            z=[[r.opcodes.get(op, 0) for op in top] for _, r in ok],
            x=top,
            y=[f"#{i}" for i, _ in ok],
            text=[[esc(r.label)] * len(top) for _, r in ok],
            hovertemplate="%{y} %{x}: %{z}<br>%{text}<extra></extra>",
            colorscale="Blues",
            colorbar={"title": "count"},
        )
    )
    fig.update_layout(
        title=f"SASS opcode histogram ({data.arch}; static count in the binary, NOP excluded)",
        yaxis={"autorange": "reversed", "title": "config (table row)"},
        height=160 + 28 * len(ok),
    )
    return fig


def draw_static_resources(data: StaticData) -> go.Figure | None:
    ok = [(i, r) for i, r in enumerate(data.records, 1) if r.ok]
    if not ok:
        return None
    labels = [f"#{i}" for i, _ in ok]
    hover = [esc(r.label) for _, r in ok]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            name="registers per thread", x=labels, y=[r.registers for _, r in ok], hovertext=hover
        )
    )
    fig.add_trace(
        go.Bar(
            name="theoretical occupancy (%)",
            x=labels,
            y=[None if r.occupancy is None else 100 * r.occupancy for _, r in ok],
            hovertext=hover,
        )
    )
    fig.update_layout(
        barmode="group",
        title="registers and theoretical occupancy per config",
        height=380,
        xaxis_title="config (table row)",
    )
    return fig
