"""Read a CUDA cubin's ELF: target architecture, kernel entry points and their resources.

What was measured on NVRTC/ptxas 13.5 cubins (``EI_ABIVERSION`` 8, the layout CUDA 13 writes
for every target, sm_75 included), and what this module relies on:

* The SM number is in ``e_flags`` bits 8..15 (ABI 7 and older: the low byte). The ``a`` suffix
  is *not* in ``e_flags`` (sm_90 and sm_90a both give ``0x09005a04``): it is attribute 0x09
  (``EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET``) of the ``.nv.compat`` section, which is where
  nvdisasm and cuobjdump read it from. The ``f`` suffix leaves no trace (sm_100f == sm_100).
  The virtual (PTX) architecture is in the ``.note.nv.cuinfo`` note.
* ``.nv.info`` records are ``u8 format, u8 attribute, u16 field``; for ``EIFMT_SVAL`` the field
  is the payload size and the payload follows; for ``NVAL``/``BVAL``/``HVAL`` the record is these
  4 bytes (the value is in the field; ``BVAL`` uses its low byte). Register counts, frame and
  stack sizes are in the *global* ``.nv.info`` keyed by symbol index, not in ``.nv.info.<name>``.
* Kernel entry symbols are ``STT_FUNC`` with ``STO_CUDA_ENTRY`` (0x10) in ``st_other``.
* An initialised ``__device__`` variable is an ``STT_OBJECT`` symbol whose ``st_value`` is its
  offset in ``.nv.global.init`` (``__constant__``: ``.nv.constant3``); NVRTC keeps an
  ``extern "C"`` one that no kernel reads.
* On sm_90 and newer every ``.nv.shared.<name>`` section starts with the 1 KiB the driver
  reserves per block (user data starts at 0x400), so it is 1024 bytes larger than the
  ``N bytes smem`` ptxas prints; cuobjdump ``-res-usage`` prints the section size.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field

from workbench.analysis.elf import (
    EIATTR_CBANK_PARAM_SIZE,
    EIATTR_FRAME_SIZE,
    EIATTR_KPARAM_INFO,
    EIATTR_MAX_STACK_SIZE,
    EIATTR_MAX_THREADS,
    EIATTR_MAXREG_COUNT,
    EIATTR_MIN_STACK_SIZE,
    EIATTR_NUM_BARRIERS,
    EIATTR_REGCOUNT,
    EIATTR_REQNTID,
    EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET,
    EIFMT_HVAL,
    EIFMT_SVAL,
    STO_CUDA_ENTRY,
    STT_FUNC,
    ElfSection,
    check_header,
    cuinfo_virtual_sm,
    int32_objects,
    parse_nv_info,
    sections,
    symbols,
)

__all__ = ["CubinInfo", "CubinKernel", "ParamSlot", "parse_nv_info", "read_cubin"]

#: Shared memory the driver reserves per block on sm_80+; sm_90+ cubins include it in the
#: kernel's ``.nv.shared.<name>`` section.
RESERVED_SHARED_BYTES = 1024


@dataclass(frozen=True)
class ParamSlot:
    """One kernel parameter as the driver lays it out (``EIATTR_KPARAM_INFO``): its position in
    the argument list, its byte offset in the parameter constant bank and its size in bytes."""

    ordinal: int
    offset: int
    size: int


@dataclass(frozen=True)
class CubinKernel:
    """Resources of one kernel as recorded in the cubin (the numbers the driver loads)."""

    name: str
    registers: int
    shared_section_bytes: int
    reserved_shared_bytes: int
    frame_size: int
    min_stack_size: int
    max_stack_size: int | None
    max_threads: tuple[int, int, int] | None
    max_reg_count: int | None
    #: the exact block a launch must have (PTX ``.reqntid``), if the kernel demands one
    required_threads: tuple[int, int, int] | None
    barriers: int
    param_bytes: int | None
    cmem0: int | None
    code_bytes: int
    #: the parameters in order; None when the cubin does not describe them
    params: tuple[ParamSlot, ...] | None = None

    @property
    def static_shared_bytes(self) -> int:
        """User-declared static ``__shared__`` bytes (what ptxas prints as ``bytes smem``)."""
        return self.shared_section_bytes - self.reserved_shared_bytes


@dataclass(frozen=True)
class CubinInfo:
    """What a cubin says about its target and its kernels."""

    cc: int
    accelerated: bool
    virtual_cc: int | None
    abi_version: int
    e_flags: int
    kernels: dict[str, CubinKernel]
    #: initialised 4-byte data objects by name (``__device__ const int x = 1;`` and the like):
    #: what a kernel exports for the host, such as its setmaxnreg budget
    int32_objects: dict[str, int] = field(default_factory=dict)

    @property
    def arch(self) -> str:
        """``sm_90a`` style name (``f`` family targets read as the plain arch)."""
        return f"sm_{self.cc}{'a' if self.accelerated else ''}"


def read_cubin(cubin: bytes) -> CubinInfo:
    """Decode a cubin's architecture and per-kernel resources with pyelftools.

    Args:
        cubin: the ELF image (as NVRTC's ``nvrtcGetCUBIN`` or ptxas writes it).

    Returns:
        The target architecture and one :class:`CubinKernel` per entry point (mangled names).

    Raises:
        CubinError: not a 64-bit little-endian CUDA ELF, truncated, or malformed.
    """
    # one image is read by a compile's resources, its args check and the runner: parse it once
    return _read_cubin(bytes(cubin))


@functools.lru_cache(maxsize=16)
def _read_cubin(data: bytes) -> CubinInfo:
    check_header(data)
    secs = sections(data)
    by_name = {s.name: s for s in secs}
    syms = symbols(secs)
    e_flags = struct.unpack_from("<I", data, 48)[0]
    abi = data[8]
    if abi >= 8:
        cc, accelerated, virtual = (e_flags >> 8) & 0xFF, bool(e_flags & 0x8), None
    else:
        cc, accelerated = e_flags & 0xFF, bool(e_flags & 0x800)
        virtual = ((e_flags >> 16) & 0xFF) or None
    if ".nv.compat" in by_name:
        for rec in parse_nv_info(by_name[".nv.compat"].data, ".nv.compat"):
            if rec.attribute == EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET and rec.fmt != EIFMT_SVAL:
                accelerated = accelerated or rec.value == 1
    virtual = cuinfo_virtual_sm(by_name.get(".note.nv.cuinfo")) or virtual

    per_symbol: dict[int, dict[int, int]] = {}
    if ".nv.info" in by_name:
        for rec in parse_nv_info(by_name[".nv.info"].data):
            words = rec.words()
            if rec.fmt == EIFMT_SVAL and len(words) == 2:
                per_symbol.setdefault(words[0], {})[rec.attribute] = words[1]
    entries = [
        (i, name)
        for i, (name, kind, other) in enumerate(syms)
        if kind == STT_FUNC and other & STO_CUDA_ENTRY
    ]
    if not entries:  # older producers: every kernel has an .nv.info.<name> section
        index = {name: i for i, (name, _, _) in enumerate(syms)}
        entries = [
            (index.get(s.name[9:], -1), s.name[9:]) for s in secs if s.name.startswith(".nv.info.")
        ]
    has_reserved = any(s.name.startswith(".nv.shared.reserved") for s in secs)
    kernels: dict[str, CubinKernel] = {}
    for sym, name in entries:
        attrs = per_symbol.get(sym, {})
        kernels[name] = _kernel(name, attrs, by_name, reserved=has_reserved and cc >= 90)
    return CubinInfo(cc, accelerated, virtual, abi, e_flags, kernels, int32_objects(secs))


def _kernel(
    name: str, attrs: dict[int, int], by_name: dict[str, ElfSection], *, reserved: bool
) -> CubinKernel:
    max_threads: tuple[int, int, int] | None = None
    required: tuple[int, int, int] | None = None
    max_reg: int | None = None
    param_bytes: int | None = None
    barriers = 0
    slots: list[ParamSlot] = []
    info = by_name.get(f".nv.info.{name}")
    for rec in parse_nv_info(info.data, info.name) if info else []:
        if rec.attribute == EIATTR_MAX_THREADS and len(rec.words()) >= 3:
            x, y, z = rec.words()[:3]
            max_threads = (x, y, z)
        elif rec.attribute == EIATTR_REQNTID and len(rec.words()) >= 3:
            x, y, z = rec.words()[:3]
            required = (x, y, z)
        elif rec.attribute == EIATTR_MAXREG_COUNT and rec.fmt == EIFMT_HVAL:
            max_reg = rec.value
        elif rec.attribute == EIATTR_NUM_BARRIERS and rec.fmt != EIFMT_SVAL:
            barriers = rec.value
        elif rec.attribute == EIATTR_CBANK_PARAM_SIZE and rec.fmt == EIFMT_HVAL:
            param_bytes = rec.value
        elif rec.attribute == EIATTR_KPARAM_INFO and len(rec.words()) >= 3:
            # u32 index; u16 ordinal, u16 offset; u32 flags with the size in bits 18..31
            _, position, flags = rec.words()[:3]
            slots.append(ParamSlot(position & 0xFFFF, position >> 16, flags >> 18))
    shared = by_name.get(f".nv.shared.{name}")
    shared_bytes = shared.size if shared else 0
    reserved_bytes = (
        RESERVED_SHARED_BYTES if reserved and shared_bytes >= RESERVED_SHARED_BYTES else 0
    )
    cmem0 = by_name.get(f".nv.constant0.{name}")
    text = by_name.get(f".text.{name}")
    return CubinKernel(
        name=name,
        registers=attrs.get(EIATTR_REGCOUNT, 0),
        shared_section_bytes=shared_bytes,
        reserved_shared_bytes=reserved_bytes,
        frame_size=attrs.get(EIATTR_FRAME_SIZE, 0),
        min_stack_size=attrs.get(EIATTR_MIN_STACK_SIZE, 0),
        max_stack_size=attrs.get(EIATTR_MAX_STACK_SIZE),
        max_threads=max_threads,
        max_reg_count=max_reg,
        required_threads=required,
        barriers=barriers,
        param_bytes=param_bytes,
        cmem0=cmem0.size if cmem0 else None,
        code_bytes=text.size if text else 0,
        params=_params(slots, param_bytes),
    )


def _params(slots: list[ParamSlot], param_bytes: int | None) -> tuple[ParamSlot, ...] | None:
    """The slots in ordinal order, or None when they do not account for every parameter (a
    producer that writes no ``KPARAM_INFO``, or a gap in the ordinals)."""
    ordered = tuple(sorted(slots, key=lambda p: p.ordinal))
    if [p.ordinal for p in ordered] != list(range(len(ordered))):
        return None
    if not ordered and param_bytes:  # parameters exist but are not described
        return None
    return ordered
