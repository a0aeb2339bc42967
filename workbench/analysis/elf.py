"""Low-level reading of CUDA ELF images: header checks, sections, symbols, ``.nv.info`` records.

Everything here raises :class:`CubinError` for input that is not a well-formed cubin, never a
pyelftools, construct or struct exception.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass

from workbench.analysis.errors import CubinError

EM_CUDA = 190
STO_CUDA_ENTRY = 0x10
STT_OBJECT = 1
STT_FUNC = 2

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 0x01, 0x02, 0x03, 0x04
EIATTR_MAX_THREADS = 0x05
EIATTR_REQNTID = 0x10
EIATTR_FRAME_SIZE = 0x11
EIATTR_KPARAM_INFO = 0x17
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
EIATTR_NUM_BARRIERS = 0x4C
EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET = 0x09


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
class ElfSection:
    """One ELF section: name, raw ``sh_type``, size and bytes (empty for NOBITS)."""

    name: str
    type: int
    size: int
    data: bytes


def check_header(data: bytes) -> None:
    """Check the ELF header and that the header tables and segments lie inside the image.

    Raises:
        CubinError: not a 64-bit little-endian EM_CUDA ELF, or truncated.
    """
    if len(data) < 64:
        raise CubinError(f"not a cubin: {len(data)} bytes is shorter than an ELF64 header")
    if data[:4] != b"\x7fELF":
        raise CubinError(f"not a cubin: no ELF magic (starts with {data[:4]!r})")
    if data[4] != 2 or data[5] != 1:
        raise CubinError("not a cubin: a cubin is a 64-bit little-endian ELF")
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != EM_CUDA:
        raise CubinError(f"not a cubin: ELF machine {machine}, expected EM_CUDA ({EM_CUDA})")
    phoff, shoff = struct.unpack_from("<QQ", data, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 54)
    if shnum == 0:
        raise CubinError("malformed cubin: no section headers")
    for what, end in (
        ("section", shoff + shentsize * shnum),
        ("program", phoff + phentsize * phnum),
    ):
        if end > len(data):
            raise CubinError(
                f"truncated cubin: {what} headers end at byte {end}, the image has {len(data)}"
            )
    for i in range(phnum if phentsize >= 56 else 0):
        offset, _vaddr, _paddr, filesz = struct.unpack_from(
            "<QQQQ", data, phoff + i * phentsize + 8
        )
        if filesz and offset + filesz > len(data):
            raise CubinError(
                f"truncated cubin: segment {i} ends at byte {offset + filesz}, "
                f"the image has {len(data)}"
            )


def sections(data: bytes) -> list[ElfSection]:
    """All sections, each bounds-checked against the image.

    Raises:
        CubinError: a section lies past the end of the image, or pyelftools cannot parse it.
    """
    from elftools.elf.elffile import ELFFile

    out: list[ElfSection] = []
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
            out.append(ElfSection(sec.name, raw_type, size, body))
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


@dataclass(frozen=True)
class Symbol:
    """One ``.symtab`` entry (``Elf64_Sym``): ``section`` is the index of the section it lies
    in (``st_shndx``), ``value`` its offset there in a relocatable cubin."""

    name: str
    kind: int  #: st_type: STT_OBJECT, STT_FUNC, ...
    other: int  #: raw st_other (pyelftools drops bit 4, STO_CUDA_ENTRY)
    section: int
    value: int
    size: int


def symbol_table(all_sections: list[ElfSection]) -> list[Symbol]:
    """Every symbol of the cubin, in table order (index 0 is the null symbol)."""
    symtab = next((s for s in all_sections if s.type == 2), None)
    if symtab is None:
        return []
    strtab = next((s for s in all_sections if s.name == ".strtab"), None)
    names = strtab.data if strtab else b""
    out: list[Symbol] = []
    for pos in range(0, len(symtab.data) - 23, 24):
        name_off, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", symtab.data, pos)
        end = names.find(b"\0", name_off)
        name = names[name_off : end if end >= 0 else len(names)].decode(errors="replace")
        out.append(Symbol(name, info & 0xF, other, shndx, value, size))
    return out


def symbols(all_sections: list[ElfSection]) -> list[tuple[str, int, int]]:
    """``(name, st_type, st_other)`` per symbol; st_other is raw (pyelftools drops bit 4)."""
    return [(s.name, s.kind, s.other) for s in symbol_table(all_sections)]


def int32_objects(all_sections: list[ElfSection]) -> dict[str, int]:
    """The value of every initialised 4-byte data object (``STT_OBJECT`` with bytes in the
    image: a ``__device__`` or ``__constant__`` ``int`` with an initialiser), by name; what a
    kernel exports for the host to read without a GPU."""
    out: dict[str, int] = {}
    for sym in symbol_table(all_sections):
        if sym.kind != STT_OBJECT or sym.size != 4 or not 0 < sym.section < len(all_sections):
            continue
        data = all_sections[sym.section].data  # empty for SHT_NOBITS (uninitialised)
        if sym.value + 4 <= len(data):
            out[sym.name] = struct.unpack_from("<i", data, sym.value)[0]
    return out


def cuinfo_virtual_sm(note: ElfSection | None) -> int | None:
    """The virtual SM from ``.note.nv.cuinfo``: desc = u16 version, u16 virtual SM, u32 tool."""
    if note is None or len(note.data) < 12:
        return None
    namesz, descsz, _type = struct.unpack_from("<III", note.data, 0)
    desc = 12 + (namesz + 3) // 4 * 4
    if descsz < 4 or desc + 4 > len(note.data):
        return None
    return struct.unpack_from("<H", note.data, desc + 2)[0] or None
