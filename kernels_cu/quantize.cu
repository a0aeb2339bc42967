// quantize.cu: quantize the rows of x [M, K] (fp16 or fp32, row-major) to int8, fp8 E4M3,
// MXINT8 or MXFP8. The formulas and the bit-exactness rules are in quantize_common.cuh.
//
// quantize_rows: dynamic scales, computed here from the data.
//   * per token: one warp per row. Pass 1 reduces the row's range (each lane over its
//     vectors, then a butterfly over the warp); pass 2 reads the row again (from L1/L2: the
//     warp has just read it) and encodes it. Lane 0 stores the row's scale (and zero point).
//   * per group (G = 32, 64, 128) and per MX block (G = 32): a warp takes chunks of 32 * ITEMS elements
//     of a row; chunks are independent, so short rows still spread over many warps. In one
//     vector load of the warp, lane l holds elements [l * VEC, (l + 1) * VEC) of a 32 * VEC
//     span: a group is G / VEC adjacent lanes, reduced with a butterfly among those lanes and
//     encoded from registers (one pass). The group's first lane stores its scale.
// quantize_static: scales given (calibrated offline): per tensor or per channel (column).
//
// ITEMS elements per lane and step are loaded VEC at a time, all loads before any use
// (instruction-level parallelism); BLOCK / 32 warps per block (thread-level parallelism).
//
// Shapes: K % VEC == 0 (16-byte vectors never straddle rows) and, per group, K % G == 0;
// M and K otherwise arbitrary (the last chunk of a row is predicated). x 16-byte aligned.
#include "quantize_common.cuh"

// Load the LOADS vectors lane `lane` holds in the chunk at column c of a row; vectors past the
// end of the row are left as zeros (and masked by the caller).
template <int LOADS, int VEC, typename In>
__device__ __forceinline__ void load_chunk(const In* __restrict__ row, int c, int lane, int K,
                                           float (&v)[LOADS][VEC]) {
#pragma unroll
  for (int j = 0; j < LOADS; ++j) {
    const int col = c + (j * 32 + lane) * VEC;
    if (col < K) {
      load_floats<VEC>(row + col, v[j]);
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[j][i] = 0.0f;
    }
  }
}

// Encode one vector and store its VEC bytes.
template <int VEC, typename Q>
__device__ __forceinline__ void encode_store(const Q& quant, const float (&v)[VEC],
                                             u8* __restrict__ out) {
  u8 b[VEC];
#pragma unroll
  for (int i = 0; i < VEC; ++i) b[i] = quant(v[i]);
  store_bytes<VEC>(out, b);
}

template <typename In, Format F, Gran GR, bool SYMMETRIC, int G, int BLOCK, int VEC, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
quantize_rows(const In* __restrict__ x, u8* __restrict__ q, ScaleOf<F>* __restrict__ scale,
              int* __restrict__ zero_point, int M, int K) {
  // Preconditions (the space files state the same relations as constraints)
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024 threads");
  static_assert(is_pow2(VEC) && VEC * sizeof(In) <= 16, "VEC: one load of at most 16 bytes");
  static_assert(ITEMS % VEC == 0, "ITEMS: a whole number of VEC-wide loads");
  static_assert(GR == Gran::token || GR == Gran::group || GR == Gran::mx,
                "dynamic scales: per token, per group or per MX block");
  static_assert(is_pow2(G) && G % VEC == 0, "G: a power of two, whole vectors");
  static_assert(GR == Gran::token || G / VEC <= 32, "G: a group is G / VEC lanes of one warp");
  static_assert(is_mx(F) == (GR == Gran::mx), "MX formats go with MX blocks");
  static_assert(GR != Gran::mx || G == 32, "MX blocks: 32 elements");
  static_assert(SYMMETRIC || F == Format::int8, "zero points (asymmetric): int8 only");
  using Quant = Quantizer<F, SYMMETRIC>;
  constexpr int LOADS = ITEMS / VEC;  // vector loads per lane per chunk
  constexpr int CHUNK = 32 * ITEMS;   // elements of one row a warp handles per step

  if (K % VEC != 0 || (GR != Gran::token && K % G != 0)) __trap();  // shape preconditions
  const int lane = threadIdx.x % 32;
  const long long warp = (static_cast<long long>(blockIdx.x) * BLOCK + threadIdx.x) / 32;
  const long long warps = static_cast<long long>(gridDim.x) * (BLOCK / 32);

  if constexpr (GR == Gran::token) {
    // ---- per token: one warp per row, two passes over it ----
    for (long long row = warp; row < M; row += warps) {
      const In* xr = x + row * K;  // (K)
      u8* qr = q + row * K;        // (K)
      Range<SYMMETRIC> range;
      for (int c = 0; c < K; c += CHUNK) {
        float v[LOADS][VEC];  // (LOADS, VEC)
        load_chunk(xr, c, lane, K, v);
#pragma unroll
        for (int j = 0; j < LOADS; ++j)
#pragma unroll
          for (int i = 0; i < VEC; ++i) range.add(v[j][i]);  // zeros past K change no range
      }
      range.template reduce<32>();  // every lane now holds the row's range
      const Quant quant(range);
      if (lane == 0) {
        scale[row] = quant.scale_code();
        if constexpr (!SYMMETRIC) zero_point[row] = quant.zero_point();
      }
      for (int c = 0; c < K; c += CHUNK) {
        float v[LOADS][VEC];  // (LOADS, VEC)
        load_chunk(xr, c, lane, K, v);
#pragma unroll
        for (int j = 0; j < LOADS; ++j) {
          const int col = c + (j * 32 + lane) * VEC;
          if (col < K) encode_store(quant, v[j], qr + col);
        }
      }
    }
  } else {
    // ---- per group / MX block: independent chunks, one pass ----
    constexpr int LANES = G / VEC;  // lanes of one group in one vector load
    const long long chunks_per_row = (K + CHUNK - 1) / CHUNK;
    const int groups_per_row = K / G;
    for (long long chunk = warp; chunk < M * chunks_per_row; chunk += warps) {
      const long long row = chunk / chunks_per_row;
      const int c = static_cast<int>(chunk % chunks_per_row) * CHUNK;
      float v[LOADS][VEC];  // (LOADS, VEC)
      load_chunk(x + row * K, c, lane, K, v);
#pragma unroll
      for (int j = 0; j < LOADS; ++j) {
        // all lanes take part in the butterfly; groups past K (K % G == 0: whole groups) are
        // all-zero and stored nowhere
        Range<SYMMETRIC> range;
#pragma unroll
        for (int i = 0; i < VEC; ++i) range.add(v[j][i]);
        range.template reduce<LANES>();
        const Quant quant(range);
        const int col = c + (j * 32 + lane) * VEC;
        if (col < K) {
          const long long g = row * groups_per_row + col / G;
          if (lane % LANES == 0) {
            scale[g] = quant.scale_code();
            if constexpr (!SYMMETRIC) zero_point[g] = quant.zero_point();
          }
          encode_store(quant, v[j], q + row * K + col);
        }
      }
    }
  }
}

template <typename In, Format F, bool SYMMETRIC, Gran GR, int BLOCK, int VEC, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
quantize_static(const In* __restrict__ x, const float* __restrict__ scale,
                const int* __restrict__ zero_point, u8* __restrict__ q, int M, int K) {
  // Preconditions (the space file states the same relations as constraints)
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024 threads");
  static_assert(is_pow2(VEC) && VEC * sizeof(In) <= 16, "VEC: one load of at most 16 bytes");
  static_assert(ITEMS % VEC == 0, "ITEMS: a whole number of VEC-wide loads");
  static_assert(F == Format::int8 || F == Format::fp8, "static scales: int8 or fp8");
  static_assert(GR == Gran::tensor || GR == Gran::channel, "static scales: per tensor or channel");
  static_assert(SYMMETRIC || F == Format::int8, "zero points (asymmetric): int8 only");
  using Quant = Quantizer<F, SYMMETRIC>;
  constexpr int LOADS = ITEMS / VEC;                      // vector loads per thread per tile
  constexpr long long TILE = static_cast<long long>(BLOCK) * LOADS;  // vectors per tile

  if (K % VEC != 0) __trap();  // shape precondition: vectors never straddle rows
  const long long n_vecs = static_cast<long long>(M) * K / VEC;
  const long long stride = static_cast<long long>(gridDim.x) * TILE;
  const Quant per_tensor(scale[0], SYMMETRIC ? 0 : zero_point[0]);

  for (long long tile = blockIdx.x * TILE; tile < n_vecs; tile += stride) {
    float v[LOADS][VEC];  // (LOADS, VEC)
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {  // all loads of the tile first
      const long long k = tile + j * BLOCK + threadIdx.x;
      if (k < n_vecs) load_floats<VEC>(x + k * VEC, v[j]);
    }
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const long long k = tile + j * BLOCK + threadIdx.x;
      if (k >= n_vecs) continue;
      if constexpr (GR == Gran::tensor) {
        encode_store(per_tensor, v[j], q + k * VEC);
      } else {
        const int col = static_cast<int>((k * VEC) % K);  // first of VEC consecutive columns
        float s[VEC];
        load_floats<VEC>(scale + col, s);
        u8 b[VEC];
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
          const Quant quant(s[i], SYMMETRIC ? 0 : zero_point[col + i]);
          b[i] = quant(v[j][i]);
        }
        store_bytes<VEC>(q + k * VEC, b);
      }
    }
  }
}
