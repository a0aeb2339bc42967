"""The worker's real device: what it reports as a :class:`DeviceInfo`, whether a CUBIN runs on
it, and a device preset corrected with the limits its driver reports."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from workbench.devices import DeviceSpec
from workbench.errors import ToolchainError
from workbench.runners.base import DeviceInfo
from workbench.toolchain import Arch, nvrtc_version


def cubin_runs_on(arch: Arch, device_cc: int) -> bool:
    """Whether a CUBIN for ``arch`` loads on a device of compute capability ``device_cc``.

    A CUBIN runs on its own major version with an equal or higher minor version; an
    arch-specific target (``sm_90a``) runs only on exactly its compute capability.
    """
    major, minor = divmod(device_cc, 10)
    if arch.suffix == "a":
        return arch.cc == device_cc
    return arch.major == major and minor >= arch.minor


_PEAKS = ("peak_int8_tops", "peak_fp8_tflops", "peak_fp16_tflops", "peak_fp32_tflops")


def live_device(preset: DeviceSpec, gpu_name: str, limits: Mapping[str, int]) -> DeviceSpec:
    """``preset`` with the limits the driver reported for the real GPU.

    The preset's datasheet peaks are kept when its model number appears in ``gpu_name``
    (``H200`` in ``NVIDIA H200``) and zeroed (unknown) otherwise.
    """
    fields = {f.name for f in dataclasses.fields(DeviceSpec)}
    changes: dict[str, Any] = {k: int(v) for k, v in limits.items() if k in fields}
    models = [t for t in re.split(r"[\s\-]+", preset.name) if any(c.isdigit() for c in t)]
    same_model = any(m.lower() in gpu_name.lower() for m in models)
    if not same_model:
        changes.update({k: 0.0 for k in _PEAKS})
        changes["dram_bandwidth_gbs"] = 0.0
    updated = dataclasses.replace(preset, **changes)
    if updated == preset:
        return preset
    source = f"driver limits of {gpu_name}; " + (
        f"peaks: {preset.source} ({preset.name})" if same_model else "peaks unknown"
    )
    return dataclasses.replace(updated, name=gpu_name or preset.name, source=source)


def device_info(info: Mapping[str, Any]) -> DeviceInfo:
    """The worker's ``info["device"]`` as a DeviceInfo (unknown keys ignored)."""
    raw = dict(info.get("device") or {})
    fields = {f.name for f in dataclasses.fields(DeviceInfo)}
    kwargs = {k: v for k, v in raw.items() if k in fields}
    kwargs.setdefault("name", "unknown device")
    if kwargs.get("toolkit") is None:
        try:
            kwargs["toolkit"] = f"nvrtc {nvrtc_version()}"
        except ToolchainError:
            kwargs["toolkit"] = None
    return DeviceInfo(**kwargs)
