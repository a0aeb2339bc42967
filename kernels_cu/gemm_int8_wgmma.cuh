// gemm_int8_wgmma.cuh: the Hopper path of gemm_int8 (PATH=wgmma, sm_90a only).
//
// C[M, N] = A[M, K] . B[N, K]^T, int8 x int8 -> int32, with wgmma.mma_async.m64nBNk32.s32.s8.s8.
//
// Block tile BM x BN, BM / 64 warpgroups (128 threads each); warpgroup g owns rows
// [64 g, 64 g + 64) of the tile and holds its 64 x BN int32 accumulators in registers (BN / 2 per
// thread). K advances BK bytes per k-tile, 32 bytes per wgmma. Operands are staged through a
// STAGES-deep cp.async pipeline into shared memory in the SWIZZLE-byte swizzled K-major layout
// that the wgmma descriptors describe (gemm_smem_tiles.cuh, gemm_wgmma_mainloop.cuh).
// Block order: GROUP_M tile rows walked together (tile_of_block, gemm_common.cuh).
//
// Knobs (macros): BM, BN, BK, STAGES, SWIZZLE, GROUP_M; EPI / OUT as in gemm_common.cuh.
// Launch: grid = cdiv(M, BM) * cdiv(N, BN) blocks, 2 * BM threads,
//         dynamic shared memory STAGES * (BM + BN) * BK + 1024 bytes (1024: alignment slack).
// Requires: K % 16 == 0 (16-byte cp.async of every row); M, N arbitrary (zero-filled tiles,
// guarded stores). workspace is unused: no split-K on this path (SPLIT_K, if the space has it,
// must be 1).

#include "gemm_wgmma_mainloop.cuh"

// Preconditions (the space file states the same relations as constraints)
static_assert(BM == 64 || BM == 128 || BM == 256, "BM: 64 rows per warpgroup, 1, 2 or 4 of them");
static_assert((BN % 8 == 0 && BN <= 32) || (BN % 16 == 0 && BN <= 256),
              "BN: a legal N of wgmma s8 (8, 16, 24, 32, then 48..256 step 16)");
static_assert(SWIZZLE == 32 || SWIZZLE == 64 || SWIZZLE == 128, "SWIZZLE: 32, 64 or 128 bytes");
static_assert(BK % SWIZZLE == 0, "BK: whole swizzle atoms (hence also whole 32-byte wgmma slices)");
static_assert(STAGES >= 3, "STAGES: one slot multiplied, one finishing, at least one loading");
static_assert(GROUP_M >= 1, "GROUP_M: at least one tile row per group");
#ifdef SPLIT_K
static_assert(SPLIT_K == 1, "SPLIT_K: this path runs the whole K range in every block");
#endif

constexpr int THREADS = 2 * BM;  // BM / 64 warpgroups of 128 threads

extern "C" __global__ void __launch_bounds__(THREADS, 1)
gemm_int8(const i8* __restrict__ A, const i8* __restrict__ B, OutT* __restrict__ C,
          const float* __restrict__ row_scale, const float* __restrict__ col_scale,
          i32* __restrict__ workspace, int M, int N, int K,
          const __grid_constant__ TmaDescriptor tmap_a,  // read by the TMA paths only
          const __grid_constant__ TmaDescriptor tmap_b,
          const __grid_constant__ TmaDescriptor tmap_c) {
  (void)workspace;
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
  i32 acc[BN / 2];  // this thread's part of the warpgroup's 64 x BN accumulator
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0;

  auto consume = [&](u32 a_tile, u32 b_tile) {  // a_tile: this warpgroup's 64 rows
    fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 32; ++kk) {
      const u64 da = kslice_desc<BM, SWIZZLE>(a_tile, kk);  // A: 64 rows x 32 bytes
      const u64 db = kslice_desc<BN, SWIZZLE>(b_tile, kk);  // B: BN rows x 32 bytes
      wgmma_s8<true>(acc, da, db);
    }
    wgmma_commit();
  };
  wgmma_mainloop<BM, BN, BK, STAGES, SWIZZLE, THREADS>(
      reinterpret_cast<const u8*>(A), reinterpret_cast<const u8*>(B), M, N, K, m0, n0,
      aligned_smem_base(), consume);
  fence_operands(acc);  // no read of acc before the final wgmma.wait_group

  // ---- epilogue: registers -> C, two adjacent columns at a time -------------------------------
  const int row_base = m0 + 64 * warpgroup;
#pragma unroll
  for (int i = 0; i < BN / 2; i += 2) {  // i, i + 1: columns col, col + 1 of one row
    const int m = row_base + wgmma_acc_row(warp, lane, i);
    const int n = n0 + wgmma_acc_col(lane, i);
    if (m < M) store_out_pair(C, N, m, n, acc[i], acc[i + 1], row_scale, col_scale);
  }
}
