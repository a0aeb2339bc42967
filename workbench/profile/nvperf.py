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

The same evaluator gives a chip's peaks per unit and cycle (``.avg.peak_sustained``: NVIDIA's
hardware model, the figure ``ncu`` reports) with no GPU, evaluated on a counter-data image of
one empty range made on the host (:meth:`ChipCatalog.peaks_per_unit`): it checks, per chip, which
tensor peaks are the 2:4-sparse rate (:mod:`workbench.roofline.ceilings`).

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
from collections.abc import Sequence
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


class _BuilderCreate(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pChipName", C.c_char_p),
        ("pCounterAvailabilityImage", C.c_void_p),
        ("pCounterDataBuilder", C.c_void_p),
    )


class _BuilderPrefix(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pCounterDataBuilder", C.c_void_p),
        ("bytesAllocated", C.c_size_t),
        ("pBuffer", C.c_void_p),
        ("bytesCopied", C.c_size_t),
    )


class _ImageOptions(C.Structure):
    """The options of ``NVPW_CUDA_Profiler_CounterDataImage_*`` (CUPTI's
    ``CUpti_Profiler_CounterDataImageOptions`` without its size and private pointer, as the
    library reads them)."""

    _fields_ = (
        ("pCounterDataPrefix", C.c_void_p),
        ("counterDataPrefixSize", C.c_size_t),
        ("maxNumRanges", C.c_uint32),
        ("maxNumRangeTreeNodes", C.c_uint32),
        ("maxRangeNameLength", C.c_uint32),
    )


class _ImageSize(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("sizeofCounterDataImageOptions", C.c_size_t),
        ("pOptions", C.POINTER(_ImageOptions)),
        ("counterDataImageSize", C.c_size_t),
    )


class _ImageInit(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("sizeofCounterDataImageOptions", C.c_size_t),
        ("pOptions", C.POINTER(_ImageOptions)),
        ("counterDataImageSize", C.c_size_t),
        ("pCounterDataImage", C.c_void_p),
    )


class _CombinerCreate(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pCounterDataDst", C.c_void_p),
        ("pCounterDataCombiner", C.c_void_p),
    )


class _CreateRange(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pCounterDataCombiner", C.c_void_p),
        ("numDescriptions", C.c_size_t),
        ("ppDescriptions", C.POINTER(C.c_char_p)),
        ("rangeIndexDst", C.c_size_t),
    )


class _Destroy(C.Structure):
    """The parameters of every ``NVPW_*_Destroy`` taking one object."""

    _fields_ = (("structSize", C.c_size_t), ("pPriv", C.c_void_p), ("pObject", C.c_void_p))


class _DeviceAttributes(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pMetricsEvaluator", C.c_void_p),
        ("pCounterDataImage", C.c_void_p),
        ("counterDataImageSize", C.c_size_t),
    )


class _Evaluate(C.Structure):
    _fields_ = (
        ("structSize", C.c_size_t),
        ("pPriv", C.c_void_p),
        ("pMetricsEvaluator", C.c_void_p),
        ("pMetricEvalRequests", C.POINTER(_EvalRequest)),
        ("numMetricEvalRequests", C.c_size_t),
        ("metricEvalRequestStructSize", C.c_size_t),
        ("metricEvalRequestStrideSize", C.c_size_t),
        ("pCounterDataImage", C.c_void_p),
        ("counterDataImageSize", C.c_size_t),
        ("rangeIndex", C.c_size_t),
        ("isolated", C.c_uint8),
        ("pMetricValues", C.POINTER(C.c_double)),
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
        self._scratch, self._evaluator = _evaluator(lib, chip)  # the scratch outlives it

    def known(self, name: str) -> bool:
        """True when the chip has the full metric ``name`` (base, rollup and submetric)."""
        return _request(self._lib, self._evaluator, name) is not None

    def peaks_per_unit(self, bases: Sequence[str]) -> dict[str, float]:
        """``base.avg.peak_sustained`` of each base metric (``sm__ops_path_tensor_src_int8``):
        its peak per unit (an SM for ``sm__``) and cycle in NVIDIA's model of the chip, as
        ``ncu`` reports it, with no GPU.

        Raises:
            NvperfUnavailable: a name is unknown for the chip, or the library refused a step.
        """
        lib = self._lib
        scratch, evaluator = _evaluator(lib, self.chip)  # its own: device attributes are set
        try:
            return self._peaks(evaluator, bases)
        finally:
            _call(lib, "NVPW_MetricsEvaluator_Destroy", _Destroy, evaluator)
            del scratch  # the evaluator lived in it

    def _peaks(self, evaluator: int, bases: Sequence[str]) -> dict[str, float]:
        lib = self._lib
        requests = (_EvalRequest * len(bases))()
        for i, base in enumerate(bases):
            found = _request(lib, evaluator, f"{base}.avg.peak_sustained")
            if found is None:
                raise NvperfUnavailable(f"{self.chip} has no {base}.avg.peak_sustained")
            requests[i] = found
        image = _one_range_image(lib, self.chip)
        size = len(image)
        _call(
            lib,
            "NVPW_MetricsEvaluator_SetDeviceAttributes",
            _DeviceAttributes,
            evaluator,
            C.cast(image, C.c_void_p),
            size,
        )
        values = (C.c_double * len(bases))()
        _call(
            lib,
            "NVPW_MetricsEvaluator_EvaluateToGpuValues",
            _Evaluate,
            evaluator,
            requests,
            len(bases),
            _size(_EvalRequest),
            C.sizeof(_EvalRequest),
            C.cast(image, C.c_void_p),
            size,
            0,
            1,
            values,
        )
        return dict(zip(bases, values, strict=True))

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


def _call(lib: C.CDLL, function: str, params: type[C.Structure], *fields: object) -> C.Structure:
    """Call a Perfworks function with its parameter struct filled from ``fields`` (after the
    size and the private pointer); returns the struct (its outputs).

    Raises:
        NvperfUnavailable: the function returned an error status.
    """
    struct = params(_size(params), None, *fields)
    with _LOCK:
        status = getattr(lib, function)(C.byref(struct))
    if status != _OK:
        raise NvperfUnavailable(f"{function} failed with status {status}")
    return struct


def _evaluator(lib: C.CDLL, chip: str) -> tuple[C.Array, int]:
    """A metrics evaluator of a virtual device of ``chip`` and the scratch buffer it lives in
    (keep it as long as the evaluator)."""
    size = _call(
        lib, "NVPW_CUDA_MetricsEvaluator_CalculateScratchBufferSize", _ScratchSize, chip.encode()
    )
    scratch = (C.c_uint8 * size.scratchBufferSize)()
    init = _call(
        lib,
        "NVPW_CUDA_MetricsEvaluator_Initialize",
        _EvaluatorInit,
        C.cast(scratch, C.c_void_p),
        size.scratchBufferSize,
        chip.encode(),
    )
    if not init.pMetricsEvaluator:
        raise NvperfUnavailable(f"{chip}: metrics evaluator initialisation failed")
    return scratch, init.pMetricsEvaluator


def _request(lib: C.CDLL, evaluator: int, name: str) -> _EvalRequest | None:
    """The evaluation request of a full metric name, or None if the chip has no such metric."""
    request = _EvalRequest()
    params = _Convert(
        _size(_Convert), None, evaluator, name.encode(), C.pointer(request), _size(_EvalRequest)
    )
    with _LOCK:
        status = lib.NVPW_MetricsEvaluator_ConvertMetricNameToMetricEvalRequest(C.byref(params))
    return request if status == _OK else None


def _one_range_image(lib: C.CDLL, chip: str) -> C.Array:
    """A counter-data image of ``chip`` holding one range and no counter: what a peak needs."""
    builder = _call(lib, "NVPW_CUDA_CounterDataBuilder_Create", _BuilderCreate, chip.encode())
    handle = builder.pCounterDataBuilder
    try:
        asked = _call(lib, "NVPW_CounterDataBuilder_GetCounterDataPrefix", _BuilderPrefix, handle)
        prefix = (C.c_uint8 * asked.bytesCopied)()
        _call(
            lib,
            "NVPW_CounterDataBuilder_GetCounterDataPrefix",
            _BuilderPrefix,
            handle,
            asked.bytesCopied,
            C.cast(prefix, C.c_void_p),
        )
    finally:
        _call(lib, "NVPW_CounterDataBuilder_Destroy", _Destroy, handle)
    options = _ImageOptions(C.cast(prefix, C.c_void_p), len(prefix), 1, 1, 64)
    size = _call(
        lib,
        "NVPW_CUDA_Profiler_CounterDataImage_CalculateSize",
        _ImageSize,
        C.sizeof(options),
        C.pointer(options),
    ).counterDataImageSize
    image = (C.c_uint8 * size)()
    _call(
        lib,
        "NVPW_CUDA_Profiler_CounterDataImage_Initialize",
        _ImageInit,
        C.sizeof(options),
        C.pointer(options),
        size,
        C.cast(image, C.c_void_p),
    )
    combiner = _call(
        lib, "NVPW_CounterDataCombiner_Create", _CombinerCreate, C.cast(image, C.c_void_p)
    ).pCounterDataCombiner
    try:
        names = (C.c_char_p * 1)(b"peaks")
        _call(lib, "NVPW_CounterDataCombiner_CreateRange", _CreateRange, combiner, 1, names)
    finally:
        _call(lib, "NVPW_CounterDataCombiner_Destroy", _Destroy, combiner)
    return image


@functools.cache
def catalog(chip: str) -> ChipCatalog:
    """The (cached) catalog of ``chip``.

    Raises:
        NvperfUnavailable: the library cannot be loaded or does not know the chip.
    """
    return ChipCatalog(chip)
