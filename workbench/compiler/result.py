"""What a compile produces: the binary and its evidence, or the failure and its log."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CompileResult:
    """One compile of one configuration.

    A failed compile is a result too (``ok`` false, ``log`` says why): a sweep records it and
    goes on. ``lowered_names`` maps each requested name expression (``reduce<256, 4>``) to its
    mangled symbol in the CUBIN; ``entry`` is the symbol to launch.
    """

    ok: bool
    key: str
    arch: str
    entry: str | None
    cubin: bytes | None
    ptx: str | None
    log: str
    lowered_names: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False
    toolchain: str = ""
