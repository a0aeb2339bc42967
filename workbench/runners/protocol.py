"""The requests a kernel-running worker answers, and how arrays travel to and from it.

Plain data only: the parent decides everything (binary, geometry, arguments, output fills,
timing options) so that the worker's job is to execute. Arrays never go through the pipe:
the parent writes each input once as an ``.npy`` file of raw bytes in a temporary
directory, and the worker writes outputs back the same way (raw bytes, because ``np.save``
cannot round-trip the ml_dtypes formats: bfloat16 comes back as void, float8_e5m2 not at all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workbench.runners.timing import TimingOptions, TimingStopReason
from workbench.spaces.launch import Launch

if TYPE_CHECKING:  # (the buffers bring ml_dtypes, which the profiler's NVTX names do not need)
    from workbench.runners.buffers import KernelArg, OutputBuffer


@dataclass(frozen=True)
class InputFile:
    """One input array as raw bytes in an ``.npy`` file."""

    name: str
    path: str
    nbytes: int


@dataclass(frozen=True)
class LoadInputs:
    """Replace the worker's inputs with these (when a config needs another set than the one
    it holds, and after every restart)."""

    key: str  #: shape, the config values input shapes use, and seed: to recognise the set
    files: tuple[InputFile, ...]


@dataclass(frozen=True)
class InputsLoaded:
    key: str
    nbytes: int
    seconds: float


#: NVTX domain of every range the CUDA worker opens around a config's launches, and the one the
#: profiler's ``--nvtx-include`` selects (the two must be one: else ncu profiles nothing).
NVTX_DOMAIN = "workbench"


def nvtx_range(kernel: str, config_label: str) -> str:
    """The NVTX range name of a config's launches (``KernelJob.label``): ``kernel:config``,
    with no ``/``, which ncu's ``--nvtx-include`` reads as the step into a nested range."""
    return f"{kernel}:{config_label}"


@dataclass(frozen=True)
class ThenStep:
    """A second kernel of the job's binary, launched right after the entry (a combine pass):
    run, verified and timed with it, as one call."""

    entry: str  #: its symbol
    launch: Launch
    args: tuple[KernelArg, ...]


@dataclass(frozen=True)
class KernelJob:
    """One configuration, ready to launch."""

    label: str  #: ``kernel:config_label``: the NVTX range around its launches
    module_key: str  #: the compile key: one loaded module per key
    cubin: bytes
    entry: str  #: the (mangled) symbol to launch
    launch: Launch
    args: tuple[KernelArg, ...]
    outputs: tuple[OutputBuffer, ...]
    then: tuple[ThenStep, ...] = ()  #: launched after the entry, in order


@dataclass(frozen=True)
class RunOnce:
    """Fill the outputs, launch once, and write every output to ``out_dir/NAME.npy``."""

    job: KernelJob
    out_dir: str


@dataclass(frozen=True)
class OutputFiles:
    paths: Mapping[str, str]
    seconds: float  #: wall time of the launch and its synchronisation
    load_seconds: float = 0.0  #: loading the module and setting its launch attributes


@dataclass(frozen=True)
class DeviceCompare:
    """One output compared on the GPU: the reference's output (a file, uploaded once per
    ``VerifyOnDevice.key``) and the compare kernel, whose buffer arguments name the output,
    ``expected`` and ``result``."""

    output: str
    expected: InputFile
    kernel: KernelJob


@dataclass(frozen=True)
class VerifyOnDevice:
    """Fill the outputs, launch once, and compare each output with the reference on the GPU."""

    job: KernelJob
    key: str  #: the reference outputs' set (input set and reference entry)
    compares: tuple[DeviceCompare, ...]


@dataclass(frozen=True)
class DeviceVerdicts:
    results: Mapping[str, bytes]  #: per output: the compare kernel's result struct
    seconds: float  #: wall time of the launch and the comparisons
    load_seconds: float = 0.0  #: loading the modules and uploading the reference's outputs


@dataclass(frozen=True)
class TimeKernel:
    """Warm up, then take samples until the stopping rule says done."""

    job: KernelJob
    options: TimingOptions


@dataclass(frozen=True)
class Timing:
    """The samples of one configuration, as measured."""

    samples_ms: tuple[float, ...]
    sm_clock_mhz: tuple[float | None, ...]  #: per sample; None where it could not be read
    throttled: tuple[bool, ...]
    max_sm_clock_mhz: float | None
    stop_reason: TimingStopReason
    warmup_launches: int
    seconds: float  #: wall time of warm-up and sampling
    clock_note: str = ""  #: why no clock was read ("" when it was)
    warmup_seconds: float = 0.0  #: ... of which warm-up
    load_seconds: float = 0.0  #: loading the module and setting its launch attributes
    #: the GPU's energy counter's increase over the samples (mJ; None: no counter)
    energy_mj: float | None = None
    sampling_seconds: float = 0.0  #: wall time of the samples (the energy's window)


def write_raw(path: Path | str, array: np.ndarray) -> int:
    """Write ``array``'s bytes as a flat uint8 ``.npy`` file; returns the byte count."""
    raw = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    np.save(path, raw, allow_pickle=False)
    return int(raw.nbytes)


def read_raw(path: Path | str, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Read a file written by :func:`write_raw` back as ``dtype`` and ``shape`` (memory-mapped).

    Raises:
        ValueError: the file holds another number of bytes.
    """
    raw = np.load(path, mmap_mode="r", allow_pickle=False)
    expected = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if raw.dtype != np.uint8 or raw.size != expected:
        raise ValueError(f"{path}: {raw.size} bytes of {raw.dtype}; expected {expected} bytes")
    return raw.view(dtype).reshape(shape)
