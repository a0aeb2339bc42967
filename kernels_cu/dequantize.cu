// dequantize.cu: codes q [M, K] (int8 or fp8 E4M3 bytes, row-major) back to fp16 or fp32.
//
//   int8:   x = (q - zp) * scale      (zp = 0 when symmetric)
//   fp8:    x = e4m3(q) * scale
//   MXINT8: x = q * 2^(e - 6)         e = E8M0 byte - 127 of the element's block of 32
//   MXFP8:  x = e4m3(q) * 2^e         (an E8M0 byte 0xFF is NaN: the whole block is NaN)
// with the scale of the element's tensor, channel (column), token (row) or group of G (row-wise),
// one float32 multiply per element and one rounding to the output type (round to nearest even),
// exactly what the reference (workbench/references/quantize.py) computes.
//
// Work split: a grid-stride loop over VEC-element vectors, ITEMS elements per thread and tile,
// all loads of a tile before the first conversion. Shapes: K % VEC == 0 (vectors never straddle
// rows), K % G == 0 per group, K % 32 == 0 for MX.
#include "quantize_common.cuh"

enum class Elem { int8, fp8 };

template <int VEC>
__device__ __forceinline__ void store_vec(float* __restrict__ p, const float (&v)[VEC]) {
  Vec<float, VEC> out;
#pragma unroll
  for (int i = 0; i < VEC; ++i) out.v[i] = v[i];
  *reinterpret_cast<Vec<float, VEC>*>(p) = out;
}
template <int VEC>
__device__ __forceinline__ void store_vec(__half* __restrict__ p, const float (&v)[VEC]) {
  Vec<__half, VEC> out;
#pragma unroll
  for (int i = 0; i < VEC; ++i) out.v[i] = __float2half_rn(v[i]);
  *reinterpret_cast<Vec<__half, VEC>*>(p) = out;
}

template <Elem E, Gran GR, bool SYMMETRIC, int G, typename Out, int BLOCK, int VEC, int ITEMS>
__global__ void __launch_bounds__(BLOCK)
dequantize(const u8* __restrict__ q, const float* __restrict__ scale,
           const int* __restrict__ zero_point, const u8* __restrict__ e8m0,
           Out* __restrict__ out, int M, int K) {
  // Preconditions (the space files state the same relations as constraints)
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024 threads");
  static_assert(is_pow2(VEC) && VEC * sizeof(Out) <= 16, "VEC: one store of at most 16 bytes");
  static_assert(ITEMS % VEC == 0, "ITEMS: a whole number of VEC-wide loads");
  static_assert(GR != Gran::group || (is_pow2(G) && G % VEC == 0), "G: whole vectors per group");
  static_assert(GR != Gran::mx || VEC <= 32, "MX: a vector lies in one block of 32");
  static_assert(SYMMETRIC || (E == Elem::int8 && GR != Gran::mx), "zero points: int8, not MX");
  constexpr int LOADS = ITEMS / VEC;                                 // vectors per thread per tile
  constexpr long long TILE = static_cast<long long>(BLOCK) * LOADS;  // vectors per tile

  if (K % VEC != 0 || (GR == Gran::group && K % G != 0) || (GR == Gran::mx && K % 32 != 0))
    __trap();  // shape preconditions
  const long long n_vecs = static_cast<long long>(M) * K / VEC;
  const long long stride = static_cast<long long>(gridDim.x) * TILE;

  for (long long tile = blockIdx.x * TILE; tile < n_vecs; tile += stride) {
    Vec<u8, VEC> codes[LOADS];  // (LOADS, VEC)
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {  // all loads of the tile first
      const long long k = tile + j * BLOCK + threadIdx.x;
      if (k < n_vecs) codes[j] = reinterpret_cast<const Vec<u8, VEC>*>(q)[k];
    }
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
      const long long k = tile + j * BLOCK + threadIdx.x;
      if (k >= n_vecs) continue;
      const long long first = k * VEC;  // flat index of the vector's first element
      float v[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const u8 b = codes[j].v[i];
        const float code = E == Elem::int8 ? static_cast<float>(static_cast<i8>(b)) : decode_e4m3(b);
        // groups and MX blocks never straddle rows (K % G == 0), so the index of an element's
        // group is its flat index / G; a vector lies in one row (K % VEC == 0)
        if constexpr (GR == Gran::mx) {
          const u8 x = e8m0[(first + i) / 32];
          const int e = static_cast<int>(x) - 127;
          const float factor = exp2_exact(E == Elem::int8 ? e - 6 : e);  // 6 fraction bits
          v[i] = x == 0xFF ? __int_as_float(0x7fffffff) : code * factor;
        } else {
          long long s;  // index of the element's scale
          if constexpr (GR == Gran::tensor) s = 0;
          else if constexpr (GR == Gran::channel) s = first % K + i;
          else if constexpr (GR == Gran::token) s = first / K;
          else s = (first + i) / G;
          const float zp = SYMMETRIC ? 0.0f : static_cast<float>(zero_point[s]);
          v[i] = (code - zp) * scale[s];  // q - zp is an exact small integer
        }
      }
      store_vec<VEC>(out + first, v);
    }
  }
}
