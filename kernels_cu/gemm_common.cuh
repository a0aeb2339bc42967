// gemm_common.cuh: what every GEMM path of the library shares.
//
//   * integer types (int_types.cuh: NVRTC has no <cstdint>),
//   * the output type and the epilogue (raw int32, or W8A8 dequantisation:
//       C[m, n] = (float) acc[m, n] * row_scale[m] * col_scale[n]   -> fp16 / bf16 / fp32),
//   * block rasterisation: which output tile a block computes (grouped order for L2 reuse;
//     gemm_schedule.cuh).
//
// Macros (set by the space file):
//   EPI   raw | w8a8         (EPI_raw / EPI_w8a8 are defined to 1 by the workbench)
//   OUT   int32 | float16 | bfloat16 | float32   (OUT_int32, OUT_float16, ... likewise)
//   GROUP_M  rows of tiles walked together by consecutive blocks (1 = plain row-major order)
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "int_types.cuh"  // i8, u8, i32, u32, i64, u64

#if OUT_int32
using OutT = i32;
#elif OUT_float16
using OutT = __half;
#elif OUT_bfloat16
using OutT = __nv_bfloat16;
#elif OUT_float32
using OutT = float;
#else
#error "OUT must be int32, float16, bfloat16 or float32"
#endif

// (preprocessor checks: OUT_int32 is only defined, to 1, when OUT=int32)
#if EPI_raw
#if !OUT_int32
#error "EPI=raw writes the int32 accumulators: OUT must be int32"
#endif
#elif EPI_w8a8
#if OUT_int32
#error "EPI=w8a8 dequantises: OUT must be float16, bfloat16 or float32"
#endif
#else
#error "EPI must be raw or w8a8"
#endif

// Convert one fp32 value to the output type (round to nearest even).
__device__ __forceinline__ OutT to_out(float v) {
#if OUT_float16
  return __float2half_rn(v);
#elif OUT_bfloat16
  return __float2bfloat16_rn(v);
#else
  return static_cast<OutT>(v);
#endif
}

// The epilogue for one accumulator: raw int32, or dequantised with per-token (row) and
// per-channel (column) scales. Callers guard m < M and n < N.
__device__ __forceinline__ OutT epilogue(i32 acc, int m, int n, const float* __restrict__ row_scale,
                                         const float* __restrict__ col_scale) {
#if EPI_raw
  return acc;
#else
  return to_out(static_cast<float>(acc) * row_scale[m] * col_scale[n]);
#endif
}

// Tile coordinates of this block in grouped ("swizzled") order (TileCoord, tile_of_block):
// gemm_schedule.cuh, with the persistent schedules of the TMA paths.
#include "gemm_schedule.cuh"

// Opt-in dynamic shared memory per block of the target arch (CUDA Programming Guide, compute
// capabilities): what a kernel's static_assert can check at compile time. The space files
// check the device's own limit (device.max_smem_per_block).
#if defined(__CUDA_ARCH__)
constexpr int ARCH_MAX_SMEM_PER_BLOCK = __CUDA_ARCH__ >= 1200                         ? 99 * 1024
                                        : __CUDA_ARCH__ >= 900                          ? 227 * 1024
                                        : __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 870 ? 163 * 1024
                                        : __CUDA_ARCH__ >= 800                          ? 99 * 1024
                                        : __CUDA_ARCH__ >= 750                          ? 64 * 1024
                                        : __CUDA_ARCH__ >= 700                          ? 96 * 1024
                                                                                        : 48 * 1024;
#endif

// ---- Output stores ---------------------------------------------------------------------------
// Two outputs of the same row as one vector: int2 / __half2 / __nv_bfloat162 / float2.
#if OUT_int32
using OutPair = int2;
#elif OUT_float16
using OutPair = __half2;
#elif OUT_bfloat16
using OutPair = __nv_bfloat162;
#else
using OutPair = float2;
#endif

// C[m, n] and C[m, n + 1] through the epilogue, for an even n. One 2-element vector store when
// both columns exist and the pair is aligned (N even), else element by element. Callers guard
// m < M; the column guard is here.
__device__ __forceinline__ void store_out_pair(OutT* __restrict__ C, int N, int m, int n, i32 acc0,
                                               i32 acc1, const float* __restrict__ row_scale,
                                               const float* __restrict__ col_scale) {
  OutT* row = C + static_cast<i64>(m) * N;
  if (N % 2 == 0 && n + 1 < N) {
    OutPair pair;
    pair.x = epilogue(acc0, m, n, row_scale, col_scale);
    pair.y = epilogue(acc1, m, n + 1, row_scale, col_scale);
    *reinterpret_cast<OutPair*>(row + n) = pair;
  } else {
    if (n < N) row[n] = epilogue(acc0, m, n, row_scale, col_scale);
    if (n + 1 < N) row[n + 1] = epilogue(acc1, m, n + 1, row_scale, col_scale);
  }
}

// Two outputs rounded from fp32 at once (one F2FP pack for 16-bit types; each value rounds to
// nearest even exactly as to_out does).
__device__ __forceinline__ OutPair to_out_pair(float v0, float v1) {
#if OUT_float16
  return __floats2half2_rn(v0, v1);
#elif OUT_bfloat16
  return __floats2bfloat162_rn(v0, v1);
#else
  OutPair pair;
  pair.x = to_out(v0);
  pair.y = to_out(v1);
  return pair;
#endif
}

// C[m, n] and C[m, n + 1] = `pair` (already through the epilogue) for an even n: one vector
// store when both columns exist and their address is aligned for it, else element by element.
// Callers guard m < M; the column guard is here. (The test is on the address rather than on
// N % 2 == 0, as store_out_pair has it: a loop-invariant condition lets the compiler duplicate
// a whole unrolled epilogue for the two cases, loads included.)
__device__ __forceinline__ void store_pair(OutT* __restrict__ C, int N, int m, int n,
                                           OutPair pair) {
  OutT* row = C + static_cast<i64>(m) * N;
  if (n + 1 < N && reinterpret_cast<unsigned long long>(row + n) % sizeof(OutPair) == 0) {
    *reinterpret_cast<OutPair*>(row + n) = pair;
  } else {
    if (n < N) row[n] = pair.x;
    if (n + 1 < N) row[n + 1] = pair.y;
  }
}

// ---- Split-K through a workspace -------------------------------------------------------------
// With SPLIT_K > 1, blockIdx.z picks a slice of the K range, and the slices of one output tile
// meet in the int32 workspace (zeroed before the first launch):
//   workspace[0, M*N)                             partial sums, row-major like C
//   workspace[M*N, M*N + tiles_m*tiles_n)          one arrival counter per output tile
// Every slice adds its partial sums (splitk_add), then counts its arrival (splitk_arrive). The
// slice that arrives last reads the totals (splitk_take), applies the epilogue and writes C. It
// leaves zeros behind (sums and counter), so the next launch needs no memset. Blocks are 1-D.

// Add one partial sum (the atomic resolves in L2; ptxas 13 emits ATOMG.E.ADD for it).
__device__ __forceinline__ void splitk_add(i32* workspace, int N, int m, int n, i32 partial) {
  atomicAdd(workspace + static_cast<i64>(m) * N + n, partial);
}

// Count this slice's arrival at output tile `tile`; true, in every thread of the block, for the
// slice that arrives last. Call after all of the block's splitk_add calls, from all threads.
__device__ __forceinline__ bool splitk_arrive(i32* workspace, int M, int N, int tile, int slices) {
  __threadfence();  // this thread's partial sums are visible GPU-wide before the arrival counts
  __syncthreads();  // every thread of the block has added and fenced
  int last = 0;
  if (threadIdx.x == 0) {
    i32* counter = workspace + static_cast<i64>(M) * N + tile;
    last = atomicAdd(counter, 1) == slices - 1;
    if (last) *counter = 0;  // every slice has arrived: reset for the next launch
  }
  last = __syncthreads_or(last);  // broadcast thread 0's answer
  if (last) __threadfence();      // the other slices' sums are seen after their arrival
  return last;
}

// In the last slice: the total for C[m, n], read from L2 (never a stale L1 line), and zeroed.
__device__ __forceinline__ i32 splitk_take(i32* workspace, int N, int m, int n) {
  i32* p = workspace + static_cast<i64>(m) * N + n;
  const i32 total = __ldcg(p);
  __stcg(p, 0);
  return total;
}
