"""Metric names checked offline against the target chip, through NVIDIA's Perfworks host library.

The ``ncu-report`` wheel ships ``libnvperf_host.so``, the library Nsight Compute itself uses to
turn metric names into counter requests. Its host API (``nvperf_host.h`` and
``nvperf_cuda_host.h`` of CUPTI) works with no driver and no GPU: ``NVPW_InitializeHost``, then
``NVPW_CUDA_MetricsEvaluator_Initialize`` with a chip name (``GA100``, ``GH100``) builds an
evaluator for a *virtual* device of that chip, and
``NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest`` accepts a full metric name
(base name, rollup and submetric: ``dram__bytes.sum.per_second``) exactly when the chip has it.
So a typo in a metric set, or a Hopper-only metric asked of an A100, fails here, on the CPU,
before any GPU is involved.

Nsight Compute adds metrics of its own that Perfworks does not know (``launch__*`` launch
statistics, ``device__attribute_*``, ``profiler__*``, the occupancy calculator's
``sm__maximum_warps_*``, PC-sampling ``smsp__pcsamp_*``). Those are checked against
:data:`NCU_SIDE_METRICS`, a curated list taken from the public reports in
``shared/datasets/ncu-reports`` (see their SOURCES.md). When the Perfworks library cannot be
loaded at all (no ``ncu-report`` wheel for this platform), :func:`catalog` raises
:class:`NvperfUnavailable` and callers fall back to the names declared in
:mod:`workbench.profile.metrics` (see :func:`workbench.profile.metrics.validate_names`).
"""

from __future__ import annotations

import ctypes as C
import difflib
import functools
import importlib.util
import threading
from pathlib import Path

from workbench.profile.errors import ProfileError

#: ``NVPW_MetricType``: counter, ratio, throughput (nvperf_host.h).
METRIC_TYPES = ("counter", "ratio", "throughput")
_OK = 0  #: NVPA_STATUS_SUCCESS

#: Prefixes of the metrics Nsight Compute computes itself (Perfworks does not know them).
NCU_SIDE_PREFIXES = (
    "launch__",
    "device__attribute_",
    "profiler__",
    "sm__maximum_warps",
    "smsp__maximum_warps",
    "smsp__pcsamp_",
    "numa__",
    "nvlink__",
    "c2clink__",
    "pmsampling:",
    "group:",
    "breakdown:",
    "derived__",
    "sass__",
)

#: Nsight Compute's own metrics this workbench reads, as they appear in the public reports
#: (Launch Statistics and Occupancy sections, device attributes, replay statistics).
NCU_SIDE_METRICS = frozenset(
    {
        *(
            f"launch__{n}"
            for n in [
                "block_dim_x",
                "block_dim_y",
                "block_dim_z",
                "block_size",
                "cluster_dim_x",
                "cluster_dim_y",
                "cluster_dim_z",
                "cluster_max_active",
                "cluster_max_potential_size",
                "cluster_size",
                "context_id",
                "device_id",
                "func_cache_config",
                "grid_dim_x",
                "grid_dim_y",
                "grid_dim_z",
                "grid_size",
                "occupancy_cluster_gpu_pct",
                "occupancy_cluster_pct",
                "occupancy_limit_blocks",
                "occupancy_limit_registers",
                "occupancy_limit_shared_mem",
                "occupancy_limit_warps",
                "occupancy_per_block_size",
                "occupancy_per_cluster_size",
                "occupancy_per_register_count",
                "occupancy_per_shared_mem_size",
                "registers_per_thread",
                "registers_per_thread_allocated",
                "shared_mem_config_size",
                "shared_mem_per_block",
                "shared_mem_per_block_allocated",
                "shared_mem_per_block_driver",
                "shared_mem_per_block_dynamic",
                "shared_mem_per_block_static",
                "sm_count",
                "stream_id",
                "thread_count",
                "uses_cdp",
                "uses_green_context",
                "uses_vgpu",
                "waves_per_multiprocessor",
            ]
        ),
        *(
            f"device__attribute_{n}"
            for n in [
                "architecture",
                "chip",
                "clock_rate",
                "compute_capability_major",
                "compute_capability_minor",
                "display_name",
                "fb_bus_width",
                "global_memory_bus_width",
                "l2_cache_size",
                "max_shared_memory_per_block",
                "max_shared_memory_per_block_optin",
                "max_shared_memory_per_multiprocessor",
                "max_registers_per_multiprocessor",
                "max_threads_per_multiprocessor",
                "memory_clock_rate",
                "multiprocessor_count",
            ]
        ),
        "profiler__replayer_passes",
        "sm__maximum_warps_avg_per_active_cycle",
        "sm__maximum_warps_per_active_cycle_pct",
        "smsp__maximum_warps_avg_per_active_cycle",
    }
)


class NvperfUnavailable(ProfileError):
    """The Perfworks host library cannot be loaded or initialised here."""


def is_ncu_side(name: str) -> bool:
    """True for a metric Nsight Compute computes itself (not a Perfworks counter)."""
    return name.startswith(NCU_SIDE_PREFIXES) or "__" not in name


class _Init(C.Structure):
    _fields_ = (("structSize", C.c_size_t), ("pPriv", C.c_void_p))


class _ChipNames(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("ppChipNames", C.POINTER(C.c_char_p)),
        ("numChipNames", C.c_size_t),
    )


class _ScratchSize(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pChipName", C.c_char_p),
        ("pCounterAvailabilityImage", C.c_void_p),
        ("scratchBufferSize", C.c_size_t),
    )


class _EvaluatorInit(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pScratchBuffer", C.c_void_p),
        ("scratchBufferSize", C.c_size_t),
        ("pChipName", C.c_char_p),
        ("pCounterAvailabilityImage", C.c_void_p),
        ("pCounterDataImage", C.c_void_p),
        ("counterDataImageSize", C.c_size_t),
        ("pMetricsEvaluator", C.c_void_p),
    )


class _MetricNames(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pMetricsEvaluator", C.c_void_p),
        ("metricType", C.c_uint8),
        ("pMetricNames", C.c_void_p),
        ("pMetricNameBeginIndices", C.POINTER(C.c_size_t)),
        ("numMetrics", C.c_size_t),
    )


class _EvalRequest(C.Structure):
    _fields_ = (
        ("metricIndex", C.c_size_t),
        ("metricType", C.c_uint8),
        ("rollupOp", C.c_uint8),
        ("submetric", C.c_uint16),
    )


class _Convert(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pMetricsEvaluator", C.c_void_p),
        ("pMetricName", C.c_char_p),
        ("pMetricEvalRequest", C.POINTER(_EvalRequest)),
        ("metricEvalRequestStructSize", C.c_size_t),
    )


def _size(struct: type[C.Structure]) -> int:
    """``NVPA_STRUCT_SIZE``: offset of the last field plus its size."""
    last = getattr(struct, struct._fields_[-1][0])
    return last.offset + last.size


def library_path() -> Path | None:
    """``libnvperf_host.so`` inside the installed ``ncu-report`` package, if any."""
    spec = importlib.util.find_spec("ncu_report")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "libnvperf_host.so"
        if path.is_file():
            return path
    return None


_LOCK = threading.Lock()


@functools.cache
def _library() -> C.CDLL:
    path = library_path()
    if path is None:
        raise NvperfUnavailable(
            "libnvperf_host.so not found: install the ncu-report wheel (pip install ncu-report)"
        )
    try:
        lib = C.CDLL(str(path))
    except OSError as exc:
        raise NvperfUnavailable(f"cannot load {path}: {exc}") from exc
    params = _Init(_size(_Init), None)
    status = lib.NVPW_InitializeHost(C.byref(params))
    if status != _OK:
        raise NvperfUnavailable(f"NVPW_InitializeHost failed with status {status} ({path})")
    return lib


@functools.cache
def supported_chips() -> tuple[str, ...]:
    """Every chip the Perfworks library knows (``TU102`` ... ``GH100`` ...).

    Raises:
        NvperfUnavailable: the library cannot be loaded.
    """
    lib = _library()
    params = _ChipNames(_size(_ChipNames), None)
    with _LOCK:
        status = lib.NVPW_GetSupportedChipNames(C.byref(params))
    if status != _OK:
        raise NvperfUnavailable(f"NVPW_GetSupportedChipNames failed with status {status}")
    return tuple(params.ppChipNames[i].decode() for i in range(params.numChipNames))


class ChipCatalog:
    """The metrics of one chip, from a Perfworks evaluator of a virtual device of that chip.

    Args:
        chip: a name from :func:`supported_chips` (``GA100``, ``GH100``).

    Raises:
        NvperfUnavailable: the library cannot be loaded or does not know the chip.
    """

    def __init__(self, chip: str) -> None:
        lib = _library()
        if chip not in supported_chips():
            raise NvperfUnavailable(
                f"the Perfworks library does not know chip {chip!r}; it knows "
                f"{', '.join(supported_chips())}"
            )
        self.chip = chip
        self._lib = lib
        size = _ScratchSize(_size(_ScratchSize), None, chip.encode())
        with _LOCK:
            status = lib.NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize(C.byref(size))
        if status != _OK:
            raise NvperfUnavailable(f"{chip}: scratch buffer size query failed ({status})")
        self._scratch = (C.c_uint8 * size.scratchBufferSize)()  # lives as long as the evaluator
        init = _EvaluatorInit(
            _size(_EvaluatorInit),
            None,
            C.cast(self._scratch, C.c_void_p),
            size.scratchBufferSize,
            chip.encode(),
        )
        with _LOCK:
            status = lib.NVPW_CUDA_MetricsEvaluator_Initialize(C.byref(init))
        if status != _OK or not init.pMetricsEvaluator:
            raise NvperfUnavailable(f"{chip}: metrics evaluator initialisation failed ({status})")
        self._evaluator = init.pMetricsEvaluator

    def known(self, name: str) -> bool:
        """True when the chip has the full metric ``name`` (base, rollup and submetric)."""
        request = _EvalRequest()
        params = _Convert(
            _size(_Convert),
            None,
            self._evaluator,
            name.encode(),
            C.pointer(request),
            _size(_EvalRequest),
        )
        with _LOCK:
            status = self._lib.NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest(
                C.byref(params)
            )
        return status == _OK

    @functools.cached_property
    def base_metrics(self) -> dict[str, str]:
        """Every base metric name of the chip (``dram__bytes``) and its type (``counter``)."""
        out: dict[str, str] = {}
        for index, kind in enumerate(METRIC_TYPES):
            params = _MetricNames(_size(_MetricNames), None, self._evaluator, index)
            with _LOCK:
                status = self._lib.NVPW_MetricsEvaluator_GetMetricNames(C.byref(params))
            if status != _OK:
                raise NvperfUnavailable(f"{self.chip}: metric listing failed ({status})")
            for i in range(params.numMetrics):
                address = params.pMetricNames + params.pMetricNameBeginIndices[i]
                out[C.string_at(address).decode()] = kind
        return out

    def suggestions(self, name: str, limit: int = 3) -> list[str]:
        """Known names close to ``name`` (for an error message)."""
        base, _, suffix = name.partition(".")
        kind = self.base_metrics.get(base)
        if kind is not None:  # the base is right, the rollup or submetric is not
            forms = {
                "counter": (".sum", ".sum.per_second", ".avg.peak_sustained"),
                "ratio": (".ratio", ".pct", ".max_rate"),
                "throughput": (".avg.pct_of_peak_sustained_elapsed",),
            }[kind]
            return [base + f for f in forms if self.known(base + f)][:limit]
        close = difflib.get_close_matches(base, list(self.base_metrics), n=limit, cutoff=0.75)
        return [c + ("." + suffix if suffix else "") for c in close]


@functools.cache
def catalog(chip: str) -> ChipCatalog:
    """The (cached) catalog of ``chip``.

    Raises:
        NvperfUnavailable: the library cannot be loaded or does not know the chip.
    """
    return ChipCatalog(chip)
