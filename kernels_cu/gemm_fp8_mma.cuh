// gemm_fp8_mma.cuh: the mma.sync path of gemm_fp8 (PATH=mma; native FP8 tensor cores on sm_89,
// emulated on sm_90 / sm_90a).
//
// Block tile BM x BN, warps arranged (BM / WM) x (BN / WN), each computing a WM x WN warp tile as
// (WM / 16) x (WN / 8) mma.sync.m16n8k32 tiles with fp32 accumulators. Operands are staged by a
// STAGES-deep cp.async pipeline into shared memory in the swizzled K-major layout of
// gemm_smem_tiles.cuh (SWIZZLE = min(BK, 128): 8 consecutive rows at one 16-byte column hit 8
// different bank groups, so every ldmatrix phase is conflict-free), then read with ldmatrix.x4.
//
// Knobs (macros): BM, BN, BK, WM, WN, STAGES, SWIZZLE, GROUP_M, PROMOTE; FORMAT, OUT.
// Launch: grid = cdiv(M, BM) * cdiv(N, BN) blocks, 32 * (BM / WM) * (BN / WN) threads,
//         dynamic shared memory STAGES * (BM + BN) * BK + 1024 bytes (1024: alignment slack).

#include "gemm_smem_tiles.cuh"

// Preconditions (the space file states the same relations as constraints)
static_assert(BM % WM == 0 && BN % WN == 0, "BM, BN: whole warp tiles");
static_assert(WM % 16 == 0, "WM: whole m16 MMA tiles");
static_assert(WN % 16 == 0, "WN: pairs of n8 MMA tiles (one ldmatrix.x4 loads two)");
static_assert(BK % 32 == 0, "BK: whole k32 MMA steps");
static_assert(SWIZZLE == (BK < 128 ? BK : 128), "SWIZZLE: the widest span that divides BK");
static_assert(STAGES >= 2, "STAGES: at least one slot loading while one is multiplied");
static_assert(GROUP_M >= 1, "GROUP_M: at least one tile row per group");

constexpr int WARPS_M = BM / WM;
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int MI = WM / 16;  // m16 tiles per warp
constexpr int NI = WN / 8;   // n8 tiles per warp

// Four 8 x 16-byte matrices from shared memory; lanes 8j .. 8j + 7 give the row addresses of
// matrix j, and thread l receives 4 bytes of row l / 4 of each matrix, at byte 4 * (l % 4)
// (PTX ISA, ldmatrix: .b16 elements, 2 per 32-bit register, so 4 bytes per thread per row).
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");  // reads what cp.async wrote: keep it after the barrier
}

// d += a . b for one m16n8k32 tile (PTX ISA, "Matrix Fragments for mma.m16n8k32" with
// .e4m3/.e5m2, g = lane / 4, t = lane % 4):
//   a[0]: row g,     k 4t .. 4t+3      a[1]: row g + 8, k 4t .. 4t+3
//   a[2]: row g,     k 16+4t .. 16+4t+3 a[3]: row g + 8, k 16+4t ..
//   b[0]: col g, k 4t .. 4t+3            b[1]: col g, k 16+4t .. 16+4t+3
//   d[0], d[1]: row g, cols 2t, 2t+1     d[2], d[3]: row g + 8, cols 2t, 2t+1
__device__ __forceinline__ void mma_fp8(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32" FP8_PTX_TYPES
               ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(THREADS)
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

  const int tid = threadIdx.x;
  const int warp = tid / 32, lane = tid % 32;
  const int wm0 = (warp / WARPS_N) * WM;  // first row of this warp's tile within the block tile
  const int wn0 = (warp % WARPS_N) * WN;  // first column

  // ---- shared memory: STAGES x (A tile [BM, BK], B tile [BN, BK]) ------------------------------
  constexpr u32 A_BYTES = BM * BK, STAGE_BYTES = (BM + BN) * BK;
  const u32 smem = aligned_smem_base();
  const int k_tiles = (K + BK - 1) / BK;
  auto load_stage = [&](int kt) {
    const u32 stage = smem + (kt % STAGES) * STAGE_BYTES;
    load_tile_async<BM, BK, SWIZZLE, THREADS>(stage, A, m0, M, kt * BK, K, tid);
    load_tile_async<BN, BK, SWIZZLE, THREADS>(stage + A_BYTES, B, n0, N, kt * BK, K, tid);
  };

  float acc[MI][NI][4];  // (WM, WN) warp tile as MI x NI mma tiles
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;

  // ---- prologue: k-tiles 0 .. STAGES - 2 in flight --------------------------------------------
#pragma unroll 1
  for (int kt = 0; kt < STAGES - 1; ++kt) {
    if (kt < k_tiles) load_stage(kt);
    cp_async_commit();
  }

  // ---- main loop ------------------------------------------------------------------------------
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of k-tile kt have landed
    __syncthreads();              // everyone's have; every warp is done with k-tile kt - 1
    const int next = kt + STAGES - 1;  // goes into the slot of k-tile kt - 1
    if (next < k_tiles) load_stage(next);
    cp_async_commit();

    const u32 a_tile = smem + (kt % STAGES) * STAGE_BYTES;
    const u32 b_tile = a_tile + A_BYTES;
    // d += this k-tile's products, BK / 32 k32 steps
    auto mma_k_tile = [&](float (&d)[MI][NI][4]) {
#pragma unroll
      for (int kk = 0; kk < BK; kk += 32) {
        u32 a[MI][4];  // lanes 0-15: rows 0-15 at k, lanes 16-31: rows 0-15 at k + 16
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          const int row = wm0 + mi * 16 + lane % 16;
          ldmatrix_x4(a[mi], a_tile + tile_offset<BM, SWIZZLE>(row, kk + 16 * (lane / 16)));
        }
        u32 b[NI][2];  // one x4 per n8 pair: (n 0-7, k), (n 0-7, k+16), (n 8-15, k), (n 8-15, k+16)
#pragma unroll
        for (int nj = 0; nj < NI; nj += 2) {
          const int col = wn0 + nj * 8 + lane % 8 + 8 * (lane / 16);
          u32 r[4];
          ldmatrix_x4(r, b_tile + tile_offset<BN, SWIZZLE>(col, kk + 16 * ((lane / 8) % 2)));
          b[nj][0] = r[0];
          b[nj][1] = r[1];
          b[nj + 1][0] = r[2];
          b[nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) mma_fp8(d[mi][ni], a[mi], b[ni]);
      }
    };
#if PROMOTE
    float part[MI][NI][4] = {};  // this k-tile's sum in the tensor core, then one FADD each
    mma_k_tile(part);
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[mi][ni][r] += part[mi][ni][r];
#else
    mma_k_tile(acc);
#endif
  }
  cp_async_wait<0>();  // only empty groups remain; leave nothing in flight at exit

  // ---- epilogue: C = acc * scale_a * scale_b, two adjacent columns at a time -----------------
  const float scale = scale_a[0] * scale_b[0];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // rows g and g + 8
        const int m = m0 + wm0 + mi * 16 + lane / 4 + 8 * half;
        const int n = n0 + wn0 + ni * 8 + 2 * (lane % 4);
        const float* v = &acc[mi][ni][2 * half];
        if (m < M) store_scaled_pair(C, N, m, n, v[0], v[1], scale);
      }
}
