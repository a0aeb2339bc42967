// gemm_w4a16_convert.cuh: int4 weights -> fp16 / bf16 mma fragments, in registers.
//
// One 32-bit word of the packed weights (the layout is described in gemm_w4a16.cu and in
// workbench/quant/int4.py) holds the 8 nibbles a lane needs for two n8 tiles of one k16 step:
//
//   nibble (bits)   0 (0-3)   4 (16-19)   1 (4-7)   5 (20-23)   2 (8-11)  6 (24-27)  3 (12-15)  7 (28-31)
//   n8 tile         a         a           a         a           b         b          b          b
//   k row           2t        2t+1        2t+8      2t+9        2t        2t+1       2t+8       2t+9
//
// (t = lane % 4; the column is g = lane / 4 of each n8 tile.) Nibbles i and i + 4 are the two
// halves of one B fragment register of mma.m16n8k16 ({B[2t][g], B[2t+1][g]} or the rows 8 below),
// so every conversion below turns one pair of nibbles into one 32-bit fragment register:
//   out[0] = tile a, b0    out[1] = tile a, b1    out[2] = tile b, b0    out[3] = tile b, b1
// each holding (q - z) for the tile's zero point z (8 when symmetric), exactly: |q - z| <= 15 is
// an integer that fp16 and bf16 both represent.
//
// CVT=lop3 (no I2F: integer ops and one fp16/bf16 subtract or fma per register):
//   fp16: (q | 0x6400) read as fp16 is 1024 + q (1024 has an ulp of 1, q < 16 sits in the
//         mantissa). One lop3 (a & b) | c selects two nibbles into both halves and ors the
//         exponent in; nibbles at bits 4-7 give 1024 + 16 q, scaled by an fma with 1/16. So a
//         word is 2 lop3 + 1 shift + 2 hsub2 + 2 hfma2 (the trick of NVIDIA's FasterTransformer
//         and IST-DASLab's Marlin).
//   bf16: bf16 has 7 mantissa bits, so only bits 0-3 of each half may hold the nibble:
//         (q | 0x4300) is 128 + q; a word is 4 lop3 + 3 shifts + 4 bf16 subtracts.
// CVT=i2f: shift and mask each nibble, subtract z in int32 and convert (I2F.F16 / I2F.BF16):
//   8 conversions per word, the straightforward way, kept for comparison.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "int_types.cuh"  // u8, u32, i64

namespace w4 {

// ---- the operand type ---------------------------------------------------------------------
#if DTYPE_float16
using T = __half;     // A, C and the dequantized weights
using T2 = __half2;   // one fragment register
#elif DTYPE_bfloat16
using T = __nv_bfloat16;
using T2 = __nv_bfloat162;
#else
#error "DTYPE must be float16 or bfloat16"
#endif

__device__ __forceinline__ T2 as_t2(u32 bits) { return *reinterpret_cast<T2*>(&bits); }
__device__ __forceinline__ u32 as_u32(T2 v) { return *reinterpret_cast<u32*>(&v); }

// d = (a & b) | c in one LOP3 (immLut 0xEA = (0xF0 & 0xCC) | 0xAA).
__device__ __forceinline__ u32 and_or(u32 a, u32 b, u32 c) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// ---- zero points ------------------------------------------------------------------------------
// What a fragment register subtracts for the zero point z (0..15) of its column, made once per
// group and column: CVT=lop3 keeps the magic number in it, CVT=i2f the integer.
struct Zero {
#if CVT_lop3 && DTYPE_float16
  T2 sub;  // (1024 + z, 1024 + z): for the nibbles at bits 0-3 of each half
  T2 fma;  // (-(64 + z), -(64 + z)): for (1024 + 16 q) / 16
#elif CVT_lop3
  T2 sub;  // (128 + z, 128 + z)
#else
  int z;
#endif
};

__device__ __forceinline__ Zero make_zero(u32 z) {
  Zero out;
#if CVT_lop3 && DTYPE_float16
  const u32 both = z | (z << 16);
  out.sub = as_t2(both | 0x64006400u);                         // 1024 + z, exact
  out.fma = __hsub2(__half2half2(__ushort_as_half(0x6380)),    // 960 - (1024 + z) = -(64 + z)
                    out.sub);
#elif CVT_lop3
  out.sub = as_t2((z | (z << 16)) | 0x43004300u);              // 128 + z, exact
#else
  out.z = static_cast<int>(z);
#endif
  return out;
}

// ---- one word -> four fragment registers of (q - z) -----------------------------------------
__device__ __forceinline__ void dequant_word(u32 w, const Zero& za, const Zero& zb, T2 (&out)[4]) {
#if CVT_lop3 && DTYPE_float16
  const u32 LO = 0x000F000Fu, HI = 0x00F000F0u, MAGIC = 0x64006400u;
  const T2 sixteenth = __half2half2(__ushort_as_half(0x2C00));  // 1/16
  const u32 w8 = w >> 8;
  out[0] = __hsub2(as_t2(and_or(w, LO, MAGIC)), za.sub);             // nibbles 0, 4
  out[1] = __hfma2(as_t2(and_or(w, HI, MAGIC)), sixteenth, za.fma);  // nibbles 1, 5
  out[2] = __hsub2(as_t2(and_or(w8, LO, MAGIC)), zb.sub);            // nibbles 2, 6
  out[3] = __hfma2(as_t2(and_or(w8, HI, MAGIC)), sixteenth, zb.fma); // nibbles 3, 7
#elif CVT_lop3
  const u32 LO = 0x000F000Fu, MAGIC = 0x43004300u;
  out[0] = __hsub2(as_t2(and_or(w, LO, MAGIC)), za.sub);        // nibbles 0, 4
  out[1] = __hsub2(as_t2(and_or(w >> 4, LO, MAGIC)), za.sub);   // nibbles 1, 5
  out[2] = __hsub2(as_t2(and_or(w >> 8, LO, MAGIC)), zb.sub);   // nibbles 2, 6
  out[3] = __hsub2(as_t2(and_or(w >> 12, LO, MAGIC)), zb.sub);  // nibbles 3, 7
#else
  const int z[4] = {za.z, za.z, zb.z, zb.z};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int lo = static_cast<int>((w >> (4 * i)) & 15u) - z[i];
    const int hi = static_cast<int>((w >> (4 * i + 16)) & 15u) - z[i];
#if DTYPE_float16
    out[i] = __halves2half2(__int2half_rn(lo), __int2half_rn(hi));
#else
    out[i] = __halves2bfloat162(__int2bfloat16_rn(lo), __int2bfloat16_rn(hi));
#endif
  }
#endif
}

// The scale of a column as a fragment multiplier (both halves), from its fp16 value.
__device__ __forceinline__ T2 scale_pair(__half s) {
#if DTYPE_float16
  return __half2half2(s);
#else
  return __bfloat162bfloat162(__float2bfloat16_rn(__half2float(s)));
#endif
}

}  // namespace w4
