// gemm_ws_epilogue.cuh: what a consumer warpgroup of the warp-specialized Hopper GEMMs
// (gemm_tma_ws.cuh; gemm_int8_tma_ws.cuh and gemm_fp8_tma_ws.cuh) does with a finished
// accumulator tile of WG_ROWS = 64 * MBLOCKS rows x BN columns (sm_90a).
//
// The fragment (wgmma_sm90.cuh, wgmma_acc_row / wgmma_acc_col): in m64 block mb, lane l of warp
// w holds rows 16 w + l / 4 + 8 h (h = 0, 1) and, in every 8-column group g, the two adjacent
// columns 8 g + 2 (l % 4) and + 1: accumulators 4 g + 2 h and 4 g + 2 h + 1. So a thread's
// fragment covers 2 * MBLOCKS rows and BN / 4 columns, each output pair once.
//
// Every epilogue below visits the fragment column group by column group and asks the kernel
// for two things (lambdas, inlined):
//   cols(n)              once per column group: what the group's columns n, n + 1 need (the
//                        W8A8 column scales, loaded here once per tile; nothing for the others)
//   pair(mb, h, g, c)    the two outputs of row half h of block mb in group g, converted to
//                        OutT (OutPair) with c = cols(n)
// so a W8A8 thread loads its 2 * MBLOCKS row scales and BN / 4 column scales once per tile (the
// kernel loads the row scales before the tile's epilogue), not two scales per output.
//
// EPILOGUE (a knob of the TMA paths; the space file's `EPILOGUE` parameter):
//   direct   each thread stores its pairs to C: one 2-element vector store (4 bytes for 16-bit
//            outputs) per pair, guarded at the M and N edges (ws_store_direct).
//   tma      staged: the warpgroup writes its tile into its own staging buffer in shared memory
//            (stmatrix for 16-bit outputs, st.shared.v2 for 32-bit ones), in the layout the TMA
//            boxes of C's tensor map expect; every thread fences (fence.proxy.async), the
//            warpgroup meets at a named barrier, and one thread stores the tile with
//            cp.async.bulk.tensor bulk-group stores and commits them (ws_store_tma). TMA clips
//            the boxes at the tensor's edges, so no output is guarded. The thread waits for
//            its stores to have READ the buffer (cp.async.bulk.wait_group.read 0) only right
//            before the warpgroup writes the buffer again, at its next tile: the store of tile
//            i overlaps the main loop of tile i + 1. Expected to help where the direct stores'
//            half-sector (4-byte) writes and their guards cost, at the price of WG_ROWS * BN *
//            sizeof(OutT) bytes of shared memory per consumer warpgroup (fewer STAGES fit):
//            unmeasured, nothing has run on a GPU yet.
//
// Staging buffer of one warpgroup (WsStaging): its tile as BN * sizeof(OutT) / SPAN column
// atoms, atom a holding columns [a * SPAN / sizeof(OutT), (a + 1) * SPAN / sizeof(OutT)) of all
// WG_ROWS rows, SPAN bytes per row, written in TMA's SPAN-byte swizzle (16-byte chunk c of row r
// at chunk c ^ (r / (128 / SPAN) % (SPAN / 16)), the address bits 4.. XOR bits 7..: CUTLASS's
// Swizzle<log2(SPAN / 16), 4, 3>). SPAN is the widest of 128, 64, 32 bytes that divides a row
// of the tile; one TMA box of [WG_ROWS, SPAN / sizeof(OutT)] stores one atom. An 8x8 stmatrix
// writes 8 consecutive rows of one 16-byte chunk: 8 distinct chunks of 128 bytes after the
// swizzle, so it is free of bank conflicts for each SPAN. The space file's tensor map of C has
// the same box and swizzle (gemm_int8.yaml, gemm_fp8.yaml: ws_c_span).
#pragma once
#include "gemm_tma_ws.cuh"

// (the kernels choose with #if EPILOGUE_tma, so a direct build never instantiates the staging)
#if !EPILOGUE_tma && !EPILOGUE_direct
#error "EPILOGUE must be direct or tma"
#endif
// After the fixup (gemm_tma_ws.cuh, ws_fixup) the finisher of a shared tile holds the tile's full
// sums in registers and stores them like any other tile, staged too: stream-K does. Static
// split-K would run the same code (it compiles without spills) but is kept out until the GPU
// checks cover it (the space files' constraint says the same).
#if EPILOGUE_tma
static_assert(SPLIT_K == 1, "EPILOGUE=tma: not combined with SPLIT_K slices yet");
#endif

// Named barrier of consumer warpgroup w's staged epilogue: 5 + w, over its 128 threads (0 is
// __syncthreads; 1, 2: the ping-pong turns, ws_wait_turn; 3, 4: the fixup of units that share a
// tile, ws_unit_fixup, which a finisher passes before its epilogue).
constexpr int WS_EPILOGUE_BARRIER = 5;
__device__ __forceinline__ void ws_epilogue_sync(int consumer) {
  if (consumer == 0) {
    named_barrier_sync<WS_EPILOGUE_BARRIER>(128);
  } else {
    named_barrier_sync<WS_EPILOGUE_BARRIER + 1>(128);
  }
}

// The bits of two packed 16-bit outputs (__half2, __nv_bfloat162), low half first.
template <class Pair>
__device__ __forceinline__ u32 pair_bits(const Pair& p) {
  static_assert(sizeof(Pair) == 4, "two 16-bit outputs");
  return *reinterpret_cast<const u32*>(&p);
}

// Two 8x8 matrices of 16-bit elements from the warp's registers into shared memory: lanes
// 8 q .. 8 q + 7 (q = 0, 1) give the addresses of the 8 rows (16 bytes each) of matrix q, and
// each lane's register q holds its two elements of row lane / 4, columns 2 (lane % 4), + 1 of
// matrix q (the wgmma accumulator's layout of an 8x8 block). (.x2 rather than .x4: one column
// group's scales and pairs live at a time; with .x4 the 192-accumulator tiles spill 12 bytes.)
__device__ __forceinline__ void stmatrix_x2(u32 addr, u32 m0, u32 m1) {
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n" ::"r"(addr), "r"(m0),
               "r"(m1)
               : "memory");
}

// Two 32-bit outputs (int2, float2) at an 8-byte aligned shared address.
template <class Pair>
__device__ __forceinline__ void st_shared_pair(u32 addr, const Pair& p) {
  static_assert(sizeof(Pair) == 8, "two 32-bit outputs");
  const u32* bits = reinterpret_cast<const u32*>(&p);
  asm volatile("st.shared.v2.b32 [%0], {%1, %2};\n" ::"r"(addr), "r"(bits[0]), "r"(bits[1])
               : "memory");
}

// The staging buffer of one consumer warpgroup: ROWS x BN outputs at `base` (1024-byte aligned).
template <int ROWS>
struct WsStaging {
  static constexpr int ELEMENT = int(sizeof(OutT));
  static constexpr int ROW_BYTES = BN * ELEMENT;
  static constexpr int SPAN = ROW_BYTES % 128 == 0 ? 128 : ROW_BYTES % 64 == 0 ? 64 : 32;
  static constexpr int BOX_COLS = SPAN / ELEMENT;  // the box of C's tensor map: [ROWS, BOX_COLS]
  static constexpr int ATOMS = ROW_BYTES / SPAN;  // boxes per tile
  static constexpr u32 ATOM_BYTES = u32(ROWS) * SPAN;
  static constexpr u32 BYTES = ATOMS * ATOM_BYTES;  // ROWS * BN * sizeof(OutT)
  static_assert(ROW_BYTES % 32 == 0, "BN: a tile row is whole 32-byte swizzle spans");
  static_assert(ROWS <= 256, "a TMA box has at most 256 rows");
  static_assert(BYTES % 1024 == 0, "the next buffer starts on the swizzle pattern's period");

  u32 base;
  // Shared address of output (row, col) of the tile; col is even for 32-bit outputs, a multiple
  // of 8 for stmatrix rows (a pair or a row stays inside one 16-byte chunk).
  __device__ __forceinline__ u32 at(int row, int col) const {
    const u32 byte = u32(col * ELEMENT);
    const u32 logical = u32(row) * SPAN + byte % SPAN;  // in atom byte / SPAN
    return base + byte / SPAN * ATOM_BYTES + (logical ^ (((logical >> 7) & (SPAN / 16 - 1)) << 4));
  }
};

// ---- EPILOGUE=direct -------------------------------------------------------------------------
// This thread's fragment of the tile at rows [m_base, m_base + 64 MBLOCKS), columns [n_base,
// n_base + BN) straight to C, guarded at the edges.
template <int MBLOCKS, class Cols, class Pair>
__device__ __forceinline__ void ws_store_direct(OutT* __restrict__ C, int M, int N, int m_base,
                                                int n_base, int warp, int lane, Cols&& cols,
                                                Pair&& pair) {
#pragma unroll
  for (int g = 0; g < BN / 8; ++g) {
    const int n = n_base + wgmma_acc_col(lane, 4 * g);
    const auto c = cols(n);
#pragma unroll
    for (int mb = 0; mb < MBLOCKS; ++mb) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m_base + 64 * mb + wgmma_acc_row(warp, lane, 2 * h);
        if (m < M) store_pair(C, N, m, n, pair(mb, h, g, c));
      }
    }
  }
}

// ---- EPILOGUE=tma ----------------------------------------------------------------------------
// This thread's fragment into the warpgroup's staging buffer (columns from n_base, for cols).
template <int MBLOCKS, class Cols, class Pair>
__device__ __forceinline__ void ws_stage_fragment(const WsStaging<64 * MBLOCKS>& staging,
                                                  int n_base, int warp, int lane, Cols&& cols,
                                                  Pair&& pair) {
  if constexpr (sizeof(OutT) == 2) {
    // matrices 0, 1 of one stmatrix .x2: rows 0-7 and 8-15 of the warp's 16 rows in group g;
    // lane l < 16 addresses row l % 8 of matrix l / 8 (the others' addresses are not read)
    const int row = 16 * warp + 8 * (lane / 8 % 2) + lane % 8;
#pragma unroll
    for (int g = 0; g < BN / 8; ++g) {
      const auto c = cols(n_base + wgmma_acc_col(lane, 4 * g));
#pragma unroll
      for (int mb = 0; mb < MBLOCKS; ++mb) {
        stmatrix_x2(staging.at(64 * mb + row, 8 * g), pair_bits(pair(mb, 0, g, c)),
                    pair_bits(pair(mb, 1, g, c)));
      }
    }
  } else {
#pragma unroll
    for (int g = 0; g < BN / 8; ++g) {
      const int col = wgmma_acc_col(lane, 4 * g);
      const auto c = cols(n_base + col);
#pragma unroll
      for (int mb = 0; mb < MBLOCKS; ++mb) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          st_shared_pair(staging.at(64 * mb + wgmma_acc_row(warp, lane, 2 * h), col),
                         pair(mb, h, g, c));
        }
      }
    }
  }
}

// Consumer warpgroup `consumer` stores its tile at rows [m_base, ..), columns [n_base, ..) of C
// through the staging buffer and C's tensor map (one thread of the warpgroup issues and owns
// the stores). Called by all 128 threads of the warpgroup, once per tile.
template <int MBLOCKS, class Cols, class Pair>
__device__ __forceinline__ void ws_store_tma(const WsStaging<64 * MBLOCKS>& staging,
                                             const TmaDescriptor* map_c, int m_base, int n_base,
                                             int consumer, int warp, int lane, Cols&& cols,
                                             Pair&& pair) {
  using Staging = WsStaging<64 * MBLOCKS>;
  const bool leader = threadIdx.x % 128 == 0;
  if (leader) tma_store_wait_read<0>();  // the previous tile's stores have read the buffer
  ws_epilogue_sync(consumer);            // ... before any thread of the warpgroup rewrites it
  ws_stage_fragment<MBLOCKS>(staging, n_base, warp, lane, cols, pair);
  tma_fence_proxy_async();     // this thread's shared-memory writes are visible to TMA
  ws_epilogue_sync(consumer);  // ... and every other thread's
  if (leader) {
#pragma unroll
    for (int a = 0; a < Staging::ATOMS; ++a) {
      tma_store_2d(map_c, n_base + a * Staging::BOX_COLS, m_base,
                   staging.base + u32(a) * Staging::ATOM_BYTES);
    }
    tma_store_commit();
  }
}
