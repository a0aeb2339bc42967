// gemm_fp8_wgmma.cuh: the Hopper path of gemm_fp8 (PATH=wgmma, sm_90a only).
//
// The same structure as gemm_int8_wgmma.cuh: BM / 64 warpgroups, each owning 64 rows of the
// BM x BN block tile in fp32 registers (BN / 2 per thread), one wgmma.m64nBNk32 .f32.<fp8>.<fp8>
// per 32 bytes of K, operands staged by the shared cp.async pipeline (gemm_wgmma_mainloop.cuh)
// in the SWIZZLE-byte swizzled K-major layout. With PROMOTE, each k-tile's wgmma write fresh
// partial sums (scale-d = 0 on the first) that are then added into the fp32 accumulators.
//
// Knobs (macros): BM, BN, BK, STAGES, SWIZZLE, GROUP_M, PROMOTE; FORMAT, OUT.
// Launch: grid = cdiv(M, BM) * cdiv(N, BN) blocks, 2 * BM threads,
//         dynamic shared memory STAGES * (BM + BN) * BK + 1024 bytes (1024: alignment slack).

#include "gemm_wgmma_mainloop.cuh"

// Preconditions (the space file states the same relations as constraints)
static_assert(BM == 64 || BM == 128 || BM == 256, "BM: 64 rows per warpgroup, 1, 2 or 4 of them");
static_assert(BN % 8 == 0 && BN >= 8 && BN <= 256, "BN: a legal N of wgmma fp8 (8, 16, .., 256)");
static_assert(SWIZZLE == 32 || SWIZZLE == 64 || SWIZZLE == 128, "SWIZZLE: 32, 64 or 128 bytes");
static_assert(BK % SWIZZLE == 0, "BK: whole swizzle atoms (hence also whole 32-byte wgmma slices)");
static_assert(STAGES >= 3, "STAGES: one slot multiplied, one finishing, at least one loading");
static_assert(GROUP_M >= 1, "GROUP_M: at least one tile row per group");

constexpr int THREADS = 2 * BM;  // BM / 64 warpgroups of 128 threads

// D[64 x BN] (+)= A[64 x 32] . B[BN x 32]^T, fp8 x fp8 -> fp32 (wgmma_sm90.cuh). The trailing
// "1, 1" are imm-scale-a and imm-scale-b (1: no negation); scale-d 0 overwrites D.
template <bool ACCUMULATE>
__device__ __forceinline__ void wgmma_fp8(float (&d)[BN / 2], u64 desc_a, u64 desc_b) {
  if constexpr (ACCUMULATE) {
    WGMMA_SS(BN, ".f32" FP8_PTX_TYPES, "1", ", 1, 1", "+f", d, desc_a, desc_b);
  } else {
    WGMMA_SS(BN, ".f32" FP8_PTX_TYPES, "0", ", 1, 1", "+f", d, desc_a, desc_b);
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_fp8(const u8* __restrict__ A, const u8* __restrict__ B, OutT* __restrict__ C,
         const float* __restrict__ scale_a, const float* __restrict__ scale_b,
         i32* __restrict__ workspace,  // read by the TMA paths only (split-K, stream-K)
         int M, int N, int K,
         const __grid_constant__ TmaDescriptor tmap_a,  // read by the TMA paths only
         const __grid_constant__ TmaDescriptor tmap_b,
         const __grid_constant__ TmaDescriptor tmap_c) {  // read with EPILOGUE=tma only
  // ---- tiling ---------------------------------------------------------------------------------
  const int tiles_m = (M + BM - 1) / BM;
  const int tiles_n = (N + BN - 1) / BN;
  const TileCoord tile = tile_of_block(blockIdx.x, tiles_m, tiles_n, GROUP_M);
  const int m0 = tile.m * BM;  // first row of the block tile
  const int n0 = tile.n * BN;  // first column

  const int warpgroup = threadIdx.x / 128;
  const int warp = (threadIdx.x % 128) / 32;  // warp within the warpgroup: rows 16 warp ..
  const int lane = threadIdx.x % 32;

  // ---- main loop: acc (64 x BN per warpgroup) += A tile . B tile^T ----------------------------
  float acc[BN / 2];  // this thread's part of the warpgroup's 64 x BN fp32 accumulator
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
#if PROMOTE
  float part[BN / 2] = {};  // one k-tile's sum, written by the tensor cores
#endif

  auto consume = [&](u32 a_tile, u32 b_tile) {  // a_tile: this warpgroup's 64 rows
#if PROMOTE
    fence_operands(part);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 32; ++kk) {  // part = this k-tile's sum: slice 0 overwrites
      const u64 da = kslice_desc<BM, SWIZZLE>(a_tile, kk);  // A: 64 rows x 32 bytes
      const u64 db = kslice_desc<BN, SWIZZLE>(b_tile, kk);  // B: BN rows x 32 bytes
      if (kk == 0) {
        wgmma_fp8<false>(part, da, db);
      } else {
        wgmma_fp8<true>(part, da, db);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();  // the partial sums are needed now
    fence_operands(part);
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] += part[i];  // promotion: fp32 FADD on CUDA cores
#else
    fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 32; ++kk) {
      const u64 da = kslice_desc<BM, SWIZZLE>(a_tile, kk);  // A: 64 rows x 32 bytes
      const u64 db = kslice_desc<BN, SWIZZLE>(b_tile, kk);  // B: BN rows x 32 bytes
      wgmma_fp8<true>(acc, da, db);
    }
    wgmma_commit();
#endif
  };
  wgmma_mainloop<BM, BN, BK, STAGES, SWIZZLE, THREADS>(A, B, M, N, K, m0, n0,
                                                       aligned_smem_base(), consume);
  fence_operands(acc);  // no read of acc before the final wgmma.wait_group

  // ---- epilogue: C = acc * scale_a * scale_b, two adjacent columns at a time -----------------
  const float scale = scale_a[0] * scale_b[0];
  const int row_base = m0 + 64 * warpgroup;
#pragma unroll
  for (int i = 0; i < BN / 2; i += 2) {  // i, i + 1: columns col, col + 1 of one row
    const int m = row_base + wgmma_acc_row(warp, lane, i);
    const int n = n0 + wgmma_acc_col(lane, i);
    if (m < M) store_scaled_pair(C, N, m, n, acc[i], acc[i + 1], scale);
  }
}
