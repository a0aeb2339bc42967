// gemm_int8_tma_ws.cuh: the warp-specialized Hopper paths of gemm_int8 (sm_90a):
// PATH=tma_coop (cooperative schedule) and PATH=tma_pingpong (ping-pong schedule).
//
// C[M, N] = A[M, K] . B[N, K]^T, int8 x int8 -> int32 (EPI=raw) or dequantised (EPI=w8a8), with
// wgmma.mma_async.m64nBNk32.s32.s8.s8 fed by TMA from a producer warp, persistent CTAs and a
// cooperative or ping-pong schedule of two consumer warpgroups (gemm_tma_ws.cuh says how).
//
// Knobs (macros): PATH (tma_coop | tma_pingpong: the schedule), BM, BN, BK, STAGES, SWIZZLE,
// GROUP_M, SPLIT_K; EPI / OUT as in gemm_common.cuh.
// Launch: grid = min(tiles * SPLIT_K, SMs) CTAs of 384 threads; dynamic shared memory
//         STAGES * (BM + BN) * BK + 1024 (alignment slack) + 16 * STAGES (mbarriers) bytes.
// Arguments: tmap_a, tmap_b are tensor maps of A [M, K] and B [N, K] (int8) with boxes of
// [BM, SWIZZLE] and [BN, SWIZZLE] bytes and the SWIZZLE-byte swizzle (the space file's
// {tensor_map: ...} entries). Requires K % 16 == 0 (16-byte global strides); M, N, K need not
// be multiples of the tile: the TMA boxes are zero-filled past the edges, stores are guarded.
// SPLIT_K > 1: a work unit is one K slice of a tile (gemm_tma_ws.cuh, WsWork); the slices add
// their int32 partial sums into the zeroed workspace (M*N sums + one counter per tile, exact in
// any order) and the last to arrive writes C through the epilogue, leaving zeros behind.

#include "gemm_tma_ws.cuh"

#if PATH_tma_coop
constexpr bool WS_COOPERATIVE = true;
#elif PATH_tma_pingpong
constexpr bool WS_COOPERATIVE = false;
#else
#error "gemm_int8_tma_ws.cuh serves PATH=tma_coop and PATH=tma_pingpong"
#endif

// Rows of the block tile one consumer warpgroup multiplies, in m64 wgmma blocks.
constexpr int WG_ROWS = WS_COOPERATIVE ? BM / 2 : BM;
constexpr int WG_MBLOCKS = WG_ROWS / 64;

// Preconditions (the space file states the same relations as constraints)
static_assert(WS_COOPERATIVE ? (BM == 128 || BM == 256) : (BM == 64 || BM == 128),
              "BM: cooperative 128 or 256 (two warpgroups of 64 or 128 rows), ping-pong 64 or 128");
static_assert((BN % 8 == 0 && BN <= 32) || (BN % 16 == 0 && BN <= 256),
              "BN: a legal N of wgmma s8 (8, 16, 24, 32, then 48..256 step 16)");
static_assert(SWIZZLE == 128, "SWIZZLE: TMA boxes of 128 bytes along K, 128-byte swizzle");
static_assert(BK % SWIZZLE == 0, "BK: whole swizzle atoms (one TMA box each per operand)");
static_assert(STAGES >= 3, "STAGES: a stage is released one k-tile late (wgmma_wait<1>): with 2 "
                            "no load runs ahead of the multiplication");
static_assert(WG_ROWS * BN / 128 + (SPLIT_K == 1 ? 40 : 88 + BN / 8) <= WS_CONSUMER_REGS,
              "BM, BN: the accumulators plus ~40 registers (~88 + BN / 8 with split-K) fit a "
              "consumer's setmaxnreg share");
static_assert(GROUP_M >= 1, "GROUP_M: at least one tile row per group");
static_assert(SPLIT_K >= 1, "SPLIT_K: K slices per output tile");

using Pipe = WsPipeline<BM, BN, BK, STAGES>;

extern "C" __global__ void __launch_bounds__(WS_THREADS, 1)
gemm_int8(const i8* __restrict__ A, const i8* __restrict__ B, OutT* __restrict__ C,
          const float* __restrict__ row_scale, const float* __restrict__ col_scale,
          i32* __restrict__ workspace, int M, int N, int K,
          const __grid_constant__ TmaDescriptor tmap_a,
          const __grid_constant__ TmaDescriptor tmap_b) {
  (void)A, (void)B;  // the operands are read through their tensor maps
  const Pipe pipe{aligned_smem_base()};
  const int warpgroup = threadIdx.x / 128;
  const WsWork work(M, N, K, BM, BN, BK, SPLIT_K);

  if (threadIdx.x == 0) pipe.init(WS_COOPERATIVE ? 8 : 4);  // consumer warps per stage
  __syncthreads();  // the barriers are initialised before anyone waits on them

  // ---- producer warpgroup: one thread issues every TMA load ---------------------------------
  if (warpgroup == 0) {
    warpgroup_registers_release<WS_PRODUCER_REGS>();
    if (threadIdx.x == 0) ws_produce<BM, BN, BK, STAGES, SWIZZLE>(pipe, &tmap_a, &tmap_b, work);
    return;
  }

  // ---- consumer warpgroups ------------------------------------------------------------------
  warpgroup_registers_claim<WS_CONSUMER_REGS>();
  const int consumer = warpgroup - 1;  // 0 or 1
  const int warp = (threadIdx.x % 128) / 32;  // rows 16 warp .. of each m64 block
  const int lane = threadIdx.x % 32;
  const int row0 = WS_COOPERATIVE ? consumer * WG_ROWS : 0;  // this warpgroup's rows in the tile

  i32 acc[WG_MBLOCKS][BN / 2];  // WG_ROWS x BN int32, BN / 2 per thread per m64 block
  auto multiply = [&](u32 a_stage, u32 b_stage) {
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) fence_operands(acc[mb]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 32; ++kk) {
      const u64 db = kslice_desc<BN, SWIZZLE>(b_stage, kk);  // B: BN rows x 32 bytes
#pragma unroll
      for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
        const u32 rows = a_stage + u32(row0 + 64 * mb) * SWIZZLE;  // 64 rows of the A atoms
        wgmma_s8<true>(acc[mb], kslice_desc<BM, SWIZZLE>(rows, kk), db);
      }
    }
    wgmma_commit();
  };

  auto reset = [&] {
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) acc[mb][j] = 0;
    }
  };
  // ---- epilogue: registers -> C, two adjacent columns at a time -----------------------------
  // With split-K every slice adds its partial sums into the workspace; the slice that arrives
  // last takes the totals (leaving zeros) and writes C through the epilogue.
  auto store = [&](const WsUnit& unit) {
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) fence_operands(acc[mb]);
    const int m_base = unit.tile.m * BM + row0;
    const int n_base = unit.tile.n * BN;
    if (SPLIT_K > 1) {
#pragma unroll
      for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) {
          const int m = m_base + 64 * mb + wgmma_acc_row(warp, lane, j);
          const int n = n_base + wgmma_acc_col(lane, j);
          if (m < M && n < N) splitk_add(workspace, N, m, n, acc[mb][j]);
        }
      }
      const bool leader = threadIdx.x % 128 == 0 && (!WS_COOPERATIVE || consumer == 0);
      const bool last =
          WS_COOPERATIVE || consumer == 0
              ? ws_splitk_arrive<3>(workspace, M, N, unit.index, SPLIT_K,
                                    WS_COOPERATIVE ? 256 : 128, leader)
              : ws_splitk_arrive<4>(workspace, M, N, unit.index, SPLIT_K, 128, leader);
      if (!last) return;
#pragma unroll
      for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
#pragma unroll
        for (int j = 0; j < BN / 2; ++j) {
          const int m = m_base + 64 * mb + wgmma_acc_row(warp, lane, j);
          const int n = n_base + wgmma_acc_col(lane, j);
          if (m < M && n < N) acc[mb][j] = splitk_take(workspace, N, m, n);
        }
      }
    }
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
#pragma unroll
      for (int j = 0; j < BN / 2; j += 2) {  // j, j + 1: columns col, col + 1 of one row
        const int m = m_base + 64 * mb + wgmma_acc_row(warp, lane, j);
        const int n = n_base + wgmma_acc_col(lane, j);
        if (m < M) store_out_pair(C, N, m, n, acc[mb][j], acc[mb][j + 1], row_scale, col_scale);
      }
    }
  };
  ws_consume_units<WS_COOPERATIVE>(pipe, work, consumer, reset, multiply, store);
}
