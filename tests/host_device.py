"""Host memory in place of a GPU, behind the methods the CUDA worker calls on its ``Gpu``.

With it, the worker's own code (:class:`~workbench.runners.cuda.worker.CudaExecutor`) runs on a
CPU: inputs loaded from their files into "device" buffers, outputs filled with their poison or
initial value, the arguments packed as ``cuLaunchKernel``'s ``kernelParams``, outputs copied
back. A launch runs nothing: like the driver, it reads each parameter through the ``void**``
with the size the kernel's cubin declares, lays them out at the cubin's parameter offsets, and
keeps those bytes (``launches``), so that a test sees exactly what the kernel would have been
given. Buffers are real host allocations, so an address in the parameters can be followed to
the bytes it points at.

Tensor maps: with no driver there is no ``cuTensorMapEncodeTiled``. The host device builds the
encoder's real arguments (``tensor_map_encode_arguments``: dtype, dims, strides, box, swizzle)
and returns, in place of the driver's opaque 128 bytes, those arguments packed as plain fields
(:func:`host_tensor_map`), so that a test can read back which buffer, box and swizzle reached
which parameter. Whether the driver accepts them is a GPU test's job.

Light imports only: a worker process started with ``spawn`` imports this module again.
"""

from __future__ import annotations

import ctypes
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.analysis.cubin import ParamSlot, read_cubin
from workbench.devices import device_for
from workbench.runners.buffers import ArgPack, Fill
from workbench.runners.cuda.driver import (
    LIMIT_ATTRIBUTES,
    DeviceBuffer,
    DeviceProperties,
    Kernel,
    tensor_map_encode_arguments,
)
from workbench.runners.cuda.worker import CudaExecutor
from workbench.runners.tensor_maps import TENSOR_MAP_BYTES, TensorMapValue
from workbench.spaces.launch import Launch
from workbench.toolchain import Arch


def read_kernel_params(address: int, sizes: Sequence[int]) -> tuple[bytes, ...]:
    """What ``cuLaunchKernel`` copies from ``kernelParams``: ``sizes[i]`` bytes from the address
    in the ``i``-th entry of the ``void**`` at ``address``."""
    if not sizes:
        return ()
    pointers = (ctypes.c_void_p * len(sizes)).from_address(address)
    return tuple(ctypes.string_at(pointers[i], size) for i, size in enumerate(sizes))


#: The host stand-in for a CUtensorMap: global address, rank, swizzle, then globalDim (5 x u64),
#: globalStrides (4 x u64) and boxDim (5 x u32), innermost first, zero-padded to 128 bytes.
HOST_TENSOR_MAP = struct.Struct("<QII5Q4Q5I")


def host_tensor_map(args: Sequence[object]) -> bytes:
    """``cuTensorMapEncodeTiled``'s arguments (as ``tensor_map_encode_arguments`` builds them)
    packed as plain fields in 128 bytes: what the host device passes for a tensor map."""
    _, rank, address, dims, strides, box, _, _, swizzle, _, _ = args
    rank = int(rank)  # type: ignore[call-overload]

    def padded(values: object, count: int) -> list[int]:
        ints = [int(v) for v in values]  # type: ignore[attr-defined]
        return ints + [0] * (count - len(ints))

    raw = HOST_TENSOR_MAP.pack(
        int(address),  # type: ignore[call-overload]
        rank,
        int(swizzle),  # type: ignore[call-overload]
        *padded(dims, 5),
        *padded(strides, 4),
        *padded(box, 5),
    )
    return raw.ljust(TENSOR_MAP_BYTES, b"\0")


def read_host_tensor_map(raw: bytes) -> dict[str, object]:
    """:func:`host_tensor_map`'s fields back (dims, strides and box cut to the rank)."""
    fields = HOST_TENSOR_MAP.unpack(raw[: HOST_TENSOR_MAP.size])
    address, rank, swizzle = fields[:3]
    dims, strides, box = fields[3:8], fields[8:12], fields[12:17]
    return {
        "address": address,
        "rank": rank,
        "swizzle": swizzle,
        "dims": dims[:rank],
        "strides": strides[: rank - 1],
        "box": box[:rank],
    }


def param_buffer(slots: Sequence[ParamSlot], params: Sequence[bytes], total: int) -> bytes:
    """The kernel's parameter block as the driver fills it: each parameter's bytes at the offset
    the cubin gives it (``EIATTR_KPARAM_INFO``), ``total`` bytes in all."""
    block = bytearray(max([total, *(s.offset + s.size for s in slots)]))
    for slot, raw in zip(slots, params, strict=True):
        block[slot.offset : slot.offset + slot.size] = raw
    return bytes(block)


@dataclass(frozen=True)
class Launched:
    """One launch as the kernel would have received it."""

    entry: str
    launch: Launch
    params: tuple[bytes, ...]  #: each parameter's bytes, sized as the cubin declares
    #: for each parameter that holds the address of a buffer: that buffer's bytes (else None)
    pointees: tuple[bytes | None, ...]
    #: the parameter block: every parameter at its cubin offset
    block: bytes = b""


class HostDevice:
    """A stand-in for :class:`~workbench.runners.cuda.driver.Gpu` over host memory.

    Args:
        arch: the compute capability it claims (its limits are that arch's preset's).
        record: a file to append each launch to as a JSON line (a worker process's launches,
            read by the test in the parent).
        sample_ms: what a timed launch reports (None: a timed launch raises, since nothing
            runs; a number lets the worker's timing protocol run through, for tests of what
            surrounds the samples, never of their values).
    """

    def __init__(
        self, arch: str = "sm_90", record: Path | str | None = None, sample_ms: float | None = None
    ) -> None:
        self.arch = Arch.parse(arch)
        self.record = Path(record) if record is not None else None
        self.sample_ms = sample_ms
        self.allocations: dict[int, np.ndarray] = {}
        self.launches: list[Launched] = []
        #: (tensor map, address) of every map encoded, in order
        self.encoded: list[tuple[TensorMapValue, int]] = []
        self.stream = None

    def properties(self) -> DeviceProperties:
        preset = device_for(self.arch)
        limits = {key: int(getattr(preset, key)) for key in LIMIT_ATTRIBUTES}
        limits["cc"] = self.arch.cc
        return DeviceProperties(
            name=f"host memory ({preset.name} limits)",
            uuid="GPU-00000000-0000-0000-0000-000000000000",
            cc=self.arch.cc,
            cuda="none",
            sm_clock_max_mhz=None,
            memory_clock_mhz=None,
            limits=limits,
        )

    # -- memory --------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> DeviceBuffer:
        memory = np.zeros(max(1, nbytes), dtype=np.uint8)  # calloc: untouched pages cost nothing
        self.allocations[int(memory.ctypes.data)] = memory
        return DeviceBuffer(int(memory.ctypes.data), nbytes)

    def free(self, buf: DeviceBuffer) -> None:
        del self.allocations[buf.ptr]

    def bytes_at(self, buf: DeviceBuffer) -> np.ndarray:
        return self.allocations[buf.ptr][: buf.nbytes]

    def upload(self, buf: DeviceBuffer, host: np.ndarray) -> None:
        raw = np.ascontiguousarray(host).reshape(-1).view(np.uint8)
        if raw.nbytes > buf.nbytes:
            raise ValueError(f"{raw.nbytes} bytes do not fit in a {buf.nbytes}-byte buffer")
        self.allocations[buf.ptr][: raw.nbytes] = raw

    def download(self, buf: DeviceBuffer, host: np.ndarray) -> None:
        host.reshape(-1).view(np.uint8)[:] = self.allocations[buf.ptr][: host.nbytes]

    def fill(self, buf: DeviceBuffer, fill: Fill) -> None:
        count = buf.nbytes // fill.word_size
        unit = np.frombuffer(fill.pattern[: fill.word_size], dtype=np.uint8)
        self.allocations[buf.ptr][: count * fill.word_size] = np.tile(unit, count)

    # -- modules and launches ------------------------------------------------------------
    def load(self, cubin: bytes, entry: str) -> Kernel:
        kernel = read_cubin(cubin).kernels.get(entry)
        if kernel is None or kernel.params is None:
            raise ValueError(f"the cubin does not describe the parameters of {entry}")
        return Kernel(module=kernel.param_bytes or 0, function=kernel.params, entry=entry)

    def encode_tensor_map(self, value: TensorMapValue, address: int) -> bytes:
        self.encoded.append((value, address))
        return host_tensor_map(tensor_map_encode_arguments(value, address))

    def unload(self, kernel: Kernel) -> None:
        pass

    def prepare(self, kernel: Kernel, launch: Launch) -> None:
        pass

    def launch(self, kernel: Kernel, launch: Launch, args: ArgPack) -> None:
        slots: tuple[ParamSlot, ...] = kernel.function
        sizes = tuple(slot.size for slot in slots)
        if len(args.sizes) != len(sizes):
            raise ValueError(f"{len(args.sizes)} arguments for {len(sizes)} parameters")
        params = read_kernel_params(args.address, sizes)
        pointees = tuple(self._pointee(p) for p in params)
        block = param_buffer(slots, params, kernel.module)
        launched = Launched(kernel.entry, launch, params, pointees, block)
        self.launches.append(launched)
        if self.record is not None:
            with self.record.open("a") as f:
                f.write(json.dumps(launch_record(launched)) + "\n")

    def _pointee(self, param: bytes) -> bytes | None:
        memory = self.allocations.get(int.from_bytes(param, "little")) if len(param) == 8 else None
        return None if memory is None else memory.tobytes()

    def synchronize(self) -> None:
        pass

    def timed_launch(
        self,
        kernel: Kernel,
        launch: Launch,
        args: ArgPack,
        then: Sequence[tuple[Kernel, Launch, ArgPack]] = (),
    ) -> float:
        if self.sample_ms is None:
            raise NotImplementedError("nothing runs on host memory: there is no time to measure")
        self.launch(kernel, launch, args)
        for k, lc, a in then:
            self.launch(k, lc, a)
        return self.sample_ms

    def close(self) -> None:
        self.allocations.clear()


def launch_record(launched: Launched) -> Mapping[str, object]:
    """A launch as JSON: the parameters in hex, and the byte count of each buffer pointed at."""
    return {
        "entry": launched.entry,
        "params": [p.hex() for p in launched.params],
        "pointee_bytes": [None if p is None else len(p) for p in launched.pointees],
    }


def host_executor(record: str, sample_ms: float | None = None) -> CudaExecutor:
    """The CUDA worker's executor on host memory, its launches appended to ``record``
    (picklable through ``functools.partial``: a worker's ``executor_factory``)."""
    return CudaExecutor(gpu=HostDevice(record=record, sample_ms=sample_ms))  # type: ignore[arg-type]
