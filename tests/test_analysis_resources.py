"""Resources from the ptxas log and from the cubin's ELF, checked against cuobjdump."""

from __future__ import annotations

import contextlib
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.analysis import (
    CubinError,
    kernel_resources,
    parse_nv_info,
    parse_ptxas_log,
    read_cubin,
)
from workbench.compiler.nvrtc import NvrtcOutput, compile_cuda
from workbench.compiler.options import CompileOptions
from workbench.compiler.ptx import assemble_ptx
from workbench.toolchain import Arch, find_tool

SOURCE = r"""
extern "C" __global__ void shfl_reduce(const float* x, float* y) {
  float v = x[threadIdx.x + blockIdx.x * blockDim.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(y, v);
}
extern "C" __global__ void __launch_bounds__(128, 4) smem_k(const float* x, float* y) {
  __shared__ float tile[256];
  __shared__ double t2[33];
  tile[threadIdx.x] = x[threadIdx.x];
  t2[threadIdx.x % 33] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = tile[255 - threadIdx.x] + t2[(threadIdx.x + 1) % 33];
}
template <int N> __global__ void local_k(const float* x, float* y, int idx) {
  float a[N];
  for (int i = 0; i < N; ++i) a[i] = x[i * 7 + threadIdx.x];
  float s = 0;
  for (int i = 0; i < N; ++i) s += a[(i * idx) % N] * a[i];
  y[threadIdx.x] = s;
}
template __global__ void local_k<64>(const float*, float*, int);
"""
LOCAL_K = "_Z7local_kILi64EEvPKfPfi"

#: 48 live accumulators capped at 32 registers: ptxas must spill.
SPILL_SOURCE = r"""
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

ARCHES = ("sm_80", "sm_89", "sm_90", "sm_90a")

#: An NVRTC log as NVRTC 13.5 prints it (continuation lines prefixed ``ptxas         .``), with a
#: non-entry function and the global/cmem line that parsing must skip.
NVRTC_LOG = (
    """\
ptxas info    : Overriding maximum register limit 256 for 'heavy' with  32 of maxrregcount option
ptxas info    : 64 bytes gmem, 256 bytes cmem[3], 8 bytes cmem[4]
ptxas info    : Compiling entry function 'heavy' for 'sm_80'
ptxas info    : Function properties for heavy
ptxas         .     512 bytes stack frame, 888 bytes spill stores, 904 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 512 bytes cumulative stack size, """
    """372 bytes cmem[0]
ptxas info    : Compile time = 130.176 ms
ptxas info    : Function properties for _Z6helperPKfi
ptxas         .     16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'smem_k' for 'sm_80'
ptxas info    : Function properties for smem_k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 15 registers, used 1 barriers, 1288 bytes smem, 368 bytes cmem[0]
"""
)

#: The same shape from the ptxas binary: continuation lines are only indented; sm_90 omits cmem.
PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
    480 bytes stack frame, 844 bytes spill stores, 876 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 480 bytes cumulative stack size
ptxas info    : Compile time = 82.639 ms
"""


def _compile(source: str, arch: str, **knobs: object) -> NvrtcOutput:
    names = ("local_k<64>",) if "local_k" in source else ()
    out = compile_cuda(
        source, CompileOptions.build(Arch.parse(arch), knobs=knobs), name_expressions=names
    )
    assert out.ok, out.log
    return out


@pytest.fixture(scope="module")
def builds() -> dict[str, NvrtcOutput]:
    return {arch: _compile(SOURCE, arch) for arch in ARCHES}


@pytest.fixture(scope="module")
def spilled() -> NvrtcOutput:
    return _compile(SPILL_SOURCE, "sm_80", maxrregcount=32)


def _cuobjdump_res_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        text = subprocess.run(
            [find_tool("cuobjdump"), "-res-usage", str(path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    out: dict[str, dict[str, int]] = {}
    for name, fields in re.findall(r"Function (\S+):\s*\n\s*(.*)", text):
        out[name] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", fields)}
    return out


def _nvdisasm_target(cubin: bytes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        text = subprocess.run(
            [find_tool("nvdisasm"), "-c", str(path)], capture_output=True, text=True, check=True
        ).stdout
    match = re.search(r"\.target\s+(\S+)", text)
    assert match
    return match.group(1)


def test_parse_nvrtc_log_text() -> None:
    res = parse_ptxas_log(NVRTC_LOG)
    assert list(res) == ["heavy", "smem_k"]  # the non-entry helper is not a kernel
    heavy = res["heavy"]
    assert (heavy.registers, heavy.barriers, heavy.smem) == (32, 0, 0)
    assert (heavy.stack_frame, heavy.spill_stores, heavy.spill_loads) == (512, 888, 904)
    assert heavy.cmem0 == 372 and heavy.cumulative_stack == 512
    assert heavy.spills and heavy.uses_local_memory
    smem = res["smem_k"]
    assert (smem.registers, smem.barriers, smem.smem, smem.cmem0) == (15, 1, 1288, 368)
    assert not smem.spills and not smem.uses_local_memory


def test_parse_plain_ptxas_log_text() -> None:
    k = parse_ptxas_log(PTXAS_LOG)["k"]
    assert (k.registers, k.stack_frame, k.spill_stores, k.spill_loads) == (32, 480, 844, 876)
    assert k.cmem0 is None  # ptxas 13 prints no cmem[0] for sm_90


def test_parse_empty_log() -> None:
    assert parse_ptxas_log("") == {}
    assert parse_ptxas_log("kernel.cu(3): warning #177-D: variable x was declared\n") == {}


@pytest.mark.parametrize("arch", ARCHES)
def test_log_of_real_compile(builds: dict[str, NvrtcOutput], arch: str) -> None:
    res = parse_ptxas_log(builds[arch].log)
    assert set(res) == {"shfl_reduce", "smem_k", LOCAL_K}
    assert res["smem_k"].smem == 1024 + 33 * 8 and res["smem_k"].barriers == 1
    assert res[LOCAL_K].stack_frame == 256 and not res[LOCAL_K].spills
    assert res["shfl_reduce"].smem == 0 and res["shfl_reduce"].registers > 0
    # cmem[0] is printed up to sm_89 and not for sm_90 (measured with NVRTC 13.5)
    assert (res["shfl_reduce"].cmem0 is None) == (Arch.parse(arch).cc >= 90)


def test_spilling_compile_nvrtc_and_ptxas(spilled: NvrtcOutput) -> None:
    from_nvrtc = parse_ptxas_log(spilled.log)["heavy"]
    assert from_nvrtc.registers == 32
    assert from_nvrtc.spill_stores > 0 and from_nvrtc.spill_loads > 0
    assert spilled.ptx is not None
    options = CompileOptions.build(Arch.parse("sm_80"), knobs={"maxrregcount": 32})
    assembled = assemble_ptx(spilled.ptx, options)
    assert assembled.ok, assembled.log
    from_ptxas = parse_ptxas_log(assembled.log)["heavy"]
    assert from_ptxas.registers == 32 and from_ptxas.spills
    elf = read_cubin(assembled.cubin or b"")  # a ptxas cubin reads like an NVRTC one
    assert elf.arch == "sm_80" and elf.kernels["heavy"].registers == 32
    assert elf.kernels["heavy"].frame_size == from_ptxas.stack_frame


@pytest.mark.parametrize("arch", ARCHES)
def test_cubin_arch_matches_nvdisasm(builds: dict[str, NvrtcOutput], arch: str) -> None:
    cubin = builds[arch].cubin
    assert cubin is not None
    info = read_cubin(cubin)
    assert info.arch == arch == _nvdisasm_target(cubin)
    assert info.cc == Arch.parse(arch).cc and info.virtual_cc == info.cc
    assert info.abi_version == 8 and (info.e_flags >> 8) & 0xFF == info.cc
    assert set(info.kernels) == {"shfl_reduce", "smem_k", LOCAL_K}


def test_sm90_and_sm90a_differ_only_in_nv_compat(builds: dict[str, NvrtcOutput]) -> None:
    plain, accel = (read_cubin(builds[a].cubin or b"") for a in ("sm_90", "sm_90a"))
    assert plain.e_flags == accel.e_flags  # the 'a' is not in e_flags
    assert (plain.accelerated, accel.accelerated) == (False, True)


@pytest.mark.parametrize("arch", ARCHES)
def test_elf_matches_cuobjdump_res_usage(builds: dict[str, NvrtcOutput], arch: str) -> None:
    cubin = builds[arch].cubin
    assert cubin is not None
    info = read_cubin(cubin)
    reference = _cuobjdump_res_usage(cubin)
    assert set(reference) == set(info.kernels)
    for name, kernel in info.kernels.items():
        ref = reference[name]
        assert kernel.registers == ref["REG"], name
        assert kernel.shared_section_bytes == ref["SHARED"], name
        assert kernel.frame_size == ref["STACK"], name
        assert kernel.cmem0 == ref["CONSTANT[0]"], name


@pytest.mark.parametrize("arch", ARCHES)
def test_elf_agrees_with_log(builds: dict[str, NvrtcOutput], arch: str) -> None:
    out = builds[arch]
    info = read_cubin(out.cubin or b"")
    log = parse_ptxas_log(out.log)
    for name, kernel in info.kernels.items():
        assert kernel.registers == log[name].registers
        assert kernel.static_shared_bytes == log[name].smem  # the 1 KiB reservation removed
        assert kernel.frame_size == log[name].stack_frame
        assert kernel.barriers == log[name].barriers
    smem_k = info.kernels["smem_k"]
    # sm_90+ fold the driver's 1 KiB per-block reservation into .nv.shared.<kernel>
    assert smem_k.reserved_shared_bytes == (1024 if Arch.parse(arch).cc >= 90 else 0)


@pytest.mark.parametrize("arch", ARCHES)
def test_launch_bounds_in_elf(builds: dict[str, NvrtcOutput], arch: str) -> None:
    kernels = read_cubin(builds[arch].cubin or b"").kernels
    assert kernels["smem_k"].max_threads == (128, 1, 1)
    assert kernels["smem_k"].max_reg_count == 65536 // (128 * 4)  # __launch_bounds__(128, 4)
    assert kernels["shfl_reduce"].max_threads is None
    assert kernels["shfl_reduce"].max_reg_count == 255


def test_kernel_resources_combines(spilled: NvrtcOutput, builds: dict[str, NvrtcOutput]) -> None:
    heavy = kernel_resources(spilled.cubin or b"", spilled.log)["heavy"]
    logged = parse_ptxas_log(spilled.log)["heavy"]
    assert heavy.registers == 32 and heavy.max_reg_count == 32
    assert (heavy.spill_stores, heavy.spill_loads) == (logged.spill_stores, logged.spill_loads)
    assert heavy.stack_frame == logged.stack_frame > 0
    res = kernel_resources(builds["sm_90a"].cubin or b"", builds["sm_90a"].log)
    assert res["smem_k"].smem == 1288 and res["smem_k"].cmem0 is not None  # cmem from ELF
    assert res["smem_k"].max_threads == (128, 1, 1)
    no_log = kernel_resources(builds["sm_80"].cubin or b"", "")
    assert no_log[LOCAL_K].stack_frame == 256 and not no_log[LOCAL_K].spills


def test_nv_info_records_are_four_byte_aligned(builds: dict[str, NvrtcOutput]) -> None:
    # NVAL/BVAL/HVAL records are 4 bytes (u8 fmt, u8 attr, u16 value), not 2/3/4
    record = bytes([0x01, 0x35, 0, 0, 0x02, 0x4C, 1, 0, 0x03, 0x1B, 0x80, 0, 0x04, 0x05, 12, 0])
    record += (128).to_bytes(4, "little") + (1).to_bytes(4, "little") * 2
    recs = parse_nv_info(record)
    assert [(r.fmt, r.attribute, r.value) for r in recs[:3]] == [
        (1, 0x35, 0),
        (2, 0x4C, 1),
        (3, 0x1B, 128),
    ]
    assert recs[3].words() == (128, 1, 1)
    with pytest.raises(CubinError, match="runs past"):
        parse_nv_info(bytes([0x04, 0x05, 12, 0, 1, 2]))


@pytest.mark.parametrize("data", [b"", b"\x7fELF", b"not a cubin at all" * 8, bytes(range(256))])
def test_garbage_raises_cubin_error(data: bytes) -> None:
    with pytest.raises(CubinError, match="not a cubin"):
        read_cubin(data)


def test_host_elf_is_not_a_cubin() -> None:
    host = Path(find_tool("nvdisasm")).read_bytes()[:4096]
    with pytest.raises(CubinError, match=r"not a cubin|truncated"):
        read_cubin(host)


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, 0.999])
def test_truncated_cubin_raises(builds: dict[str, NvrtcOutput], fraction: float) -> None:
    cubin = builds["sm_80"].cubin or b""
    with pytest.raises(CubinError, match="truncated"):
        read_cubin(cubin[: int(len(cubin) * fraction)])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_corrupted_cubin_never_leaks_other_errors(
    builds: dict[str, NvrtcOutput], data: st.DataObject
) -> None:
    cubin = bytearray(builds["sm_90a"].cubin or b"")
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(cubin) - 1))
        cubin[pos] = data.draw(st.integers(0, 255))
    with contextlib.suppress(CubinError):
        read_cubin(bytes(cubin))
