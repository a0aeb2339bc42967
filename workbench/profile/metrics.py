"""The metric sets ``workbench profile --set`` collects, and their check against the chip.

Each set lists full Nsight Compute metric names (base, rollup, submetric). The formulas that
use them live in :mod:`workbench.roofline` (roofline) and :mod:`workbench.profile.derive`
(divergence, memory access, occupancy). Every set also carries the occupancy and launch
metrics. A metric marked ``optional`` exists on some chips only (FP8 tensor paths on Hopper,
the per-dtype tensor paths on Ampere): on a chip without it, it is skipped and the skip is
reported; every other name must exist on the chip, or :func:`resolve` refuses the set before a
GPU is involved (see :mod:`workbench.profile.nvperf`).

Names that Nsight Compute computes itself (``launch__*``, ``sm__maximum_warps_*``) are not
passed to ``--metrics``: the default ``basic`` sections (Launch Statistics, Occupancy, Speed
of Light) always collect them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.profile.errors import MetricNameError
from workbench.profile.nvperf import NCU_SIDE_METRICS, NvperfUnavailable, catalog, is_ncu_side
from workbench.roofline import SPARSE_COUNTERS


class MetricSet(enum.Enum):
    """What ``--set`` collects."""

    ROOFLINE = "roofline"
    DIVERGENCE = "divergence"
    MEMORY = "memory"
    OCCUPANCY = "occupancy"
    FULL = "full"


@dataclass(frozen=True)
class Metric:
    """One metric of a set; ``optional`` ones exist only on some chips."""

    name: str
    optional: bool = False


def _m(*names: str, optional: bool = False) -> tuple[Metric, ...]:
    return tuple(Metric(n, optional) for n in names)


def _ops(
    prefix: str, ops: Sequence[str], suffix: str, optional: bool = False
) -> tuple[Metric, ...]:
    return _m(*(f"{prefix}{op}{suffix}" for op in ops), optional=optional)


_THREAD_OPS = "smsp__sass_thread_inst_executed_op_"
_PEAK_OPS = "sm__sass_thread_inst_executed_op_"
#: Tensor-core operations per source type: ``sm__ops_path_tensor_src_<type>``.
TENSOR_PATHS = (
    "int8",
    "fp8",
    "fp16",
    "fp16_dst_fp16",
    "fp16_dst_fp32",
    "bf16_dst_fp32",
    "tf32_dst_fp32",
)
#: Warp stall reasons (Warp State Statistics), as ``smsp__average_warps_issue_stalled_*``.
STALL_REASONS = (
    "barrier",
    "branch_resolving",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "lg_throttle",
    "long_scoreboard",
    "math_pipe_throttle",
    "membar",
    "mio_throttle",
    "misc",
    "no_instruction",
    "not_selected",
    "selected",
    "short_scoreboard",
    "sleeping",
    "tex_throttle",
    "wait",
)

OCCUPANCY_METRICS = (
    *_m(
        "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy
        "sm__warps_active.avg.per_cycle_active",
        "sm__maximum_warps_per_active_cycle_pct",  # theoretical occupancy
        "sm__maximum_warps_avg_per_active_cycle",
        "launch__registers_per_thread",
        "launch__block_size",
        "launch__grid_size",
        "launch__thread_count",
        "launch__shared_mem_per_block_static",
        "launch__shared_mem_per_block_dynamic",
        "launch__occupancy_limit_blocks",
        "launch__occupancy_limit_registers",
        "launch__occupancy_limit_shared_mem",
        "launch__occupancy_limit_warps",
        "launch__waves_per_multiprocessor",
        "launch__sm_count",
        "gpu__time_duration.sum",
    ),
)

ROOFLINE_METRICS = (
    *_m(
        "sm__cycles_elapsed.avg.per_second",
        "smsp__cycles_elapsed.avg.per_second",
        "dram__cycles_elapsed.avg.per_second",
        "lts__cycles_elapsed.avg.per_second",
        "l1tex__cycles_elapsed.avg.per_second",
        "dram__bytes.sum",
        "dram__bytes.sum.per_second",
        "dram__bytes.sum.peak_sustained",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "lts__t_bytes.sum",
        "lts__t_bytes.sum.per_second",
        "lts__t_bytes.sum.peak_sustained",
        "l1tex__t_bytes.sum",
        "l1tex__t_bytes.sum.per_second",
        "l1tex__t_bytes.sum.peak_sustained",
    ),
    *_ops(_THREAD_OPS, ("fadd", "fmul", "ffma"), "_pred_on.sum.per_cycle_elapsed"),
    *_ops(_THREAD_OPS, ("dadd", "dmul", "dfma"), "_pred_on.sum.per_cycle_elapsed"),
    *_ops(_THREAD_OPS, ("hadd", "hmul", "hfma"), "_pred_on.sum.per_cycle_elapsed"),
    *_ops(_PEAK_OPS, ("ffma", "dfma", "hfma"), "_pred_on.sum.peak_sustained"),
    *_ops("sm__ops_path_tensor_src_", TENSOR_PATHS, ".sum.per_cycle_elapsed", optional=True),
    *_ops("sm__ops_path_tensor_src_", TENSOR_PATHS, ".sum.peak_sustained", optional=True),
    # the dense peak where the chip names one (the path's own peak is the 2:4-sparse rate;
    # Hopper's fp16 path has no sparsity-off twin)
    *_ops(
        "sm__ops_path_tensor_src_",
        [f"{p}_sparsity_off" for p in TENSOR_PATHS if p != "fp16"],
        ".sum.peak_sustained",
        optional=True,
    ),
    # 2:4-sparse MMA work: a launch with any is placed under the sparse roof
    *_m(*(n for names in SPARSE_COUNTERS.values() for n in names), optional=True),
    *_ops(
        "sm__inst_executed_pipe_tensor_op_",
        ("hmma", "imma", "gmma"),
        ".avg.pct_of_peak_sustained_active",
        optional=True,
    ),
    *_m("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"),
)

DIVERGENCE_METRICS = (
    *_m(
        "smsp__thread_inst_executed_per_inst_executed.ratio",
        "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",
        "smsp__sass_average_branch_targets_threads_uniform.pct",
        "smsp__inst_executed.sum",
        "smsp__thread_inst_executed.sum",
        "smsp__thread_inst_executed_pred_on.sum",
        "smsp__sass_branch_targets.sum",
        "smsp__sass_branch_targets_threads_divergent.sum",
        "smsp__sass_branch_targets_threads_uniform.sum",
    ),
    *_ops("smsp__average_warps_issue_stalled_", STALL_REASONS, "_per_issue_active.ratio"),
)

MEMORY_METRICS = (
    *(
        m
        for op in ("ld", "st")
        for m in _m(
            f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum",
            f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum",
            f"l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_{op}.ratio",
            f"smsp__sass_average_data_bytes_per_sector_mem_global_op_{op}.ratio",
            f"smsp__sass_inst_executed_op_global_{op}.sum",
            f"smsp__sass_inst_executed_op_shared_{op}.sum",
            f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum",
            f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{op}.sum",
            f"l1tex__t_sector_pipe_lsu_mem_global_op_{op}_hit_rate.pct",
        )
    ),
    *_m(
        "l1tex__t_sector_hit_rate.pct",
        "lts__t_sector_hit_rate.pct",
        "lts__t_sectors.sum",
        "lts__t_sectors_srcunit_tex_op_read.sum",
        "lts__t_sectors_srcunit_tex_op_write.sum",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
    ),
)

_SETS: dict[MetricSet, tuple[Metric, ...]] = {
    MetricSet.OCCUPANCY: OCCUPANCY_METRICS,
    MetricSet.ROOFLINE: ROOFLINE_METRICS + OCCUPANCY_METRICS,
    MetricSet.DIVERGENCE: DIVERGENCE_METRICS + OCCUPANCY_METRICS,
    MetricSet.MEMORY: MEMORY_METRICS + OCCUPANCY_METRICS,
}
_SETS[MetricSet.FULL] = ROOFLINE_METRICS + DIVERGENCE_METRICS + MEMORY_METRICS + OCCUPANCY_METRICS


def metrics_of(metric_set: MetricSet) -> tuple[Metric, ...]:
    """The metrics of a set, each once, in declaration order."""
    seen: dict[str, Metric] = {}
    for m in _SETS[metric_set]:
        seen.setdefault(m.name, m)
    return tuple(seen.values())


def declared_names() -> frozenset[str]:
    """Every metric name any set declares (the offline fallback list)."""
    return frozenset(m.name for m in metrics_of(MetricSet.FULL))


@dataclass(frozen=True)
class ResolvedSet:
    """A metric set checked against one chip.

    Attributes:
        chip: the chip (``GH100``).
        metric_set: the set.
        collect: Perfworks names to pass to ``ncu --metrics``.
        expected: every name the profile should hold (``collect`` plus Nsight Compute's own).
        skipped: optional names this chip lacks (not collected, reported as such).
        checked_by: what the names were checked against.
    """

    chip: str
    metric_set: MetricSet
    collect: tuple[str, ...]
    expected: tuple[str, ...]
    skipped: tuple[str, ...]
    checked_by: str


def validate_names(names: Iterable[str], chip: str) -> str:
    """Refuse any name ``chip`` does not have; returns what the names were checked against.

    Perfworks names go to the chip's Perfworks catalog; Nsight Compute's own names to
    :data:`~workbench.profile.nvperf.NCU_SIDE_METRICS`. Without the Perfworks library, the
    Perfworks names are checked against the names this module declares (a curated list).

    Raises:
        MetricNameError: one or more names are unknown, each with the closest known names.
    """
    names = list(dict.fromkeys(names))
    unknown: dict[str, list[str]] = {}
    try:
        chip_catalog = catalog(chip)
        source = f"the Perfworks metric list of {chip} (libnvperf_host)"
    except NvperfUnavailable as exc:
        chip_catalog = None
        source = f"the declared metric sets (Perfworks unavailable: {exc})"
    import difflib

    for name in names:
        if is_ncu_side(name):
            if name not in NCU_SIDE_METRICS:
                unknown[name] = difflib.get_close_matches(name, NCU_SIDE_METRICS, n=3)
        elif chip_catalog is not None:
            if not chip_catalog.known(name):
                unknown[name] = chip_catalog.suggestions(name)
        elif name not in declared_names():
            unknown[name] = difflib.get_close_matches(name, declared_names(), n=3)
    if unknown:
        raise MetricNameError(chip, unknown, source)
    return source


def resolve(metric_set: MetricSet, chip: str, extra: Sequence[str] = ()) -> ResolvedSet:
    """Check a set (plus ``extra`` names, never optional) against ``chip``.

    Raises:
        MetricNameError: a required name, or one of ``extra``, is unknown for the chip.
    """
    metrics = metrics_of(metric_set)
    skipped: list[str] = []
    try:
        chip_catalog = catalog(chip)
    except NvperfUnavailable:
        chip_catalog = None
    required = []
    for m in metrics:
        if m.optional and chip_catalog is not None and not chip_catalog.known(m.name):
            skipped.append(m.name)
        else:
            required.append(m.name)
    wanted = list(dict.fromkeys([*required, *extra]))
    source = validate_names(wanted, chip)
    return ResolvedSet(
        chip=chip,
        metric_set=metric_set,
        collect=tuple(n for n in wanted if not is_ncu_side(n)),
        expected=tuple(wanted),
        skipped=tuple(skipped),
        checked_by=source,
    )


def missing_by_set(present: Iterable[str]) -> dict[str, list[str]]:
    """For each set, the declared names absent from ``present`` (optional ones left out)."""
    have = set(present)
    return {
        s.value: [m.name for m in metrics_of(s) if not m.optional and m.name not in have]
        for s in MetricSet
    }
