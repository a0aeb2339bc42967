"""Per-kernel resource usage from the ptxas ``-v`` log and from the cubin itself.

The log is the only place that gives spill bytes; the cubin is what the driver loads, so it
wins for registers and shared memory when both are at hand (:func:`kernel_resources`).

Log lines this parser reads (NVRTC prefixes continuation lines with ``ptxas         .``; plain
ptxas indents them)::

    ptxas info    : Compiling entry function '_Z4gemmPKfPf' for 'sm_80'
    ptxas info    : Function properties for _Z4gemmPKfPf
    ptxas         .     512 bytes stack frame, 888 bytes spill stores, 904 bytes spill loads
    ptxas info    : Used 32 registers, used 1 barriers, 1288 bytes smem, 372 bytes cmem[0]

On sm_90 and newer ptxas 13 no longer prints ``cmem[0]``; the cubin still has it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from workbench.analysis.cubin import CubinInfo, CubinKernel, read_cubin

__all__ = [
    "CubinInfo",
    "CubinKernel",
    "KernelResources",
    "kernel_resources",
    "parse_ptxas_log",
    "read_cubin",
]


@dataclass(frozen=True)
class KernelResources:
    """Resources of one kernel (mangled name).

    ``smem`` is the user-declared static shared memory (ptxas' ``bytes smem``); it excludes the
    1 KiB per-block reservation that sm_90+ cubins fold into their shared section.
    ``cmem0`` is ``None`` when only a log that does not print it was seen.
    """

    name: str
    registers: int = 0
    barriers: int = 0
    smem: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    cmem0: int | None = None
    cumulative_stack: int = 0
    max_threads: tuple[int, int, int] | None = None
    required_threads: tuple[int, int, int] | None = None
    max_reg_count: int | None = None

    @property
    def spills(self) -> bool:
        """Whether ptxas spilled registers to local memory."""
        return self.spill_stores > 0 or self.spill_loads > 0

    @property
    def uses_local_memory(self) -> bool:
        """Whether the kernel has a stack frame (local arrays, spills, calls with a frame)."""
        return self.stack_frame > 0 or self.spills


_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)'")
_PROPS = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME = re.compile(
    r"(?P<frame>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, "
    r"(?P<ld>\d+) bytes spill loads"
)
_USED = re.compile(r"Used (?P<regs>\d+) registers")
_FIELDS = {
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem": re.compile(r"(\d+) bytes smem"),
    "cmem0": re.compile(r"(\d+) bytes cmem\[0\]"),
    "cumulative_stack": re.compile(r"(\d+) bytes cumulative stack size"),
}


def parse_ptxas_log(log: str) -> dict[str, KernelResources]:
    """Resource usage per entry function from a ptxas ``-v`` log (NVRTC's or ptxas' own).

    Args:
        log: the full log; warnings, timing lines and non-entry functions are skipped.

    Returns:
        One :class:`KernelResources` per kernel, keyed by mangled name, in log order. A log
        without ``-v`` output gives an empty dict.
    """
    frames: dict[str, tuple[int, int, int]] = {}
    used: dict[str, dict[str, int]] = {}
    entries: list[str] = []
    current_props: str | None = None
    current_entry: str | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current_entry = m.group("name")
            if current_entry not in entries:
                entries.append(current_entry)
        elif m := _PROPS.search(line):
            current_props = m.group("name")
        elif (m := _FRAME.search(line)) and current_props is not None:
            frames[current_props] = (int(m["frame"]), int(m["st"]), int(m["ld"]))
        elif (m := _USED.search(line)) and current_entry is not None:
            values = {"registers": int(m["regs"])}
            for key, pattern in _FIELDS.items():
                if f := pattern.search(line):
                    values[key] = int(f.group(1))
            used[current_entry] = values
    out: dict[str, KernelResources] = {}
    for name in entries:
        frame, stores, loads = frames.get(name, (0, 0, 0))
        values = used.get(name, {})
        out[name] = KernelResources(
            name=name,
            registers=values.get("registers", 0),
            barriers=values.get("barriers", 0),
            smem=values.get("smem", 0),
            stack_frame=frame,
            spill_stores=stores,
            spill_loads=loads,
            cmem0=values.get("cmem0"),
            cumulative_stack=values.get("cumulative_stack", frame),
        )
    return out


def from_cubin_kernel(kernel: CubinKernel) -> KernelResources:
    """The resources a cubin alone can tell (no spill counts: only the log has them).

    Args:
        kernel: one kernel from :func:`read_cubin`.

    Returns:
        A :class:`KernelResources` with zero spill bytes.
    """
    return KernelResources(
        name=kernel.name,
        registers=kernel.registers,
        barriers=kernel.barriers,
        smem=kernel.static_shared_bytes,
        stack_frame=kernel.frame_size,
        cmem0=kernel.cmem0,
        cumulative_stack=kernel.min_stack_size,
        max_threads=kernel.max_threads,
        max_reg_count=kernel.max_reg_count,
        required_threads=kernel.required_threads,
    )


def kernel_resources(cubin: bytes, log: str) -> dict[str, KernelResources]:
    """Combine the cubin and the ptxas log: the cubin wins for registers, shared memory,
    stack frame, barriers and ``cmem[0]``; the log adds spill bytes.

    Args:
        cubin: the ELF image.
        log: the ptxas ``-v`` log of the same compile (may be empty: spills then read 0).

    Returns:
        One entry per kernel in the cubin, keyed by mangled name.

    Raises:
        CubinError: the cubin cannot be read.
    """
    info = read_cubin(cubin)
    from_log = parse_ptxas_log(log)
    out: dict[str, KernelResources] = {}
    for name, kernel in info.kernels.items():
        elf = from_cubin_kernel(kernel)
        logged = from_log.get(name)
        if logged is not None:
            elf = replace(
                elf,
                spill_stores=logged.spill_stores,
                spill_loads=logged.spill_loads,
                cumulative_stack=logged.cumulative_stack,
            )
        out[name] = elf
    return out
