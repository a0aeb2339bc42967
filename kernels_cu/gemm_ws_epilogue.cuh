// gemm_ws_epilogue.cuh: what a consumer warpgroup of the warp-specialized Hopper GEMMs
// (gemm_tma_ws.cuh; gemm_int8_tma_ws.cuh and gemm_fp8_tma_ws.cuh) does with a finished
// accumulator tile of WG_ROWS = 64 * MBLOCKS rows x BN columns (sm_90a).
//
// The fragment (wgmma_sm90.cuh, wgmma_acc_row / wgmma_acc_col): in m64 block mb, lane l of warp
// w holds rows 16 w + l / 4 + 8 h (h = 0, 1) and, in every 8-column group g, the two adjacent
// columns 8 g + 2 (l % 4) and + 1: accumulators 4 g + 2 h and 4 g + 2 h + 1. So a thread's
// fragment covers 2 * MBLOCKS rows and BN / 4 columns, each output pair once.
//
// The epilogue visits the fragment column group by column group and asks the kernel for two
// things (lambdas, inlined):
//   cols(n)              once per column group: what the group's columns n, n + 1 need (the
//                        W8A8 column scales, loaded here once per tile; nothing for the others)
//   pair(mb, h, g, c)    the two outputs of row half h of block mb in group g, converted to
//                        OutT (OutPair) with c = cols(n)
// so a W8A8 thread loads its 2 * MBLOCKS row scales and BN / 4 column scales once per tile (the
// kernel loads the row scales before the tile's epilogue), not two scales per output.
//
// Each thread stores its pairs to C: one 2-element vector store (4 bytes for 16-bit outputs)
// per pair, guarded at the M and N edges (ws_store_direct).
#pragma once
#include "gemm_tma_ws.cuh"

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
