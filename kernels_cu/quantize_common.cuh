// quantize_common.cuh: what the quantize and dequantize kernels share.
//
//   * the formats: int8 (symmetric or with a zero point), fp8 E4M3, and the microscaling
//     formats MXINT8 / MXFP8 (blocks of 32 elements sharing one E8M0 power-of-two scale),
//   * vector loads of fp16 / fp32 inputs and byte-vector stores,
//   * the range statistics of a group and their warp reduction,
//   * the scale formulas and the element encoders, written so that the CPU reference
//     (workbench/references/quantize.py) computes bit-identical results:
//       - every division is an IEEE float32 division (__fdiv_rn, never x * (1 / s): the
//         reciprocal is rounded once more and moves some x / s across a .5 boundary),
//       - rounding to integers is round-half-to-even (rintf), clamping happens in float,
//       - fp8 is E4M3 with saturation to +-448 (cvt.rn.satfinite),
//       - MX scales are exact powers of two, applied by one float32 multiply.
//
// The formulas (standard; see the reference module for the same text):
//   symmetric int8:   scale = max|x| / 127, q = clamp(rint(x / scale), -127, 127)
//   asymmetric int8:  lo = min(min x, 0), hi = max(max x, 0), scale = (hi - lo) / 255,
//                     zp = clamp(rint(-128 - lo / scale), -128, 127),
//                     q = clamp(rint(x / scale) + zp, -128, 127)
//   fp8 E4M3:         scale = max|x| / 448, q = e4m3_satfinite(x / scale)
//   MX (OCP Microscaling Formats v1.0): per block of 32, e = floor(log2(max|x|)) - emax_elem
//                     (emax_elem = 8 for E4M3, 0 for INT8), clamped to >= -127; the scale is
//                     2^e, stored as the E8M0 byte e + 127; elements are x / 2^e encoded as
//                     E4M3 (saturating) or as INT8 with 6 fraction bits: clamp(rint(x / 2^e *
//                     64), -127, 127). A block of zeros takes e = -126 - emax_elem (clamped),
//                     as microsoft/microxcaling's reference implementation does.
//   A range of zero (all elements zero) takes scale 1.
#pragma once
#include <cuda_fp16.h>
#include <cuda_fp8.h>

using i8 = signed char;
using u8 = unsigned char;

enum class Format { int8, fp8, mxint8, mxfp8 };
// where a scale comes from: one for the tensor, per column (channel), per row (token), per group
// of G consecutive elements of a row, or per MX block of 32 (E8M0)
enum class Gran { tensor, channel, token, group, mx };

__host__ __device__ constexpr bool is_mx(Format f) { return f == Format::mxint8 || f == Format::mxfp8; }
__host__ __device__ constexpr bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

// the type of one stored scale: fp32, or the E8M0 byte of the MX formats (NVRTC has no
// <type_traits>: a two-line conditional)
template <bool MX> struct ScaleType { using T = float; };
template <> struct ScaleType<true> { using T = unsigned char; };
template <Format F>
using ScaleOf = typename ScaleType<is_mx(F)>::T;

// ---- vectors ---------------------------------------------------------------------------------

// N elements of T in one aligned load or store (N * sizeof(T) bytes, a power of two; above 16
// bytes the compiler splits it into 16-byte accesses).
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

// Load VEC consecutive inputs starting at p (VEC-aligned) as floats (fp16 -> fp32 is exact).
template <int VEC, typename In>
__device__ __forceinline__ void load_floats(const In* __restrict__ p, float (&out)[VEC]) {
  const Vec<In, VEC> v = *reinterpret_cast<const Vec<In, VEC>*>(p);
#pragma unroll
  for (int i = 0; i < VEC; ++i) out[i] = to_float(v.v[i]);
}

// Store VEC bytes at p (VEC-aligned).
template <int VEC>
__device__ __forceinline__ void store_bytes(u8* __restrict__ p, const u8 (&b)[VEC]) {
  Vec<u8, VEC> v;
#pragma unroll
  for (int i = 0; i < VEC; ++i) v.v[i] = b[i];
  *reinterpret_cast<Vec<u8, VEC>*>(p) = v;
}

// ---- range statistics and their warp reduction -------------------------------------------------

// max |x| (sum, min) over aligned groups of LANES lanes (butterfly: every lane of a group gets the
// result; attention_decode.cu sums its dot products with group_sum).
template <int LANES>
__device__ __forceinline__ float group_max(float v) {
#pragma unroll
  for (int offset = LANES / 2; offset > 0; offset >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}
template <int LANES>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
  for (int offset = LANES / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <int LANES>
__device__ __forceinline__ float group_min(float v) {
#pragma unroll
  for (int offset = LANES / 2; offset > 0; offset >>= 1)
    v = fminf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// What a scale is computed from: max |x| (symmetric), or min and max with 0 included
// (asymmetric: zero must stay exactly representable). The initial values are also the neutral
// elements, so lanes without data (past the end of a row) take part in reductions harmlessly.
template <bool SYMMETRIC>
struct Range;

template <>
struct Range<true> {
  float amax = 0.0f;
  __device__ __forceinline__ void add(float v) { amax = fmaxf(amax, fabsf(v)); }
  template <int LANES>
  __device__ __forceinline__ void reduce() { amax = group_max<LANES>(amax); }
};

template <>
struct Range<false> {
  float lo = 0.0f, hi = 0.0f;
  __device__ __forceinline__ void add(float v) {
    lo = fminf(lo, v);
    hi = fmaxf(hi, v);
  }
  template <int LANES>
  __device__ __forceinline__ void reduce() {
    lo = group_min<LANES>(lo);
    hi = group_max<LANES>(hi);
  }
};

// ---- element encoders --------------------------------------------------------------------------

// round half to even, clamp to [qmin, qmax] (in float, so huge values cannot wrap), to int8
__device__ __forceinline__ u8 encode_int8(float v, float qmin, float qmax) {
  const float r = fminf(fmaxf(rintf(v), qmin), qmax);
  return static_cast<u8>(static_cast<i8>(__float2int_rn(r)));
}

// fp32 -> E4M3, round to nearest even, saturating to +-448 (F2FP on sm_89+, emulated on sm_80)
__device__ __forceinline__ u8 encode_e4m3(float v) {
  return static_cast<u8>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// E4M3 byte -> fp32 (exact: every E4M3 value is an fp16 value)
__device__ __forceinline__ float decode_e4m3(u8 b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
}

// 2^e as a float, exact for -149 <= e <= 127 (subnormal below -126)
__device__ __forceinline__ float exp2_exact(int e) { return ldexpf(1.0f, e); }

// ---- quantizers: from a group's range to its scale and encoded elements -----------------------

template <Format F, bool SYMMETRIC>
struct Quantizer;

// symmetric int8: q = clamp(rint(x / s), -127, 127), s = max|x| / 127
template <>
struct Quantizer<Format::int8, true> {
  using ScaleT = float;
  float scale;
  __device__ explicit Quantizer(const Range<true>& r)
      : scale(r.amax > 0.0f ? __fdiv_rn(r.amax, 127.0f) : 1.0f) {}
  __device__ Quantizer(float s, int /*zero_point*/) : scale(s) {}
  __device__ ScaleT scale_code() const { return scale; }
  __device__ int zero_point() const { return 0; }
  __device__ u8 operator()(float v) const { return encode_int8(__fdiv_rn(v, scale), -127.f, 127.f); }
};

// asymmetric int8: q = clamp(rint(x / s) + zp, -128, 127), s = (hi - lo) / 255,
// zp = clamp(rint(-128 - lo / s), -128, 127)
template <>
struct Quantizer<Format::int8, false> {
  using ScaleT = float;
  float scale;
  float zp;  // an integer, kept as float for the float clamp
  __device__ explicit Quantizer(const Range<false>& r) {
    const float range = r.hi - r.lo;
    scale = range > 0.0f ? __fdiv_rn(range, 255.0f) : 1.0f;
    zp = fminf(fmaxf(rintf(-128.0f - __fdiv_rn(r.lo, scale)), -128.0f), 127.0f);
  }
  __device__ Quantizer(float s, int zero_point) : scale(s), zp(static_cast<float>(zero_point)) {}
  __device__ ScaleT scale_code() const { return scale; }
  __device__ int zero_point() const { return static_cast<int>(zp); }
  __device__ u8 operator()(float v) const {
    return encode_int8(rintf(__fdiv_rn(v, scale)) + zp, -128.f, 127.f);
  }
};

// fp8 E4M3 (symmetric): q = e4m3_satfinite(x / s), s = max|x| / 448
template <>
struct Quantizer<Format::fp8, true> {
  using ScaleT = float;
  float scale;
  __device__ explicit Quantizer(const Range<true>& r)
      : scale(r.amax > 0.0f ? __fdiv_rn(r.amax, 448.0f) : 1.0f) {}
  __device__ Quantizer(float s, int /*zero_point*/) : scale(s) {}
  __device__ ScaleT scale_code() const { return scale; }
  __device__ int zero_point() const { return 0; }
  __device__ u8 operator()(float v) const { return encode_e4m3(__fdiv_rn(v, scale)); }
};

// the largest exponent of a normal element: E4M3 448 = 1.75 * 2^8; INT8 with 6 fraction bits
// 127 / 64 = 1.98 * 2^0 (OCP MX v1.0 element formats)
template <Format F>
constexpr int mx_emax_elem = F == Format::mxfp8 ? 8 : 0;

// shared exponent of an MX block: floor(log2(amax)) - emax_elem, at least -127 (E8M0's range)
template <Format F>
__device__ __forceinline__ int mx_shared_exponent(float amax) {
  int e = -126;  // an all-zero block: log2 of the smallest normal fp32
  if (amax > 0.0f) {
    int ex;
    frexpf(amax, &ex);  // amax = m * 2^ex, 0.5 <= m < 1: floor(log2(amax)) = ex - 1
    e = ex - 1;
  }
  return max(e - mx_emax_elem<F>, -127);
}

// MXFP8: q = e4m3_satfinite(x * 2^-e); MXINT8: q = clamp(rint(x * 2^-e * 64), -127, 127).
// x * 2^-e is exact unless it falls below the smallest normal float, where every code is 0
// anyway; 2^-e itself (-127 <= e <= 127) is always a float, 2^(6 - e) would not be.
template <Format F>
struct MxQuantizer {
  using ScaleT = u8;
  int e;         // shared exponent: the block's scale is 2^e
  float factor;  // 2^-e
  __device__ explicit MxQuantizer(const Range<true>& r)
      : e(mx_shared_exponent<F>(r.amax)), factor(exp2_exact(-e)) {}
  __device__ ScaleT scale_code() const { return static_cast<u8>(e + 127); }  // E8M0
  __device__ int zero_point() const { return 0; }
  __device__ u8 operator()(float v) const {
    if constexpr (F == Format::mxfp8) return encode_e4m3(v * factor);
    else return encode_int8((v * factor) * 64.0f, -127.f, 127.f);  // 6 fraction bits
  }
};
template <>
struct Quantizer<Format::mxint8, true> : MxQuantizer<Format::mxint8> {
  using MxQuantizer::MxQuantizer;
};
template <>
struct Quantizer<Format::mxfp8, true> : MxQuantizer<Format::mxfp8> {
  using MxQuantizer::MxQuantizer;
};
