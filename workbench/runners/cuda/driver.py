"""Checked CUDA Driver API calls (``cuda.bindings.driver``, cuda-bindings 13) for the worker.

Every binding returns ``(CUresult, *values)``; :func:`call` checks the result and raises
:class:`CudaError`, which names the CUresult, its description and the call. Errors that leave
the context unusable (an illegal address, a kernel that trapped) are *sticky*: the worker
reports them and exits, and the parent starts a fresh one. Only the worker process imports
this module's :class:`Gpu`; nothing here runs without a driver.

Why not cuda.core (NVIDIA's higher layer): its launch packs arguments itself and refuses a
struct by value (cuda.core 1.2.2's ParamHolder raises TypeError for a ctypes Structure, a NumPy
void scalar or a byte array), while the TMA GEMMs take 128-byte ``CUtensorMap`` parameters and
every kernel here gets the bytes :func:`workbench.runners.buffers.pack_arguments` lays out (the
compile checks ``args`` against the cubin's parameter sizes); so launches, and the module,
event and memory calls around them, stay on ``cuda.bindings.driver`` in one place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from workbench.errors import WorkbenchError
from workbench.runners.buffers import ArgPack, Fill
from workbench.runners.tensor_maps import (
    TENSOR_MAP_BYTES,
    TensorMapValue,
    check_global_address,
)
from workbench.spaces.launch import Launch
from workbench.spaces.schema import DType

#: Dynamic shared memory a kernel may use without opting in (cuFuncSetAttribute).
#: Largest cluster that needs no NON_PORTABLE_CLUSTER_SIZE_ALLOWED opt-in.
MAX_PORTABLE_CLUSTER = 8
#: The L2 flush writes this many times the L2 size (nvbench writes the L2 size; twice leaves no
#: doubt on GPUs whose reported size rounds down, like the H200's 60 MB).
L2_FLUSH_FACTOR = 2

R = cu.CUresult
#: CUresults after which the context is lost (CUDA's "sticky" errors).
STICKY_ERRORS = frozenset(
    {
        R.CUDA_ERROR_ILLEGAL_ADDRESS,
        R.CUDA_ERROR_LAUNCH_FAILED,
        R.CUDA_ERROR_ILLEGAL_INSTRUCTION,
        R.CUDA_ERROR_MISALIGNED_ADDRESS,
        R.CUDA_ERROR_INVALID_ADDRESS_SPACE,
        R.CUDA_ERROR_INVALID_PC,
        R.CUDA_ERROR_HARDWARE_STACK_ERROR,
        R.CUDA_ERROR_ASSERT,
        R.CUDA_ERROR_LAUNCH_TIMEOUT,
        R.CUDA_ERROR_ECC_UNCORRECTABLE,
        R.CUDA_ERROR_CONTEXT_IS_DESTROYED,
        R.CUDA_ERROR_UNKNOWN,
    }
)


class CudaError(WorkbenchError):
    """A Driver API call failed: ``CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was
    encountered (cuStreamSynchronize)``."""

    def __init__(self, result: cu.CUresult, call: str) -> None:
        self.result = result
        self.call = call
        name = getattr(result, "name", str(result))
        text = error_string(result)
        super().__init__(f"{name}: {text} ({call})" if text else f"{name} ({call})")

    @property
    def sticky(self) -> bool:
        """The context is lost: the process must exit."""
        return self.result in STICKY_ERRORS

    @property
    def recoverable(self) -> bool:
        """Read by the worker loop: a non-sticky error leaves the worker usable."""
        return not self.sticky


def error_string(result: cu.CUresult) -> str:
    """The driver's description of ``result`` ("" when it has none)."""
    try:
        err, text = cu.cuGetErrorString(result)
    except Exception:  # the driver is not loaded: the name alone must do
        return ""
    if err != R.CUDA_SUCCESS or not text:
        return ""
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


def call(fn: Callable[..., tuple[Any, ...]], *args: Any) -> Any:
    """Call a binding and return its value(s).

    Raises:
        CudaError: the CUresult is not CUDA_SUCCESS.
    """
    result = fn(*args)
    err, values = result[0], result[1:]
    if err != R.CUDA_SUCCESS:
        raise CudaError(err, getattr(fn, "__name__", str(fn)))
    if not values:
        return None
    return values[0] if len(values) == 1 else values


@dataclass(frozen=True)
class DeviceBuffer:
    """A device allocation: address and size."""

    ptr: int
    nbytes: int

    @property
    def dptr(self) -> cu.CUdeviceptr:
        return cu.CUdeviceptr(self.ptr)


@dataclass(frozen=True)
class DeviceProperties:
    """What the driver says about the device."""

    name: str
    uuid: str  #: NVML's form: ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``
    cc: int
    cuda: str  #: the CUDA version the driver supports ("13.0")
    sm_clock_max_mhz: int | None
    memory_clock_mhz: int | None
    limits: dict[str, int]  #: DeviceSpec field -> value


@dataclass(frozen=True)
class Kernel:
    """A loaded module and the function to launch from it."""

    module: Any
    function: Any
    entry: str


def format_uuid(raw: bytes, prefix: str = "GPU") -> str:
    """16 bytes as NVML prints them: ``GPU-8-4-4-4-12`` hex digits."""
    h = raw.hex()
    return f"{prefix}-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


A = cu.CUdevice_attribute
#: DeviceSpec field -> the device attribute that gives it.
LIMIT_ATTRIBUTES = {
    "sm_count": A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    "l2_bytes": A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
    "max_threads_per_block": A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
    "max_smem_per_block_default": A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
    "max_smem_per_block": A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
    "smem_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
    "regs_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
    "max_threads_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
    "max_blocks_per_sm": A.CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR,
    "warp_size": A.CU_DEVICE_ATTRIBUTE_WARP_SIZE,
}


def cluster_launch_config(launch: Launch, stream: cu.CUstream) -> cu.CUlaunchConfig:
    """``cuLaunchKernelEx``'s configuration of a launch with thread-block clusters: grid, block,
    dynamic shared memory, stream and the cluster dimension as its one launch attribute (built
    without a driver, so that a test checks it on any machine)."""
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = launch.grid
    config.blockDimX, config.blockDimY, config.blockDimZ = launch.block
    config.sharedMemBytes = launch.shared_bytes
    config.hStream = stream
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dim = attr.value.clusterDim
    dim.x, dim.y, dim.z = launch.cluster or (1, 1, 1)
    config.attrs = [attr]
    config.numAttrs = 1
    return config


#: The encoder's element type of each dtype: 8-bit integers and fp8 travel as plain bytes.
_TMA = cu.CUtensorMapDataType
TENSOR_MAP_DTYPES = {
    DType.INT8: _TMA.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    DType.UINT8: _TMA.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    DType.FLOAT8_E4M3: _TMA.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    DType.FLOAT8_E5M2: _TMA.CU_TENSOR_MAP_DATA_TYPE_UINT8,
    DType.INT16: _TMA.CU_TENSOR_MAP_DATA_TYPE_UINT16,
    DType.FLOAT16: _TMA.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    DType.BFLOAT16: _TMA.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    DType.INT32: _TMA.CU_TENSOR_MAP_DATA_TYPE_INT32,
    DType.UINT32: _TMA.CU_TENSOR_MAP_DATA_TYPE_UINT32,
    DType.FLOAT32: _TMA.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    DType.INT64: _TMA.CU_TENSOR_MAP_DATA_TYPE_INT64,
    DType.FLOAT64: _TMA.CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
}
_SWIZZLES = {
    0: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
    32: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
    64: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
    128: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
}
_L2 = cu.CUtensorMapL2promotion
_L2_PROMOTIONS = {
    0: _L2.CU_TENSOR_MAP_L2_PROMOTION_NONE,
    64: _L2.CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
    128: _L2.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    256: _L2.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
}


def tensor_map_encode_arguments(value: TensorMapValue, address: int) -> tuple[Any, ...]:
    """``cuTensorMapEncodeTiled``'s arguments for ``value`` at device ``address`` (built
    without a driver, so that a test checks them on any machine): tiled, no interleave, unit
    element strides, out-of-bounds elements filled with zeros.

    Raises:
        TensorMapError: the address is not 16-byte aligned.
    """
    check_global_address(value, address)
    rank = value.rank
    return (
        TENSOR_MAP_DTYPES[value.dtype],
        rank,
        address,
        [cu.cuuint64_t(d) for d in value.global_dims],
        [cu.cuuint64_t(s) for s in value.global_strides],
        [cu.cuuint32_t(b) for b in value.box_dims],
        [cu.cuuint32_t(1)] * rank,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        _SWIZZLES[value.swizzle],
        _L2_PROMOTIONS[value.l2_promotion],
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )


def encode_tensor_map(value: TensorMapValue, address: int) -> bytes:
    """The 128 bytes of the ``CUtensorMap`` the driver encodes for ``value`` at ``address``.

    Raises:
        TensorMapError: the address is not 16-byte aligned.
        CudaError: the driver refuses the map (or there is no driver).
    """
    tensor_map = call(cu.cuTensorMapEncodeTiled, *tensor_map_encode_arguments(value, address))
    raw = b"".join(int(word).to_bytes(8, "little") for word in tensor_map.opaque)
    assert len(raw) == TENSOR_MAP_BYTES
    return raw


class Gpu:
    """The primary context of one device, one non-blocking stream and one event pair.

    Args:
        ordinal: the CUDA device ordinal.

    Raises:
        CudaError: no driver, no such device, or the context cannot be made current.
    """

    def __init__(self, ordinal: int = 0) -> None:
        call(cu.cuInit, 0)
        self.device = call(cu.cuDeviceGet, ordinal)
        self.context = call(cu.cuDevicePrimaryCtxRetain, self.device)
        call(cu.cuCtxSetCurrent, self.context)
        self.stream = call(cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
        flags = cu.CUevent_flags.CU_EVENT_DEFAULT.value
        self._start = call(cu.cuEventCreate, flags)
        self._stop = call(cu.cuEventCreate, flags)

    # -- facts ---------------------------------------------------------------------------
    def attribute(self, attr: cu.CUdevice_attribute) -> int:
        return int(call(cu.cuDeviceGetAttribute, attr, self.device))

    def properties(self) -> DeviceProperties:
        """Name, UUID, compute capability, CUDA version, clocks and limits."""
        raw_name = call(cu.cuDeviceGetName, 256, self.device)
        name = raw_name.split(b"\0", 1)[0].decode(errors="replace")
        uuid = format_uuid(bytes(call(cu.cuDeviceGetUuid, self.device).bytes))
        cc = 10 * self.attribute(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) + self.attribute(
            A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
        )
        version = int(call(cu.cuDriverGetVersion))
        limits = {key: self.attribute(attr) for key, attr in LIMIT_ATTRIBUTES.items()}
        limits["cc"] = cc
        return DeviceProperties(
            name=name,
            uuid=uuid,
            cc=cc,
            cuda=f"{version // 1000}.{version % 1000 // 10}",
            sm_clock_max_mhz=self._optional_mhz(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            memory_clock_mhz=self._optional_mhz(A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            limits=limits,
        )

    def _optional_mhz(self, attr: cu.CUdevice_attribute) -> int | None:
        try:
            khz = self.attribute(attr)  # deprecated attributes: absent on some drivers
        except CudaError:
            return None
        return khz // 1000 if khz > 0 else None

    # -- memory --------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        return DeviceBuffer(int(call(cu.cuMemAlloc, max(1, nbytes))), nbytes)

    def free(self, buf: DeviceBuffer) -> None:
        call(cu.cuMemFree, buf.dptr)

    def upload(self, buf: DeviceBuffer, host: np.ndarray) -> None:
        """Copy a contiguous host array into ``buf`` (synchronous)."""
        host = np.ascontiguousarray(host)
        if host.nbytes > buf.nbytes:
            raise ValueError(f"{host.nbytes} bytes do not fit in a {buf.nbytes}-byte buffer")
        call(cu.cuMemcpyHtoD, buf.dptr, host.ctypes.data, host.nbytes)
        # from pageable memory the call may return before the DMA lands, and kernels run on a
        # non-blocking stream that does not wait for the legacy stream: wait here (rare: once
        # per input)
        call(cu.cuCtxSynchronize)

    def download(self, buf: DeviceBuffer, host: np.ndarray) -> None:
        """Copy ``buf`` into a contiguous, writable host array (synchronous)."""
        if not host.flags.c_contiguous or not host.flags.writeable or host.nbytes > buf.nbytes:
            raise ValueError("download needs a contiguous writable array no larger than buf")
        call(cu.cuMemcpyDtoH, host.ctypes.data, buf.dptr, host.nbytes)

    def fill(self, buf: DeviceBuffer, fill: Fill) -> None:
        """Set every element of ``buf`` to ``fill`` on the stream (asynchronous)."""
        size, word = fill.word_size, fill.word
        count = buf.nbytes // size
        if size == 1:
            call(cu.cuMemsetD8Async, buf.dptr, word, count, self.stream)
        elif size == 2:
            call(cu.cuMemsetD16Async, buf.dptr, word, count, self.stream)
        elif size == 4:
            call(cu.cuMemsetD32Async, buf.dptr, word, count, self.stream)
        elif size == 8:  # two strided 32-bit fills: low words, then high words
            for half, value in ((0, word & 0xFFFFFFFF), (4, word >> 32)):
                dst = cu.CUdeviceptr(buf.ptr + half)
                call(cu.cuMemsetD2D32Async, dst, 8, value, 1, count, self.stream)
        else:
            raise ValueError(f"no memset for a {size}-byte fill")

    # -- modules and launches ------------------------------------------------------------
    def load(self, cubin: bytes, entry: str) -> Kernel:
        """Load a CUBIN (cuModuleLoadData) and find ``entry`` (the mangled symbol)."""
        module = call(cu.cuModuleLoadData, cubin)
        try:
            function = call(cu.cuModuleGetFunction, module, entry.encode())
        except CudaError:
            call(cu.cuModuleUnload, module)
            raise
        return Kernel(module, function, entry)

    def unload(self, kernel: Kernel) -> None:
        call(cu.cuModuleUnload, kernel.module)

    def encode_tensor_map(self, value: TensorMapValue, address: int) -> bytes:
        """The ``CUtensorMap`` of a buffer at device ``address`` (see :func:`encode_tensor_map`)."""
        return encode_tensor_map(value, address)

    def prepare(self, kernel: Kernel, launch: Launch) -> None:
        """Opt in to the launch's dynamic shared memory and cluster size (> 8).

        The default dynamic limit is 48 KB minus the kernel's static shared memory, so any
        dynamic size is set explicitly (up to the device's opt-in maximum, which the space's
        launch limits and the sweep's cannot-launch lint check beforehand)."""
        attr = cu.CUfunction_attribute
        if launch.shared_bytes > 0:
            call(
                cu.cuFuncSetAttribute,
                kernel.function,
                attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                launch.shared_bytes,
            )
        if launch.cluster is not None and math.prod(launch.cluster) > MAX_PORTABLE_CLUSTER:
            call(
                cu.cuFuncSetAttribute,
                kernel.function,
                attr.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                1,
            )

    def launch(self, kernel: Kernel, launch: Launch, args: ArgPack) -> None:
        """Enqueue one launch on the stream (cuLaunchKernelEx when a cluster is given).

        A ``(1, 1, 1)`` cluster is a plain launch, so that a space can make the cluster a
        parameter and still run on GPUs without clusters (before sm_90).
        """
        gx, gy, gz = launch.grid
        bx, by, bz = launch.block
        if launch.cluster is None or launch.cluster == (1, 1, 1):  # (1,1,1): no cluster at all
            call(
                cu.cuLaunchKernel,
                kernel.function,
                gx, gy, gz, bx, by, bz,
                launch.shared_bytes,
                self.stream,
                args.address,
                0,
            )  # fmt: skip
            return
        config = cluster_launch_config(launch, self.stream)
        call(cu.cuLaunchKernelEx, config, kernel.function, args.address, 0)

    def synchronize(self) -> None:
        """Wait for the stream; a kernel's fault surfaces here."""
        call(cu.cuStreamSynchronize, self.stream)

    def timed_launch(
        self,
        kernel: Kernel,
        launch: Launch,
        args: ArgPack,
        then: Sequence[tuple[Kernel, Launch, ArgPack]] = (),
    ) -> float:
        """One launch (and the launches of ``then`` after it, a config's second kernel) between
        an event pair; its duration in milliseconds."""
        call(cu.cuEventRecord, self._start, self.stream)
        self.launch(kernel, launch, args)
        for k, lc, a in then:
            self.launch(k, lc, a)
        call(cu.cuEventRecord, self._stop, self.stream)
        call(cu.cuEventSynchronize, self._stop)
        return float(call(cu.cuEventElapsedTime, self._start, self._stop))

    def close(self) -> None:
        """Destroy the events and stream and release the primary context."""
        for event in (self._start, self._stop):
            call(cu.cuEventDestroy, event)
        call(cu.cuStreamDestroy, self.stream)
        call(cu.cuDevicePrimaryCtxRelease, self.device)


class L2Flush:
    """Evicts the L2 before a sample by writing a buffer ``L2_FLUSH_FACTOR`` times its size."""

    def __init__(self, gpu: Gpu, l2_bytes: int) -> None:
        self.gpu = gpu
        self.buffer = gpu.alloc(max(L2_FLUSH_FACTOR * l2_bytes, 1 << 20))
        self._count = 0

    def flush(self) -> None:
        """Enqueue the write on the GPU's stream (alternating values, so no write is a no-op)."""
        self._count += 1
        call(
            cu.cuMemsetD32Async,
            self.buffer.dptr,
            self._count & 1,
            self.buffer.nbytes // 4,
            self.gpu.stream,
        )

    def close(self) -> None:
        self.gpu.free(self.buffer)
