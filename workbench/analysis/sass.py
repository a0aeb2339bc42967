"""SASS per kernel from nvdisasm (or cuobjdump), parsed into instructions, with histograms.

Text this parser reads (nvdisasm ``-c``; cuobjdump ``-sass`` adds ``/* 0x... */`` encodings
and names functions with ``Function : name`` instead of ``.text.name:`` labels)::

    .text.smem_k:
            /*0000*/                   LDC R1, c[0x0][0x28] ;
            /*0080*/              @!P0 BRA `(.L_x_1) ;
            /*0370*/                   STL [R1+0x1dc], R24      (*"SpillRefill"*);
    .L_x_1:
            /*0230*/                   EXIT ;

Older dual-issue listings wrap a pair in ``{ ... }``; the braces are dropped.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from workbench.analysis.errors import CubinError, SassError
from workbench.errors import ToolchainError
from workbench.toolchain import find_tool

#: A disassembler run longer than this is treated as hung.
DISASM_TIMEOUT_S = 300

CATEGORIES = (
    "memory",
    "tensor",
    "fp32",
    "fp16",
    "fp64",
    "int",
    "move",
    "conversion",
    "control",
    "sync",
    "uniform",
    "other",
)

_CATEGORY_OF: dict[str, str] = {}
for _cat, _ops in {
    "memory": "LDG STG LDS STS LDL STL LD ST LDC LDGSTS LDSM STSM LDGDEPBAR ATOM ATOMG ATOMS "
    "RED REDG REDAS STAS UBLKCP UTMALDG UTMASTG UTMAPF UTMACCTL UTMACMDFLUSH UBLKPF UBLKRED "
    "UTMAREDG CCTL CCTLL "
    "CCTLT SULD SUST SUATOM SURED TLD TEX TLD4 TXQ MATCH QSPC ERRBAR MEMBAR FENCE LDTRAM",
    "tensor": "HMMA IMMA QMMA BMMA DMMA HGMMA IGMMA QGMMA BGMMA UTCHMMA UTCIMMA UTCQMMA UTCOMMA "
    "UTCMMA OMMA",
    "fp32": "FADD FMUL FFMA FFMA32I FMUL32I FADD32I FMNMX FSET FSETP FSEL FCHK FSWZADD MUFU FRND "
    "FMNMX3 FADD2 FMUL2 FFMA2",
    "fp16": "HADD2 HMUL2 HFMA2 HMNMX2 HSET2 HSETP2",
    "fp64": "DADD DMUL DFMA DMNMX DSET DSETP",
    "int": "IADD IADD3 IMAD IMUL ISETP ISCADD LEA LOP LOP3 SHF SHL SHR IMNMX IABS ISET "
    "POPC FLO BREV BMSK SGXT PRMT VABSDIFF VABSDIFF4 IDP IDP4A VIADD VIMNMX VIADDMNMX "
    "IADD32I IMUL32I LOP32I SEL PLOP3 PSETP",
    "move": "MOV MOV32I P2R R2P CS2R S2R S2UR R2UR",
    "conversion": "F2F F2FP F2I I2F I2I I2FP F2IP",
    "control": "BRA BRX JMP JMX CALL RET EXIT BSSY BSYNC BREAK BMOV WARPSYNC KILL NOP YIELD BPT "
    "JMXU ACQBULK ENDCOLLECTIVE ELECT PREEXIT",
    "sync": "BAR BARRIER SYNCS DEPBAR WARPGROUP NANOSLEEP ARRIVES UCGABAR_ARV UCGABAR_WAIT "
    "CGAERRBAR WARPGROUPSET SHFL VOTE VOTEU REDUX CREDUX",
}.items():
    for _op in _ops.split():
        _CATEGORY_OF.setdefault(_op, _cat)


@dataclass(frozen=True)
class SassInstruction:
    """One SASS instruction.

    ``opcode`` carries the modifiers (``LDG.E.EF.128.CONSTANT``); ``base`` is the part before
    the first dot (``LDG``); ``predicate`` is ``@!P0`` style or empty; ``annotation`` holds
    nvdisasm's ``(*"SpillRefill"*)`` style notes.
    """

    offset: int
    predicate: str
    opcode: str
    base: str
    operands: str
    annotation: str = ""

    @property
    def category(self) -> str:
        """Report category of the instruction (see :func:`category`)."""
        return category(self.opcode)

    def __str__(self) -> str:
        pred = f"{self.predicate} " if self.predicate else ""
        ops = f" {self.operands}" if self.operands else ""
        return f"/*{self.offset:04x}*/ {pred}{self.opcode}{ops} ;"


def category(opcode: str) -> str:
    """Category of an opcode: one of :data:`CATEGORIES`.

    Args:
        opcode: full (``HFMA2.MMA``) or base (``LDG``) opcode.

    Returns:
        The category; uniform-datapath ops (``UIADD3``, ``ULDC``) take their vector twin's
        category when it has one (``ULDC`` is memory), else ``"uniform"``.
    """
    op = opcode.upper()
    if op in _CATEGORY_OF:
        return _CATEGORY_OF[op]
    base = op.split(".", 1)[0]
    if base in _CATEGORY_OF:
        return _CATEGORY_OF[base]
    if base.startswith("U") and len(base) > 1:
        twin = _CATEGORY_OF.get(base[1:])
        return twin or "uniform"
    return "other"


_LINE = re.compile(r"^\s*/\*(?P<off>[0-9a-fA-F]+)\*/\s*(?P<body>.*)$")
_ENCODING = re.compile(r"/\*\s*0x[0-9a-fA-F]+\s*\*/")
_ANNOTATION = re.compile(r"\(\*\s*(?P<text>.*?)\s*\*\)")
_TEXT_LABEL = re.compile(r"^\.text\.(?P<name>\S+?):\s*$")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(?P<name>\S+)\s*$")


def parse_sass(text: str) -> dict[str, list[SassInstruction]]:
    """Parse nvdisasm or cuobjdump SASS text into instructions per function.

    Args:
        text: the disassembler's standard output.

    Returns:
        Instructions per function (the ``.text.<name>`` section or ``Function : name`` block),
        in address order; local labels and sub-function labels stay in their section.
    """
    out: dict[str, list[SassInstruction]] = {}
    current: list[SassInstruction] | None = None
    for raw in text.splitlines():
        line = raw.split("//", 1)[0] if raw.lstrip().startswith("//") else raw
        if m := _TEXT_LABEL.match(line.strip()) or _FUNCTION.match(line):
            current = out.setdefault(m.group("name"), [])
            continue
        m = _LINE.match(line)
        if m is None or current is None:
            continue
        if (inst := _parse_instruction(int(m.group("off"), 16), m.group("body"))) is not None:
            current.append(inst)
    return out


def _parse_instruction(offset: int, body: str) -> SassInstruction | None:
    body = _ENCODING.sub("", body)
    notes = [a.group("text").strip('"') for a in _ANNOTATION.finditer(body)]
    body = _ANNOTATION.sub("", body).strip()
    body = body.strip("{} \t").rstrip(";").strip().strip("{}").strip()
    if not body:
        return None
    predicate = ""
    if body.startswith("@"):
        predicate, _, body = body.partition(" ")
        body = body.strip()
    opcode, _, operands = body.partition(" ")
    return SassInstruction(
        offset=offset,
        predicate=predicate,
        opcode=opcode,
        base=opcode.split(".", 1)[0],
        operands=operands.strip(),
        annotation=" ".join(notes),
    )


def disassemble(cubin: bytes) -> dict[str, list[SassInstruction]]:
    """SASS of every function in a cubin, keyed by (mangled) name.

    Each disassembler run costs most of a second of CPU (tool start-up): callers that look at
    the same binary again should keep :func:`disassembly_text` (the compile cache does).

    Raises:
        CubinError, ToolchainError, SassError: as :func:`disassembly_text`.
    """
    return parse_sass(disassembly_text(cubin))


def disassembly_text(cubin: bytes) -> str:
    """The disassembler's text for a cubin.

    Runs ``nvdisasm -c``; if it is missing or fails, ``cuobjdump -sass``.

    Args:
        cubin: the ELF image.

    Returns:
        The SASS listing (parse it with :func:`parse_sass`).

    Raises:
        CubinError: the bytes are not an ELF image.
        ToolchainError: neither nvdisasm nor cuobjdump is installed.
        SassError: both tools failed on the image.
    """
    if len(cubin) < 64 or cubin[:4] != b"\x7fELF":
        raise CubinError("not a cubin: no ELF header")
    failures: list[str] = []
    missing: list[str] = []
    with tempfile.TemporaryDirectory(prefix="workbench-sass-") as tmp:
        path = os.path.join(tmp, "kernel.cubin")
        with open(path, "wb") as fh:
            fh.write(cubin)
        for tool, args in (("nvdisasm", ["-c"]), ("cuobjdump", ["-sass"])):
            try:
                exe = find_tool(tool)
            except ToolchainError as exc:
                missing.append(str(exc))
                continue
            try:
                proc = subprocess.run(
                    [exe, *args, path], capture_output=True, text=True, timeout=DISASM_TIMEOUT_S
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                failures.append(f"{tool}: {exc}")
                continue
            if proc.returncode == 0:
                return proc.stdout
            failures.append(f"{tool} exited {proc.returncode}: {proc.stderr.strip()[:500]}")
    if missing and not failures:
        raise ToolchainError("; ".join(missing))
    raise SassError("no SASS from the cubin: " + "; ".join(failures + missing))


def histogram(instructions: Iterable[SassInstruction]) -> Counter[str]:
    """Count base opcodes.

    Args:
        instructions: one kernel's SASS.

    Returns:
        ``Counter`` of base opcodes (``LDG``, ``HMMA``).
    """
    return Counter(i.base for i in instructions)


def full_histogram(instructions: Iterable[SassInstruction]) -> Counter[str]:
    """Count full opcodes with their modifiers.

    Args:
        instructions: one kernel's SASS.

    Returns:
        ``Counter`` of full opcodes (``LDG.E.128``, ``HMMA.16816.F32``).
    """
    return Counter(i.opcode for i in instructions)


def category_histogram(instructions: Iterable[SassInstruction]) -> Counter[str]:
    """Count instructions per category.

    Args:
        instructions: one kernel's SASS.

    Returns:
        ``Counter`` keyed by the names in :data:`CATEGORIES`.
    """
    return Counter(i.category for i in instructions)


def find_opcode(instructions: Iterable[SassInstruction], prefix: str) -> list[SassInstruction]:
    """Instructions whose full opcode is ``prefix`` or extends it by modifiers.

    A prefix ends at a dot boundary and is case-insensitive: ``"IMMA"`` matches
    ``IMMA.16832.S8.S8``, ``"LDG.E.EF"`` matches ``LDG.E.EF.128``, ``"HMMA"`` does not match
    ``HMMA2``.

    Args:
        instructions: one kernel's SASS.
        prefix: opcode with or without modifiers.

    Returns:
        The matching instructions, in order.
    """
    want = prefix.upper().rstrip(".")
    return [
        i for i in instructions if (op := i.opcode.upper()) == want or op.startswith(want + ".")
    ]


def has_opcode(instructions: Iterable[SassInstruction], prefix: str) -> bool:
    """Whether any instruction matches ``prefix`` as :func:`find_opcode` does.

    Args:
        instructions: one kernel's SASS.
        prefix: ``"IMMA"``, ``"HGMMA"``, ``"SHFL"``, ``"LDG.E.EF"`` (streaming load)...

    Returns:
        True when at least one instruction matches.
    """
    return bool(find_opcode(instructions, prefix))


def streaming_loads(instructions: Iterable[SassInstruction]) -> list[SassInstruction]:
    """Global loads with the evict-first hint.

    ``ld.global.cs`` and ``ld.global.L1::evict_first`` both become ``LDG.E.EF`` (sm_80, sm_90).

    Args:
        instructions: one kernel's SASS.

    Returns:
        The ``LDG`` instructions carrying the ``EF`` modifier.
    """
    return [i for i in instructions if i.base == "LDG" and "EF" in i.opcode.split(".")[1:]]
