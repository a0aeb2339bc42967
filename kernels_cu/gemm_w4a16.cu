// gemm_w4a16: C[M, N] = A[M, K] . dequant(W)[K, N], the GEMM of GPTQ / AWQ int4 LLM weights.
//
// A and C are fp16 or bf16 (DTYPE), accumulation fp32. W is int4 in groups of G rows along K:
// one fp16 scale per (group, column), and w = s * (q - 8) (SYMMETRIC, GPTQ) or w = s * (q - z)
// with an int4 zero point per (group, column) (AWQ, asymmetric GPTQ).
//
// Tensor cores through mma.sync.m16n8k16 (sm_80+; SASS HMMA.16816.F32[.BF16]), the weights
// dequantized in registers between shared memory and the mma, a STAGES-deep cp.async pipeline
// for activations, weights, scales and zero points:
//
//   global --cp.async 16 B--> shared --ldmatrix.x4 (A) / ld.shared 16 B (W)--> registers
//            (STAGES-deep ring)          W: 4 words = 8 n8 fragments --CVT--> (q - z) --SCALE-->
//                                                                  mma.sync --> fp32 accumulators
//
// ---- layouts (workbench/quant/int4.py writes them from GPTQ and AWQ checkpoints, and back) ----
//   A        [M, K] row-major, DTYPE.
//   qweight  u32 [K/16][NU][32][4], NU = cdiv(N, 64): a "unit" is 16 rows (k) x 64 columns (n),
//            512 contiguous bytes; lane l's 16 bytes (4 words) hold exactly the B fragments of
//            mma.m16n8k16 that lane l needs for the unit's 8 n8 tiles (word j: tiles 2j, 2j+1;
//            nibble order in gemm_w4a16_convert.cuh). One 16-byte shared load per lane per unit:
//            no ldmatrix, no bank conflict. Columns N..64*NU-1 are padding (never stored).
//   scales   fp16 [K/G][64 * NU], within each unit column 8j + g stored at 8g + j: the scales
//            of the 8 n8 tiles that fragment column g meets are one 16-byte chunk.
//   zeros    u8 [K/G][64 * NU] (SYMMETRIC=0 only), permuted like the scales.
//   C        [M, N] row-major, DTYPE.
//   workspace fp32 [M * N] partial sums + one int counter per output tile (SPLIT_K > 1), zero
//            before the first launch and left zero by every launch.
//
// ---- tunables (the space file states every relation between them as a constraint) ------------
//   BM, BN, BK      block tile; BK elements of K per pipeline stage
//   WM, WN          warp tile (WN: whole 64-column units)
//   WARPS_K         warps that split each k-tile's k16 steps inside the block (decode: few rows,
//                   more warps); their accumulators are summed through shared memory at the end
//   STAGES          cp.async pipeline depth
//   SPLIT_K         K slices per output tile (blockIdx.z): fp32 atomics into the workspace; the
//                   slice that arrives last converts the sums to DTYPE, writes C and re-zeroes
//   GROUP_M         grouped block order (rows of tiles walked together for L2 reuse)
//   CVT             lop3 (magic-number conversion, no I2F) | i2f (shift, mask, I2F)
//   SCALE           element: w = (q - z) * s per weight in DTYPE before the mma;
//                   group: mma on (q - z) (exact), then acc += s * partial in fp32 once per
//                   k-tile, which must then lie in one group (G % BK == 0)
//   HINT            none | evict_first: the weight stream's cp.async carries an L2::evict_first
//                   cache policy (createpolicy), so it does not push A and C out of L2
//   PATH            mma (mma.sync, sm_80+) | wgmma (warpgroup MMA, operands swapped, sm_90a)
// Problem variants: DTYPE, G, SYMMETRIC.
//
// PATH=wgmma (sm_90a only; gemm_w4a16_wgmma.cuh): the Hopper warpgroup MMA. wgmma takes only
// its A operand from registers, so the operands are swapped, C^T = W^T . A^T (as vLLM's Machete
// does): the dequantized weights are wgmma's A (64 output columns per instruction), the
// activations its B from shared memory (WM tokens as wgmma's N), through a wgmma_pipeline of
// the same stages; the same weight layout, conversion, scales, zero points, WARPS_K and SPLIT_K.
//
// Launch: grid (cdiv(N, BN), cdiv(M, BM), SPLIT_K), block 32 * (BM/WM) * (BN/WN) * WARPS_K
// threads (wgmma: (BM/WM) * WARPS_K warpgroups), SMEM_BYTES of dynamic shared memory (STAGES
// stages, or the WARPS_K reduction).
#include "gemm_smem_tiles.cuh"  // cp.async; the wgmma path's swizzled activation tiles
#include "gemm_w4a16_convert.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "gemm_w4a16 needs sm_80 or newer (mma.sync m16n8k16 f16/bf16, cp.async)"
#endif
#if !(PATH_mma || PATH_wgmma)
#error "PATH must be mma or wgmma"
#endif
#if PATH_wgmma
#include "gemm_w4a16_wgmma_map.cuh"
#include "gemm_wgmma_mainloop.cuh"  // wgmma_pipeline, kslice_desc; wgmma_sm90.cuh (sm_90a only)
#endif
#if !(CVT_lop3 || CVT_i2f)
#error "CVT must be lop3 or i2f"
#endif
#if !(SCALE_element || SCALE_group)
#error "SCALE must be element or group"
#endif
#if !(HINT_none || HINT_evict_first)
#error "HINT must be none or evict_first"
#endif

namespace w4 {

// Opt-in dynamic shared memory per block of the target arch (CUDA Programming Guide, compute
// capabilities): sm_80/87 163 KB, sm_86/89 99 KB, sm_90 227 KB, sm_120 99 KB.
constexpr int ARCH_MAX_SMEM_PER_BLOCK = __CUDA_ARCH__ >= 1200                         ? 99 * 1024
                                        : __CUDA_ARCH__ >= 900                          ? 227 * 1024
                                        : __CUDA_ARCH__ == 800 || __CUDA_ARCH__ == 870 ? 163 * 1024
                                                                                        : 99 * 1024;

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int cmin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }

#if SCALE_group
constexpr bool PER_GROUP_SCALES = true;   // SCALE=group
#else
constexpr bool PER_GROUP_SCALES = false;  // SCALE=element
#endif
constexpr int UNIT_N = 64;                                 // columns of a weight unit
constexpr int UNIT_BYTES = 512;                            // (16, 64) int4
constexpr int WARPS_M = BM / WM;                           // warps along M
constexpr int WARPS_N = BN / WN;                           // warps along N
constexpr int WARPS_MN = WARPS_M * WARPS_N;                // warps of one k16 step
constexpr int THREADS = WARPS_MN * WARPS_K * 32;           // threads per block
// the mma path's warp tiling (PATH=wgmma builds do not use it)
[[maybe_unused]] constexpr int MI = WM / 16;               // m16 tiles per warp
[[maybe_unused]] constexpr int NU = WN / UNIT_N;           // weight units per warp
[[maybe_unused]] constexpr int NI = WN / 8;                // n8 tiles per warp
constexpr int BNU = BN / UNIT_N;                           // weight units per block row
constexpr int KSTEPS = BK / 16;                            // k16 steps per k-tile
constexpr int GROUP_ROWS = BK > G ? BK / G : 1;            // groups (scale rows) per k-tile
constexpr int ROW_KSTEPS = cmin(BK, G) / 16;               // k16 steps per scale row
constexpr int A_CHUNKS = BK / 8;                           // 16-byte chunks per A row
#if PATH_wgmma
constexpr bool WGMMA = true;
#else
constexpr bool WGMMA = false;
#endif
// wgmma: the activation tile's swizzle span (its rows are 2 * BK bytes; 128 from BK = 64 on)
[[maybe_unused]] constexpr int SW = 2 * BK < 128 ? 2 * BK : 128;

constexpr int A_TILE_BYTES = BM * BK * 2;                  // (BM, BK) DTYPE
constexpr int W_TILE_BYTES = KSTEPS * BNU * UNIT_BYTES;    // (BK/16, BN/64) units
constexpr int S_TILE_BYTES = GROUP_ROWS * BN * 2;          // (GROUP_ROWS, BN) fp16
constexpr int Z_TILE_BYTES = SYMMETRIC ? 0 : GROUP_ROWS * BN;  // (GROUP_ROWS, BN) u8
constexpr int STAGE_DATA = A_TILE_BYTES + W_TILE_BYTES + S_TILE_BYTES + Z_TILE_BYTES;
// wgmma: every stage's activation tile starts on the swizzle pattern's 1024-byte period, and the
// launch adds 1024 bytes of slack to align the base (aligned_smem_base)
constexpr int STAGE_BYTES = WGMMA ? ceil_div(STAGE_DATA, 1024) * 1024 : STAGE_DATA;
constexpr int PIPE_BYTES = STAGES * STAGE_BYTES + (WGMMA ? 1024 : 0);
constexpr int REDUCE_BYTES = (WARPS_K - 1) * BM * BN * 4;  // fp32 partials of warps k > 0
constexpr int SMEM_BYTES = cmax(PIPE_BYTES, REDUCE_BYTES);  // dynamic shared memory of the launch

// ---- Preconditions (one static_assert per constraint of tuning_spaces/gemm_w4a16.yaml) -------
// The space's other constraints have no compile-time form: K % G == 0 is the caller's (a shape:
// the kernel reads K / G scale rows), `BM == 16 or BM / 2 < M`, `GROUP_M == 1 or several tile
// rows` and "every K slice gets a k-tile" only prune wasteful points (the kernel is correct
// without them: rows past M and empty slices contribute zeros), and the register fit is
// checked against ptxas by tests/test_kernels_gemm_w4a16.py.
static_assert(BM % WM == 0, "BM % WM == 0: the block tile is a whole number of warp tiles along M");
static_assert(BN % WN == 0, "BN % WN == 0: the block tile is a whole number of warp tiles along N");
static_assert(WM % 16 == 0, "WM % 16 == 0: a warp tile is whole m16 mma tiles");
static_assert(WN % UNIT_N == 0, "WN % 64 == 0: a warp tile is whole 64-column weight units");
static_assert(G == 32 || G == 64 || G == 128, "G in {32, 64, 128}: the group sizes of the format");
static_assert(BK % 32 == 0 && BK <= 256, "BK in {32, 64, 128, 256}: whole k16 steps, swizzled A rows");
static_assert(!PER_GROUP_SCALES || G % BK == 0,
              "SCALE=group needs G % BK == 0: a k-tile must not straddle two groups");
static_assert(BK <= G || BK % G == 0, "BK <= G or BK % G == 0: a k-tile holds whole groups");
static_assert(ROW_KSTEPS % WARPS_K == 0,
              "min(BK, G)/16 % WARPS_K == 0: each group's k16 steps are dealt evenly to the WARPS_K warps");
static_assert(STAGES >= 2, "STAGES >= 2: one stage is computed while the next one loads");
static_assert(THREADS <= 1024, "(BM/WM)*(BN/WN)*WARPS_K <= 32: at most 1024 threads per block");
static_assert(SPLIT_K >= 1 && GROUP_M >= 1, "SPLIT_K, GROUP_M >= 1");
#if PATH_wgmma
static_assert(BN == 4 * UNIT_N && WN == UNIT_N,
              "wgmma: BN == 256 and WN == 64: a warpgroup's four warps take one 64-column weight unit each");
static_assert(WM % 8 == 0 && WM <= 256, "wgmma: WM is the N of wgmma.m64nNk16 (a multiple of 8, at most 256)");
static_assert(STAGES >= 3,
              "wgmma: STAGES >= 3: one stage multiplied, one whose wgmma may still run, one loading");
#endif
static_assert(SMEM_BYTES <= ARCH_MAX_SMEM_PER_BLOCK,
              "shared memory per block: STAGES * stage bytes (and the WARPS_K reduction) fit the arch");

// ---- PTX wrappers ---------------------------------------------------------------------------
// (cp_async_16, cp_async_commit, cp_async_wait: gemm_smem_tiles.cuh)
// 16 bytes global -> shared with an L2 cache policy (createpolicy), for the weight stream.
__device__ __forceinline__ void cp_async_16_hint(u32 dst, const void* src, bool valid,
                                                 unsigned long long policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst),
               "l"(src), "r"(valid ? 16 : 0), "l"(policy)
               : "memory");
}

__device__ __forceinline__ unsigned long long evict_first_policy() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// Four 8 x 8 b16 matrices: lanes 8j..8j+7 address the rows of matrix j.
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a . b for one 16 x 8 x 16 tile, fp32 accumulators.
__device__ __forceinline__ void mma(float (&d)[4], const u32 (&a)[4], T2 b0, T2 b1) {
#if DTYPE_float16
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(as_u32(b0)), "r"(as_u32(b1)));
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(as_u32(b0)), "r"(as_u32(b1)));
#endif
}
// ---- end of PTX wrappers ----------------------------------------------------------------------

// Byte offset of 16-byte chunk `chunk` of row `row` in the A tile: within each 128-byte line the
// chunk index is XORed with the row (rows of 8+ chunks) or the line (rows of 4 chunks), so the 8
// rows one ldmatrix phase reads fall in 8 different 16-byte bank groups.
__device__ __forceinline__ u32 a_offset(int row, int chunk) {
  const int linear = row * A_CHUNKS + chunk;
  return static_cast<u32>((linear ^ ((linear / cmax(8, A_CHUNKS)) & 7)) * 16);
}

// Tile coordinates of this block. The grid is (tiles_n, tiles_m): consecutive blocks take
// consecutive column tiles of one row of tiles. GROUP_M > 1 renumbers the blocks so that GROUP_M
// tile rows are walked column by column (blocks running together share columns of W in L2);
// its divisions by runtime values are the only I2F (.U32.RP, a reciprocal) a GROUP_M=1 build
// does not have.
struct TileCoord {
  int m, n;
};
__device__ __forceinline__ TileCoord tile_of_block() {
  if constexpr (GROUP_M == 1) return TileCoord{static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.x)};
  const int tiles_n = gridDim.x, tiles_m = gridDim.y;
  const int block = blockIdx.y * tiles_n + blockIdx.x;
  const int per_group = GROUP_M * tiles_n;
  const int first_m = (block / per_group) * GROUP_M;
  const int rows = min(tiles_m - first_m, GROUP_M);  // the last group may be short
  const int in_group = block % per_group;
  return TileCoord{first_m + in_group % rows, in_group / rows};
}

// This block's work (both paths): its output tile and its slice of the k-tiles (SPLIT_K slices
// along blockIdx.z; a slice past the last k-tile gets none).
struct BlockWork {
  TileCoord tile;
  int kt_begin;  // first k-tile of the slice
  int k_tiles;   // k-tiles in the slice
};
__device__ __forceinline__ BlockWork block_work(int K) {
  const int k_tiles_all = ceil_div(K, BK);
  const int per_slice = ceil_div(k_tiles_all, SPLIT_K);
  const int kt_begin = blockIdx.z * per_slice;
  const int k_tiles = max(0, min(k_tiles_all, kt_begin + per_slice) - kt_begin);
  return BlockWork{tile_of_block(), kt_begin, k_tiles};
}

// Everything one stage holds, as shared-memory addresses.
struct Stage {
  u32 a, w, s, z;
  __device__ __forceinline__ explicit Stage(u32 base)
      : a(base),
        w(base + A_TILE_BYTES),
        s(base + A_TILE_BYTES + W_TILE_BYTES),
        z(base + A_TILE_BYTES + W_TILE_BYTES + S_TILE_BYTES) {}
};

// The problem as the kernel sees it.
struct Problem {
  const T* A;
  const u32* qweight;
  const __half* scales;
  const u8* zeros;
  int M, N, K;
  int units;   // NU of the layout: cdiv(N, 64)
  int groups;  // K / G
};

// Issue the copies of the weights, scales and zero points of k-tile `kt` (global index) of the
// block's columns from n0 into `st` (both paths). Thread tid takes chunks tid, tid + THREADS, ...
// of each operand: consecutive threads read consecutive 16 bytes (coalesced). Outside the
// matrices the chunks are zero-filled.
__device__ __forceinline__ void load_weights(const Stage& st, const Problem& p, int n0, int kt,
                                             int tid, unsigned long long policy) {
  const int k0 = kt * BK;
  // W: (BK/16, BN/64) units of 32 chunks, copied as they lie (lane l's chunk is chunk l)
  constexpr int W_TOTAL = KSTEPS * BNU * 32;
  const int unit0 = n0 / UNIT_N;
#pragma unroll
  for (int i = 0; i < ceil_div(W_TOTAL, THREADS); ++i) {
    const int idx = tid + i * THREADS;
    if (W_TOTAL % THREADS == 0 || idx < W_TOTAL) {
      const int c = idx % 32, u = (idx / 32) % BNU, ks = idx / (32 * BNU);
      const int k16 = k0 / 16 + ks, unit = unit0 + u;
      const bool valid = k16 * 16 < p.K && unit < p.units;
      const u32* src = valid ? p.qweight + (static_cast<i64>(k16) * p.units + unit) * 128 + c * 4
                             : p.qweight;
#if HINT_evict_first
      cp_async_16_hint(st.w + idx * 16, src, valid, policy);
#else
      cp_async_16(st.w + idx * 16, src, valid);
#endif
    }
  }
  // scales (and zero points): GROUP_ROWS rows of the k-tile's groups, BN columns each
  const int group0 = k0 / G;
  constexpr int S_CHUNKS = BN / 8;  // 8 fp16 per chunk
  constexpr int S_TOTAL = GROUP_ROWS * S_CHUNKS;
#pragma unroll
  for (int i = 0; i < ceil_div(S_TOTAL, THREADS); ++i) {
    const int idx = tid + i * THREADS;
    if (S_TOTAL % THREADS == 0 || idx < S_TOTAL) {
      const int r = idx / S_CHUNKS, c = idx % S_CHUNKS;
      const int group = group0 + r, col = n0 + c * 8;
      const bool valid = group < p.groups && col < p.units * UNIT_N;
      const __half* src =
          valid ? p.scales + static_cast<i64>(group) * p.units * UNIT_N + col : p.scales;
      cp_async_16(st.s + idx * 16, src, valid);
    }
  }
#if !SYMMETRIC
  constexpr int Z_CHUNKS = BN / 16;  // 16 zero points per chunk
  constexpr int Z_TOTAL = GROUP_ROWS * Z_CHUNKS;
#pragma unroll
  for (int i = 0; i < ceil_div(Z_TOTAL, THREADS); ++i) {
    const int idx = tid + i * THREADS;
    if (Z_TOTAL % THREADS == 0 || idx < Z_TOTAL) {
      const int r = idx / Z_CHUNKS, c = idx % Z_CHUNKS;
      const int group = group0 + r, col = n0 + c * 16;
      const bool valid = group < p.groups && col < p.units * UNIT_N;
      const u8* src = valid ? p.zeros + static_cast<i64>(group) * p.units * UNIT_N + col : p.zeros;
      cp_async_16(st.z + idx * 16, src, valid);
    }
  }
#endif
}

// mma: the copies of k-tile `kt` of the block tile (m0, n0): A in the ldmatrix swizzle, then the
// weights.
__device__ __forceinline__ void load_stage(const Stage& st, const Problem& p, int m0, int n0,
                                           int kt, int tid, unsigned long long policy) {
  const int k0 = kt * BK;
  // A: (BM, BK), chunks of 8 elements; K % 8 == 0, so a chunk is all in or all out
  constexpr int A_TOTAL = BM * A_CHUNKS;
#pragma unroll
  for (int i = 0; i < ceil_div(A_TOTAL, THREADS); ++i) {
    const int idx = tid + i * THREADS;
    if (A_TOTAL % THREADS == 0 || idx < A_TOTAL) {
      const int r = idx / A_CHUNKS, c = idx % A_CHUNKS;
      const int m = m0 + r, k = k0 + c * 8;
      const bool valid = m < p.M && k < p.K;
      cp_async_16(st.a + a_offset(r, c), valid ? p.A + static_cast<i64>(m) * p.K + k : p.A, valid);
    }
  }
  load_weights(st, p, n0, kt, tid, policy);
}

// The zero points of the 8 n8 tiles of one unit at fragment column g, from shared memory.
__device__ __forceinline__ void load_zeros(Zero (&z)[8], u32 zrow, int unit, int g) {
#if SYMMETRIC
#pragma unroll
  for (int j = 0; j < 8; ++j) z[j] = make_zero(8u);
#else
  u32 lo, hi;  // 8 bytes: z of tiles 0..7
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(lo), "=r"(hi) : "r"(zrow + unit * 64 + g * 8));
#pragma unroll
  for (int j = 0; j < 8; ++j) z[j] = make_zero(((j < 4 ? lo : hi) >> (8 * (j % 4))) & 0xFFu);
#endif
}

// 8 fp16 scales (one 16-byte chunk) of one unit: position 8 * col + j is column 8j + col.
__device__ __forceinline__ void load_scales(__half (&s)[8], u32 srow, int unit, int col) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(srow + unit * 128 + col * 16));
  const __half* h = reinterpret_cast<const __half*>(&v);
#pragma unroll
  for (int j = 0; j < 8; ++j) s[j] = h[j];
}

#if !PATH_wgmma  // (the wgmma path's k-tile: wgmma_stage, gemm_w4a16_wgmma.cuh)
// One k-tile of this warp's WM x WN piece: for each group row of the tile, the warp's share
// (every WARPS_K-th) of its k16 steps. SCALE=group accumulates each row into `part` and adds
// s * part to `acc` at the row's end.
__device__ __forceinline__ void compute_stage(const Stage& st, int warp_m0, int warp_unit0, int wk,
                                              int lane, float (&acc)[MI][NI][4]) {
  const int g = lane / 4;
  [[maybe_unused]] const int t = lane % 4;  // (SCALE=element reads no scales here)
  const int a_row = lane % 16, a_chunk = lane / 16;  // ldmatrix.x4 lane addressing (a0..a3)
  // (the rows are not unrolled: each starts from its own scales and zero points, and a whole
  // unrolled k-tile of several groups makes ptxas hoist loads until it spills)
#pragma unroll 1
  for (int r = 0; r < GROUP_ROWS; ++r) {
    const u32 srow = st.s + r * BN * 2, zrow = st.z + r * BN;
#if SCALE_group
    float part[MI][NI][4];  // (WM/16, WN/8, 4): this group row's sums of a * (q - z)
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int q = 0; q < 4; ++q) part[mi][ni][q] = 0.f;
    float (&sum)[MI][NI][4] = part;
#else
    float (&sum)[MI][NI][4] = acc;
#endif
    Zero z[NU][8];  // zero points of the warp's n8 tiles at fragment column g (this group)
#if SCALE_element
    __half sc[NU][8];  // scales of the warp's n8 tiles at fragment column g (this group)
#endif
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      load_zeros(z[u], zrow, warp_unit0 + u, g);
#if SCALE_element
      load_scales(sc[u], srow, warp_unit0 + u, g);
#endif
    }
#pragma unroll
    for (int i = 0; i < ROW_KSTEPS / WARPS_K; ++i) {
      const int ks = r * ROW_KSTEPS + i * WARPS_K + wk;  // k16 step within the k-tile
      u32 a[MI][4];                       // (WM/16) A fragments, 16 x 16 each
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        ldmatrix_x4(a[mi], st.a + a_offset(warp_m0 + mi * 16 + a_row, ks * 2 + a_chunk));
#pragma unroll
      for (int u = 0; u < NU; ++u) {
        const int unit = warp_unit0 + u;  // unit within the block tile
        uint4 q;  // this lane's 16 bytes of the unit: B fragments of 8 n8 tiles
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(q.x), "=r"(q.y), "=r"(q.z), "=r"(q.w)
                     : "r"(st.w + (ks * BNU + unit) * UNIT_BYTES + lane * 16));
        const u32 words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // word j: n8 tiles 2j and 2j + 1 of the unit
          T2 b[4];
          dequant_word(words[j], z[u][2 * j], z[u][2 * j + 1], b);
#if SCALE_element
          const T2 sa = scale_pair(sc[u][2 * j]), sb = scale_pair(sc[u][2 * j + 1]);
          b[0] = __hmul2(b[0], sa);
          b[1] = __hmul2(b[1], sa);
          b[2] = __hmul2(b[2], sb);
          b[3] = __hmul2(b[3], sb);
#endif
          const int ni = u * 8 + 2 * j;
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) {
            mma(sum[mi][ni], a[mi], b[0], b[1]);
            mma(sum[mi][ni + 1], a[mi], b[2], b[3]);
          }
        }
      }
    }
#if SCALE_group
    // acc += s * part; accumulator columns are 2t and 2t + 1 of each n8 tile
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      __half s0[8], s1[8];
      load_scales(s0, srow, warp_unit0 + u, 2 * t);
      load_scales(s1, srow, warp_unit0 + u, 2 * t + 1);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float f0 = __half2float(s0[j]), f1 = __half2float(s1[j]);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
          float(&d)[4] = acc[mi][u * 8 + j];
          const float(&pp)[4] = part[mi][u * 8 + j];
          d[0] = fmaf(pp[0], f0, d[0]);
          d[1] = fmaf(pp[1], f1, d[1]);
          d[2] = fmaf(pp[2], f0, d[2]);
          d[3] = fmaf(pp[3], f1, d[3]);
        }
      }
    }
#endif
  }
}

#endif  // !PATH_wgmma

// ---- output --------------------------------------------------------------------------------------
__device__ __forceinline__ T to_t(float v) {
#if DTYPE_float16
  return __float2half_rn(v);
#else
  return __float2bfloat16_rn(v);
#endif
}

// C[m, n], C[m, n + 1] (n even): one 4-byte store when both exist and N is even, else one by one.
__device__ __forceinline__ void store_pair(T* __restrict__ C, int N, int m, int n, float v0,
                                           float v1) {
  T* row = C + static_cast<i64>(m) * N;
  if (N % 2 == 0 && n + 1 < N) {
    T2 pair;
    pair.x = to_t(v0);
    pair.y = to_t(v1);
    *reinterpret_cast<T2*>(row + n) = pair;
  } else {
    if (n < N) row[n] = to_t(v0);
    if (n + 1 < N) row[n + 1] = to_t(v1);
  }
}

// Split-K: count this slice's arrival at `tile`; true, in every thread, for the last slice.
__device__ __forceinline__ bool splitk_arrive(float* workspace, int M, int N, int tile) {
  __threadfence();  // this thread's partial sums are visible GPU-wide before the arrival counts
  __syncthreads();  // every thread of the block has added and fenced
  int last = 0;
  if (threadIdx.x == 0) {
    int* counter = reinterpret_cast<int*>(workspace + static_cast<i64>(M) * N) + tile;
    last = atomicAdd(counter, 1) == SPLIT_K - 1;
    if (last) *counter = 0;  // every slice has arrived: reset for the next launch
  }
  last = __syncthreads_or(last);  // broadcast thread 0's answer
  if (last) __threadfence();      // the other slices' sums are seen after their arrival
  return last;
}

}  // namespace w4

#if PATH_wgmma
#include "gemm_w4a16_wgmma.cuh"
#else
extern "C" __global__ void __launch_bounds__(w4::THREADS, 1)
gemm_w4a16(const w4::T* __restrict__ A, const u32* __restrict__ qweight,
           const __half* __restrict__ scales, const u8* __restrict__ zeros,
           w4::T* __restrict__ C, float* __restrict__ workspace, int M, int N, int K) {
  using namespace w4;
  extern __shared__ __align__(128) unsigned char smem[];  // (STAGES, A | W | S | Z), then reuse
  const u32 smem_base = smem_addr(smem);
  const Problem p{A, qweight, scales, zeros, M, N, K, ceil_div(N, UNIT_N), K / G};

  // ---- tiling: this block's output tile and K slice ---------------------------------------
  const BlockWork work = block_work(K);
  const TileCoord tile = work.tile;
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int kt_begin = work.kt_begin, k_tiles = work.k_tiles;

  // ---- partitioning: warp (wm, wn) of k-group wk --------------------------------------------
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wk = warp / WARPS_MN, warp_mn = warp % WARPS_MN;
  const int warp_m0 = (warp_mn / WARPS_N) * WM;            // rows inside the block tile
  const int warp_unit0 = (warp_mn % WARPS_N) * WN / UNIT_N;  // first weight unit of the warp
#if HINT_evict_first
  const unsigned long long policy = evict_first_policy();
#else
  const unsigned long long policy = 0;
#endif

  float acc[MI][NI][4];  // (WM/16, WN/8, 4): rows g, g + 8 and columns 2t, 2t + 1 of each tile
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;

  // ---- main loop: a STAGES-deep cp.async pipeline ----------------------------------------------
  // One commit group per k-tile (empty past the end): k-tile kt has landed when at most
  // STAGES - 2 newer groups are pending.
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_stage(Stage(smem_base + s * STAGE_BYTES), p, m0, n0, kt_begin + s, tid, policy);
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of k-tile kt have landed ...
    __syncthreads();  // ... and everyone's; and every warp is done with k-tile kt - 1, whose
                      // stage is refilled next
    const int next = kt + STAGES - 1;
    if (next < k_tiles)
      load_stage(Stage(smem_base + (next % STAGES) * STAGE_BYTES), p, m0, n0, kt_begin + next,
                 tid, policy);
    cp_async_commit();
    compute_stage(Stage(smem_base + (kt % STAGES) * STAGE_BYTES), warp_m0, warp_unit0, wk, lane,
                  acc);
  }

  // ---- WARPS_K > 1: the k-groups' partial sums meet in shared memory -------------------------
  if constexpr (WARPS_K > 1) {
    cp_async_wait<0>();  // (only empty groups can be pending)
    __syncthreads();     // every warp is done with the pipeline's shared memory
    float* red = reinterpret_cast<float*>(smem);  // (WARPS_K - 1, WARPS_MN, MI*NI*4, 32)
    constexpr int REGS = MI * NI * 4;
    if (wk > 0) {
#pragma unroll
      for (int i = 0; i < REGS; ++i)
        red[(((wk - 1) * WARPS_MN + warp_mn) * REGS + i) * 32 + lane] = (&acc[0][0][0])[i];
    }
    __syncthreads();  // every k-group's partial sums are in shared memory
    if (wk == 0) {
#pragma unroll
      for (int w = 1; w < WARPS_K; ++w)
#pragma unroll
        for (int i = 0; i < REGS; ++i)
          (&acc[0][0][0])[i] += red[(((w - 1) * WARPS_MN + warp_mn) * REGS + i) * 32 + lane];
    }
  }

  // ---- epilogue: warps of k-group 0 hold the tile's sums -------------------------------------
  const int g = lane / 4, t = lane % 4;
  const int row0 = m0 + warp_m0 + g;                  // + mi * 16 + h * 8
  const int col0 = n0 + warp_unit0 * UNIT_N + 2 * t;  // + ni * 8
  if constexpr (SPLIT_K == 1) {
    if (wk != 0) return;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = row0 + mi * 16 + h * 8;
        if (m >= M) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          store_pair(C, N, m, col0 + ni * 8, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
      }
  } else {
    // every slice adds its sums (fp32 atomics, resolved in L2); the last one to arrive reads
    // the totals, re-zeroes them and writes C (all threads take part in the barriers)
    if (wk == 0 && k_tiles > 0) {
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = row0 + mi * 16 + h * 8;
          if (m >= M) continue;
#pragma unroll
          for (int ni = 0; ni < NI; ++ni) {
            const int n = col0 + ni * 8;
            float* sums = workspace + static_cast<i64>(m) * N + n;
            if (n < N) atomicAdd(sums, acc[mi][ni][2 * h]);
            if (n + 1 < N) atomicAdd(sums + 1, acc[mi][ni][2 * h + 1]);
          }
        }
    }
    if (!splitk_arrive(workspace, M, N, tile.m * gridDim.x + tile.n) || wk != 0) return;
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
          float* sums = workspace + static_cast<i64>(m) * N + n;
          const float v0 = __ldcg(sums);
          __stcg(sums, 0.f);
          float v1 = 0.f;
          if (n + 1 < N) {
            v1 = __ldcg(sums + 1);
            __stcg(sums + 1, 0.f);
          }
          store_pair(C, N, m, n, v0, v1);
        }
      }
  }
}
#endif  // PATH_mma
