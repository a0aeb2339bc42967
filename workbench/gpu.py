"""Is there a CUDA GPU here? Asked once, answered with a reason either way."""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuProbe:
    """Result of looking for a usable GPU through the Driver API."""

    available: bool
    reason: str
    count: int = 0
    name: str = ""
    cc: int = 0


@functools.cache
def probe_gpu() -> GpuProbe:
    """Load the driver, ``cuInit``, and read device 0's name and compute capability.

    Never raises: a machine without a driver or GPU is a normal case here.
    """
    try:
        from cuda.bindings import driver
    except ImportError:
        return GpuProbe(False, "cuda-bindings is not installed")
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:  # libcuda.so missing: cuda.pathfinder's DynamicLibNotFoundError
        return GpuProbe(False, f"no NVIDIA driver ({type(exc).__name__})")
    if err != driver.CUresult.CUDA_SUCCESS:
        return GpuProbe(False, f"cuInit failed: {err.name}")
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return GpuProbe(False, "the driver sees no GPU")
    _, dev = driver.cuDeviceGet(0)
    _, raw = driver.cuDeviceGetName(64, dev)
    attr = driver.CUdevice_attribute
    _, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    name = raw.split(b"\0", 1)[0].decode(errors="replace")
    return GpuProbe(True, "ok", count, name, major * 10 + minor)
