// gemm_fp8: C[M, N] = (A[M, K] . B[N, K]^T) * scale_a[0] * scale_b[0] with FP8 inputs, fp32
// accumulation and a float16 / bfloat16 output (tensor-wise scales, as torch._scaled_mm).
//
// Both operands are K-major ("TN"): A row-major [M, K], B row-major [N, K], one byte per element,
// E4M3 (FORMAT=e4m3, the OCP "fn" variant: no infinities) or E5M2 (FORMAT=e5m2).
//
// One entry point, implementations chosen by PATH:
//   wgmma  Hopper warpgroup MMA, wgmma.mma_async ... .f32.e4m3.e4m3 (sm_90a only; SASS QGMMA)
//   tma_coop, tma_pingpong
//          the same instruction fed by TMA from a producer warp, persistent warp-specialized
//          consumers sharing each tile (cooperative) or taking turns (ping-pong), sm_90a only
//   mma    mma.sync.m16n8k32.row.col.f32.e4m3.e4m3.f32: native on sm_89 (SASS QMMA); on sm_90 it
//          compiles but is EMULATED (F2FP unpacks to f16 + HMMA), which the workbench's static
//          lint FP8_MMA_EMULATED reports: real FP8 speed on Hopper needs the wgmma path.
//
// PROMOTE (both paths): the tensor cores' FP8 accumulation is reported to keep fewer bits than
// fp32 (DeepSeek-V3 technical report, section 3.3.2: about 14 bits on H800), so with
// PROMOTE=true each k-tile's products are summed in fresh tensor-core accumulators and then added
// into separate fp32 registers by ordinary FADDs, once per BK of K (what cuBLASLt does unless
// fast accumulation is requested). PROMOTE=false accumulates in the tensor core over all of K:
// fewer registers and instructions, larger error for long K.
//
// Signature: gemm_fp8(A, B, C, scale_a, scale_b, workspace, M, N, K, tmap_a, tmap_b, tmap_c)
// tmap_a, tmap_b: CUtensorMaps of A and B by value, read by the TMA paths only (zeros elsewhere);
// tmap_c: a CUtensorMap of C, read by the TMA paths with EPILOGUE=tma only (zeros elsewhere).
// workspace: a zeroed int32 scratch buffer, read by the TMA paths with SPLIT_K > 1 or
// SCHED=streamk (partial tiles and arrival counters, gemm_tma_ws.cuh), which leave it zeroed.
// Alignment: K % 16 == 0 (16-byte cp.async of every row); M and N arbitrary.

// gemm_common.cuh checks EPI/OUT for the int8 epilogues; FP8 output is a scaled float, i.e. the
// dequantising ("w8a8") kind: OUT must be a float type. (Its check reads OUT_int32 in a
// static_assert, where an undefined macro is an error rather than 0.)
#define EPI_w8a8 1
#ifndef OUT_int32
#define OUT_int32 0
#endif
#include "gemm_common.cuh"

#if FORMAT_e4m3
#define FP8_PTX_TYPES ".e4m3.e4m3"
#elif FORMAT_e5m2
#define FP8_PTX_TYPES ".e5m2.e5m2"
#else
#error "FORMAT must be e4m3 or e5m2"
#endif

// C[m, n] and C[m, n + 1] = acc * scale for an even n (the FP8 counterpart of gemm_common.cuh's
// store_out_pair): one 2-element vector store when both columns exist and the pair is aligned
// (N even), else element by element. Callers guard m < M; the column guard is here.
__device__ __forceinline__ void store_scaled_pair(OutT* __restrict__ C, int N, int m, int n,
                                                  float acc0, float acc1, float scale) {
  OutT* row = C + static_cast<i64>(m) * N;
  if (N % 2 == 0 && n + 1 < N) {
    OutPair pair;
    pair.x = to_out(acc0 * scale);
    pair.y = to_out(acc1 * scale);
    *reinterpret_cast<OutPair*>(row + n) = pair;
  } else {
    if (n < N) row[n] = to_out(acc0 * scale);
    if (n + 1 < N) row[n + 1] = to_out(acc1 * scale);
  }
}

#include "tma_sm90.cuh"  // TmaDescriptor: every path's signature takes the tensor maps

#if PATH_wgmma
#include "gemm_fp8_wgmma.cuh"
#elif PATH_tma_coop || PATH_tma_pingpong
#include "gemm_fp8_tma_ws.cuh"
#elif PATH_mma
#include "gemm_fp8_mma.cuh"
#else
#error "PATH must be wgmma, tma_coop, tma_pingpong or mma"
#endif
#if EPILOGUE_tma && !(PATH_tma_coop || PATH_tma_pingpong)
#error "EPILOGUE=tma: only the TMA paths (tma_coop, tma_pingpong) stage their tile for a TMA store"
#endif
#if ((defined(CLUSTER_M) && CLUSTER_M != 1) || (defined(CLUSTER_N) && CLUSTER_N != 1)) && \
    !(PATH_tma_coop || PATH_tma_pingpong)
#error "CLUSTER_M, CLUSTER_N: only the TMA paths (tma_coop, tma_pingpong) run in thread-block clusters"
#endif
