"""SASS from real cubins: shuffles, tensor-core ops, cache hints, parsing of both tools."""

from __future__ import annotations

import itertools
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from workbench.analysis import (
    CubinError,
    SassInstruction,
    category,
    category_histogram,
    disassemble,
    find_opcode,
    full_histogram,
    has_opcode,
    histogram,
    parse_sass,
    streaming_loads,
)
from workbench.compiler.nvrtc import compile_cuda
from workbench.compiler.options import CompileOptions
from workbench.compiler.ptx import assemble_ptx
from workbench.toolchain import Arch, find_tool

SHFL = r"""
extern "C" __global__ void shfl_reduce(const float* x, float* y) {
  float v = x[threadIdx.x + blockIdx.x * blockDim.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(y, v);
}
"""

MMA = r"""
extern "C" __global__ void mma_k(const unsigned* a, const unsigned* b, TYPE_D* c) {
  int t = threadIdx.x;
  unsigned a0 = a[t*4], a1 = a[t*4+1], a2 = a[t*4+2], a3 = a[t*4+3], b0 = b[t*2], b1 = b[t*2+1];
  TYPE_D d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.SHAPE {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};"
    : "=CD"(d0), "=CD"(d1), "=CD"(d2), "=CD"(d3)
    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),
      "CD"(ZERO), "CD"(ZERO), "CD"(ZERO), "CD"(ZERO));
  c[t*4] = d0; c[t*4+1] = d1; c[t*4+2] = d2; c[t*4+3] = d3;
}
"""
IMMA_SRC = (
    MMA.replace("TYPE_D", "int")
    .replace("SHAPE", "s32.s8.s8.s32")
    .replace("CD", "r")
    .replace("ZERO", "0")
)
FP8_SRC = (
    MMA.replace("TYPE_D", "float")
    .replace("SHAPE", "f32.e4m3.e4m3.f32")
    .replace("CD", "f")
    .replace("ZERO", "0.f")
)

#: One load per cache hint, each at its own offset so that the SASS shows which is which.
LOAD_PTX = """
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 a, .param .u64 b) {
  .reg .b64 %rd<6>; .reg .f32 %f<32>; .reg .b32 %r<3>;
  ld.param.u64 %rd1, [a]; ld.param.u64 %rd2, [b];
  cvta.to.global.u64 %rd3, %rd1; cvta.to.global.u64 %rd4, %rd2;
  mov.u32 %r1, %tid.x; mul.wide.u32 %rd5, %r1, 4;
  add.s64 %rd3, %rd3, %rd5; add.s64 %rd4, %rd4, %rd5;
  mov.f32 %f0, 0f00000000;
%LOADS%
  st.global.f32 [%rd4], %f0;
  ret;
}
"""

#: SASS each ld.global cache hint becomes (measured, ptxas 13.5; the same on sm_80 and sm_90).
CACHE_HINT_SASS = {
    "": "LDG.E",
    ".ca": "LDG.E.STRONG.SM",
    ".cg": "LDG.E.STRONG.GPU",
    ".cs": "LDG.E.EF",
    ".lu": "LDG.E.LU",
    ".nc": "LDG.E.CONSTANT",
    ".cv": "LDG.E.STRONG.SYS",
    ".L1::evict_first": "LDG.E.EF",
    ".L1::evict_last": "LDG.E.EL",
    ".L1::no_allocate": "LDG.E.NA",
}


def _sass(source: str, arch: str) -> dict[str, list[SassInstruction]]:
    out = compile_cuda(source, CompileOptions.build(Arch.parse(arch)))
    assert out.ok and out.cubin is not None, out.log
    return disassemble(out.cubin)


@pytest.fixture(scope="module")
def shfl() -> dict[str, list[SassInstruction]]:
    return {arch: _sass(SHFL, arch)["shfl_reduce"] for arch in ("sm_80", "sm_89", "sm_90")}


@pytest.fixture(scope="module")
def mma() -> dict[tuple[str, str], list[SassInstruction]]:
    built = {("imma", a): _sass(IMMA_SRC, a)["mma_k"] for a in ("sm_80", "sm_90")}
    built.update({("fp8", a): _sass(FP8_SRC, a)["mma_k"] for a in ("sm_89", "sm_90")})
    return built


@pytest.mark.parametrize("arch", ["sm_80", "sm_89", "sm_90"])
def test_warp_shuffle(shfl: dict[str, list[SassInstruction]], arch: str) -> None:
    instrs = shfl[arch]
    assert has_opcode(instrs, "SHFL")
    assert histogram(instrs)["SHFL"] == 5  # 16, 8, 4, 2, 1
    assert full_histogram(instrs)["SHFL.DOWN"] == 5
    assert instrs[0].offset == 0 and all(
        b.offset - a.offset == 16 for a, b in itertools.pairwise(instrs)
    )
    assert any(i.base == "EXIT" for i in instrs)
    assert any(i.predicate.startswith("@") for i in instrs)  # the lane-0 atomic is predicated
    assert category_histogram(instrs)["sync"] == 5


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_int8_mma_is_imma(mma: dict[tuple[str, str], list[SassInstruction]], arch: str) -> None:
    instrs = mma[("imma", arch)]
    assert [i.opcode for i in find_opcode(instrs, "IMMA")] == ["IMMA.16832.S8.S8"]
    assert not has_opcode(instrs, "HMMA")


def test_fp8_mma_native_on_sm89(mma: dict[tuple[str, str], list[SassInstruction]]) -> None:
    instrs = mma[("fp8", "sm_89")]
    assert [i.opcode for i in find_opcode(instrs, "QMMA")] == ["QMMA.16832.F32.E4M3.E4M3"]
    assert not has_opcode(instrs, "HMMA")


def test_fp8_mma_emulated_on_sm90(mma: dict[tuple[str, str], list[SassInstruction]]) -> None:
    instrs = mma[("fp8", "sm_90")]
    assert not has_opcode(instrs, "QMMA")
    assert full_histogram(instrs)["HMMA.16816.F32"] == 2
    assert histogram(instrs)["F2FP"] == 12
    assert has_opcode(instrs, "F2FP.F16.E4M3.UNPACK_B")


def _hint_ptx() -> str:
    lines = []
    for i, hint in enumerate(HINTS, start=1):
        lines.append(f"  ld.global{hint}.f32 %f{i}, [%rd3+{4 * i}];")
        lines.append(f"  add.f32 %f0, %f0, %f{i};")
    return LOAD_PTX.replace("%LOADS%", "\n".join(lines))


HINTS = sorted(CACHE_HINT_SASS)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cache_hint_sass(arch: str) -> None:
    out = assemble_ptx(_hint_ptx(), CompileOptions.build(Arch.parse(arch)))
    assert out.ok and out.cubin is not None, out.log
    loads = [i for i in disassemble(out.cubin)["k"] if i.base == "LDG"]
    by_offset = {}
    for load in loads:
        match = re.search(r"\.64\+0x([0-9a-f]+)\]", load.operands)
        assert match, load
        by_offset[int(match.group(1), 16)] = load
    seen = {hint: by_offset[4 * i].opcode for i, hint in enumerate(HINTS, start=1)}
    assert seen == CACHE_HINT_SASS
    evict_first = {by_offset[4 * (HINTS.index(h) + 1)] for h in (".cs", ".L1::evict_first")}
    assert set(streaming_loads(loads)) == evict_first
    if arch == "sm_90":  # Hopper addresses global memory through a descriptor
        assert all("desc[UR" in i.operands for i in loads)


def test_has_opcode_is_dot_bounded() -> None:
    instrs = parse_sass(".text.k:\n /*0000*/ LDG.E.EF.128 R4, [R2.64] ;\n /*0010*/ HMMA2 R0 ;\n")[
        "k"
    ]
    assert (
        has_opcode(instrs, "LDG.E.EF") and has_opcode(instrs, "LDG") and has_opcode(instrs, "ldg")
    )
    assert not has_opcode(instrs, "LDG.E.E") and not has_opcode(instrs, "HMMA")
    assert streaming_loads(instrs) == [instrs[0]]


NVDISASM_TEXT = """\
\t.target\tsm_90a
//--------------------- .text.kern              --------------------------
\t.section\t.text.kern,"ax",@progbits
        .other          kern,@"STO_CUDA_ENTRY STV_DEFAULT"
kern:
.text.kern:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 BRA `(.L_x_1) ;
        /*0020*/                   STL [R1+0x1dc], R24                         (*"SpillRefill"*);
        /*0030*/    { FADD R0, R1, R2 ;
        /*0040*/      FMUL R3, R4, R5 ; }
.L_x_1:
        /*0050*/                   EXIT ;
$kern$helper:
        /*0060*/                   RET.REL.NODEC R24 `(kern) ;
//--------------------- .text.other             --------------------------
.text.other:
        /*0000*/              @P1 LDG.E.EF.128.CONSTANT R4, desc[UR4][R2.64] ;
"""

CUOBJDUMP_TEXT = """\
\tcode for sm_80
\t\tFunction : kern
\t.headerflags\t@"EF_CUDA_SM80 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM80)"
        /*0000*/                   MOV R1, c[0x0][0x28] ;         /* 0x00000a0000017a02 */
                                                                  /* 0x000fc40000000f00 */
        /*0010*/              @!PT SHFL.IDX PT, RZ, RZ, RZ, RZ ;  /* 0x000000fffffff389 */
                                                                  /* 0x000fe200000e00ff */
\t\t..........
"""


def test_parse_nvdisasm_text() -> None:
    parsed = parse_sass(NVDISASM_TEXT)
    assert list(parsed) == ["kern", "other"]
    kern = parsed["kern"]
    assert [i.offset for i in kern] == [0x0, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60]
    assert (
        kern[1].predicate == "@!P0" and kern[1].opcode == "BRA" and kern[1].operands == "`(.L_x_1)"
    )
    assert kern[2].annotation == "SpillRefill" and kern[2].operands == "[R1+0x1dc], R24"
    assert (kern[3].opcode, kern[3].operands) == ("FADD", "R0, R1, R2")  # braces dropped
    assert (kern[4].opcode, kern[4].operands) == ("FMUL", "R3, R4, R5")
    assert kern[6].base == "RET" and kern[6].category == "control"
    (other,) = parsed["other"]
    assert other.predicate == "@P1" and other.base == "LDG"
    assert other.opcode == "LDG.E.EF.128.CONSTANT" and other.operands == "R4, desc[UR4][R2.64]"


def test_parse_cuobjdump_text() -> None:
    (kern,) = parse_sass(CUOBJDUMP_TEXT).values()
    assert [(i.predicate, i.opcode) for i in kern] == [("", "MOV"), ("@!PT", "SHFL.IDX")]
    assert kern[0].operands == "R1, c[0x0][0x28]"  # encodings stripped


def test_nvdisasm_and_cuobjdump_agree(shfl: dict[str, list[SassInstruction]]) -> None:
    out = compile_cuda(SHFL, CompileOptions.build(Arch.parse("sm_90")))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(out.cubin or b"")
        text = subprocess.run(
            [find_tool("cuobjdump"), "-sass", str(path)], capture_output=True, text=True, check=True
        ).stdout
    from_cuobjdump = parse_sass(text)["shfl_reduce"]
    assert [(i.offset, i.predicate, i.opcode) for i in from_cuobjdump] == [
        (i.offset, i.predicate, i.opcode) for i in shfl["sm_90"]
    ]


def test_disassemble_rejects_non_elf() -> None:
    with pytest.raises(CubinError):
        disassemble(b"\x00" * 128)


@pytest.mark.parametrize(
    ("opcode", "expected"),
    [
        ("LDG.E.EF.128.CONSTANT", "memory"),
        ("LDGSTS.E.BYPASS.128", "memory"),
        ("LDSM.16.M88.4", "memory"),
        ("ULDC.64", "memory"),
        ("STL", "memory"),
        ("HMMA.16816.F32", "tensor"),
        ("IMMA.16832.S8.S8", "tensor"),
        ("HGMMA.64x128x16.F32", "tensor"),
        ("QGMMA.64x64x32.F32.E4M3.E4M3", "tensor"),
        ("FFMA", "fp32"),
        ("IMAD.WIDE.U32", "int"),
        ("UIADD3", "int"),
        ("F2FP.BF16.F32.PACK_AB", "conversion"),
        ("I2F.U32", "conversion"),
        ("BRA", "control"),
        ("BSSY", "control"),
        ("EXIT", "control"),
        ("BAR.SYNC.DEFER_BLOCKING", "sync"),
        ("SHFL.BFLY", "sync"),
        ("DFMA", "fp64"),
        ("HFMA2", "fp16"),
        ("MOV", "move"),
        ("S2R", "move"),
        ("FOO.BAR", "other"),
    ],
)
def test_category(opcode: str, expected: str) -> None:
    assert category(opcode) == expected


def test_find_opcode_ignores_case_of_shape_modifiers() -> None:
    """nvdisasm writes wgmma shapes in lower case (IGMMA.64x256x32.S8.S8): a prefix written
    either way matches, and a prefix that stops inside a modifier does not."""
    igmma = SassInstruction(0, "", "IGMMA.64x256x32.S8.S8", "IGMMA", "gdesc[UR4], RZ", "")
    assert find_opcode([igmma], "IGMMA.64x256x32.S8.S8") == [igmma]
    assert find_opcode([igmma], "igmma.64X256X32") == [igmma]
    assert find_opcode([igmma], "IGMMA.64x256") == []
