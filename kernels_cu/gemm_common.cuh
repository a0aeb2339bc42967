// gemm_common.cuh: what every GEMM path of the library shares.
//
//   * integer types (NVRTC has no <cstdint>),
//   * the output type and the epilogue (raw int32, or W8A8 dequantisation:
//       C[m, n] = (float) acc[m, n] * row_scale[m] * col_scale[n]   -> fp16 / bf16 / fp32),
//   * block rasterisation: which output tile a block computes (grouped order for L2 reuse).
//
// Macros (set by the space file):
//   EPI   raw | w8a8         (EPI_raw / EPI_w8a8 are defined to 1 by the workbench)
//   OUT   int32 | float16 | bfloat16 | float32   (OUT_int32, OUT_float16, ... likewise)
//   GROUP_M  rows of tiles walked together by consecutive blocks (1 = plain row-major order)
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

using i8 = signed char;
using u8 = unsigned char;
using i32 = int;
using u32 = unsigned int;
using i64 = long long;

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

#if EPI_raw
static_assert(OUT_int32, "EPI=raw writes the int32 accumulators: OUT must be int32");
#elif EPI_w8a8
static_assert(!OUT_int32, "EPI=w8a8 dequantises: OUT must be float16, bfloat16 or float32");
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

// Tile coordinates of this block in grouped ("swizzled") order: GROUP_M consecutive tile rows
// are walked column by column, so blocks running at the same time share rows of A and
// columns of B in L2. GROUP_M = 1 is plain row-major order.
struct TileCoord {
  int m;  // tile row
  int n;  // tile column
};

__device__ __forceinline__ TileCoord tile_of_block(int block, int tiles_m, int tiles_n, int group_m) {
  const int per_group = group_m * tiles_n;
  const int group = block / per_group;
  const int first_m = group * group_m;
  const int rows = min(tiles_m - first_m, group_m);  // the last group may be short
  const int in_group = block % per_group;
  return TileCoord{first_m + in_group % rows, in_group / rows};
}
