"""Lints on real compiles: spills, local memory, emulated FP8 mma.sync, expected opcodes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from workbench.analysis import (
    KernelResources,
    LintCode,
    SassInstruction,
    Severity,
    disassemble,
    kernel_resources,
    lint,
)
from workbench.compiler.nvrtc import compile_cuda
from workbench.compiler.options import CompileOptions
from workbench.errors import ArchError
from workbench.toolchain import Arch

SPILL = r"""
extern "C" __global__ void heavy(const float* __restrict__ x, float* __restrict__ y, int n) {
  float acc[48];
  #pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = x[threadIdx.x + i * n];
  #pragma unroll
  for (int r = 0; r < 8; ++r) {
    #pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = acc[i] * acc[(i + r + 1) % 48] + 1.0f;
  }
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < 48; ++i) s += acc[i] * (float)(i + 1);
  y[threadIdx.x] = s;
}
"""

#: A dynamically indexed local array: a stack frame and LDL, but no spills.
LOCAL = r"""
extern "C" __global__ void local_k(const float* x, float* y, int idx) {
  float a[64];
  for (int i = 0; i < 64; ++i) a[i] = x[i * 7 + threadIdx.x];
  float s = 0.f;
  for (int i = 0; i < 64; ++i) s += a[(i * idx) & 63] * a[i];
  y[threadIdx.x] = s;
}
"""

SHFL = r"""
extern "C" __global__ void shfl_reduce(const float* x, float* y) {
  float v = x[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
  y[threadIdx.x] = v;
}
"""

MMA = r"""
extern "C" __global__ void mma_k(const unsigned* a, const unsigned* b, float* c) {
  int t = threadIdx.x;
  unsigned a0 = a[t*4], a1 = a[t*4+1], a2 = a[t*4+2], a3 = a[t*4+3], b0 = b[t*2], b1 = b[t*2+1];
  float d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.TYPE.TYPE.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
    : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
    : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.f), "f"(0.f), "f"(0.f), "f"(0.f));
  c[t*4] = d0; c[t*4+1] = d1; c[t*4+2] = d2; c[t*4+3] = d3;
}
"""

IMMA = r"""
extern "C" __global__ void imma_k(const int* a, const int* b, int* c) {
  int t = threadIdx.x;
  int d0, d1, d2, d3;
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
               "{%8,%9}, {%10,%11,%12,%13};"
    : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
    : "r"(a[t*4]), "r"(a[t*4+1]), "r"(a[t*4+2]), "r"(a[t*4+3]), "r"(b[t*2]), "r"(b[t*2+1]),
      "r"(0), "r"(0), "r"(0), "r"(0));
  c[t*4] = d0; c[t*4+1] = d1; c[t*4+2] = d2; c[t*4+3] = d3;
}
"""


@dataclass(frozen=True)
class Built:
    """One compiled kernel with what the lints need."""

    kernel: str
    arch: str
    resources: KernelResources
    sass: list[SassInstruction]
    ptx: str | None


def _build(source: str, kernel: str, arch: str, **knobs: object) -> Built:
    out = compile_cuda(source, CompileOptions.build(Arch.parse(arch), knobs=knobs))
    assert out.ok and out.cubin is not None, out.log
    resources = kernel_resources(out.cubin, out.log)[kernel]
    return Built(kernel, arch, resources, disassemble(out.cubin)[kernel], out.ptx)


def _lint(b: Built, expect: tuple[str, ...] = ()) -> list:
    return lint(b.kernel, b.arch, b.resources, b.sass, b.ptx, expect_sass=expect)


@pytest.fixture(scope="module")
def built() -> dict[str, Built]:
    return {
        "spill": _build(SPILL, "heavy", "sm_80", maxrregcount=32),
        "local": _build(LOCAL, "local_k", "sm_80"),
        "shfl": _build(SHFL, "shfl_reduce", "sm_90a"),
        "fp8_89": _build(MMA.replace("TYPE", "e4m3"), "mma_k", "sm_89"),
        "fp8_90": _build(MMA.replace("TYPE", "e4m3"), "mma_k", "sm_90"),
        "e5m2_90a": _build(MMA.replace("TYPE", "e5m2"), "mma_k", "sm_90a"),
        "imma_80": _build(IMMA, "imma_k", "sm_80"),
    }


@pytest.mark.slow
def test_spilling_kernel(built: dict[str, Built]) -> None:
    found = _lint(built["spill"])
    assert [f.code for f in found] == [LintCode.SPILLS, LintCode.LOCAL_MEMORY]
    assert all(f.severity is Severity.WARNING for f in found)
    spill = built["spill"].resources
    assert f"{spill.spill_stores} bytes of spill stores" in found[0].message
    assert "LDL/STL" in found[1].message


def test_local_array_without_spills(built: dict[str, Built]) -> None:
    b = built["local"]
    assert not b.resources.spills and b.resources.stack_frame > 0
    assert [f.code for f in _lint(b)] == [LintCode.LOCAL_MEMORY]


def test_clean_kernel(built: dict[str, Built]) -> None:
    assert _lint(built["shfl"], expect=("SHFL.BFLY",)) == []


@pytest.mark.parametrize("key", ["fp8_90", "e5m2_90a"])
def test_fp8_mma_sync_emulated_on_hopper(built: dict[str, Built], key: str) -> None:
    (finding,) = _lint(built[key])
    assert finding.code is LintCode.FP8_MMA_EMULATED and finding.severity is Severity.WARNING
    assert "emulated (F2FP + HMMA" in finding.message and "use wgmma on sm_90a" in finding.message


def test_fp8_mma_sync_native_on_ada(built: dict[str, Built]) -> None:
    assert _lint(built["fp8_89"], expect=("QMMA",)) == []


def test_fp8_rule_needs_ptx(built: dict[str, Built]) -> None:
    b = built["fp8_90"]
    assert lint(b.kernel, b.arch, b.resources, b.sass, None) == []


def test_expected_sass(built: dict[str, Built]) -> None:
    assert _lint(built["imma_80"], expect=("IMMA", "IMMA.16832.S8.S8")) == []
    (missing,) = _lint(built["shfl"], expect=("IMMA",))
    assert missing.code is LintCode.EXPECTED_SASS_MISSING and missing.severity is Severity.ERROR
    assert "expected tensor-core instructions (IMMA) not found" in missing.message
    (streaming,) = _lint(built["shfl"], expect=("LDG.E.EF",))
    assert "expected instructions (LDG.E.EF) not found" in streaming.message
    assert str(streaming).startswith("error: shfl_reduce: [expected-sass-missing]")


def test_bad_arch(built: dict[str, Built]) -> None:
    b = built["shfl"]
    with pytest.raises(ArchError):
        lint(b.kernel, "hopper", b.resources, b.sass, b.ptx)
