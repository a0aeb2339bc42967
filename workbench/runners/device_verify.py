"""Verification on the GPU: the kernel's outputs compared with the reference's where they are.

On the H200 the host verification of one gemm_int8 config at 8192^3 (a 256 MiB int32 output
copied back, written to a file, read and compared with NumPy) cost about 2 s, against
0.04-0.27 s of timed samples (see ``benchmarks/gpu_throughput.py``). Here the reference's
outputs are uploaded once per input set, widened exactly (integers to int64, floats to
float64), and a compare kernel, compiled by NVRTC like any config, counts per output what
:func:`workbench.runners.verify.compare_output` counts: wrong, untouched (still the poison)
and non-finite elements, the first wrong index, the largest absolute and relative errors.
Only those 56 bytes come back. When the GPU finds an output wrong, the host path runs as
before and says exactly where (the GPU's answer is only ever trusted to say "all equal").

:func:`compare_model` is the kernel's semantics in NumPy, element for element: the CPU tests
check it against ``compare_output`` and the GPU check runs both on the same outputs.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.compiler import CompileCache, CompileJob, CompileOptions, CompileResult, compile_job
from workbench.errors import CompileError
from workbench.runners.buffers import BufferArg, KernelArg, OutputBuffer, OutputRole, ScalarValue
from workbench.runners.protocol import (
    DeviceCompare,
    DeviceVerdicts,
    InputFile,
    KernelJob,
    VerifyOnDevice,
    write_raw,
)
from workbench.runners.verify import (
    Mismatch,
    OutputCheck,
    Tolerance,
    Verification,
    output_tolerance,
    poison_is_nan,
)
from workbench.spaces.launch import Launch
from workbench.toolchain import Arch

#: Threads per block of the compare kernel; blocks per SM of its grid-stride loop.
BLOCK = 256
BLOCKS_PER_SM = 8
#: The result struct: checked, wrong, untouched, nonfinite, first wrong index, and the bits of
#: the largest absolute and relative errors (non-negative doubles order as their bits).
RESULT = struct.Struct("<7Q")
NO_INDEX = 2**64 - 1

#: numpy dtype of an output -> the C type the kernel reads it as (uint64 and the fp8 formats
#: stay on the host)
C_TYPES = {
    np.dtype(np.int8): "signed char",
    np.dtype(np.int16): "short",
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long long",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.float16): "__half",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}
#: bfloat16 is an ml_dtypes type: known by name
BFLOAT16 = "bfloat16"
_UNSIGNED = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}

SOURCE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>

struct CompareResult {
  unsigned long long checked, wrong, untouched, nonfinite, first, max_abs, max_rel;
};

__device__ __forceinline__ double widen(signed char v) { return (double)v; }
__device__ __forceinline__ double widen(short v) { return (double)v; }
__device__ __forceinline__ double widen(int v) { return (double)v; }
__device__ __forceinline__ double widen(long long v) { return (double)v; }
__device__ __forceinline__ double widen(unsigned char v) { return (double)v; }
__device__ __forceinline__ double widen(unsigned short v) { return (double)v; }
__device__ __forceinline__ double widen(unsigned int v) { return (double)v; }
__device__ __forceinline__ double widen(float v) { return (double)v; }
__device__ __forceinline__ double widen(double v) { return v; }
__device__ __forceinline__ double widen(__half v) { return (double)__half2float(v); }
__device__ __forceinline__ double widen(__nv_bfloat16 v) { return (double)__bfloat162float(v); }

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ unsigned long long warp_max(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ unsigned long long warp_min(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One output against the reference, element i: the rules of verify.compare_output.
//   INTEGER: got and expected are integers: wrong when they differ (int64), |g - e| in double.
//   else:    finite = both finite; same = (g == e) or both NaN where the output allows NaN and
//            inf (nonfinite_allowed), else finite and g == e; exact: wrong = !same;
//            otherwise wrong = !(same or (finite and |g - e| <= atol + rtol |e|)).
// Errors count over finite pairs (relative ones where e != 0); an element still holding the
// poison's bits is untouched; a wrong element where either side is not finite is nonfinite.
// A poison that is a NaN of G (every float output's) marks an element nobody wrote: wrong even
// where the reference is NaN too. An integer poison is a value: untouched only where wrong.
template <typename G, typename B, typename E, bool INTEGER>
__global__ void compare(const G* __restrict__ got, const E* __restrict__ expected,
                        unsigned long long n, double atol, double rtol, int exact,
                        int nonfinite_allowed, int has_poison, long long poison,
                        CompareResult* out) {
  unsigned long long checked = 0, wrong = 0, untouched = 0, nonfinite = 0, first = ~0ull;
  double max_abs = 0.0, max_rel = 0.0;
  const B* raw = reinterpret_cast<const B*>(got);
  const B poison_bits = (B)poison;
  G poison_value;
  memcpy(&poison_value, &poison_bits, sizeof(G));
  const bool poison_unwritten = has_poison && isnan(widen(poison_value));
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    checked++;
    double g = widen(got[i]);
    double e = (double)expected[i];
    bool bad, finite;
    double diff;
    if constexpr (INTEGER) {
      bad = (long long)got[i] != (long long)expected[i];
      finite = true;
      diff = fabs(g - e);
    } else {
      finite = isfinite(g) && isfinite(e);
      bool same = nonfinite_allowed ? (g == e) || (isnan(g) && isnan(e)) : finite && g == e;
      diff = fabs(g - e);
      bool close = finite && diff <= atol + rtol * fabs(e);
      bad = exact ? !same : !(same || close);
    }
    const bool is_poison = has_poison && raw[i] == poison_bits;
    if (poison_unwritten && is_poison) bad = true;
    if (finite) {
      max_abs = fmax(max_abs, diff);
      if (e != 0.0) max_rel = fmax(max_rel, diff / fabs(e));
    }
    if (bad) {
      wrong++;
      if (is_poison) untouched++;
      if (!finite) nonfinite++;
      if (i < first) first = i;
    }
  }
  checked = warp_sum(checked);
  wrong = warp_sum(wrong);
  untouched = warp_sum(untouched);
  nonfinite = warp_sum(nonfinite);
  first = warp_min(first);
  unsigned long long abs_bits = warp_max(__double_as_longlong(max_abs));
  unsigned long long rel_bits = warp_max(__double_as_longlong(max_rel));
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out->checked, checked);
    if (wrong) {
      atomicAdd(&out->wrong, wrong);
      atomicAdd(&out->untouched, untouched);
      atomicAdd(&out->nonfinite, nonfinite);
      atomicMin(&out->first, first);
    }
    atomicMax(&out->max_abs, abs_bits);
    atomicMax(&out->max_rel, rel_bits);
  }
}
"""


@dataclass(frozen=True)
class CompareResult:
    """What the compare kernel counted for one output."""

    checked: int
    wrong: int
    untouched: int
    nonfinite: int
    first: int | None  #: flat index of the first wrong element
    max_abs_error: float
    max_rel_error: float

    @classmethod
    def from_bytes(cls, raw: bytes) -> CompareResult:
        checked, wrong, untouched, nonfinite, first, abs_bits, rel_bits = RESULT.unpack(raw)
        return cls(
            checked,
            wrong,
            untouched,
            nonfinite,
            None if first == NO_INDEX else first,
            struct.unpack("<d", struct.pack("<Q", abs_bits))[0],
            struct.unpack("<d", struct.pack("<Q", rel_bits))[0],
        )

    def check(self, out: OutputBuffer, tolerance: Tolerance) -> OutputCheck:
        """As :func:`~workbench.runners.verify.compare_output` reports it (the first wrong
        element's values are the host's to read: only its index is known here)."""
        first = None
        if self.first is not None:
            index = tuple(int(x) for x in np.unravel_index(self.first, out.shape))
            first = Mismatch(index, math.nan, math.nan, False)
        poison = out.fill.pattern if out.role is OutputRole.POISONED else None
        return OutputCheck(
            out.name,
            self.checked,
            self.wrong,
            self.untouched,
            self.nonfinite,
            first,
            self.max_abs_error,
            self.max_rel_error,
            tolerance,
            poison,
        )


INITIAL = RESULT.pack(0, 0, 0, 0, NO_INDEX, 0, 0)


def supported(out: OutputBuffer, expected: np.ndarray) -> bool:
    """Whether the GPU can compare ``out`` with ``expected`` (else the host does)."""
    return _c_type(out.np_dtype) is not None and _numeric(expected.dtype)


def widened(out: OutputBuffer, expected: np.ndarray) -> np.ndarray:
    """The reference's output as the kernel reads it (see :func:`widened_array`)."""
    return widened_array(out.np_dtype, expected)


def compare_job(out: OutputBuffer, expected: np.ndarray, arch: Arch) -> CompileJob:
    """The compare kernel for ``out`` (its dtype) against ``expected`` (widened), for ``arch``."""
    got = _c_type(out.np_dtype)
    assert got is not None
    integer = widened(out, expected).dtype == np.int64
    bits = _UNSIGNED[out.np_dtype.itemsize]
    wide = "long long" if integer else "double"
    expr = f"compare<{got}, {bits}, {wide}, {'true' if integer else 'false'}>"
    return CompileJob(
        language="cuda",
        source=SOURCE,
        filename="workbench_compare.cu",
        options=CompileOptions(arch=arch),
        name_expression=expr,
        entry_kernel=None,
    )


def compile_compare(
    out: OutputBuffer, expected: np.ndarray, arch: Arch, cache: CompileCache | None
) -> CompileResult:
    """The compare kernel's binary (cached like any config's)."""
    return compile_job(compare_job(out, expected, arch), cache)


def compare_arguments(
    out: OutputBuffer, expected_name: str, result_name: str, tolerance: Tolerance
) -> tuple[KernelArg, ...]:
    """The compare kernel's arguments: buffers by the names the worker gives them."""
    tol = output_tolerance(out, tolerance)
    poison = out.fill.pattern if out.role is OutputRole.POISONED else None
    has_poison = poison is not None and len(poison) == out.np_dtype.itemsize
    word = int.from_bytes(poison, "little") if has_poison and poison is not None else 0
    signed = word - 2**64 if word >= 2**63 else word
    return (
        BufferArg(out.name),
        BufferArg(expected_name),
        ScalarValue("int64", int(np.prod(out.shape, dtype=np.int64)), "n"),  # read as u64
        ScalarValue("float64", float(tol.atol), "atol"),
        ScalarValue("float64", float(tol.rtol), "rtol"),
        ScalarValue("int32", int(tol.exact), "exact"),
        ScalarValue("int32", int(tol.nonfinite), "nonfinite"),
        ScalarValue("int32", int(has_poison), "has_poison"),
        ScalarValue("int64", signed, "poison"),
        BufferArg(result_name),
    )


def compare_launch(n: int, sm_count: int) -> Launch:
    """A grid-stride launch: at most BLOCKS_PER_SM blocks per SM, at least one."""
    blocks = max(1, min(math.ceil(n / BLOCK), BLOCKS_PER_SM * max(1, sm_count)))
    return Launch((blocks, 1, 1), (BLOCK, 1, 1), 0)


def compare_model(
    got: np.ndarray, expected: np.ndarray, tolerance: Tolerance, poison: bytes | None
) -> CompareResult:
    """The compare kernel's result, computed in NumPy element for element as the kernel does
    (its specification: each line mirrors one of the kernel's)."""
    g_raw = np.ascontiguousarray(got).reshape(-1)
    e_wide = widened_array(got.dtype, expected).reshape(-1)
    integer = e_wide.dtype == np.int64
    g = g_raw.astype(np.float64)
    e = e_wide.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - e)
        if integer:
            bad = g_raw.astype(np.int64) != e_wide
            finite = np.ones(g.shape, dtype=bool)
        else:
            finite = np.isfinite(g) & np.isfinite(e)
            both_nan = np.isnan(g) & np.isnan(e)
            same = (g == e) | both_nan if tolerance.nonfinite else finite & (g == e)
            close = finite & (diff <= tolerance.atol + tolerance.rtol * np.abs(e))
            bad = ~same if tolerance.exact else ~(same | close)
        rel_ok = finite & (e != 0)
        max_abs = float(diff[finite].max()) if finite.any() else 0.0
        max_rel = float((diff[rel_ok] / np.abs(e[rel_ok])).max()) if rel_ok.any() else 0.0
    if poison is not None and len(poison) == got.dtype.itemsize:
        word = int.from_bytes(poison, "little")
        unsigned = np.dtype(f"<u{got.dtype.itemsize}")
        is_poison = g_raw.view(unsigned) == np.array(word, dtype=unsigned)
    else:
        is_poison = np.zeros(g.shape, dtype=bool)
    if poison_is_nan(poison, got.dtype):
        bad = bad | is_poison
    wrong = int(np.count_nonzero(bad))
    return CompareResult(
        checked=int(g.size),
        wrong=wrong,
        untouched=int(np.count_nonzero(bad & is_poison)),
        nonfinite=int(np.count_nonzero(bad & ~finite)),
        first=int(np.argmax(bad)) if wrong else None,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
    )


def widened_array(got_dtype: np.dtype, expected: np.ndarray) -> np.ndarray:
    """int64 when both sides are integers (as ``compare_output`` compares them), else float64
    (exact for every narrower format)."""
    integer = got_dtype.kind in "iu" and expected.dtype.kind in "iub"
    return np.ascontiguousarray(expected, dtype=np.int64 if integer else np.float64)


def _numeric(dtype: np.dtype) -> bool:
    """Widens to float64 exactly: NumPy's numbers and ml_dtypes' floats (bfloat16, fp8)."""
    return dtype.kind in "biuf" or dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def _c_type(dtype: np.dtype) -> str | None:
    if dtype.name == BFLOAT16:
        return "__nv_bfloat16"
    return C_TYPES.get(np.dtype(dtype))


class DeviceVerifier:
    """The runner's side of verification on the GPU: the compare kernels (compiled once per
    output type), the reference's outputs written once per set as the files the worker
    uploads, the request, and the verdict of the reply.

    Args:
        arch: the arch the compare kernels are compiled for (the space's).
        sm_count: the GPU's SMs (the compare grid).
        cache: the compile cache.
        directory: where the reference's outputs are written.
    """

    def __init__(
        self, arch: Arch, sm_count: int, cache: CompileCache | None, directory: Path
    ) -> None:
        self.arch = arch
        self.sm_count = sm_count
        self.cache = cache
        self.directory = directory
        self._kernels: dict[str, CompileResult] = {}
        self._files: dict[tuple[str, str], InputFile] = {}

    def request(
        self, job: KernelJob, set_key: str, expected: Mapping[str, np.ndarray], tolerance: Tolerance
    ) -> VerifyOnDevice | None:
        """The request that verifies ``job`` on the GPU; None when an output's type, or a
        compare kernel that fails to compile, leaves it to the host."""
        compared = [o for o in job.outputs if o.compared]
        if not all(supported(o, expected[o.name]) for o in compared):
            return None
        compares = []
        for out in compared:
            compiled = self._compiled(out, expected[out.name])
            if compiled is None:
                return None
            kernel = KernelJob(
                label=f"workbench:compare {out.name}",
                module_key=compiled.key,
                cubin=compiled.cubin,  # type: ignore[arg-type]
                entry=compiled.entry,  # type: ignore[arg-type]
                launch=compare_launch(out.size, self.sm_count),
                args=compare_arguments(out, "expected", "result", tolerance),
                outputs=(),
            )
            file = self._file(set_key, out, expected[out.name])
            compares.append(DeviceCompare(out.name, file, kernel))
        return VerifyOnDevice(job, set_key, tuple(compares))

    def verdict(
        self, job: KernelJob, reply: DeviceVerdicts, tolerance: Tolerance
    ) -> Verification | None:
        """What the GPU found; None when a comparison did not check every element (it did not
        run: the host must verify)."""
        checks = []
        for out in (o for o in job.outputs if o.compared):
            raw = reply.results.get(out.name)
            result = CompareResult.from_bytes(raw) if raw is not None else None
            if result is None or result.checked != out.size:
                return None
            checks.append(result.check(out, output_tolerance(out, tolerance)))
        return Verification(tuple(checks))

    def _compiled(self, out: OutputBuffer, expected: np.ndarray) -> CompileResult | None:
        job = compare_job(out, expected, self.arch)
        key = job.key()
        if key not in self._kernels:
            try:
                self._kernels[key] = compile_job(job, self.cache)
            except CompileError:
                return None
        result = self._kernels[key]
        return result if result.ok and result.cubin and result.entry else None

    def _file(self, set_key: str, out: OutputBuffer, expected: np.ndarray) -> InputFile:
        known = self._files.get((set_key, out.name))
        if known is None:
            path = self.directory / f"expected-{len(self._files)}-{out.name}.npy"
            known = InputFile("expected", str(path), write_raw(path, widened(out, expected)))
            self._files[set_key, out.name] = known
        return known
