// wgmma_sm90.cuh: the Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) as the GEMMs use it.
//
// One wgmma.mma_async.m64nNk32 multiplies a 64 x 32-byte slice of A by an N x 32-byte slice of B
// (both K-major in shared memory, read through 64-bit matrix descriptors) into a 64 x N
// accumulator held in the registers of the 128 threads of a warpgroup, asynchronously (WGMMA_SS;
// WGMMA_RS takes A from registers instead, gemm_w4a16's dequantized weights):
//
//   wgmma.fence        before the first wgmma that touches accumulators other instructions wrote
//   wgmma.mma_async    issue (any number of times)
//   commit_group       close the batch issued since the last commit
//   wait_group N       block until at most N batches are in flight; then the accumulators and
//                      the shared memory they read are free again
//
// Instruction shape: the whole block tile width in one instruction, N = BN (a space knob that
// must be defined before this header is included). Legal N (PTX ISA, wgmma.mma_async shapes):
// s8 x s8 -> s32: 8, 16, 24, 32, then 48 to 256 in steps of 16; e4m3/e5m2 -> f32: any multiple
// of 8 up to 256. SASS: IGMMA.64xNx32.S8.S8 and QGMMA.64xNx32.F32.E4M3.E4M3 (ptxas 13.5).
#pragma once
#include "int_types.cuh"

#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "wgmma needs the architecture-specific target sm_90a (plain sm_90 rejects it)"
#endif

// ---- shared memory matrix descriptor ----------------------------------------------------------
// 64-bit descriptor of a K-major operand in shared memory (PTX ISA, "Matrix Descriptor Format"
// of the asynchronous warpgroup MMA; the same fields as CUTLASS cute/arch/mma_sm90_desc.hpp
// GmmaDescriptor):
//
//   bits  0-13  start address >> 4            (18-bit .shared address, 16-byte aligned)
//   bits 16-29  leading dimension byte offset >> 4: for K-major swizzled layouts it is not
//               used (the 32-byte K extent of one instruction lies inside one swizzle row);
//               CUTLASS sets it to 1, and so do we
//   bits 32-45  stride dimension byte offset >> 4: from one 8-row core-matrix group to the
//               next along M (or N): 8 rows x SW bytes in our layout (gemm_smem_tiles.cuh)
//   bits 49-51  matrix base offset: 0, the tiles start on the swizzle pattern's period
//   bits 62-63  swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
//
// The start address of the k-th 32-byte slice inside a swizzle atom is the atom's address plus
// 32 * k: the hardware applies the XOR swizzle to the addresses it generates (address bits 7..9
// are the row bits, unchanged by the +32 * k), exactly as for our cp.async writes.
template <int SW>
__device__ __forceinline__ u64 smem_desc(u32 addr) {
  static_assert(SW == 32 || SW == 64 || SW == 128, "SW: 32, 64 or 128-byte swizzle");
  constexpr u64 mode = SW == 128 ? 1 : SW == 64 ? 2 : 3;
  constexpr u64 leading = 1;                // unused for swizzled K-major layouts
  constexpr u64 stride = (8 * SW) >> 4;     // 8 rows of SW bytes
  return u64((addr & 0x3FFFF) >> 4) | (leading << 16) | (stride << 32) | (mode << 62);
}

// ---- synchronisation --------------------------------------------------------------------------
// Orders this warpgroup's register and shared-memory accesses before the wgmma.mma_async that
// follow (PTX ISA, wgmma.fence: required before the first wgmma and whenever other instructions
// accessed the accumulator registers in between).
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Writes made through the generic proxy (cp.async, st.shared) become visible to the async proxy
// that wgmma reads shared memory through (PTX ISA, "Memory proxies": a proxy fence is required
// between accesses to the same memory through different proxies). Each writing thread fences
// after its copies have landed and before the barrier that publishes them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The compiler must neither read the accumulators before wgmma.wait_group nor move writes to
// them past wgmma.fence: an empty asm that "reads and writes" every register pins them in place
// (the role of CUTLASS's warpgroup_fence_operand).
template <int R>
__device__ __forceinline__ void fence_operands(i32 (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// ---- the instruction ---------------------------------------------------------------------------
// Inline PTX needs the operand numbers as literal text. The two descriptors are operands %0 and
// %1 (listed as read-write only so that their numbers do not depend on N; wgmma does not change
// them) and the N / 2 accumulator registers are %2 ... %(N / 2 + 1). WGMMA_REGS_<N> is that
// list as text, WGMMA_ACC_<N>(C, d) the matching operands C(d[0]), C(d[1]), ... (C = "+r" for
// s32, "+f" for f32 accumulators).
#define WGMMA_REGS_8 "%2, %3, %4, %5"
#define WGMMA_REGS_16 WGMMA_REGS_8 ", %6, %7, %8, %9"
#define WGMMA_REGS_24 WGMMA_REGS_16 ", %10, %11, %12, %13"
#define WGMMA_REGS_32 WGMMA_REGS_24 ", %14, %15, %16, %17"
#define WGMMA_REGS_40 WGMMA_REGS_32 ", %18, %19, %20, %21"
#define WGMMA_REGS_48 WGMMA_REGS_40 ", %22, %23, %24, %25"
#define WGMMA_REGS_56 WGMMA_REGS_48 ", %26, %27, %28, %29"
#define WGMMA_REGS_64 WGMMA_REGS_56 ", %30, %31, %32, %33"
#define WGMMA_REGS_72 WGMMA_REGS_64 ", %34, %35, %36, %37"
#define WGMMA_REGS_80 WGMMA_REGS_72 ", %38, %39, %40, %41"
#define WGMMA_REGS_88 WGMMA_REGS_80 ", %42, %43, %44, %45"
#define WGMMA_REGS_96 WGMMA_REGS_88 ", %46, %47, %48, %49"
#define WGMMA_REGS_104 WGMMA_REGS_96 ", %50, %51, %52, %53"
#define WGMMA_REGS_112 WGMMA_REGS_104 ", %54, %55, %56, %57"
#define WGMMA_REGS_120 WGMMA_REGS_112 ", %58, %59, %60, %61"
#define WGMMA_REGS_128 WGMMA_REGS_120 ", %62, %63, %64, %65"
#define WGMMA_REGS_136 WGMMA_REGS_128 ", %66, %67, %68, %69"
#define WGMMA_REGS_144 WGMMA_REGS_136 ", %70, %71, %72, %73"
#define WGMMA_REGS_152 WGMMA_REGS_144 ", %74, %75, %76, %77"
#define WGMMA_REGS_160 WGMMA_REGS_152 ", %78, %79, %80, %81"
#define WGMMA_REGS_168 WGMMA_REGS_160 ", %82, %83, %84, %85"
#define WGMMA_REGS_176 WGMMA_REGS_168 ", %86, %87, %88, %89"
#define WGMMA_REGS_184 WGMMA_REGS_176 ", %90, %91, %92, %93"
#define WGMMA_REGS_192 WGMMA_REGS_184 ", %94, %95, %96, %97"
#define WGMMA_REGS_200 WGMMA_REGS_192 ", %98, %99, %100, %101"
#define WGMMA_REGS_208 WGMMA_REGS_200 ", %102, %103, %104, %105"
#define WGMMA_REGS_216 WGMMA_REGS_208 ", %106, %107, %108, %109"
#define WGMMA_REGS_224 WGMMA_REGS_216 ", %110, %111, %112, %113"
#define WGMMA_REGS_232 WGMMA_REGS_224 ", %114, %115, %116, %117"
#define WGMMA_REGS_240 WGMMA_REGS_232 ", %118, %119, %120, %121"
#define WGMMA_REGS_248 WGMMA_REGS_240 ", %122, %123, %124, %125"
#define WGMMA_REGS_256 WGMMA_REGS_248 ", %126, %127, %128, %129"

#define WGMMA_ACC_8(C, d) C(d[0]), C(d[1]), C(d[2]), C(d[3])
#define WGMMA_ACC_16(C, d) WGMMA_ACC_8(C, d), C(d[4]), C(d[5]), C(d[6]), C(d[7])
#define WGMMA_ACC_24(C, d) WGMMA_ACC_16(C, d), C(d[8]), C(d[9]), C(d[10]), C(d[11])
#define WGMMA_ACC_32(C, d) WGMMA_ACC_24(C, d), C(d[12]), C(d[13]), C(d[14]), C(d[15])
#define WGMMA_ACC_40(C, d) WGMMA_ACC_32(C, d), C(d[16]), C(d[17]), C(d[18]), C(d[19])
#define WGMMA_ACC_48(C, d) WGMMA_ACC_40(C, d), C(d[20]), C(d[21]), C(d[22]), C(d[23])
#define WGMMA_ACC_56(C, d) WGMMA_ACC_48(C, d), C(d[24]), C(d[25]), C(d[26]), C(d[27])
#define WGMMA_ACC_64(C, d) WGMMA_ACC_56(C, d), C(d[28]), C(d[29]), C(d[30]), C(d[31])
#define WGMMA_ACC_72(C, d) WGMMA_ACC_64(C, d), C(d[32]), C(d[33]), C(d[34]), C(d[35])
#define WGMMA_ACC_80(C, d) WGMMA_ACC_72(C, d), C(d[36]), C(d[37]), C(d[38]), C(d[39])
#define WGMMA_ACC_88(C, d) WGMMA_ACC_80(C, d), C(d[40]), C(d[41]), C(d[42]), C(d[43])
#define WGMMA_ACC_96(C, d) WGMMA_ACC_88(C, d), C(d[44]), C(d[45]), C(d[46]), C(d[47])
#define WGMMA_ACC_104(C, d) WGMMA_ACC_96(C, d), C(d[48]), C(d[49]), C(d[50]), C(d[51])
#define WGMMA_ACC_112(C, d) WGMMA_ACC_104(C, d), C(d[52]), C(d[53]), C(d[54]), C(d[55])
#define WGMMA_ACC_120(C, d) WGMMA_ACC_112(C, d), C(d[56]), C(d[57]), C(d[58]), C(d[59])
#define WGMMA_ACC_128(C, d) WGMMA_ACC_120(C, d), C(d[60]), C(d[61]), C(d[62]), C(d[63])
#define WGMMA_ACC_136(C, d) WGMMA_ACC_128(C, d), C(d[64]), C(d[65]), C(d[66]), C(d[67])
#define WGMMA_ACC_144(C, d) WGMMA_ACC_136(C, d), C(d[68]), C(d[69]), C(d[70]), C(d[71])
#define WGMMA_ACC_152(C, d) WGMMA_ACC_144(C, d), C(d[72]), C(d[73]), C(d[74]), C(d[75])
#define WGMMA_ACC_160(C, d) WGMMA_ACC_152(C, d), C(d[76]), C(d[77]), C(d[78]), C(d[79])
#define WGMMA_ACC_168(C, d) WGMMA_ACC_160(C, d), C(d[80]), C(d[81]), C(d[82]), C(d[83])
#define WGMMA_ACC_176(C, d) WGMMA_ACC_168(C, d), C(d[84]), C(d[85]), C(d[86]), C(d[87])
#define WGMMA_ACC_184(C, d) WGMMA_ACC_176(C, d), C(d[88]), C(d[89]), C(d[90]), C(d[91])
#define WGMMA_ACC_192(C, d) WGMMA_ACC_184(C, d), C(d[92]), C(d[93]), C(d[94]), C(d[95])
#define WGMMA_ACC_200(C, d) WGMMA_ACC_192(C, d), C(d[96]), C(d[97]), C(d[98]), C(d[99])
#define WGMMA_ACC_208(C, d) WGMMA_ACC_200(C, d), C(d[100]), C(d[101]), C(d[102]), C(d[103])
#define WGMMA_ACC_216(C, d) WGMMA_ACC_208(C, d), C(d[104]), C(d[105]), C(d[106]), C(d[107])
#define WGMMA_ACC_224(C, d) WGMMA_ACC_216(C, d), C(d[108]), C(d[109]), C(d[110]), C(d[111])
#define WGMMA_ACC_232(C, d) WGMMA_ACC_224(C, d), C(d[112]), C(d[113]), C(d[114]), C(d[115])
#define WGMMA_ACC_240(C, d) WGMMA_ACC_232(C, d), C(d[116]), C(d[117]), C(d[118]), C(d[119])
#define WGMMA_ACC_248(C, d) WGMMA_ACC_240(C, d), C(d[120]), C(d[121]), C(d[122]), C(d[123])
#define WGMMA_ACC_256(C, d) WGMMA_ACC_248(C, d), C(d[124]), C(d[125]), C(d[126]), C(d[127])

// The same for a register A operand (WGMMA_RS): operands %0 .. %3 are A's four registers and
// %4 the descriptor of B (read-write for the same reason), so the accumulators start at %5.
#define WGMMA_RS_REGS_8 "%5, %6, %7, %8"
#define WGMMA_RS_REGS_16 WGMMA_RS_REGS_8 ", %9, %10, %11, %12"
#define WGMMA_RS_REGS_24 WGMMA_RS_REGS_16 ", %13, %14, %15, %16"
#define WGMMA_RS_REGS_32 WGMMA_RS_REGS_24 ", %17, %18, %19, %20"
#define WGMMA_RS_REGS_40 WGMMA_RS_REGS_32 ", %21, %22, %23, %24"
#define WGMMA_RS_REGS_48 WGMMA_RS_REGS_40 ", %25, %26, %27, %28"
#define WGMMA_RS_REGS_56 WGMMA_RS_REGS_48 ", %29, %30, %31, %32"
#define WGMMA_RS_REGS_64 WGMMA_RS_REGS_56 ", %33, %34, %35, %36"
#define WGMMA_RS_REGS_72 WGMMA_RS_REGS_64 ", %37, %38, %39, %40"
#define WGMMA_RS_REGS_80 WGMMA_RS_REGS_72 ", %41, %42, %43, %44"
#define WGMMA_RS_REGS_88 WGMMA_RS_REGS_80 ", %45, %46, %47, %48"
#define WGMMA_RS_REGS_96 WGMMA_RS_REGS_88 ", %49, %50, %51, %52"
#define WGMMA_RS_REGS_104 WGMMA_RS_REGS_96 ", %53, %54, %55, %56"
#define WGMMA_RS_REGS_112 WGMMA_RS_REGS_104 ", %57, %58, %59, %60"
#define WGMMA_RS_REGS_120 WGMMA_RS_REGS_112 ", %61, %62, %63, %64"
#define WGMMA_RS_REGS_128 WGMMA_RS_REGS_120 ", %65, %66, %67, %68"
#define WGMMA_RS_REGS_136 WGMMA_RS_REGS_128 ", %69, %70, %71, %72"
#define WGMMA_RS_REGS_144 WGMMA_RS_REGS_136 ", %73, %74, %75, %76"
#define WGMMA_RS_REGS_152 WGMMA_RS_REGS_144 ", %77, %78, %79, %80"
#define WGMMA_RS_REGS_160 WGMMA_RS_REGS_152 ", %81, %82, %83, %84"
#define WGMMA_RS_REGS_168 WGMMA_RS_REGS_160 ", %85, %86, %87, %88"
#define WGMMA_RS_REGS_176 WGMMA_RS_REGS_168 ", %89, %90, %91, %92"
#define WGMMA_RS_REGS_184 WGMMA_RS_REGS_176 ", %93, %94, %95, %96"
#define WGMMA_RS_REGS_192 WGMMA_RS_REGS_184 ", %97, %98, %99, %100"
#define WGMMA_RS_REGS_200 WGMMA_RS_REGS_192 ", %101, %102, %103, %104"
#define WGMMA_RS_REGS_208 WGMMA_RS_REGS_200 ", %105, %106, %107, %108"
#define WGMMA_RS_REGS_216 WGMMA_RS_REGS_208 ", %109, %110, %111, %112"
#define WGMMA_RS_REGS_224 WGMMA_RS_REGS_216 ", %113, %114, %115, %116"
#define WGMMA_RS_REGS_232 WGMMA_RS_REGS_224 ", %117, %118, %119, %120"
#define WGMMA_RS_REGS_240 WGMMA_RS_REGS_232 ", %121, %122, %123, %124"
#define WGMMA_RS_REGS_248 WGMMA_RS_REGS_240 ", %125, %126, %127, %128"
#define WGMMA_RS_REGS_256 WGMMA_RS_REGS_248 ", %129, %130, %131, %132"

#define WGMMA_STR_(x) #x
#define WGMMA_STR(x) WGMMA_STR_(x)
#define WGMMA_CAT_(a, b) a##b
#define WGMMA_CAT(a, b) WGMMA_CAT_(a, b)

// wgmma.mma_async.sync.aligned.m64n<N>k32<TYPES> {d...}, desc_a, desc_b, SCALE_D<EXTRA>;
// SCALE_D is the immediate scale-d: "1" accumulates (D = A.B + D), "0" overwrites (D = A.B).
#define WGMMA_SS(N, TYPES, SCALE_D, EXTRA, C, d, desc_a, desc_b)                                \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" WGMMA_STR(N) "k32" TYPES                     \
               " {" WGMMA_CAT(WGMMA_REGS_, N) "}, %0, %1, " SCALE_D EXTRA ";\n"                 \
               : "+l"(desc_a), "+l"(desc_b), WGMMA_CAT(WGMMA_ACC_, N)(C, d))

// wgmma.mma_async.sync.aligned.m64n<N>k16<TYPES> {d...}, {a0, a1, a2, a3}, desc_b, SCALE_D<EXTRA>;
// A (64 x 16, 16-bit types) from registers: warp w of the warpgroup supplies rows 16w .. 16w + 15,
// in the layout of mma.m16n8k16's A fragment (PTX ISA, "Register Fragments", wgmma .m64nNk16
// matrix A): register j of lane l holds the pair of columns 2 (l % 4) + 8 (j / 2) and the next
// one, of row 16 w + l / 4 + 8 (j % 2). EXTRA carries the immediates of the type (f16 / bf16:
// ", 1, 1, 0": scale-a, scale-b, B not transposed, i.e. K-major). The A registers must not be
// written again until a wgmma.wait_group has retired the instruction.
#define WGMMA_RS(N, TYPES, SCALE_D, EXTRA, C, d, a, desc_b)                                     \
  asm volatile("wgmma.mma_async.sync.aligned.m64n" WGMMA_STR(N) "k16" TYPES                     \
               " {" WGMMA_CAT(WGMMA_RS_REGS_, N) "}, {%0, %1, %2, %3}, %4, " SCALE_D EXTRA ";\n" \
               : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3]), "+l"(desc_b),                  \
                 WGMMA_CAT(WGMMA_ACC_, N)(C, d))

// Warp w (0..3) of the warpgroup holds accumulator rows 16w .. 16w + 15. Register i of lane l
// holds (PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" of wgmma, matrix D;
// CUTLASS CLayout_64xN = ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)) over m + 64 n):
//   row = 16 w + l / 4 + 8 * ((i / 2) % 2),   col = 8 * (i / 4) + 2 * (l % 4) + i % 2
// so registers 4j, 4j+1 are two adjacent columns of row l / 4 and 4j+2, 4j+3 the same columns
// eight rows below.
__device__ __forceinline__ int wgmma_acc_row(int warp_in_group, int lane, int i) {
  return 16 * warp_in_group + lane / 4 + 8 * ((i / 2) % 2);
}
__device__ __forceinline__ int wgmma_acc_col(int lane, int i) {
  return 8 * (i / 4) + 2 * (lane % 4) + i % 2;
}

// D[64 x BN] (+)= A[64 x 32] . B[BN x 32]^T, int8 x int8 -> int32 (exact; wraps on overflow).
template <bool ACCUMULATE>
__device__ __forceinline__ void wgmma_s8(i32 (&d)[BN / 2], u64 desc_a, u64 desc_b) {
  if constexpr (ACCUMULATE) {
    WGMMA_SS(BN, ".s32.s8.s8", "1", "", "+r", d, desc_a, desc_b);
  } else {
    WGMMA_SS(BN, ".s32.s8.s8", "0", "", "+r", d, desc_a, desc_b);
  }
}
