"""Target GPUs: the limits constraints may use and the peaks a roofline needs.

Constraints in a space file see these as ``device.NAME`` (``device.max_smem_per_block``).
Without a GPU the device is a preset chosen by ``--device`` or by the compile arch; with a
GPU the CUDA runner fills the same fields from the driver. Architectural limits come from the
CUDA C++ Programming Guide's compute-capability table (via :mod:`workbench.analysis.occupancy`);
SM counts, L2 sizes and peaks from NVIDIA's datasheets, and each preset says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TypedDict

from workbench.arch_limits import ARCH_LIMITS
from workbench.errors import ArchError
from workbench.toolchain import Arch


@dataclass(frozen=True)
class DeviceSpec:
    """One GPU model as the space sees it (all sizes in bytes, bandwidth in GB/s)."""

    name: str
    cc: int
    sm_count: int
    l2_bytes: int
    dram_bandwidth_gbs: float
    max_threads_per_block: int = 1024
    max_smem_per_block_default: int = 48 * 1024
    max_smem_per_block: int = 48 * 1024  #: after the opt-in (cuFuncSetAttribute)
    smem_per_sm: int = 64 * 1024
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    warp_size: int = 32
    #: dense tensor-core peaks (datasheet), TOPS / TFLOP/s; 0 where the GPU has none
    peak_int8_tops: float = 0.0
    peak_fp8_tflops: float = 0.0
    peak_fp16_tflops: float = 0.0
    peak_fp32_tflops: float = 0.0
    #: the SM clocks (MHz) the datasheet's peaks are quoted at: FP32 at the boost clock, tensor
    #: peaks at ``tensor_clock_mhz`` (lower on H100/H200: 1,979 TOPS = 8,192 ops per SM and
    #: cycle x 132 SMs x 1,830 MHz, while 67 TFLOP/s FP32 is at 1,980); 0 where unknown
    boost_clock_mhz: float = 0.0
    tensor_clock_mhz: float = 0.0
    source: str = "NVIDIA datasheet"

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def namespace(self) -> dict[str, int | float | str]:
        """``{"device.sm_count": 132, ...}``: the names expressions may use."""
        fields = asdict(self)
        fields["max_warps_per_sm"] = self.max_warps_per_sm
        return {f"device.{k}": v for k, v in fields.items() if k != "source"}


class _ArchFields(TypedDict):
    cc: int
    smem_per_sm: int
    max_smem_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    regs_per_sm: int
    max_regs_per_thread: int


def _limits(cc: int) -> _ArchFields:
    """Per-architecture limits, from the one table in :mod:`workbench.analysis.occupancy`."""
    a = ARCH_LIMITS[cc]
    return _ArchFields(
        cc=cc,
        smem_per_sm=a.max_shared_per_sm,
        max_smem_per_block=a.max_shared_per_block,
        max_threads_per_sm=a.max_threads_per_sm,
        max_blocks_per_sm=a.max_blocks_per_sm,
        max_threads_per_block=a.max_threads_per_block,
        regs_per_sm=a.registers_per_sm,
        max_regs_per_thread=a.max_registers_per_thread,
    )


#: Presets by short name. The H200 is the GPU this project's lent machines carry.
DEVICES: dict[str, DeviceSpec] = {
    "t4": DeviceSpec(
        name="Tesla T4",
        sm_count=40,
        l2_bytes=4 * 2**20,
        dram_bandwidth_gbs=320,
        peak_int8_tops=130,
        peak_fp16_tflops=65,
        peak_fp32_tflops=8.1,
        boost_clock_mhz=1590,
        tensor_clock_mhz=1590,
        **_limits(75),
    ),
    "a100": DeviceSpec(
        name="A100-SXM4-80GB",
        sm_count=108,
        l2_bytes=40 * 2**20,
        dram_bandwidth_gbs=2039,
        peak_int8_tops=624,
        peak_fp16_tflops=312,
        peak_fp32_tflops=19.5,
        boost_clock_mhz=1410,
        tensor_clock_mhz=1410,
        **_limits(80),
    ),
    "rtx3090": DeviceSpec(
        name="GeForce RTX 3090",
        sm_count=82,
        l2_bytes=6 * 2**20,
        dram_bandwidth_gbs=936,
        peak_int8_tops=284,
        peak_fp16_tflops=71,
        peak_fp32_tflops=35.6,
        boost_clock_mhz=1695,
        tensor_clock_mhz=1695,
        **_limits(86),
    ),
    "l40s": DeviceSpec(
        name="L40S",
        sm_count=142,
        l2_bytes=96 * 2**20,
        dram_bandwidth_gbs=864,
        peak_int8_tops=733,
        peak_fp8_tflops=733,
        peak_fp16_tflops=362,
        peak_fp32_tflops=91.6,
        boost_clock_mhz=2520,
        tensor_clock_mhz=2520,
        **_limits(89),
    ),
    "h100": DeviceSpec(
        name="H100 SXM5",
        sm_count=132,
        l2_bytes=50 * 2**20,
        dram_bandwidth_gbs=3350,
        peak_int8_tops=1979,
        peak_fp8_tflops=1979,
        peak_fp16_tflops=989,
        peak_fp32_tflops=67,
        boost_clock_mhz=1980,
        tensor_clock_mhz=1830,
        **_limits(90),
    ),
    "h200": DeviceSpec(
        name="H200",
        sm_count=132,
        l2_bytes=50 * 2**20,
        dram_bandwidth_gbs=4800,
        peak_int8_tops=1979,
        peak_fp8_tflops=1979,
        peak_fp16_tflops=989,
        peak_fp32_tflops=67,
        boost_clock_mhz=1980,
        tensor_clock_mhz=1830,
        **_limits(90),
    ),
}

#: The preset used when only an arch is given.
DEFAULT_DEVICE_FOR_CC = {75: "t4", 80: "a100", 86: "rtx3090", 89: "l40s", 90: "h200"}


def runs_on(arch: Arch, cc: int) -> bool:
    """Whether a cubin for ``arch`` runs on a GPU of compute capability ``cc``: the same major
    version, no older minor; an arch-specific one (sm_90a) only on its own."""
    if arch.suffix == "a":
        return cc == arch.cc
    return cc // 10 == arch.major and cc >= arch.cc


def device_for(arch: Arch | None = None, name: str | None = None) -> DeviceSpec:
    """The preset named ``name``, or the default preset for ``arch`` (H200 when neither).

    Raises:
        ArchError: unknown preset name, no preset for the arch, or a preset whose GPU cannot
            run the arch's binaries.
    """
    if name is not None:
        key = name.lower().replace("-", "").replace(" ", "")
        if key not in DEVICES:
            raise ArchError(f"unknown device {name!r}; presets: {', '.join(DEVICES)}")
        device = DEVICES[key]
        if arch is not None and not runs_on(arch, device.cc):
            raise ArchError(
                f"{arch.sm} binaries do not run on {device.name} (compute capability "
                f"{device.cc // 10}.{device.cc % 10}): pick an arch it runs, or another `device`"
            )
        return device
    if arch is None:
        return DEVICES["h200"]
    preset = DEFAULT_DEVICE_FOR_CC.get(arch.cc)
    if preset is None:
        raise ArchError(
            f"no device preset for {arch.sm}; name a `device` preset, one of: {', '.join(DEVICES)}"
        )
    return DEVICES[preset]


#: Driver names of preset GPUs that differ from the preset's name (normalised, see below).
_DRIVER_NAMES = {"h10080gbhbm3": "h100"}  # the H100 SXM5 80 GB


def preset_named(gpu_name: str) -> DeviceSpec | None:
    """The preset of a GPU as the driver names it (``NVIDIA H200``, ``NVIDIA GeForce RTX
    3090``), or None. Exact model only: an H200 NVL, a PCIe A100 or a 40 GB A100 has other
    peaks than the H200 SXM and A100-SXM4-80GB presets, so it gets none rather than the wrong
    roofline."""
    key = _normalised(gpu_name).removeprefix("nvidia")
    if key in _DRIVER_NAMES:
        return DEVICES[_DRIVER_NAMES[key]]
    return next((d for d in DEVICES.values() if _normalised(d.name) == key), None)


def _normalised(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def arch_namespace(arch: Arch) -> dict[str, int | str | bool]:
    """``arch.cc``, ``arch.sm``, ``arch.specific``: what ``expect_sass.when`` etc. may use."""
    return {"arch.cc": arch.cc, "arch.sm": arch.sm, "arch.specific": arch.suffix == "a"}


#: Names under ``device.`` and ``arch.`` that expressions may reference.
DEVICE_NAMES = frozenset(DEVICES["h200"].namespace())
ARCH_NAMES = frozenset(arch_namespace(Arch(9, 0)))
