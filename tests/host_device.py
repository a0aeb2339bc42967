"""Host memory in place of a GPU, behind the methods the CUDA worker calls on its ``Gpu``.

With it, the worker's own code (:class:`~workbench.runners.cuda.worker.CudaExecutor`) runs on a
CPU: inputs loaded from their files into "device" buffers, outputs filled with their poison or
initial value, the arguments packed as ``cuLaunchKernel``'s ``kernelParams``, outputs copied
back. A launch runs nothing: like the driver, it reads each parameter through the ``void**``
with the size the kernel's cubin declares, and keeps those bytes (``launches``), so that a test
sees exactly what the kernel would have been given. Buffers are real host allocations, so an
address in the parameters can be followed to the bytes it points at.

Light imports only: a worker process started with ``spawn`` imports this module again.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.analysis.signature import kernel_parameters
from workbench.devices import device_for
from workbench.runners.buffers import ArgPack, Fill
from workbench.runners.cuda.driver import (
    LIMIT_ATTRIBUTES,
    DeviceBuffer,
    DeviceProperties,
    Kernel,
)
from workbench.runners.cuda.worker import CudaExecutor
from workbench.spaces.launch import Launch
from workbench.toolchain import Arch


def read_kernel_params(address: int, sizes: Sequence[int]) -> tuple[bytes, ...]:
    """What ``cuLaunchKernel`` copies from ``kernelParams``: ``sizes[i]`` bytes from the address
    in the ``i``-th entry of the ``void**`` at ``address``."""
    if not sizes:
        return ()
    pointers = (ctypes.c_void_p * len(sizes)).from_address(address)
    return tuple(ctypes.string_at(pointers[i], size) for i, size in enumerate(sizes))


@dataclass(frozen=True)
class Launched:
    """One launch as the kernel would have received it."""

    entry: str
    launch: Launch
    params: tuple[bytes, ...]  #: each parameter's bytes, sized as the cubin declares
    #: for each parameter that holds the address of a buffer: that buffer's bytes (else None)
    pointees: tuple[bytes | None, ...]


class HostDevice:
    """A stand-in for :class:`~workbench.runners.cuda.driver.Gpu` over host memory.

    Args:
        arch: the compute capability it claims (its limits are that arch's preset's).
        record: a file to append each launch to as a JSON line (a worker process's launches,
            read by the test in the parent).
    """

    def __init__(self, arch: str = "sm_90", record: Path | str | None = None) -> None:
        self.arch = Arch.parse(arch)
        self.record = Path(record) if record is not None else None
        self.allocations: dict[int, np.ndarray] = {}
        self.launches: list[Launched] = []
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
        params = kernel_parameters(cubin, entry)
        if params is None:
            raise ValueError(f"the cubin does not describe the parameters of {entry}")
        return Kernel(module=None, function=tuple(p.size for p in params), entry=entry)

    def unload(self, kernel: Kernel) -> None:
        pass

    def prepare(self, kernel: Kernel, launch: Launch) -> None:
        pass

    def launch(self, kernel: Kernel, launch: Launch, args: ArgPack) -> None:
        sizes: tuple[int, ...] = kernel.function
        if len(args.sizes) != len(sizes):
            raise ValueError(f"{len(args.sizes)} arguments for {len(sizes)} parameters")
        params = read_kernel_params(args.address, sizes)
        pointees = tuple(self._pointee(p) for p in params)
        launched = Launched(kernel.entry, launch, params, pointees)
        self.launches.append(launched)
        if self.record is not None:
            with self.record.open("a") as f:
                f.write(json.dumps(launch_record(launched)) + "\n")

    def _pointee(self, param: bytes) -> bytes | None:
        memory = self.allocations.get(int.from_bytes(param, "little")) if len(param) == 8 else None
        return None if memory is None else memory.tobytes()

    def synchronize(self) -> None:
        pass

    def timed_launch(self, kernel: Kernel, launch: Launch, args: ArgPack) -> float:
        raise NotImplementedError("nothing runs on host memory: there is no time to measure")

    def close(self) -> None:
        self.allocations.clear()


def launch_record(launched: Launched) -> Mapping[str, object]:
    """A launch as JSON: the parameters in hex, and the byte count of each buffer pointed at."""
    return {
        "entry": launched.entry,
        "params": [p.hex() for p in launched.params],
        "pointee_bytes": [None if p is None else len(p) for p in launched.pointees],
    }


def host_executor(record: str) -> CudaExecutor:
    """The CUDA worker's executor on host memory, its launches appended to ``record``
    (picklable through ``functools.partial``: a worker's ``executor_factory``)."""
    return CudaExecutor(gpu=HostDevice(record=record))  # type: ignore[arg-type]
