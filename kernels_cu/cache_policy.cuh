// cache_policy.cuh: global loads of a stream that is read once, with the cache hints of the
// cache_hints family (ptx/cache_hints.ptx) written as CUDA C++ helpers.
//
//   Policy::plain        ld.global                        SASS LDG.E[.64|.128]
//   Policy::cs           ld.global.cs (evict first in L1 and L2: "streaming")
//                                                         SASS LDG.E.EF[.64|.128]
//   Policy::evict_first  createpolicy.fractional.L2::evict_first + ld.global.L2::cache_hint:
//                        the lines are first to leave L2, L1 as usual. ptxas folds the constant
//                        policy into the 64-bit memory descriptor the load takes (desc[URn];
//                        on sm_80 one UMOV URn, 0x12f00000, tests/test_kernels_cache_hints.py)
//
// Loads move 4, 8 or 16 bytes (u32, v2.u32, v4.u32) and need PTX ISA 7.4 (sm_80+).
#pragma once

enum class Policy { plain, cs, evict_first };

// The L2 policy word of Policy::evict_first (every line of the access, fraction 1.0).
__device__ __forceinline__ unsigned long long l2_evict_first_policy() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

template <int BYTES> struct RawBytes;
template <> struct RawBytes<4> { using T = unsigned int; };
template <> struct RawBytes<8> { using T = uint2; };
template <> struct RawBytes<16> { using T = uint4; };

// One load of BYTES bytes at p (BYTES-aligned) under POLICY; `policy` is read by evict_first only.
// (Not volatile: the compiler may schedule the loads of a stream freely; nothing writes it.)
template <Policy POLICY, int BYTES>
__device__ __forceinline__ typename RawBytes<BYTES>::T load_stream(const void* p,
                                                                   unsigned long long policy) {
  using R = typename RawBytes<BYTES>::T;
  R r;
  if constexpr (POLICY == Policy::plain) {
    r = *reinterpret_cast<const R*>(p);
  } else if constexpr (BYTES == 4) {
    if constexpr (POLICY == Policy::cs)
      asm("ld.global.cs.u32 %0, [%1];\n" : "=r"(r) : "l"(p));
    else
      asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;\n" : "=r"(r) : "l"(p), "l"(policy));
  } else if constexpr (BYTES == 8) {
    if constexpr (POLICY == Policy::cs)
      asm("ld.global.cs.v2.u32 {%0, %1}, [%2];\n" : "=r"(r.x), "=r"(r.y) : "l"(p));
    else
      asm("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;\n"
                   : "=r"(r.x), "=r"(r.y)
                   : "l"(p), "l"(policy));
  } else {
    if constexpr (POLICY == Policy::cs)
      asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                   : "l"(p));
    else
      asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
                   : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                   : "l"(p), "l"(policy));
  }
  return r;
}

// A float (a scale of the stream) under POLICY.
template <Policy POLICY>
__device__ __forceinline__ float load_stream_float(const float* p, unsigned long long policy) {
  return __uint_as_float(load_stream<POLICY, 4>(p, policy));
}
