// gemm_wgmma_mainloop.cuh: the multistage cp.async -> shared memory -> wgmma main loop shared by
// the int8 and FP8 Hopper GEMMs (both operands are 1-byte, K-major, read 32 bytes of K per
// wgmma, so the staging is the same; only the instruction and the accumulator type differ), and
// its pipeline (wgmma_pipeline) alone for gemm_w4a16, whose stages hold int4 weight units,
// scales and zero points besides the activations.
//
// Every thread of the block is a consumer: BM / 64 warpgroups (128 threads each) copy the next
// stages with cp.async and each one multiplies its own 64 rows of the BM x BN block tile.
// (TMA would need a tensor-map kernel argument, which the library's common GEMM signature does
// not have; cp.async writes the swizzled layout directly.)
//
// Pipeline with STAGES shared-memory slots, one barrier per k-tile. At iteration kt:
//
//   1. cp.async.wait_group: this thread's copies of k-tile kt have landed;
//      fence.proxy.async: make them visible to wgmma (async proxy);
//      __syncthreads: everyone's copies of kt are visible, and every warpgroup has passed the
//      wgmma.wait_group(1) of iteration kt - 1, so the wgmma of k-tile kt - 2 is complete in all
//      warpgroups and its slot may be overwritten.
//   2. issue the copies of k-tile kt + STAGES - 2 into slot (kt + STAGES - 2) % STAGES, the slot
//      of k-tile kt - 2; commit (an empty group past the end keeps the counting uniform).
//   3. issue the wgmma of k-tile kt (consume), commit; wgmma.wait_group(1): the wgmma of k-tile
//      kt - 1 is complete, the one of kt may still run while the next iteration waits for data.
//
// So STAGES - 2 k-tiles are being copied while one is multiplied and one is still finishing:
// STAGES >= 3. Copies in flight at the wait of iteration kt: k-tiles kt .. kt + STAGES - 3, i.e.
// cp.async.wait_group(STAGES - 3) leaves exactly k-tile kt complete.
#pragma once
#include "gemm_smem_tiles.cuh"
#include "wgmma_sm90.cuh"

// Shared memory of one pipeline stage: the A tile (TILE_M rows) then the B tile (TILE_N rows),
// TILE_K bytes of K each. (Template parameters are named TILE_M, TILE_N, ... because BM, BN, TM,
// TN are knob macros.)
template <int TILE_M, int TILE_N, int TILE_K>
struct WgmmaStage {
  static constexpr u32 A_BYTES = TILE_M * TILE_K;
  static constexpr u32 B_BYTES = TILE_N * TILE_K;
  static constexpr u32 BYTES = A_BYTES + B_BYTES;
};

// Descriptor of the 32-byte K slice `kk` of a tile of ROWS rows at shared address `tile` (which
// may already be offset by whole 8-row groups, e.g. to a warpgroup's 64 rows): the slice starts
// in swizzle atom kk * 32 / SW, kk * 32 % SW bytes into its rows.
template <int ROWS, int SW>
__device__ __forceinline__ u64 kslice_desc(u32 tile, int kk) {
  return smem_desc<SW>(tile + u32(kk * 32 / SW) * (ROWS * SW) + u32(kk * 32 % SW));
}

// The pipeline itself, whatever a stage holds: `load(kt, slot)` issues this thread's cp.async
// copies of k-tile kt into shared-memory slot `slot` (0 .. NSTAGES - 1), `consume(kt, slot)` issues
// this warpgroup's wgmma of k-tile kt from that slot and commits them (the last commit may leave
// its wgmma running: wgmma_wait<1> follows). One commit group of copies per k-tile, empty past
// the end, so that cp.async.wait_group counts k-tiles.
template <int NSTAGES, class Load, class Consume>
__device__ __forceinline__ void wgmma_pipeline(int k_tiles, Load&& load, Consume&& consume) {
  static_assert(NSTAGES >= 3, "NSTAGES: one slot being multiplied, one finishing, one loading");
  // ---- prologue: k-tiles 0 .. NSTAGES - 3 in flight --------------------------------------------
#pragma unroll 1  // one copy of the loader code, not NSTAGES - 2
  for (int kt = 0; kt < NSTAGES - 2; ++kt) {
    if (kt < k_tiles) load(kt, kt);
    cp_async_commit();
  }

  // ---- main loop ------------------------------------------------------------------------------
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<NSTAGES - 3>();  // this thread's copies of k-tile kt have landed
    fence_proxy_async_shared();   // ... and are visible to the async proxy
    __syncthreads();              // all copies of kt landed; wgmma of kt - 2 done everywhere

    const int next = kt + NSTAGES - 2;  // goes into the slot of k-tile kt - 2
    if (next < k_tiles) load(next, next % NSTAGES);
    cp_async_commit();

    consume(kt, kt % NSTAGES);
    wgmma_wait<1>();  // the wgmma of k-tile kt - 1 is complete
  }
  wgmma_wait<0>();
  cp_async_wait<0>();  // only empty groups remain; leave nothing in flight at exit
}

// Run the main loop for the TILE_M x TILE_N block tile at rows [m0, m0 + TILE_M) of A and
// [n0, n0 + TILE_N) of B, TILE_K bytes of K per k-tile, NSTAGES slots, SW-byte swizzle, NTHREADS = 2 * TILE_M threads.
// `consume(a_tile, b_tile)` issues the wgmma of one k-tile for this thread's warpgroup (A tile
// already offset to the warpgroup's 64 rows) and commits them. `smem` is 1024-byte aligned.
template <int TILE_M, int TILE_N, int TILE_K, int NSTAGES, int SW, int NTHREADS, class Consume>
__device__ __forceinline__ void wgmma_mainloop(const u8* __restrict__ A, const u8* __restrict__ B,
                                               int M, int N, int K, int m0, int n0, u32 smem,
                                               Consume&& consume) {
  using Stage = WgmmaStage<TILE_M, TILE_N, TILE_K>;
  const int tid = threadIdx.x;
  const int warpgroup = tid / 128;
  const int k_tiles = (K + TILE_K - 1) / TILE_K;

  auto load_stage = [&](int kt, int slot) {
    const u32 stage = smem + slot * Stage::BYTES;
    load_tile_async<TILE_M, TILE_K, SW, NTHREADS>(stage, A, m0, M, kt * TILE_K, K, tid);
    load_tile_async<TILE_N, TILE_K, SW, NTHREADS>(stage + Stage::A_BYTES, B, n0, N, kt * TILE_K, K,
                                                  tid);
  };
  auto consume_stage = [&](int, int slot) {
    const u32 stage = smem + slot * Stage::BYTES;
    consume(stage + warpgroup * 64 * SW, stage + Stage::A_BYTES);
  };
  wgmma_pipeline<NSTAGES>(k_tiles, load_stage, consume_stage);
}
