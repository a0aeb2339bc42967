// gemm_smem_tiles.cuh: K-major operand tiles in shared memory, in the swizzled layout that the
// Hopper warpgroup MMA reads through a matrix descriptor, filled with 16-byte cp.async copies.
//
// Used by the wgmma GEMMs (int8, fp8) and by the FP8 mma.sync GEMM, whose ldmatrix reads of
// 8 rows x 16 bytes are free of bank conflicts in the same layout.
//
// Layout of one tile of ROWS x KBYTES bytes (one operand of one pipeline stage; KBYTES is the
// GEMM's BK), SW = 32, 64 or 128:
//
//   the tile is KBYTES / SW "swizzle atoms" side by side along K; an atom is ROWS rows of SW bytes,
//   rows one after the other (row stride SW bytes, 8-row group stride 8 * SW bytes):
//
//     logical(row, k) = (k / SW) * ROWS * SW + row * SW + k % SW
//
//   and the 16-byte chunk index inside a row is XORed with the address bits just above it:
//
//     physical = logical ^ (((logical >> 7) & (SW / 16 - 1)) << 4)
//
// This is the "SW-byte swizzle" mode of the PTX ISA's shared memory matrix layouts (section
// "Asynchronous Warpgroup Level Matrix Shared Memory Layout"), i.e. CUTLASS's
// Swizzle<log2(SW / 16), 4, 3> on byte addresses (cute/atom/mma_traits_sm90_gmma.hpp:
// Layout_K_SW{32,64,128}_Atom_Bits = Swizzle<{1,2,3},4,3> o (8 rows, SW * 8 bits)): bits [4, 4+B)
// of the address are XORed with bits [7, 7+B), B = log2(SW / 16). For SW = 128 that is
// "chunk ^= row % 8" (rows of 128 bytes); for SW = 64, "chunk ^= (row / 2) % 4"; for SW = 32,
// "chunk ^= (row / 4) % 2".
//
// The hardware applies the XOR to absolute shared-memory addresses, so the formula above holds
// for tile offsets only when the tile starts on a multiple of 8 * SW bytes (the pattern's period):
// the kernels align their shared-memory base to 1024 bytes, and every tile size is a multiple of
// 8 * SW (ROWS % 8 == 0, KBYTES % SW == 0).
#pragma once
#include "int_types.cuh"

// Byte offset of (row, k) inside a ROWS x KBYTES tile stored as above; k may be any byte of a
// 16-byte chunk (the chunk moves as a whole).
template <int ROWS, int SW>
__device__ __forceinline__ u32 tile_offset(int row, int k) {
  static_assert(SW == 32 || SW == 64 || SW == 128, "SW: a swizzle span of the PTX ISA");
  static_assert(ROWS % 8 == 0, "ROWS: whole 8-row core-matrix groups");
  const u32 logical = u32(k / SW) * (ROWS * SW) + u32(row) * SW + u32(k % SW);
  return logical ^ (((logical >> 7) & (SW / 16 - 1)) << 4);
}

// Shared-memory address (the 32-bit .shared window offset cp.async, ldmatrix and the wgmma
// descriptors take) of a generic pointer to shared memory.
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// The block's dynamic shared memory, aligned up to 1024 bytes (the period of the 128-byte
// swizzle pattern). The launch adds 1024 bytes of slack for this; the declaration promises only
// 16-byte alignment, so the rounding is done at run time whatever the driver's placement.
__device__ __forceinline__ u32 aligned_smem_base() {
  extern __shared__ __align__(16) u8 gemm_smem[];
  return (smem_addr(gemm_smem) + 1023u) & ~1023u;
}

// 16-byte global -> shared copy that bypasses L1 (cp.async.cg, sm_80+). When !valid the source
// size is 0: nothing is read and the 16 destination bytes are zero-filled (PTX ISA, cp.async:
// "src-size ... the remaining bytes are filled with zeros"), which is how tiles past M, N or K
// become zeros. `src` must still be a valid address.
__device__ __forceinline__ void cp_async_16(u32 dst, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Wait until at most N of this thread's committed cp.async groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Copy rows [row0, row0 + ROWS) x bytes [k0, k0 + KBYTES) of the row-major [rows, K] byte matrix
// g into the tile at shared address `tile`, NTHREADS threads cooperating (thread `tid`). Rows past
// `rows` and chunks past K are zero-filled. K % 16 == 0 (16-byte aligned rows).
//
// Consecutive threads copy consecutive 16-byte chunks of a row: coalesced global reads, and the
// 8 chunks of a 128-byte row land in 8 different bank groups.
template <int ROWS, int KBYTES, int SW, int NTHREADS>
__device__ __forceinline__ void load_tile_async(u32 tile, const u8* __restrict__ g, int row0,
                                                int rows, int k0, int K, int tid) {
  static_assert(KBYTES % SW == 0, "KBYTES: whole swizzle atoms");
  constexpr int CHUNKS_PER_ROW = KBYTES / 16;
  constexpr int CHUNKS = ROWS * CHUNKS_PER_ROW;  // 16-byte copies per tile
  constexpr int ROUNDS = (CHUNKS + NTHREADS - 1) / NTHREADS;
#pragma unroll
  for (int i = 0; i < ROUNDS; ++i) {
    const int c = i * NTHREADS + tid;
    if (CHUNKS % NTHREADS != 0 && c >= CHUNKS) break;
    const int r = c / CHUNKS_PER_ROW;
    const int k = (c % CHUNKS_PER_ROW) * 16;
    const bool valid = row0 + r < rows && k0 + k < K;
    const u8* src = valid ? g + static_cast<i64>(row0 + r) * K + (k0 + k) : g;
    cp_async_16(tile + tile_offset<ROWS, SW>(r, k), src, valid);
  }
}
