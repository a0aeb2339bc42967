// gemm_int8_dp4a.cuh: the CUDA-core path of gemm_int8 (PATH=dp4a), any GPU with __dp4a (sm_61+).
//
// C[M, N] = epilogue(A[M, K] . B[N, K]^T), int8 x int8 -> int32, through __dp4a: one
// instruction multiplies 4 int8 pairs packed in two 32-bit words and adds the sum to an int32
// (SASS: IDP.4A.S8.S8). Every operand is signed: under NVRTC a signed/unsigned mix of __dp4a
// arguments is an ambiguous overload.
//
// Data flow of one block (one BM x BN output tile, or one K slice of it when SPLIT_K > 1):
//
//   global --VEC-byte loads--> registers --transposed stores--> shared [2 stages]
//          (next k-tile, in flight during the math)             (K words x rows)
//   shared --TM + TN words per k-word--> registers --TM x TN __dp4a--> int32 accumulators
//
// Each of the (BM/TM) x (BN/TN) threads owns a TM x TN block of outputs. The tiles sit in shared
// memory transposed, one 32-bit word (4 consecutive k) per element, [BK/4][rows + 4]: a thread
// reads its TM (TN) operands of one k-word as one or two 8/16-byte vector loads. The 4-word
// padding keeps those reads aligned and shifts consecutive k-word rows by 4 banks, which spreads
// the transposed stores (once per k-tile) over the banks; reads (once per k-word) are
// broadcasts (A) or consecutive vectors (B).
//
// Tunables (macros set by the space file):
//   BM, BN      block tile;  BK  k-tile in bytes of K (a multiple of 16)
//   TM, TN      outputs per thread (rows, columns)
//   VEC         bytes per global load: 4, 8 or 16 (int, int2, int4)
//   UNROLL      unroll factor of the BK/4 k-words of one k-tile
//   GROUP_M, SPLIT_K, MIN_BLOCKS  as in the mma path
//
// Requirements: K % 16 == 0, and A, B 16-byte aligned (rows are read in aligned VEC-byte pieces;
// K % 16 keeps the other paths' contract). M, N, K need not be multiples of the tile: loads
// outside A or B give zeros, outputs outside C are not stored.
// Launch: grid (cdiv(M, BM) * cdiv(N, BN), 1, SPLIT_K), block (BM/TM) * (BN/TN) threads,
// 2 * (BK/4) * (BM + BN + 8) * 4 bytes of dynamic shared memory.
#pragma once

namespace dp4a_path {

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

constexpr int THREADS_N = BN / TN;               // threads along N
constexpr int THREADS = (BM / TM) * THREADS_N;   // threads per block
constexpr int KW = BK / 4;                       // 32-bit words of K per tile row
constexpr int LDA = BM + 4;                      // words from one k-word row of the A tile to the next
constexpr int LDB = BN + 4;
constexpr int STAGE_WORDS = KW * (LDA + LDB);    // A tile (KW, LDA) then B tile (KW, LDB)
constexpr int SMEM_BYTES = 2 * STAGE_WORDS * 4;  // two stages
constexpr int VW = VEC / 4;                      // words per global load

// ---- Preconditions (the space file states each relation as a constraint) ----------------------
static_assert(BM % TM == 0 && BN % TN == 0,
              "BM % TM == 0 and BN % TN == 0: the block tile is a whole number of thread tiles");
static_assert(TN % 2 == 0, "TN even: outputs are stored in pairs");
static_assert(TM == 2 || TM % 4 == 0, "TM 2 or a multiple of 4: operands are read as int2/int4");
static_assert(TN == 2 || TN % 4 == 0, "TN 2 or a multiple of 4: operands are read as int2/int4");
static_assert(VEC == 4 || VEC == 8 || VEC == 16, "VEC in {4, 8, 16}: int, int2 or int4 loads");
static_assert(BK % 16 == 0, "BK % 16 == 0: a k-tile is whole 16-byte pieces of a row");
static_assert(THREADS % 32 == 0 && THREADS <= 1024,
              "(BM/TM)*(BN/TN): whole warps, at most 1024 threads per block");
static_assert(KW % UNROLL == 0, "(BK/4) % UNROLL == 0: UNROLL divides the k-words of a k-tile");
static_assert(SPLIT_K >= 1 && GROUP_M >= 1 && MIN_BLOCKS >= 1, "SPLIT_K, GROUP_M, MIN_BLOCKS >= 1");
static_assert(SMEM_BYTES <= ARCH_MAX_SMEM_PER_BLOCK,
              "2*(BK/4)*(BM+BN+8)*4 <= the arch's shared memory per block (sm_80 163 KB, sm_89 99 KB, sm_90 227 KB)");

template <int W> struct WordsOf;  // W words as one load
template <> struct WordsOf<1> { using T = int; };
template <> struct WordsOf<2> { using T = int2; };
template <> struct WordsOf<4> { using T = int4; };

__device__ __forceinline__ void unpack(int* w, int v) { w[0] = v; }
__device__ __forceinline__ void unpack(int* w, int2 v) { w[0] = v.x; w[1] = v.y; }
__device__ __forceinline__ void unpack(int* w, int4 v) { w[0] = v.x; w[1] = v.y; w[2] = v.z; w[3] = v.w; }

// N consecutive words from shared memory (16-byte aligned for N % 4 == 0, 8-byte for N == 2).
template <int N>
__device__ __forceinline__ void load_words(int (&w)[N], const int* p) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int q = 0; q < N / 4; ++q) unpack(w + 4 * q, reinterpret_cast<const int4*>(p)[q]);
  } else {
    unpack(w, *reinterpret_cast<const int2*>(p));
  }
}

// One operand tile (ROWS x BK bytes from rows row0.. of src, bytes k0.. of each row), held in
// registers between the global load and the shared-memory store. Piece idx = tid + i * THREADS
// is row idx / (BK/VEC), bytes (idx % (BK/VEC)) * VEC: consecutive threads read consecutive
// pieces of a row (coalesced).
template <int ROWS>
struct Staged {
  static constexpr int PER_ROW = BK / VEC;                       // pieces per row
  static constexpr int TOTAL = ROWS * PER_ROW;                   // pieces per tile
  static constexpr int LOADS = ceil_div(TOTAL, THREADS);         // pieces per thread
  using Piece = typename WordsOf<VW>::T;
  int w[LOADS][VW];

  __device__ __forceinline__ void fetch(const i8* __restrict__ src, int row0, int rows, int k0,
                                        int K, int tid) {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const int idx = tid + i * THREADS;
      const int r = idx / PER_ROW, gk = k0 + (idx % PER_ROW) * VEC;
      const bool valid = (TOTAL % THREADS == 0 || idx < TOTAL) && row0 + r < rows && gk < K;
      Piece v{};  // zeros outside A / B
      if (valid) v = *reinterpret_cast<const Piece*>(src + static_cast<i64>(row0 + r) * K + gk);
      unpack(w[i], v);
    }
  }

  // Transposed store: word kw of row r goes to tile[kw * (ROWS + 4) + r].
  __device__ __forceinline__ void stash(int* tile, int tid) const {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const int idx = tid + i * THREADS;
      if (TOTAL % THREADS == 0 || idx < TOTAL) {
        const int r = idx / PER_ROW, kw0 = (idx % PER_ROW) * VW;
#pragma unroll
        for (int q = 0; q < VW; ++q) tile[(kw0 + q) * (ROWS + 4) + r] = w[i][q];
      }
    }
  }
};

// One k-tile of the thread's TM x TN outputs: BK/4 k-words, TM x TN __dp4a each.
__device__ __forceinline__ void compute_tile(const int* a_tile, const int* b_tile, int ty, int tx,
                                             i32 (&acc)[TM][TN]) {
#pragma unroll UNROLL
  for (int kw = 0; kw < KW; ++kw) {
    int a[TM], b[TN];  // 4 int8 of K per word
    load_words(a, a_tile + kw * LDA + ty * TM);
    load_words(b, b_tile + kw * LDB + tx * TN);
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
  }
}

}  // namespace dp4a_path

extern "C" __global__ void __launch_bounds__(dp4a_path::THREADS, MIN_BLOCKS)
gemm_int8(const i8* __restrict__ A, const i8* __restrict__ B, OutT* __restrict__ C,
          const float* __restrict__ row_scale, const float* __restrict__ col_scale,
          i32* __restrict__ workspace, int M, int N, int K,
          const __grid_constant__ TmaDescriptor tmap_a,  // read by the TMA paths only
          const __grid_constant__ TmaDescriptor tmap_b,
          const __grid_constant__ TmaDescriptor tmap_c) {
  using namespace dp4a_path;
  extern __shared__ __align__(16) int smem_words[];  // (2, A tile (KW, LDA) | B tile (KW, LDB))

  // ---- tiling: this block's output tile and K slice ---------------------------------------
  const int tiles_m = ceil_div(M, BM), tiles_n = ceil_div(N, BN);
  const TileCoord tile = tile_of_block(blockIdx.x, tiles_m, tiles_n, GROUP_M);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int k_tiles_all = ceil_div(K, BK);
  const int k_tiles_per_slice = ceil_div(k_tiles_all, SPLIT_K);
  const int kt_begin = blockIdx.z * k_tiles_per_slice;
  const int k_tiles = max(0, min(k_tiles_all, kt_begin + k_tiles_per_slice) - kt_begin);

  // ---- partitioning: this thread's TM x TN outputs ------------------------------------------
  const int tid = threadIdx.x;
  const int tx = tid % THREADS_N;  // columns tx*TN .. tx*TN + TN - 1 of the tile
  const int ty = tid / THREADS_N;  // rows    ty*TM .. ty*TM + TM - 1

  i32 acc[TM][TN];  // (TM, TN)
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0;

  // ---- main loop: two shared stages, the next k-tile loaded into registers meanwhile ---------
  Staged<BM> a_next;
  Staged<BN> b_next;
  if (k_tiles > 0) {
    a_next.fetch(A, m0, M, kt_begin * BK, K, tid);
    b_next.fetch(B, n0, N, kt_begin * BK, K, tid);
    a_next.stash(smem_words, tid);
    b_next.stash(smem_words + KW * LDA, tid);
  }
  __syncthreads();  // stage 0 is complete
  for (int kt = 0; kt < k_tiles; ++kt) {
    const bool more = kt + 1 < k_tiles;
    if (more) {  // global loads in flight during the math below
      a_next.fetch(A, m0, M, (kt_begin + kt + 1) * BK, K, tid);
      b_next.fetch(B, n0, N, (kt_begin + kt + 1) * BK, K, tid);
    }
    const int* stage = smem_words + (kt % 2) * STAGE_WORDS;
    compute_tile(stage, stage + KW * LDA, ty, tx, acc);
    if (more) {  // the other stage was last read in iteration kt - 1, before the barrier below
      int* other = smem_words + ((kt + 1) % 2) * STAGE_WORDS;
      a_next.stash(other, tid);
      b_next.stash(other + KW * LDA, tid);
    }
    __syncthreads();  // the other stage is complete; everyone is done reading this one
  }

  // ---- epilogue ----------------------------------------------------------------------------
  const int row0 = m0 + ty * TM, col0 = n0 + tx * TN;
  if constexpr (SPLIT_K == 1) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      if (row0 + i >= M) continue;
#pragma unroll
      for (int j = 0; j < TN; j += 2)
        store_out_pair(C, N, row0 + i, col0 + j, acc[i][j], acc[i][j + 1], row_scale, col_scale);
    }
  } else {
    if (k_tiles > 0) {  // an empty slice (more slices than k-tiles) only counts its arrival
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        if (row0 + i >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j)
          if (col0 + j < N) splitk_add(workspace, N, row0 + i, col0 + j, acc[i][j]);
      }
    }
    if (!splitk_arrive(workspace, M, N, tile.m * tiles_n + tile.n, SPLIT_K)) return;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      if (row0 + i >= M) continue;
#pragma unroll
      for (int j = 0; j < TN; j += 2) {
        const int n = col0 + j;
        if (n >= N) continue;
        const i32 v0 = splitk_take(workspace, N, row0 + i, n);
        const i32 v1 = n + 1 < N ? splitk_take(workspace, N, row0 + i, n + 1) : 0;
        store_out_pair(C, N, row0 + i, n, v0, v1, row_scale, col_scale);
      }
    }
  }
}
