// gemm_int8: C[M, N] = A[M, K] . B[N, K]^T with int8 inputs and int32 accumulation.
//
// Both operands are K-major ("TN"): A is row-major [M, K], B is row-major [N, K] (the layout of
// a linear layer's weight). Output: raw int32 (EPI=raw), or W8A8 dequantisation with per-token
// row scales and per-channel column scales to fp16/bf16/fp32 (EPI=w8a8).
//
// One entry point, four implementations chosen by PATH:
//   mma     tensor cores through mma.sync.m16n8k32.s8 (sm_80+), cp.async multistage pipeline
//   wgmma   Hopper warpgroup MMA (wgmma.mma_async s8, sm_90a only), cp.async multistage pipeline
//   tma_coop, tma_pingpong
//           Hopper warpgroup MMA fed by TMA from a producer warp, persistent warp-specialized
//           consumers sharing each tile (cooperative) or taking turns (ping-pong), sm_90a only
//   dp4a    CUDA cores through __dp4a (any arch), for comparison and pre-tensor-core GPUs
//
// Signature (the same for every path):
//   gemm_int8(A, B, C, row_scale, col_scale, workspace, M, N, K, tmap_a, tmap_b, tmap_c)
// tmap_a, tmap_b: CUtensorMaps of A and B by value (const __grid_constant__, 128 bytes), read
// by the TMA paths only; tmap_c, a CUtensorMap of C, read by the TMA paths with EPILOGUE=tma
// only (their staged epilogue, gemm_ws_epilogue.cuh); the others receive zeros there (the space
// file's `when`).
// workspace is a zeroed int32 scratch buffer for split-K, which the kernel leaves zeroed again:
// mma and dp4a with SPLIT_K > 1 use M*N partial sums and one counter per output tile (see
// gemm_common.cuh); the TMA paths with SPLIT_K > 1 or SCHED=streamk use workspace_slots()
// partial tiles of BM x BN and one counter per tile (gemm_tma_ws.cuh); the others ignore it.
// Alignment: A, B rows start on 16-byte boundaries, i.e. K % 16 == 0.
#include "gemm_common.cuh"
#include "tma_sm90.cuh"  // TmaDescriptor: every path's signature takes the tensor maps

#if PATH_mma
#include "gemm_int8_mma.cuh"
#elif PATH_wgmma
#include "gemm_int8_wgmma.cuh"
#elif PATH_tma_coop || PATH_tma_pingpong
#include "gemm_int8_tma_ws.cuh"
#elif PATH_dp4a
#include "gemm_int8_dp4a.cuh"
#else
#error "PATH must be mma, wgmma, tma_coop, tma_pingpong or dp4a"
#endif
#if EPILOGUE_tma && !(PATH_tma_coop || PATH_tma_pingpong)
#error "EPILOGUE=tma: only the TMA paths (tma_coop, tma_pingpong) stage their tile for a TMA store"
#endif
#if ((defined(CLUSTER_M) && CLUSTER_M != 1) || (defined(CLUSTER_N) && CLUSTER_N != 1)) && \
    !(PATH_tma_coop || PATH_tma_pingpong)
#error "CLUSTER_M, CLUSTER_N: only the TMA paths (tma_coop, tma_pingpong) run in thread-block clusters"
#endif
