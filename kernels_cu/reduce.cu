// The reduce family: warp-shuffle reductions of float32 or float16 data, accumulated in float32.
//
//   reduce_all   one value for the whole tensor:  total = OP(x[0..n))
//   reduce_rows  one value per row of a [rows, cols] matrix:  out[r] = OP(x[r, 0..cols))
//                (sumsq per row is the statistics pass of RMSNorm)
//
// OP is sum, max or sumsq (sum of squares). float16 inputs are converted to float32 on load
// and accumulated in float32, so both dtypes share every line below the load.
//
// Structure of both kernels: each thread streams ITEMS elements per tile in VEC-wide loads
// (all LOADS = ITEMS / VEC loads of a tile are issued before any arithmetic: instruction-level
// parallelism) into ITEMS / VEC independent accumulators; then warps reduce with butterfly
// shuffles (SHFL.BFLY) and, where a block works together, one shared-memory step across warps.
//
// Knobs (template parameters, set by the space files reduce*.yaml):
//   T        float or __half                 element type of x
//   OP       Op::sum / Op::max / Op::sumsq   the reduction
//   FINISH   Finish::atomic / twopass        how reduce_all combines its blocks (see there)
//   MAP      Map::warp / Map::block          threads per row in reduce_rows: 32 or BLOCK
//   HINT     Hint::plain / cs / ldg / lu     cache hint of every load of x (see load_raw)
//   BLOCK    threads per block;  ITEMS  elements per thread per tile;  VEC  elements per load
//   UNROLL   unroll factor of the tile loop
//
// __launch_bounds__(BLOCK, 1): registers up to 65536 / BLOCK per thread. With BLOCK alone,
// ptxas 13 spilled 8-16 bytes on some points with many loads in flight (ITEMS = 32 halves) to
// raise occupancy; with the minimum of 1 block it keeps them in registers, so ITEMS, VEC and
// UNROLL decide the register count and the search weighs it against occupancy.
//
// Alignment: x must be aligned to VEC * sizeof(T) bytes (16 for float4 / 8 x half loads).
// Sizes are arbitrary: predicated tails handle partial tiles, the last n % VEC elements, and
// (rows) rows that do not start on a VEC boundary because cols % VEC != 0.
#include <cuda_fp16.h>

enum class Op { sum, max, sumsq };
enum class Finish { atomic, twopass };
enum class Map { warp, block };
enum class Hint { plain, cs, ldg, lu };

// ---- loads: one instruction moves VEC elements as a raw integer of VEC * sizeof(T) bytes ----

template <int BYTES> struct RawOf;
template <> struct RawOf<2> { using T = unsigned short; };
template <> struct RawOf<4> { using T = unsigned int; };
template <> struct RawOf<8> { using T = uint2; };
template <> struct RawOf<16> { using T = uint4; };  // LDG.E.128

// The cache hint of a load (PTX cache operator in brackets):
//   plain  an ordinary dereference [ld.global]; -Xptxas -dlcm sets its L1 policy. x (and
//          reduce_rows' out) are not declared __restrict__: when the compiler can prove x is
//          never written it takes the read-only path on its own (LDG.E.CONSTANT in SASS), and
//          plain would be the same binary as ldg
//   cs     __ldcs   [ld.global.cs]  streaming, evict first: the data is touched once
//   ldg    __ldg    [ld.global.nc]  the read-only (texture) data path
//   lu     __ldlu   [ld.global.lu]  last use: the line may be dropped after this read
template <Hint HINT, class R>
__device__ __forceinline__ R load_raw(const R* p) {
  if constexpr (HINT == Hint::cs) return __ldcs(p);
  else if constexpr (HINT == Hint::ldg) return __ldg(p);
  else if constexpr (HINT == Hint::lu) return __ldlu(p);
  else return *p;
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// ---- the reduction operator: identity and combine, in float32 ----

template <Op OP>
__device__ __forceinline__ float identity() {
  if constexpr (OP == Op::max) return __uint_as_float(0xff800000u);  // -inf
  else return 0.0f;
}

// acc (+) v for one input element v (already float32)
template <Op OP>
__device__ __forceinline__ float fold(float acc, float v) {
  if constexpr (OP == Op::sum) return acc + v;
  else if constexpr (OP == Op::max) return fmaxf(acc, v);
  else return fmaf(v, v, acc);  // sumsq
}

// a (+) b for two partial results (sumsq partials add like sums)
template <Op OP>
__device__ __forceinline__ float combine(float a, float b) {
  if constexpr (OP == Op::max) return fmaxf(a, b);
  else return a + b;
}

// Fold the VEC elements of one raw vector into acc.
template <Op OP, class T, int VEC, class R>
__device__ __forceinline__ float fold_vec(float acc, const R& raw) {
  const T* e = reinterpret_cast<const T*>(&raw);  // (VEC) elements, in registers
#pragma unroll
  for (int j = 0; j < VEC; ++j) acc = fold<OP>(acc, to_float(e[j]));
  return acc;
}

// ---- warp and block reductions ----

// Butterfly reduction: after 5 steps every lane holds the warp's result.
template <Op OP>
__device__ __forceinline__ float warp_reduce(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine<OP>(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Every thread of the block calls this; thread 0 gets the block's result. warp_vals holds
// BLOCK / 32 floats. Safe to call again after a __syncthreads() that follows the first call.
template <Op OP, int BLOCK>
__device__ __forceinline__ float block_reduce(float v, float* warp_vals) {
  constexpr int WARPS = BLOCK / 32;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = warp_reduce<OP>(v);
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();  // wait for every warp's partial result
  if (warp == 0) {
    v = lane < WARPS ? warp_vals[lane] : identity<OP>();
    v = warp_reduce<OP>(v);
  }
  return v;
}

// ---- max across blocks with integer atomics: an order-preserving key ----
// unsigned key order == float order, and key 0 lies below every float (it is the key of the NaN
// 0xffffffff), so a zeroed word means "nothing yet". Non-negative floats: set the top bit;
// negative floats: flip all bits (larger magnitude -> smaller key).
__device__ __forceinline__ unsigned ordered_key(float f) {
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float from_ordered_key(unsigned k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// ================================================================================================
// reduce_all: total[0] = OP(x[0..n)).
//
// Blocks stride over the array (grid-stride loop over tiles of BLOCK * ITEMS elements), so the
// grid size is a launch knob separate from the work per thread. Each block reduces its share to
// one value; FINISH combines the blocks:
//   atomic   sum/sumsq: one atomicAdd(total) per block (total is zeroed before the launch; the
//            order of the adds, hence the rounding, varies from run to run).
//            max: one atomicMax per block on state[1], the ordered_key of the block's max; the
//            last block to finish decodes it into total.
//   twopass  every block writes its value to partials[blockIdx.x]; the last block to finish
//            reduces partials in a fixed order and writes total: deterministic for a config.
// "Last block": after its result is visible device-wide (__threadfence), each block takes a
// ticket from state[0]; the block that draws gridDim.x - 1 finishes, then resets state to 0
// so the next launch needs no memset.
//
// Buffers: partials holds >= gridDim.x floats (twopass), state 2 zeroed unsigned ints.
// ================================================================================================
template <class T, Op OP, Finish FINISH, Hint HINT, int BLOCK, int ITEMS, int VEC, int UNROLL>
__global__ void __launch_bounds__(BLOCK, 1)
reduce_all(const T* x, float* __restrict__ total, float* __restrict__ partials,
           unsigned* __restrict__ state, long long n) {
  // Preconditions (the space file states the same relations as constraints)
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024");
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: 1, 2, 4 or 8 elements");
  static_assert(VEC * sizeof(T) <= 16, "VEC * sizeof(T) <= 16: at most one 16-byte load");
  static_assert(ITEMS % VEC == 0, "ITEMS: a whole number of VEC-wide loads");
  static_assert(UNROLL >= 1, "UNROLL: at least 1");
  using R = typename RawOf<VEC * sizeof(T)>::T;           // one vector load
  using R1 = typename RawOf<sizeof(T)>::T;                // one scalar load
  constexpr int LOADS = ITEMS / VEC;                      // vector loads per thread per tile
  constexpr long long TILE_VECS = (long long)BLOCK * LOADS;  // vectors per block per tile

  const R* xv = reinterpret_cast<const R*>(x);
  const long long n_vecs = n / VEC;
  const long long stride = (long long)gridDim.x * TILE_VECS;

  // ---- main loop: whole tiles, coalesced (thread t reads vectors t, t + BLOCK, ...) ----
  float acc[LOADS];  // (LOADS) independent accumulators
#pragma unroll
  for (int i = 0; i < LOADS; ++i) acc[i] = identity<OP>();
  long long tile = (long long)blockIdx.x * TILE_VECS;
#pragma unroll UNROLL
  for (; tile + TILE_VECS <= n_vecs; tile += stride) {
    R v[LOADS];  // (LOADS) vectors in flight
#pragma unroll
    for (int i = 0; i < LOADS; ++i) v[i] = load_raw<HINT>(xv + tile + i * BLOCK + threadIdx.x);
#pragma unroll
    for (int i = 0; i < LOADS; ++i) acc[i] = fold_vec<OP, T, VEC>(acc[i], v[i]);
  }
  // ---- tail: the one block whose next tile is partial reads it with predicated loads ----
  if (tile < n_vecs) {
#pragma unroll
    for (int i = 0; i < LOADS; ++i) {
      const long long j = tile + i * BLOCK + threadIdx.x;
      if (j < n_vecs) acc[i] = fold_vec<OP, T, VEC>(acc[i], load_raw<HINT>(xv + j));
    }
  }
  // ---- the last n % VEC elements (fewer than VEC <= 8 < BLOCK) ----
  const long long rest = n_vecs * VEC;
  if (blockIdx.x == 0 && threadIdx.x < n - rest)
    acc[0] = fold_vec<OP, T, 1>(acc[0], load_raw<HINT>(reinterpret_cast<const R1*>(x + rest) +
                                                       threadIdx.x));

  float v = acc[0];
#pragma unroll
  for (int i = 1; i < LOADS; ++i) v = combine<OP>(v, acc[i]);

  // ---- block reduction: shuffles within warps, then shared memory across warps ----
  __shared__ float warp_vals[BLOCK / 32];  // (WARPS)
  v = block_reduce<OP, BLOCK>(v, warp_vals);  // valid in thread 0

  // ---- combine the blocks ----
  if constexpr (FINISH == Finish::atomic && OP != Op::max) {
    if (threadIdx.x == 0) atomicAdd(total, v);
    return;
  } else {
    bool last = false;
    if (threadIdx.x == 0) {
      if constexpr (FINISH == Finish::twopass) partials[blockIdx.x] = v;
      else atomicMax(&state[1], ordered_key(v));
      __threadfence();  // this block's result is visible to every block before its ticket
      last = atomicAdd(&state[0], 1u) == gridDim.x - 1;
    }
    // __syncthreads_or: every thread learns whether thread 0 drew the last ticket (and the
    // warps are done with warp_vals, so block_reduce may use it again)
    if (!__syncthreads_or(last)) return;
    __threadfence();  // the last block sees every other block's result
    if constexpr (FINISH == Finish::twopass) {
      // fixed order: thread t folds partials t, t + BLOCK, ..., then the block reduces
      float p = identity<OP>();
      for (unsigned b = threadIdx.x; b < gridDim.x; b += BLOCK)
        p = combine<OP>(p, __ldcg(partials + b));  // .cg: read at L2, where the writes went
      p = block_reduce<OP, BLOCK>(p, warp_vals);
      if (threadIdx.x == 0) {
        total[0] = p;
        state[0] = 0u;  // ready for the next launch
      }
    } else {
      if (threadIdx.x == 0) {
        total[0] = from_ordered_key(__ldcg(&state[1]));
        state[0] = 0u;  // ready for the next launch
        state[1] = 0u;
      }
    }
  }
}

// ================================================================================================
// reduce_rows: out[r] = OP(x[r, 0..cols)) for a row-major [rows, cols] matrix, float32 output.
//
// MAP chooses the threads that share one row: a warp (ROWS_PER_BLOCK = BLOCK / 32 rows per
// block, no shared memory, no __syncthreads: best for short rows and many of them) or the whole
// block (one row per block: more loads in flight per row, for long rows and few of them).
// Rows start VEC-aligned only when cols % VEC == 0; otherwise each row reads a scalar head up
// to the first aligned element, its aligned vectors, then a scalar tail.
// ================================================================================================
template <class T, Op OP, Map MAP, Hint HINT, int BLOCK, int ITEMS, int VEC, int UNROLL>
__global__ void __launch_bounds__(BLOCK, 1)
reduce_rows(const T* x, float* out, int rows, int cols) {
  // Preconditions (the space file states the same relations as constraints)
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024");
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: 1, 2, 4 or 8 elements");
  static_assert(VEC * sizeof(T) <= 16, "VEC * sizeof(T) <= 16: at most one 16-byte load");
  static_assert(ITEMS % VEC == 0, "ITEMS: a whole number of VEC-wide loads");
  static_assert(UNROLL >= 1, "UNROLL: at least 1");
  using R = typename RawOf<VEC * sizeof(T)>::T;
  using R1 = typename RawOf<sizeof(T)>::T;
  constexpr int THREADS = MAP == Map::warp ? 32 : BLOCK;  // threads per row
  constexpr int ROWS_PER_BLOCK = BLOCK / THREADS;
  constexpr int LOADS = ITEMS / VEC;                      // vector loads per thread per tile
  constexpr int TILE_VECS = THREADS * LOADS;              // vectors per row per tile

  const int t = threadIdx.x % THREADS;  // this thread's place in its row
  const long long row = (long long)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / THREADS;
  if (row >= rows) return;  // uniform: whole warps (MAP=warp, no barrier follows) or blocks

  // ---- split the row: scalar head | aligned vectors | scalar tail ----
  const T* xr = x + row * cols;
  const int head = (int)min((long long)cols, (VEC - (row * cols) % VEC) % VEC);  // < VEC
  const int n_vecs = (cols - head) / VEC;
  const int tail = cols - head - n_vecs * VEC;                                    // < VEC
  const R1* xs = reinterpret_cast<const R1*>(xr);
  const R* xv = reinterpret_cast<const R*>(xr + head);

  float acc[LOADS];  // (LOADS) independent accumulators
#pragma unroll
  for (int i = 0; i < LOADS; ++i) acc[i] = identity<OP>();
  if (t < head) acc[0] = fold_vec<OP, T, 1>(acc[0], load_raw<HINT>(xs + t));

  // ---- main loop: whole tiles, coalesced (thread t reads vectors t, t + THREADS, ...) ----
  int tile = 0;
#pragma unroll UNROLL
  for (; tile + TILE_VECS <= n_vecs; tile += TILE_VECS) {
    R v[LOADS];  // (LOADS) vectors in flight
#pragma unroll
    for (int i = 0; i < LOADS; ++i) v[i] = load_raw<HINT>(xv + tile + i * THREADS + t);
#pragma unroll
    for (int i = 0; i < LOADS; ++i) acc[i] = fold_vec<OP, T, VEC>(acc[i], v[i]);
  }
  // ---- the partial tile (predicated loads), then the scalar tail ----
#pragma unroll
  for (int i = 0; i < LOADS; ++i) {
    const int j = tile + i * THREADS + t;
    if (j < n_vecs) acc[i] = fold_vec<OP, T, VEC>(acc[i], load_raw<HINT>(xv + j));
  }
  if (t < tail) acc[0] = fold_vec<OP, T, 1>(acc[0], load_raw<HINT>(xs + head + n_vecs * VEC + t));

  float v = acc[0];
#pragma unroll
  for (int i = 1; i < LOADS; ++i) v = combine<OP>(v, acc[i]);

  // ---- reduce the row's threads ----
  if constexpr (MAP == Map::warp) {
    v = warp_reduce<OP>(v);
    if (t == 0) out[row] = v;
  } else {
    __shared__ float warp_vals[BLOCK / 32];  // (WARPS)
    v = block_reduce<OP, BLOCK>(v, warp_vals);
    if (t == 0) out[row] = v;
  }
}
