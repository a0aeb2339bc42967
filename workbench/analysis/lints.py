"""Static checks on one compiled kernel: spills, local memory, emulated FP8, missing SASS."""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.analysis.resources import KernelResources
from workbench.analysis.sass import SassInstruction, category, find_opcode, has_opcode
from workbench.toolchain import Arch


class LintCode(enum.Enum):
    """What a lint is about."""

    SPILLS = "spills"
    LOCAL_MEMORY = "local-memory"
    FP8_MMA_EMULATED = "fp8-mma-emulated"
    EXPECTED_SASS_MISSING = "expected-sass-missing"
    #: the space's launch geometry does not evaluate for the config
    LAUNCH_GEOMETRY = "launch-geometry"
    #: the config compiles but cannot launch (threads past the kernel's bound, occupancy 0)
    CANNOT_LAUNCH = "cannot-launch"
    #: the space's ``args`` do not fit the kernel's parameters
    ARGS_MISMATCH = "args-mismatch"
    #: the config did not compile (or its binary cannot be read)
    COMPILE_FAILED = "compile-failed"


class Severity(enum.Enum):
    """How bad it is: a warning costs speed, an error means the kernel is not what was meant."""

    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Lint:
    """One finding about a kernel."""

    kernel: str
    code: LintCode
    severity: Severity
    message: str

    def __str__(self) -> str:
        return f"{self.severity.value}: {self.kernel}: [{self.code.value}] {self.message}"

    @property
    def text(self) -> str:
        """``error: cannot launch: ...``: the level, then what was found, as a compile record
        shows and exports it (tables, ``--json``, ``--csv``)."""
        return f"{self.severity.value}: {self.message}"

    def at_least(self, level: Severity) -> bool:
        """Whether it is ``level`` or worse (levels mildest first, as :class:`Severity` lists
        them)."""
        order = list(Severity)
        return order.index(self.severity) >= order.index(level)


_FP8_MMA_SYNC = re.compile(r"\bmma\.sync\.[\w.]*\.(?:e4m3|e5m2)\b")


def lint(
    kernel: str,
    arch: str,
    resources: KernelResources,
    instructions: Sequence[SassInstruction],
    ptx: str | None,
    expect_sass: Sequence[str] = (),
) -> list[Lint]:
    """Check one kernel's resources, SASS and PTX for known performance traps.

    Args:
        kernel: the kernel's name (used in messages).
        arch: target architecture, ``sm_90a`` style.
        resources: the kernel's resources (from :func:`kernel_resources`).
        instructions: the kernel's SASS (from :func:`disassemble`).
        ptx: the PTX the kernel was compiled from, when known (needed for the FP8 rule).
        expect_sass: opcode prefixes that must appear (``"IMMA"``, ``"LDG.E.EF"``).

    Returns:
        Findings, in rule order; empty when the kernel is clean.

    Raises:
        ArchError: ``arch`` is not an architecture name.
    """
    target = Arch.parse(arch)
    found = [
        _spills(kernel, resources),
        _local_memory(kernel, resources, instructions),
        _emulated_fp8(kernel, target, instructions, ptx),
    ]
    return [f for f in found if f is not None] + _missing_sass(
        kernel, target, instructions, expect_sass
    )


def _spills(kernel: str, resources: KernelResources) -> Lint | None:
    """Registers spilled to local memory: each spill is a trip through L1/L2."""
    if not resources.spills:
        return None
    return Lint(
        kernel,
        LintCode.SPILLS,
        Severity.WARNING,
        f"registers spill to local memory: {resources.spill_stores} bytes of spill stores, "
        f"{resources.spill_loads} bytes of spill loads at {resources.registers} registers; "
        "reduce live values or raise maxrregcount/launch bounds",
    )


def _local_memory(
    kernel: str, resources: KernelResources, instructions: Sequence[SassInstruction]
) -> Lint | None:
    """A stack frame or LDL/STL instructions: arrays the compiler could not keep in registers."""
    local_ops = [i for i in instructions if i.base in ("LDL", "STL")]
    if resources.stack_frame <= 0 and not local_ops:
        return None
    what = [f"{resources.stack_frame} bytes stack frame"] if resources.stack_frame else []
    if local_ops:
        what.append(f"{len(local_ops)} LDL/STL instructions")
    return Lint(
        kernel,
        LintCode.LOCAL_MEMORY,
        Severity.WARNING,
        "kernel uses local memory (" + ", ".join(what) + "): dynamically indexed arrays or "
        "spills go through L1/L2 instead of registers",
    )


def _emulated_fp8(
    kernel: str, target: Arch, instructions: Sequence[SassInstruction], ptx: str | None
) -> Lint | None:
    """FP8 ``mma.sync`` on sm_90 compiles to unpacks and HMMA (no QMMA): only wgmma is native."""
    if (
        ptx is None
        or target.cc != 90
        or not _FP8_MMA_SYNC.search(ptx)
        or has_opcode(instructions, "QMMA")
        or not has_opcode(instructions, "HMMA")
    ):
        return None
    # F2FP also packs the epilogue's outputs (F2FP.BF16.F32.PACK_AB): count unpacks only
    unpacks = sum("UNPACK" in i.opcode for i in find_opcode(instructions, "F2FP"))
    return Lint(
        kernel,
        LintCode.FP8_MMA_EMULATED,
        Severity.WARNING,
        f"FP8 mma.sync on {target.sm} is emulated (F2FP + HMMA: {unpacks} F2FP unpacks, "
        f"{len(find_opcode(instructions, 'HMMA'))} HMMA); use wgmma on sm_90a",
    )


def _missing_sass(
    kernel: str, target: Arch, instructions: Sequence[SassInstruction], expect_sass: Sequence[str]
) -> list[Lint]:
    """An error per expected opcode prefix the SASS lacks (the kernel is not what was meant)."""
    found = []
    for prefix in expect_sass:
        if not has_opcode(instructions, prefix):
            kind = "tensor-core instructions" if category(prefix) == "tensor" else "instructions"
            found.append(
                Lint(
                    kernel,
                    LintCode.EXPECTED_SASS_MISSING,
                    Severity.ERROR,
                    f"expected {kind} ({prefix}) not found in the SASS for {target.sm}",
                )
            )
    return found
