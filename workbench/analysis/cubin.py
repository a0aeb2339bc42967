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
* On sm_90 and newer every ``.nv.shared.<name>`` section starts with the 1 KiB the driver
  reserves per block (user data starts at 0x400), so it is 1024 bytes larger than the
  ``N bytes smem`` ptxas prints; cuobjdump ``-res-usage`` prints the section size.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from workbench.analysis.errors import CubinError

EM_CUDA = 190
STO_CUDA_ENTRY = 0x10
STT_FUNC = 2

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 0x01, 0x02, 0x03, 0x04
EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
EIATTR_NUM_BARRIERS = 0x4C
EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET = 0x09

#: Shared memory the driver reserves per block on sm_80+; sm_90+ cubins include it in the
#: kernel's ``.nv.shared.<name>`` section.
RESERVED_SHARED_BYTES = 1024


@dataclass(frozen=True)
class NvInfoRecord:
    """One ``.nv.info`` / ``.nv.compat`` record.

    ``value`` is the inline value of NVAL/BVAL/HVAL records; ``payload`` the bytes of an SVAL.
    """

    fmt: int
    attribute: int
    value: int
    payload: bytes = b""

    def words(self) -> tuple[int, ...]:
        """The SVAL payload as little-endian u32 words (a trailing partial word is dropped)."""
        n = len(self.payload) // 4
        return struct.unpack_from(f"<{n}I", self.payload) if n else ()


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
    barriers: int
    param_bytes: int | None
    cmem0: int | None
    code_bytes: int

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

    @property
    def arch(self) -> str:
        """``sm_90a`` style name (``f`` family targets read as the plain arch)."""
        return f"sm_{self.cc}{'a' if self.accelerated else ''}"


def parse_nv_info(data: bytes, section: str = ".nv.info") -> list[NvInfoRecord]:
    """Split an ``.nv.info``-format section into records.

    Args:
        data: the section bytes.
        section: the section name, for error messages.

    Returns:
        The records in file order.

    Raises:
        CubinError: a record runs past the end of the section or has an unknown format.
    """
    records: list[NvInfoRecord] = []
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CubinError(f"{section}: truncated record header at offset {pos}")
        fmt, attr, field = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt == EIFMT_SVAL:
            if pos + field > len(data):
                raise CubinError(f"{section}: record 0x{attr:02x} runs past the section end")
            records.append(NvInfoRecord(fmt, attr, field, bytes(data[pos : pos + field])))
            pos += field
        elif fmt in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
            value = field & 0xFF if fmt == EIFMT_BVAL else field
            records.append(NvInfoRecord(fmt, attr, value))
        else:
            raise CubinError(f"{section}: unknown record format 0x{fmt:02x} at offset {pos - 4}")
    return records


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    size: int
    data: bytes


def read_cubin(cubin: bytes) -> CubinInfo:
    """Decode a cubin's architecture and per-kernel resources with pyelftools.

    Args:
        cubin: the ELF image (as NVRTC's ``nvrtcGetCUBIN`` or ptxas writes it).

    Returns:
        The target architecture and one :class:`CubinKernel` per entry point (mangled names).

    Raises:
        CubinError: not a 64-bit little-endian CUDA ELF, truncated, or malformed.
    """
    data = bytes(cubin)
    _check_header(data)
    sections = _sections(data)
    by_name = {s.name: s for s in sections}
    symbols = _symbols(sections)
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
    virtual = _cuinfo_virtual_sm(by_name.get(".note.nv.cuinfo")) or virtual

    per_symbol: dict[int, dict[int, int]] = {}
    if ".nv.info" in by_name:
        for rec in parse_nv_info(by_name[".nv.info"].data):
            words = rec.words()
            if rec.fmt == EIFMT_SVAL and len(words) == 2:
                per_symbol.setdefault(words[0], {})[rec.attribute] = words[1]
    entries = [
        (i, name)
        for i, (name, kind, other) in enumerate(symbols)
        if kind == STT_FUNC and other & STO_CUDA_ENTRY
    ]
    if not entries:  # older producers: every kernel has an .nv.info.<name> section
        index = {name: i for i, (name, _, _) in enumerate(symbols)}
        entries = [
            (index.get(s.name[9:], -1), s.name[9:])
            for s in sections
            if s.name.startswith(".nv.info.")
        ]
    has_reserved = any(s.name.startswith(".nv.shared.reserved") for s in sections)
    kernels: dict[str, CubinKernel] = {}
    for sym, name in entries:
        attrs = per_symbol.get(sym, {})
        kernels[name] = _kernel(name, attrs, by_name, reserved=has_reserved and cc >= 90)
    return CubinInfo(cc, accelerated, virtual, abi, e_flags, kernels)


def _kernel(
    name: str, attrs: dict[int, int], by_name: dict[str, _Section], *, reserved: bool
) -> CubinKernel:
    max_threads: tuple[int, int, int] | None = None
    max_reg: int | None = None
    param_bytes: int | None = None
    barriers = 0
    info = by_name.get(f".nv.info.{name}")
    for rec in parse_nv_info(info.data, info.name) if info else []:
        if rec.attribute == EIATTR_MAX_THREADS and len(rec.words()) >= 3:
            x, y, z = rec.words()[:3]
            max_threads = (x, y, z)
        elif rec.attribute == EIATTR_MAXREG_COUNT and rec.fmt == EIFMT_HVAL:
            max_reg = rec.value
        elif rec.attribute == EIATTR_NUM_BARRIERS and rec.fmt != EIFMT_SVAL:
            barriers = rec.value
        elif rec.attribute == EIATTR_CBANK_PARAM_SIZE and rec.fmt == EIFMT_HVAL:
            param_bytes = rec.value
    shared = by_name.get(f".nv.shared.{name}")
    shared_bytes = shared.size if shared else 0
    reserved_bytes = RESERVED_SHARED_BYTES if reserved and shared_bytes >= 1024 else 0
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
        barriers=barriers,
        param_bytes=param_bytes,
        cmem0=cmem0.size if cmem0 else None,
        code_bytes=text.size if text else 0,
    )


def _check_header(data: bytes) -> None:
    if len(data) < 64:
        raise CubinError(f"not a cubin: {len(data)} bytes is shorter than an ELF64 header")
    if data[:4] != b"\x7fELF":
        raise CubinError(f"not a cubin: no ELF magic (starts with {data[:4]!r})")
    if data[4] != 2 or data[5] != 1:
        raise CubinError("not a cubin: a cubin is a 64-bit little-endian ELF")
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != EM_CUDA:
        raise CubinError(f"not a cubin: ELF machine {machine}, expected EM_CUDA ({EM_CUDA})")
    shoff = struct.unpack_from("<Q", data, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    if shnum == 0 or shoff + shentsize * shnum > len(data):
        raise CubinError(
            f"truncated cubin: section headers end at byte {shoff + shentsize * shnum}, "
            f"the image has {len(data)}"
        )


def _sections(data: bytes) -> list[_Section]:
    from elftools.elf.elffile import ELFFile

    out: list[_Section] = []
    try:
        elf = ELFFile(io.BytesIO(data))
        for sec in elf.iter_sections():
            kind = sec["sh_type"]
            raw_type = kind if isinstance(kind, int) else _SHT.get(kind, -1)
            size, offset = sec["sh_size"], sec["sh_offset"]
            if raw_type != 8 and size and offset + size > len(data):  # 8 = SHT_NOBITS
                raise CubinError(
                    f"truncated cubin: section {sec.name} ends at byte {offset + size}, "
                    f"the image has {len(data)}"
                )
            body = b"" if raw_type == 8 else bytes(data[offset : offset + size])
            out.append(_Section(sec.name, raw_type, size, body))
    except CubinError:
        raise
    except Exception as exc:  # pyelftools raises ELFError, construct errors, struct.error...
        raise CubinError(f"malformed cubin: {type(exc).__name__}: {exc}") from exc
    return out


_SHT = {
    "SHT_NULL": 0,
    "SHT_PROGBITS": 1,
    "SHT_SYMTAB": 2,
    "SHT_STRTAB": 3,
    "SHT_RELA": 4,
    "SHT_NOTE": 7,
    "SHT_NOBITS": 8,
    "SHT_REL": 9,
}


def _symbols(sections: list[_Section]) -> list[tuple[str, int, int]]:
    """``(name, st_type, st_other)`` per symbol; st_other is raw (pyelftools drops bit 4)."""
    symtab = next((s for s in sections if s.type == 2), None)
    if symtab is None:
        return []
    strtab = next((s for s in sections if s.name == ".strtab"), None)
    names = strtab.data if strtab else b""
    out: list[tuple[str, int, int]] = []
    for pos in range(0, len(symtab.data) - 23, 24):
        name_off, info, other = struct.unpack_from("<IBB", symtab.data, pos)
        end = names.find(b"\0", name_off)
        name = names[name_off : end if end >= 0 else len(names)].decode(errors="replace")
        out.append((name, info & 0xF, other))
    return out


def _cuinfo_virtual_sm(note: _Section | None) -> int | None:
    """The virtual SM from ``.note.nv.cuinfo``: desc = u16 version, u16 virtual SM, u32 tool."""
    if note is None or len(note.data) < 12:
        return None
    namesz, descsz, _type = struct.unpack_from("<III", note.data, 0)
    desc = 12 + (namesz + 3) // 4 * 4
    if descsz < 4 or desc + 4 > len(note.data):
        return None
    return struct.unpack_from("<H", note.data, desc + 2)[0] or None
