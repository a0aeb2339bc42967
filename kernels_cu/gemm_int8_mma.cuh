// gemm_int8_mma.cuh: the tensor-core path of gemm_int8 (PATH=mma), sm_80 and newer.
//
// C[M, N] = epilogue(A[M, K] . B[N, K]^T), int8 x int8 -> int32, through
// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (SASS: IMMA.16832.S8.S8).
//
// Data flow of one block (one BM x BN output tile, or one K slice of it when SPLIT_K > 1):
//
//   global --cp.async.cg, 16 B--> shared memory --ldmatrix.x4--> registers --mma.sync--> int32
//            (STAGES-deep ring:     (swizzled or      (A: 16x32 B,          accumulators
//             STAGES-1 k-tiles      padded rows)       B: 2 x 8x32 B)       (WM/16, WN/8, 4)
//             in flight)
//
// The block's (BM/WM) x (BN/WN) warps each own a WM x WN piece of the tile, computed as
// (WM/16) x (WN/8) mma tiles of 16 x 8 outputs. Both operands are K-major (A is [M, K], B is
// [N, K], rows contiguous in K), which is exactly the ".row.col" operand order of mma.sync for
// int8, so ldmatrix needs no transpose (and .trans could not transpose 8-bit data anyway).
//
// Tunables (macros set by the space file):
//   BM, BN      block tile (rows of A, rows of B)
//   BK          k-tile in bytes of K: 32, 64 or 128 (2, 4 or 8 chunks of 16 bytes per row)
//   WM, WN      warp tile
//   STAGES      shared-memory stages of the cp.async pipeline (>= 2)
//   SMEM_LAYOUT swizzle: rows packed, 16-byte chunks XOR-permuted within each 128-byte line;
//               pad: each row padded by 16 bytes. Both keep ldmatrix free of bank conflicts.
//   GROUP_M     grouped block order (tile_of_block in gemm_common.cuh)
//   SPLIT_K     slices of K per output tile (blockIdx.z); > 1 meets in the workspace
//   UNROLL      unroll factor of the BK/32 mma k-steps of one k-tile
//   MIN_BLOCKS  __launch_bounds__ minimum resident blocks per SM (caps registers per thread)
//
// Requirements: K % 16 == 0, and A, B 16-byte aligned: every row is a whole number of 16-byte
// chunks starting on a 16-byte boundary. M, N and K need not be multiples of the tile: chunks
// outside A or B are zero-filled by cp.async (src-size 0), outputs outside C are not stored.
// Launch: grid (cdiv(M, BM) * cdiv(N, BN), 1, SPLIT_K), block (BM/WM) * (BN/WN) * 32 threads,
// STAGES * (BM + BN) * row_pitch bytes of dynamic shared memory (row_pitch = BK, or BK + 16
// with SMEM_LAYOUT=pad).
#pragma once

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "PATH=mma needs sm_80 or newer (mma.sync m16n8k32 s8, cp.async)"
#endif
#if !(SMEM_LAYOUT_swizzle || SMEM_LAYOUT_pad)
#error "SMEM_LAYOUT must be swizzle or pad"
#endif

namespace mma_path {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

constexpr int WARPS_M = BM / WM;                 // warps along M
constexpr int WARPS_N = BN / WN;                 // warps along N
constexpr int THREADS = WARPS_M * WARPS_N * 32;  // threads per block
constexpr int MI = WM / 16;                      // m16 mma tiles per warp
constexpr int NI = WN / 8;                       // n8 mma tiles per warp
constexpr int KSTEPS = BK / 32;                  // k32 mma steps per k-tile
constexpr int CHUNKS = BK / 16;                  // 16-byte chunks per tile row
#if SMEM_LAYOUT_pad
constexpr int PITCH = BK + 16;  // bytes from one tile row to the next
#else
constexpr int PITCH = BK;
#endif
constexpr int A_TILE_BYTES = BM * PITCH;               // (BM, BK) in one stage
constexpr int B_TILE_BYTES = BN * PITCH;               // (BN, BK) in one stage
constexpr int STAGE_BYTES = A_TILE_BYTES + B_TILE_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;       // dynamic shared memory of the launch

// ---- Preconditions (the space file states each relation as a constraint) ----------------------
static_assert(BM % WM == 0, "BM % WM == 0: the block tile is a whole number of warp tiles along M");
static_assert(BN % WN == 0, "BN % WN == 0: the block tile is a whole number of warp tiles along N");
static_assert(WM % 16 == 0, "WM % 16 == 0: a warp tile is whole m16 mma tiles");
static_assert(WN % 16 == 0, "WN % 16 == 0: a warp tile is whole pairs of n8 mma tiles (ldmatrix.x4 loads two)");
static_assert(BK == 32 || BK == 64 || BK == 128,
              "BK in {32, 64, 128}: the XOR swizzle is conflict-free for 2, 4 or 8 chunks per row");
static_assert(STAGES >= 2, "STAGES >= 2: one stage is computed while the next one loads");
static_assert(THREADS <= 1024, "(BM/WM)*(BN/WN) <= 32: at most 1024 threads per block");
static_assert(KSTEPS % UNROLL == 0, "(BK/32) % UNROLL == 0: UNROLL divides the mma k-steps of a k-tile");
static_assert(SPLIT_K >= 1 && GROUP_M >= 1 && MIN_BLOCKS >= 1, "SPLIT_K, GROUP_M, MIN_BLOCKS >= 1");
static_assert(SMEM_BYTES <= ARCH_MAX_SMEM_PER_BLOCK,
              "STAGES*(BM+BN)*row_pitch <= the arch's shared memory per block (sm_80 163 KB, sm_89 99 KB, sm_90 227 KB)");

// ---- PTX wrappers ---------------------------------------------------------------------------
__device__ __forceinline__ u32 smem_u32(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1 (.cg). With valid == false nothing is read and the
// 16 bytes are zero-filled (src-size 0); src must still be a mapped address.
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

// Close the group of cp.async issued since the last commit (an empty group is legal).
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8 x 16-byte matrices from shared memory: lanes 8j..8j+7 give the row addresses of
// matrix j; lane l receives bytes 4*(l%4)..4*(l%4)+3 of row l/4 of matrix j in r[j].
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a . b for one 16 x 8 x 32 tile: a = rows of A (16 x 32 int8), b = rows of B (8 x 32).
__device__ __forceinline__ void mma_s8(i32 (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// ---- end of PTX wrappers ----------------------------------------------------------------------

// Byte offset of 16-byte chunk `chunk` of row `row` inside one operand tile of a stage.
//   pad:     rows BK + 16 bytes apart: 8 consecutive rows start in 8 different 16-byte bank
//            groups (the pitch is an odd number of chunks).
//   swizzle: rows packed; within each 128-byte line (8 chunks) the chunk index is XORed with the
//            line's index mod 8. The 8 rows an ldmatrix phase reads (same logical chunk) then
//            land in 8 different bank groups for 2, 4 or 8 chunks per row.
__device__ __forceinline__ u32 tile_offset(int row, int chunk) {
#if SMEM_LAYOUT_swizzle
  const int linear = row * CHUNKS + chunk;  // chunk index in a packed row-major tile
  return static_cast<u32>((linear ^ ((linear >> 3) & 7)) * 16);
#else
  return static_cast<u32>(row * PITCH + chunk * 16);
#endif
}

// Issue the cp.async of one operand tile (ROWS x BK bytes, rows row0.. of src, bytes k0.. of
// each row) into shared memory at `tile`. Thread tid copies chunks tid, tid + THREADS, ...:
// consecutive threads read consecutive 16-byte chunks of a row (coalesced).
template <int ROWS>
__device__ __forceinline__ void copy_tile(u32 tile, const i8* __restrict__ src, int row0,
                                          int rows, int k0, int K, int tid) {
  constexpr int TOTAL = ROWS * CHUNKS;  // chunks in the tile
#pragma unroll
  for (int i = 0; i < ceil_div(TOTAL, THREADS); ++i) {
    const int idx = tid + i * THREADS;
    if (TOTAL % THREADS == 0 || idx < TOTAL) {
      const int r = idx / CHUNKS, c = idx % CHUNKS;
      const int gr = row0 + r, gk = k0 + c * 16;
      const bool valid = gr < rows && gk < K;  // K % 16 == 0: a chunk is all in or all out
      cp_async_16(tile + tile_offset(r, c), valid ? src + static_cast<i64>(gr) * K + gk : src,
                  valid);
    }
  }
}

// One k-tile of the warp's WM x WN piece: BK/32 steps of (WM/16) x (WN/8) mma.sync.
__device__ __forceinline__ void compute_tile(u32 a_tile, u32 b_tile, int warp_m0, int warp_n0,
                                             int lane, i32 (&acc)[MI][NI][4]) {
  // Lane addressing of ldmatrix.x4 (matrix j = lane / 8 gets its row addresses from lanes 8j..):
  //   A, a 16-row x 32-byte block: matrices (rows 0-7, bytes 0-15), (rows 8-15, bytes 0-15),
  //     (rows 0-7, bytes 16-31), (rows 8-15, bytes 16-31) = mma's a0, a1, a2, a3.
  //   B, a 16-row x 32-byte block (two n8 tiles): matrices (rows 0-7, bytes 0-15),
  //     (rows 0-7, bytes 16-31), (rows 8-15, bytes 0-15), (rows 8-15, bytes 16-31)
  //     = b0, b1 of the first n8 tile, then b0, b1 of the second.
  const int a_row = lane % 16, a_chunk = lane / 16;
  const int b_row = lane % 8 + (lane / 16) * 8, b_chunk = (lane / 8) % 2;
#pragma unroll UNROLL
  for (int ks = 0; ks < KSTEPS; ++ks) {
    u32 a[MI][4];  // (WM/16) A fragments, 16 x 32 bytes each
    u32 b[NI][2];  // (WN/8) B fragments, 8 x 32 bytes each
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
      ldmatrix_x4(a[mi], a_tile + tile_offset(warp_m0 + mi * 16 + a_row, ks * 2 + a_chunk));
#pragma unroll
    for (int nj = 0; nj < NI / 2; ++nj) {
      u32 r[4];
      ldmatrix_x4(r, b_tile + tile_offset(warp_n0 + nj * 16 + b_row, ks * 2 + b_chunk));
      b[2 * nj][0] = r[0];
      b[2 * nj][1] = r[1];
      b[2 * nj + 1][0] = r[2];
      b[2 * nj + 1][1] = r[3];
    }
    // Serpentine order: consecutive mma share an operand (A across a row, B at the turn).
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int j = 0; j < NI; ++j) {
        const int ni = mi % 2 == 0 ? j : NI - 1 - j;
        mma_s8(acc[mi][ni], a[mi], b[ni]);
      }
    }
  }
}

}  // namespace mma_path

extern "C" __global__ void __launch_bounds__(mma_path::THREADS, MIN_BLOCKS)
gemm_int8(const i8* __restrict__ A, const i8* __restrict__ B, OutT* __restrict__ C,
          const float* __restrict__ row_scale, const float* __restrict__ col_scale,
          i32* __restrict__ workspace, int M, int N, int K,
          const __grid_constant__ TmaDescriptor tmap_a,  // read by the TMA paths only
          const __grid_constant__ TmaDescriptor tmap_b,
          const __grid_constant__ TmaDescriptor tmap_c) {
  using namespace mma_path;
  extern __shared__ __align__(128) unsigned char smem[];  // (STAGES, A tile | B tile)
  const u32 smem_base = smem_u32(smem);

  // ---- tiling: this block's output tile and K slice ---------------------------------------
  const int tiles_m = ceil_div(M, BM), tiles_n = ceil_div(N, BN);
  const TileCoord tile = tile_of_block(blockIdx.x, tiles_m, tiles_n, GROUP_M);
  const int m0 = tile.m * BM;  // first row of A and C
  const int n0 = tile.n * BN;  // first row of B, first column of C
  const int k_tiles_all = ceil_div(K, BK);
  const int k_tiles_per_slice = ceil_div(k_tiles_all, SPLIT_K);
  const int kt_begin = blockIdx.z * k_tiles_per_slice;  // first k-tile of this slice
  const int k_tiles = max(0, min(k_tiles_all, kt_begin + k_tiles_per_slice) - kt_begin);

  // ---- partitioning: this warp's piece of the tile ------------------------------------------
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m0 = (warp / WARPS_N) * WM;  // inside the block tile
  const int warp_n0 = (warp % WARPS_N) * WN;

  i32 acc[MI][NI][4];  // (WM/16, WN/8, 4): the warp's WM x WN outputs, 4 per lane per mma tile
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0;

  // Issue the copies of k-tile kt (counted from the slice's first) into its stage.
  auto load_k_tile = [&](int kt) {
    const u32 stage = smem_base + (kt % STAGES) * STAGE_BYTES;
    const int k0 = (kt_begin + kt) * BK;
    copy_tile<BM>(stage, A, m0, M, k0, K, tid);
    copy_tile<BN>(stage + A_TILE_BYTES, B, n0, N, k0, K, tid);
  };

  // ---- main loop: a STAGES-deep cp.async pipeline ----------------------------------------------
  // Exactly one commit group per k-tile (empty past the end), so "k-tile kt has landed" is
  // "at most STAGES - 2 newer groups are pending" at iteration kt.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_k_tile(s);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of k-tile kt have landed ...
    __syncthreads();  // ... and everyone's; and every warp is done with k-tile kt - 1,
                      // whose stage is refilled next
    if (kt + STAGES - 1 < k_tiles) load_k_tile(kt + STAGES - 1);
    cp_async_commit();
    const u32 stage = smem_base + (kt % STAGES) * STAGE_BYTES;
    compute_tile(stage, stage + A_TILE_BYTES, warp_m0, warp_n0, lane, acc);
  }

  // ---- epilogue ----------------------------------------------------------------------------
  // acc[mi][ni] holds rows g and g + 8, columns 2t and 2t + 1 of its 16 x 8 mma tile
  // (g = lane / 4, t = lane % 4): c0, c1 on row g, c2, c3 on row g + 8.
  const int g = lane / 4, t = lane % 4;
  const int row0 = m0 + warp_m0 + g;       // + mi * 16 + h * 8
  const int col0 = n0 + warp_n0 + 2 * t;   // + ni * 8
  if constexpr (SPLIT_K == 1) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = row0 + mi * 16 + h * 8;
        if (m >= M) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          store_out_pair(C, N, m, col0 + ni * 8, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1],
                         row_scale, col_scale);
      }
  } else {
    if (k_tiles > 0) {  // an empty slice (more slices than k-tiles) only counts its arrival
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = row0 + mi * 16 + h * 8;
          if (m >= M) continue;
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int n = col0 + ni * 8;
            if (n < N) splitk_add(workspace, N, m, n, acc[mi][ni][2 * h]);
            if (n + 1 < N) splitk_add(workspace, N, m, n + 1, acc[mi][ni][2 * h + 1]);
          }
        }
    }
    if (!splitk_arrive(workspace, M, N, tile.m * tiles_n + tile.n, SPLIT_K)) return;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = row0 + mi * 16 + h * 8;
        if (m >= M) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
          const int n = col0 + ni * 8;
          if (n >= N) continue;
          const i32 v0 = splitk_take(workspace, N, m, n);
          const i32 v1 = n + 1 < N ? splitk_take(workspace, N, m, n + 1) : 0;
          store_out_pair(C, N, m, n, v0, v1, row_scale, col_scale);
        }
      }
  }
}
