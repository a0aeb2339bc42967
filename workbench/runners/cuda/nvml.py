"""SM clock readings through NVML (``pynvml`` from the nvidia-ml-py package), when available.

NVML is optional: without the package, or when NVML cannot find the device, the runner times
as usual and says "no NVML: <why>" instead of recording clocks. Clocks are only read, never
set: locking clocks on a shared GPU is not ours to do.
"""

from __future__ import annotations

import contextlib
from typing import Any


class ClockReader:
    """Reads the current SM clock of one device (found by UUID, which CUDA and NVML share)."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle
        self.max_sm_clock_mhz = self._read(nvml.nvmlDeviceGetMaxClockInfo, nvml.NVML_CLOCK_SM)
        self.max_memory_clock_mhz = self._read(nvml.nvmlDeviceGetMaxClockInfo, nvml.NVML_CLOCK_MEM)
        try:
            version = nvml.nvmlSystemGetDriverVersion()
            self.driver_version: str | None = (
                version.decode() if isinstance(version, bytes) else str(version)
            )
        except nvml.NVMLError:
            self.driver_version = None

    @classmethod
    def open(cls, uuid: str) -> tuple[ClockReader | None, str]:
        """A reader for the device with ``uuid``, or None and the reason there is none."""
        try:
            import pynvml
        except ImportError:
            return None, "no NVML: the nvidia-ml-py package (pynvml) is not installed"
        try:
            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid.encode())
        except pynvml.NVMLError as exc:
            return None, f"no NVML: {exc} (device {uuid})"
        return cls(pynvml, handle), ""

    def sm_clock_mhz(self) -> float | None:
        """The SM clock now, or None when NVML does not answer."""
        return self._read(self._nvml.nvmlDeviceGetClockInfo, self._nvml.NVML_CLOCK_SM)

    def energy_mj(self) -> float | None:
        """The GPU's total energy counter in millijoules (since the driver loaded), or None
        where the GPU has none (before Volta) or NVML does not answer."""
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except self._nvml.NVMLError:
            return None

    def _read(self, fn: Any, clock: Any) -> float | None:
        try:
            return float(fn(self._handle, clock))
        except self._nvml.NVMLError:
            return None

    def close(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()
