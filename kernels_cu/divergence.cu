// divergence: one per-element function with four data-dependent cases of different cost,
// written three ways, so that the cost of warp divergence can be measured and compared.
//
// The function: out[i] = f_c(in[i]) with case c = in[i] & 3, and f_c = ROUNDS[c] rounds of an
// integer mixing step (a hash: exact on every GPU and in numpy) with a per-case constant:
//   case      0    1    2    3
//   rounds    1    4   16   64
// On random input, nearly every warp holds all four cases.
//
// VARIANT (VARIANT_branchy, ... are defined to 1 by the workbench):
//   branchy      a switch on c. A warp runs every case that any of its lanes needs, one after
//                another with the other lanes masked off: about 1 + 4 + 16 + 64 rounds per
//                warp, at a fraction of 32 active threads per instruction.
//   masked       every case computed by every lane, the result chosen by selects (ptxas
//                turns them into predicated instructions): no divergent branch, all 32
//                threads active, but 1 + 4 + 16 + 64 = 85 rounds for every element.
//   partitioned  the block first sorts its tile by case in shared memory (warp-aggregated
//                atomics: __match_any_sync groups the lanes of a warp by case, one atomicAdd
//                per group), then consecutive threads take consecutive sorted elements: a
//                warp's 32 elements share one case except in the (at most 3 per tile) warps at
//                bucket edges, so warps run about one case each. Results go back to input order
//                through shared memory, so loads and stores stay coalesced. Costs: 10 bytes
//                of shared memory per element, four __syncthreads per tile.
//
// Knobs: BLOCK threads per block, ITEMS elements per thread (a tile is BLOCK * ITEMS elements).
// n is arbitrary (predicated tail).

// The workbench defines VARIANT_<value> = 1 for the chosen variant only.
#ifndef VARIANT_branchy
#define VARIANT_branchy 0
#endif
#ifndef VARIANT_masked
#define VARIANT_masked 0
#endif
#ifndef VARIANT_partitioned
#define VARIANT_partitioned 0
#endif

constexpr int CASES = 4;
constexpr int TILE = BLOCK * ITEMS;  // elements per block

// Preconditions (the space file states the same relations as constraints)
static_assert(VARIANT_branchy + VARIANT_masked + VARIANT_partitioned == 1,
              "VARIANT: branchy, masked or partitioned");
static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024");
static_assert(ITEMS >= 1, "ITEMS: at least 1");
static_assert(!VARIANT_partitioned || TILE * 10 <= 48 * 1024,
              "partitioned: a tile's inputs, positions and results (10 B per element) fit 48 KB of "
              "static shared memory");

// ---- the function ----

// One mixing round (the "lowbias32" integer hash), after adding the case's constant.
__device__ __forceinline__ unsigned mix(unsigned h, unsigned key) {
  h += key;
  h ^= h >> 16;
  h *= 0x7feb352du;
  h ^= h >> 15;
  h *= 0x846ca68bu;
  h ^= h >> 16;
  return h;
}

// ROUNDS mixing rounds; the loop is unrolled by 4 (a constant trip count: its branch is uniform)
template <int ROUNDS, unsigned KEY>
__device__ __forceinline__ unsigned rounds(unsigned h) {
#pragma unroll 4
  for (int r = 0; r < ROUNDS; ++r) h = mix(h, KEY);
  return h;
}

// f_0 .. f_3: 1, 4, 16, 64 rounds, each with its own constant
__device__ __forceinline__ unsigned f0(unsigned x) { return rounds<1, 0x9e3779b9u>(x); }
__device__ __forceinline__ unsigned f1(unsigned x) { return rounds<4, 0x85ebca6bu>(x); }
__device__ __forceinline__ unsigned f2(unsigned x) { return rounds<16, 0xc2b2ae35u>(x); }
__device__ __forceinline__ unsigned f3(unsigned x) { return rounds<64, 0x27d4eb2fu>(x); }

__device__ __forceinline__ unsigned case_of(unsigned x) { return x & 3u; }

// branchy: a data-dependent branch per element
__device__ __forceinline__ unsigned f_branchy(unsigned x) {
  switch (case_of(x)) {
    case 0: return f0(x);
    case 1: return f1(x);
    case 2: return f2(x);
    default: return f3(x);
  }
}

// masked: every case for every element, then selects
__device__ __forceinline__ unsigned f_masked(unsigned x) {
  const unsigned c = case_of(x);
  const unsigned y0 = f0(x), y1 = f1(x), y2 = f2(x), y3 = f3(x);
  return c == 0 ? y0 : c == 1 ? y1 : c == 2 ? y2 : y3;
}

// ---- partitioned: sort the tile by case, compute in sorted order, restore the order ----
#if VARIANT_partitioned
// Sum of count[k] for k < c: where bucket c starts (selects, no indexed registers).
__device__ __forceinline__ int bucket_start(int c, const int* count) {
  int s = 0;
#pragma unroll
  for (int k = 0; k < CASES; ++k) s += k < c ? count[k] : 0;
  return s;
}

__device__ __forceinline__ void partitioned_tile(const unsigned* in, unsigned* out,
                                                 long long base, long long n) {
  __shared__ unsigned sorted[TILE];      // (TILE) the tile's inputs, in case order
  __shared__ unsigned short from[TILE];  // (TILE) input position of each sorted element
  __shared__ unsigned result[TILE];      // (TILE) results, in input order
  __shared__ int count[CASES];           // elements per case
  const int lane = threadIdx.x % 32;
  const unsigned lanes_below = (1u << lane) - 1u;

  if (threadIdx.x < CASES) count[threadIdx.x] = 0;
  // ---- load (coalesced) ----
  unsigned x[ITEMS];
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const long long i = base + j * BLOCK + threadIdx.x;
    x[j] = i < n ? in[i] : 0u;
  }
  __syncthreads();  // count[] is zeroed

  // ---- rank each element within its case: one shared atomic per (warp, case) ----
  int rank[ITEMS];
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const bool inside = base + j * BLOCK + threadIdx.x < n;
    const int c = inside ? (int)case_of(x[j]) : CASES;  // CASES: past n, not counted
    const unsigned peers = __match_any_sync(0xffffffffu, c);  // the lanes with my case
    const int leader = __ffs(peers) - 1;
    int first = 0;
    if (lane == leader && inside) first = atomicAdd(&count[c], __popc(peers));
    rank[j] = __shfl_sync(0xffffffffu, first, leader) + __popc(peers & lanes_below);
  }
  __syncthreads();  // count[] is final

  // ---- scatter into buckets: [case 0 | case 1 | case 2 | case 3] ----
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    if (base + j * BLOCK + threadIdx.x < n) {
      const int p = bucket_start((int)case_of(x[j]), count) + rank[j];
      sorted[p] = x[j];
      from[p] = (unsigned short)(j * BLOCK + threadIdx.x);
    }
  }
  const int valid = bucket_start(CASES, count);  // elements of this tile below n
  __syncthreads();  // the tile is sorted by case

  // ---- compute in sorted order: warps are (nearly) uniform, the branch does not diverge ----
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const int p = j * BLOCK + threadIdx.x;
    if (p < valid) result[from[p]] = f_branchy(sorted[p]);
  }
  __syncthreads();  // results are complete, in input order

  // ---- store (coalesced) ----
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const long long i = base + j * BLOCK + threadIdx.x;
    if (i < n) out[i] = result[j * BLOCK + threadIdx.x];
  }
}
#endif

// Block b handles elements [b * TILE, (b + 1) * TILE); thread t its elements t, t + BLOCK, ...
extern "C" __global__ void __launch_bounds__(BLOCK)
divergence(const unsigned* __restrict__ in, unsigned* __restrict__ out, long long n) {
  const long long base = (long long)blockIdx.x * TILE;
#if VARIANT_partitioned
  partitioned_tile(in, out, base, n);
#else
  unsigned x[ITEMS];  // all loads issued before any math
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const long long i = base + j * BLOCK + threadIdx.x;
    x[j] = i < n ? in[i] : 0u;
  }
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const long long i = base + j * BLOCK + threadIdx.x;
#if VARIANT_branchy
    if (i < n) out[i] = f_branchy(x[j]);
#else
    if (i < n) out[i] = f_masked(x[j]);
#endif
  }
#endif
}
