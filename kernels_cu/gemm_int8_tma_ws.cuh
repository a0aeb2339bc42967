// gemm_int8_tma_ws.cuh: the warp-specialized Hopper paths of gemm_int8 (sm_90a):
// PATH=tma_coop (cooperative schedule) and PATH=tma_pingpong (ping-pong schedule).
//
// C[M, N] = A[M, K] . B[N, K]^T, int8 x int8 -> int32 (EPI=raw) or dequantised (EPI=w8a8), with
// wgmma.mma_async.m64nBNk32.s32.s8.s8 fed by TMA from a producer warp, persistent CTAs and a
// cooperative or ping-pong schedule of two consumer warpgroups (gemm_tma_ws.cuh says how).
//
// Knobs (macros): PATH (tma_coop | tma_pingpong: the schedule), BM, BN, BK, STAGES, SWIZZLE,
// GROUP_M, SPLIT_K, SCHED (static | streamk), RASTER (m | n), EPILOGUE (direct | tma:
// gemm_ws_epilogue.cuh), CLUSTER_M x CLUSTER_N (1x1, 2x1, 1x2: thread-block clusters that
// multicast the shared operand, gemm_tma_ws.cuh); EPI / OUT as in gemm_common.cuh.
// Launch: grid = min(units, SMs) CTAs of 384 threads (units: tiles * SPLIT_K, or with
//         SCHED=streamk tiles * k-tiles); with a cluster of C = CLUSTER_M * CLUSTER_N CTAs,
//         C * min(cluster tiles, SMs / C) CTAs in clusters of (C, 1, 1); dynamic shared memory
//         STAGES * (BM + BN) * BK + 1024 (alignment slack) + 16 * STAGES (mbarriers) bytes,
//         plus 2 * WG_ROWS * BN * sizeof(OutT) (a staging tile per consumer) with EPILOGUE=tma.
// Arguments: tmap_a, tmap_b are tensor maps of A [M, K] and B [N, K] (int8) with boxes of
// [BM / CLUSTER_N, SWIZZLE] and [BN / CLUSTER_M, SWIZZLE] bytes (a CTA's part of a shared
// operand) and the SWIZZLE-byte swizzle (the space file's
// {tensor_map: ...} entries); tmap_c, read with EPILOGUE=tma only, a tensor map of C [M, N]
// with boxes of [WG_ROWS, SPAN / sizeof(OutT)] and the SPAN-byte swizzle (WsStaging). Requires
// K % 16 == 0 (16-byte global strides), and N * sizeof(OutT) % 16 == 0 with EPILOGUE=tma; M, N,
// K need not be multiples of the tile: the TMA boxes are zero-filled past the edges, direct
// stores are guarded and TMA stores clipped.
// SPLIT_K > 1 or SCHED=streamk: a work unit is part of the K range of a tile (gemm_schedule.cuh);
// the units of a tile meet in the workspace (zeroed before the first launch, left zeroed): each
// one but the tile's finisher stores its int32 partial sums in a slot of its own and counts its
// arrival; the finisher waits for them, adds them in a fixed order and writes C through the
// epilogue (gemm_tma_ws.cuh, ws_fixup). The workspace holds workspace_slots() partial tiles of
// BM x BN int32 and one counter per tile.

#include "gemm_ws_epilogue.cuh"

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
static_assert(WG_ROWS * BN / 128 + 40 <= WS_CONSUMER_REGS,
              "BM, BN: the accumulators plus ~40 registers fit a consumer's setmaxnreg share");
static_assert(GROUP_M >= 1, "GROUP_M: at least one tile row per group");
static_assert(SPLIT_K >= 1, "SPLIT_K: K slices per output tile");

// Shared memory: the consumers' staging tiles (EPILOGUE=tma), then the pipeline (gemm_tma_ws.cuh)
#if EPILOGUE_tma
constexpr u32 STAGING_BYTES = WsStaging<WG_ROWS>::BYTES;  // per consumer: WG_ROWS x BN outputs
#else
constexpr u32 STAGING_BYTES = 0;
#endif
static_assert(STAGES * (BM + BN) * BK + 16 * STAGES + 2 * STAGING_BYTES + 1024 <=
                  ARCH_MAX_SMEM_PER_BLOCK,
              "STAGES, BM, BN, BK, EPILOGUE: the stages and staging tiles fit the shared memory");

using Pipe = WsPipeline<BM, BN, BK, STAGES>;

extern "C" __global__ void __launch_bounds__(WS_THREADS, 1)
gemm_int8(const i8* __restrict__ A, const i8* __restrict__ B, OutT* __restrict__ C,
          const float* __restrict__ row_scale, const float* __restrict__ col_scale,
          i32* __restrict__ workspace, int M, int N, int K,
          const __grid_constant__ TmaDescriptor tmap_a,
          const __grid_constant__ TmaDescriptor tmap_b,
          const __grid_constant__ TmaDescriptor tmap_c) {
  (void)A, (void)B;  // the operands are read through their tensor maps
  const Pipe pipe{aligned_smem_base() + 2 * STAGING_BYTES};
  const int warpgroup = threadIdx.x / 128;

  ws_start(pipe, WS_COOPERATIVE ? 8 : 4);  // consumer warps per stage (gemm_tma_ws.cuh)

  // ---- producer warpgroup: one thread issues every TMA load ---------------------------------
  if (warpgroup == 0) {
    warpgroup_registers_release<WS_PRODUCER_REGS>();
    if (threadIdx.x == 0) {
      ws_produce<BM, BN, BK, STAGES, SWIZZLE>(pipe, &tmap_a, &tmap_b,
                                               ws_schedule(M, N, K, BM, BN, BK));
    }
    return;
  }

  // ---- consumer warpgroups ------------------------------------------------------------------
  warpgroup_registers_claim<WS_CONSUMER_REGS>();
  const auto schedule = [&] { return ws_schedule_again(M, N, K, BM, BN, BK); };
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
  // Units that share a tile (SPLIT_K > 1, SCHED=streamk) meet in the workspace first: a peer
  // publishes its partial sums and is done; the finisher adds them to its own and writes C
  // through the epilogue (gemm_ws_epilogue.cuh: direct stores, or staged in shared memory and
  // stored with TMA).
#if EPILOGUE_tma
  const WsStaging<WG_ROWS> staging{aligned_smem_base() + u32(consumer) * STAGING_BYTES};
  if (threadIdx.x % 128 == 0) tma_prefetch_descriptor(&tmap_c);
#endif
  auto store = [&](const GemmSchedule& work, const WsUnit& unit) {
    TileCoord tile;
    if (!ws_unit_tile<WS_COOPERATIVE, BM, BN>(work, unit, workspace, consumer, M, N, acc, tile))
      return;
    const int m_base = tile.m * BM + row0;
    const int n_base = tile.n * BN;
#if EPI_w8a8
    // this thread's scales, loaded once per tile: its 2 rows per m64 block here, its 2 columns
    // per 8-column group in the epilogue's cols (0 past the edges)
    float row_scales[WG_MBLOCKS][2];
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m_base + 64 * mb + wgmma_acc_row(warp, lane, 2 * h);
        row_scales[mb][h] = m < M ? row_scale[m] : 0.0f;
      }
    }
    auto cols = [&](int n) {
      return make_float2(n < N ? col_scale[n] : 0.0f, n + 1 < N ? col_scale[n + 1] : 0.0f);
    };
    auto pair = [&](int mb, int h, int g, float2 c) {  // fp32 in the reference's order
      const float r = row_scales[mb][h];
      return to_out_pair(static_cast<float>(acc[mb][4 * g + 2 * h]) * r * c.x,
                         static_cast<float>(acc[mb][4 * g + 2 * h + 1]) * r * c.y);
    };
#else
    auto cols = [](int) { return 0; };
    auto pair = [&](int mb, int h, int g, int) {
      return OutPair{acc[mb][4 * g + 2 * h], acc[mb][4 * g + 2 * h + 1]};
    };
#endif
#if EPILOGUE_tma
    ws_store_tma<WG_MBLOCKS>(staging, &tmap_c, m_base, n_base, consumer, warp, lane, cols, pair);
#else
    ws_store_direct<WG_MBLOCKS>(C, M, N, m_base, n_base, warp, lane, cols, pair);
#endif
  };
  ws_consume_units<WS_COOPERATIVE>(pipe, schedule, consumer, reset, multiply, store);
#if EPILOGUE_tma
  if (threadIdx.x % 128 == 0) tma_store_wait_all();  // this warpgroup's last stores are done
#endif
}
