// reduce_sum: total = sum(x[0..n)) for float32 x, one atomicAdd per block.
//
// Structure: each thread streams ITEMS elements per tile in VEC-wide loads (all loads of a tile
// issued before any add: instruction-level parallelism), accumulates in ITEMS/VEC independent
// registers, then the block reduces with warp shuffles (SHFL.BFLY) and one shared-memory step
// across warps. Blocks stride over the array (grid-stride loop), so the grid size is a launch
// knob (blocks per SM) separate from the work per thread.
//
// Alignment: x must be 16-byte aligned when VEC = 4 (8-byte when VEC = 2); n is arbitrary
// (a predicated tail handles the last partial tile and the last n % VEC elements).

template <int VEC> struct VecOf;
template <> struct VecOf<1> { using T = float; };
template <> struct VecOf<2> { using T = float2; };
template <> struct VecOf<4> { using T = float4; };

__device__ __forceinline__ float lane_sum(float v) { return v; }
__device__ __forceinline__ float lane_sum(float2 v) { return v.x + v.y; }
__device__ __forceinline__ float lane_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// Butterfly reduction: after 5 steps every lane holds the warp's sum.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <int BLOCK, int ITEMS, int VEC, int UNROLL>
__global__ void __launch_bounds__(BLOCK)
reduce_sum(const float* __restrict__ x, float* __restrict__ total, long long n) {
  // Preconditions (the space file states the same relations as constraints)
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024");
  static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC: float, float2 or float4 loads");
  static_assert(ITEMS % VEC == 0, "ITEMS: a whole number of VEC-wide loads");
  static_assert(UNROLL >= 1, "UNROLL: at least 1");
  using V = typename VecOf<VEC>::T;
  constexpr int LOADS = ITEMS / VEC;                    // vector loads per thread per tile
  constexpr long long TILE_VECS = (long long)BLOCK * LOADS;  // vectors per block per tile

  const V* __restrict__ xv = reinterpret_cast<const V*>(x);
  const long long n_vecs = n / VEC;
  const long long stride = (long long)gridDim.x * TILE_VECS;

  // ---- main loop: whole tiles, coalesced (thread t reads vectors t, t + BLOCK, ...) ----
  float acc[LOADS];
#pragma unroll
  for (int i = 0; i < LOADS; ++i) acc[i] = 0.0f;
  long long tile = (long long)blockIdx.x * TILE_VECS;
#pragma unroll UNROLL
  for (; tile + TILE_VECS <= n_vecs; tile += stride) {
    V v[LOADS];
#pragma unroll
    for (int i = 0; i < LOADS; ++i) v[i] = xv[tile + i * BLOCK + threadIdx.x];
#pragma unroll
    for (int i = 0; i < LOADS; ++i) acc[i] += lane_sum(v[i]);
  }
  // ---- tail: the one block whose next tile is partial reads its remaining vectors ----
  for (long long i = tile + threadIdx.x; i < n_vecs; i += BLOCK) acc[0] += lane_sum(xv[i]);
  // ---- the last n % VEC scalars ----
  if (blockIdx.x == 0 && threadIdx.x < n - n_vecs * VEC) acc[0] += x[n_vecs * VEC + threadIdx.x];

  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < LOADS; ++i) sum += acc[i];

  // ---- block reduction: shuffles within warps, then shared memory across warps ----
  constexpr int WARPS = BLOCK / 32;
  __shared__ float warp_sums[WARPS];  // (WARPS)
  sum = warp_sum(sum);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();  // wait for every warp's partial sum
  if (warp == 0) {
    sum = lane < WARPS ? warp_sums[lane] : 0.0f;
    sum = warp_sum(sum);
    if (lane == 0) atomicAdd(total, sum);
  }
}
