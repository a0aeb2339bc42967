"""Where the CUDA toolchain lives and which version it is.

Everything comes from PyPI wheels (``nvidia-cuda-nvrtc``, ``nvidia-cuda-nvcc`` for ptxas,
``nvidia-cuda-nvdisasm``, ``nvidia-cuda-cuobjdump``, ``nvidia-cuda-runtime`` for headers),
found through ``cuda.pathfinder``. A missing piece raises :class:`ToolchainError` naming the
wheel that provides it.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from dataclasses import dataclass

from workbench.errors import ArchError, ToolchainError

#: Which PyPI wheel provides each command-line tool.
TOOL_WHEELS = {
    "ptxas": "nvidia-cuda-nvcc",
    "nvdisasm": "nvidia-cuda-nvdisasm",
    "cuobjdump": "nvidia-cuda-cuobjdump",
}


def find_tool(name: str) -> str:
    """Absolute path of a CUDA binary utility from the wheels (or a system CUDA).

    Raises:
        ToolchainError: the tool is not installed.
    """
    try:
        from cuda import pathfinder
    except ImportError as exc:  # pragma: no cover - a broken install
        raise ToolchainError(
            "cuda-pathfinder is not installed: pip install cuda-pathfinder"
        ) from exc
    finder = getattr(pathfinder, "find_nvidia_binary_utility", None)  # (newer pathfinders)
    path = (finder(name) if finder else None) or shutil.which(name)  # else a system CUDA's
    if not path:
        wheel = TOOL_WHEELS.get(name, "the CUDA toolkit")
        raise ToolchainError(f"{name} was not found: install it with `pip install {wheel}`")
    return path


@functools.cache
def cuda_include_dir() -> str:
    """Directory holding ``cuda_fp16.h``, ``cuda_fp8.h`` and friends, for NVRTC's ``-I``."""
    from cuda import pathfinder

    path = pathfinder.find_nvidia_header_directory("cudart")
    if not path:
        raise ToolchainError(
            "the CUDA headers (cuda_runtime.h, cuda_fp16.h) were not found: "
            "pip install nvidia-cuda-runtime"
        )
    return path


def nvrtc_module():
    """Import ``cuda.bindings.nvrtc`` and check that libnvrtc loads."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise ToolchainError(
            "cuda-bindings is not installed: pip install 'cuda-bindings>=13'"
        ) from exc
    try:
        err, _major, _minor = nvrtc.nvrtcVersion()
    except Exception as exc:  # the shared library itself is missing: a RuntimeError subclass
        raise ToolchainError(
            f"NVRTC could not be loaded ({exc}): pip install 'nvidia-cuda-nvrtc>=13'"
        ) from exc
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise ToolchainError(f"NVRTC is broken: nvrtcVersion returned {err}")
    return nvrtc


@functools.cache
def nvrtc_version() -> str:
    """NVRTC's version as ``"13.5"``."""
    nvrtc = nvrtc_module()
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


@functools.cache
def nvrtc_supported_archs() -> tuple[int, ...]:
    """Compute capabilities this NVRTC can target, e.g. ``(75, 80, 86, 89, 90, 100, 120)``."""
    nvrtc = nvrtc_module()
    _, archs = nvrtc.nvrtcGetSupportedArchs()
    return tuple(int(a) for a in archs)


@functools.cache
def tool_version(name: str) -> str:
    """Version line of a binary tool, e.g. ``"V13.5.37"`` for ptxas (part of cache keys)."""
    path = find_tool(name)
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise ToolchainError(f"{name} at {path} cannot run: {exc}") from exc
    match = re.search(r"V\d+\.\d+\.\d+", out.stdout)
    return match.group(0) if match else out.stdout.strip().splitlines()[-1]


@dataclass(frozen=True, order=True)
class Arch:
    """A compilation target: ``sm_90a`` is ``Arch(9, 0, "a")``.

    The suffix ``a`` (architecture-specific features such as wgmma and setmaxnreg) and ``f``
    (family-specific) are kept because they change what compiles.
    """

    major: int
    minor: int
    suffix: str = ""

    @property
    def cc(self) -> int:
        """Compute capability as an integer: 90 for sm_90 and sm_90a."""
        return self.major * 10 + self.minor

    @property
    def sm(self) -> str:
        """``sm_90a``: the name NVRTC and ptxas take."""
        return f"sm_{self.cc}{self.suffix}"

    def __str__(self) -> str:
        return self.sm

    @classmethod
    def parse(cls, text: str) -> Arch:
        """Parse ``sm_90a``, ``90a``, ``9.0`` or ``compute_90``.

        Raises:
            ArchError: the text is not an architecture name, or NVRTC cannot target it.
        """
        raw = text.strip().lower()
        match = re.fullmatch(r"(?:sm_|compute_)?(\d)(\d{1,2})([af]?)", raw.replace(".", ""))
        if not match:
            raise ArchError(
                f"{text!r} is not a CUDA architecture; expected a name such as sm_80, sm_89, "
                "sm_90 or sm_90a"
            )
        major, minor, suffix = int(match.group(1)), int(match.group(2)), match.group(3)
        if len(match.group(2)) == 2:  # sm_100 / sm_120: three digits
            major, minor = int(match.group(1) + match.group(2)[0]), int(match.group(2)[1])
        arch = cls(major, minor, suffix)
        return arch

    def check_supported(self) -> Arch:
        """Raise :class:`ArchError` unless the installed NVRTC can compile for this arch."""
        supported = nvrtc_supported_archs()
        if self.cc not in supported:
            names = ", ".join(f"sm_{a}" for a in supported)
            raise ArchError(f"NVRTC {nvrtc_version()} cannot target {self.sm}; it knows {names}")
        if self.suffix == "a" and self.cc < 90:
            raise ArchError(f"{self.sm}: the 'a' suffix exists from sm_90a on")
        return self
