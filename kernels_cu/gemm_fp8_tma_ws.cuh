// gemm_fp8_tma_ws.cuh: the warp-specialized Hopper paths of gemm_fp8 (sm_90a): PATH=tma_coop
// (cooperative schedule) and PATH=tma_pingpong (ping-pong schedule).
//
// C[M, N] = (A[M, K] . B[N, K]^T) * scale_a * scale_b, fp8 x fp8 -> fp32 with
// wgmma.mma_async.m64nBNk32.f32.<fp8>.<fp8>, fed by TMA from a producer warp through the pipeline
// of gemm_tma_ws.cuh (the one the int8 paths use; only the instruction, the fp32 accumulators
// and the epilogue differ). PROMOTE: each stage's products are summed in fresh tensor-core
// accumulators (scale-d = 0 on the first slice), then added into fp32 registers.
//
// Knobs (macros): PATH (tma_coop | tma_pingpong), BM, BN, BK, STAGES, SWIZZLE, GROUP_M, PROMOTE,
// SPLIT_K, SCHED (static | streamk), RASTER (m | n), EPILOGUE (direct | tma:
// gemm_ws_epilogue.cuh), CLUSTER_M x CLUSTER_N (1x1, 2x1, 1x2: thread-block clusters that
// multicast the shared operand, gemm_tma_ws.cuh); FORMAT, OUT.
// Launch: grid = min(units, SMs) CTAs of 384 threads (units: tiles * SPLIT_K, or with
//         SCHED=streamk tiles * k-tiles); with a cluster of C = CLUSTER_M * CLUSTER_N CTAs,
//         C * min(cluster tiles, SMs / C) CTAs in clusters of (C, 1, 1); dynamic shared memory
//         STAGES * (BM + BN) * BK + 1024 (alignment slack) + 16 * STAGES (mbarriers) bytes,
//         plus 2 * WG_ROWS * BN * 2 (a 16-bit staging tile per consumer) with EPILOGUE=tma.
// Arguments: tmap_a, tmap_b are tensor maps of A [M, K] and B [N, K] (one byte per element)
// with boxes of [BM / CLUSTER_N, SWIZZLE] and [BN / CLUSTER_M, SWIZZLE] (a CTA's part of a
// shared operand) and the SWIZZLE-byte swizzle; tmap_c (read with
// EPILOGUE=tma only) a tensor map of C [M, N] with boxes of [WG_ROWS, 64] and the 128-byte
// swizzle. K % 16 == 0, and N % 8 == 0 with EPILOGUE=tma (16-byte rows of C).
// SPLIT_K > 1 or SCHED=streamk: the units of a tile (parts of its K range, gemm_schedule.cuh)
// meet in the workspace (zeroed before the first launch, left zeroed): workspace_slots() fp32
// partial tiles of BM x BN and one arrival counter per tile; the tile's finisher adds its peers'
// partials to its own fp32 sums in a fixed order (gemm_tma_ws.cuh, ws_fixup), then scales.

#include "gemm_ws_epilogue.cuh"

#if PATH_tma_coop
constexpr bool WS_COOPERATIVE = true;
#elif PATH_tma_pingpong
constexpr bool WS_COOPERATIVE = false;
#else
#error "gemm_fp8_tma_ws.cuh serves PATH=tma_coop and PATH=tma_pingpong"
#endif

// Rows of the block tile one consumer warpgroup multiplies, in m64 wgmma blocks.
constexpr int WG_ROWS = WS_COOPERATIVE ? BM / 2 : BM;
constexpr int WG_MBLOCKS = WG_ROWS / 64;
constexpr int ACC_REGS = WG_ROWS * BN / 128 * (PROMOTE ? 2 : 1);  // fp32 per consumer thread

// Preconditions (the space file states the same relations as constraints)
static_assert(WS_COOPERATIVE ? (BM == 128 || BM == 256) : (BM == 64 || BM == 128),
              "BM: cooperative 128 or 256 (two warpgroups of 64 or 128 rows), ping-pong 64 or 128");
static_assert(BN % 8 == 0 && BN >= 8 && BN <= 256, "BN: a legal N of wgmma fp8 (8, 16, .., 256)");
static_assert(SWIZZLE == 128, "SWIZZLE: 128-byte boxes (a 32- or 64-byte swizzle issues 4x or 2x "
                              "the TMA loads per stage)");
static_assert(BK % SWIZZLE == 0, "BK: whole swizzle atoms (one TMA box each per operand)");
static_assert(STAGES >= 3, "STAGES: a stage is released one k-tile late (wgmma_wait<1>): with 2 "
                            "no load runs ahead of the multiplication");
static_assert(ACC_REGS + 40 <= WS_CONSUMER_REGS,
              "BM, BN, PROMOTE: the accumulators plus ~40 registers fit a consumer's share");
static_assert(GROUP_M >= 1, "GROUP_M: at least one tile row per group");

// Shared memory: the consumers' staging tiles (EPILOGUE=tma), then the pipeline (gemm_tma_ws.cuh)
#if EPILOGUE_tma
constexpr u32 STAGING_BYTES = WsStaging<WG_ROWS>::BYTES;  // per consumer: WG_ROWS x BN outputs
#else
constexpr u32 STAGING_BYTES = 0;
#endif
static_assert(STAGES * (BM + BN) * BK + 16 * STAGES + 2 * STAGING_BYTES + 1024 <=
                  ARCH_MAX_SMEM_PER_BLOCK,
              "STAGES, BM, BN, BK, EPILOGUE: the stages and staging tiles fit the shared memory");

// D[64 x BN] (+)= A[64 x 32] . B[BN x 32]^T, fp8 x fp8 -> fp32 (wgmma_sm90.cuh); "1, 1" are
// imm-scale-a and imm-scale-b (no negation); scale-d 0 overwrites D.
template <bool ACCUMULATE>
__device__ __forceinline__ void wgmma_fp8(float (&d)[BN / 2], u64 desc_a, u64 desc_b) {
  if constexpr (ACCUMULATE) {
    WGMMA_SS(BN, ".f32" FP8_PTX_TYPES, "1", ", 1, 1", "+f", d, desc_a, desc_b);
  } else {
    WGMMA_SS(BN, ".f32" FP8_PTX_TYPES, "0", ", 1, 1", "+f", d, desc_a, desc_b);
  }
}

using Pipe = WsPipeline<BM, BN, BK, STAGES>;

extern "C" __global__ void __launch_bounds__(WS_THREADS, 1)
gemm_fp8(const u8* __restrict__ A, const u8* __restrict__ B, OutT* __restrict__ C,
         const float* __restrict__ scale_a, const float* __restrict__ scale_b,
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

  float acc[WG_MBLOCKS][BN / 2];  // WG_ROWS x BN fp32, BN / 2 per thread per m64 block
#if PROMOTE
  float part[WG_MBLOCKS][BN / 2];  // one stage's sums, written by the tensor cores
#endif
  auto issue = [&](float (&d)[WG_MBLOCKS][BN / 2], u32 a_stage, u32 b_stage, bool overwrite) {
#pragma unroll
    for (int kk = 0; kk < BK / 32; ++kk) {
      const u64 db = kslice_desc<BN, SWIZZLE>(b_stage, kk);  // B: BN rows x 32 bytes
#pragma unroll
      for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
        const u32 rows = a_stage + u32(row0 + 64 * mb) * SWIZZLE;  // 64 rows of the A atoms
        const u64 da = kslice_desc<BM, SWIZZLE>(rows, kk);
        if (overwrite && kk == 0) {
          wgmma_fp8<false>(d[mb], da, db);
        } else {
          wgmma_fp8<true>(d[mb], da, db);
        }
      }
    }
  };
  auto multiply = [&](u32 a_stage, u32 b_stage) {
#if PROMOTE
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) fence_operands(part[mb]);
    wgmma_fence();
    issue(part, a_stage, b_stage, true);  // part = this stage's sum
    wgmma_commit();
    wgmma_wait<0>();  // the partial sums are needed now
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
      fence_operands(part[mb]);
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) acc[mb][j] += part[mb][j];  // promotion: fp32 FADD
    }
#else
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) fence_operands(acc[mb]);
    wgmma_fence();
    issue(acc, a_stage, b_stage, false);
    wgmma_commit();
#endif
  };
  auto reset = [&] {
#pragma unroll
    for (int mb = 0; mb < WG_MBLOCKS; ++mb) {
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) acc[mb][j] = 0.0f;
    }
  };
  // ---- epilogue: C = acc * scale_a * scale_b, two adjacent columns at a time -----------------
  // Units that share a tile (SPLIT_K > 1, SCHED=streamk) meet in the workspace first (fp32
  // partial sums): a peer publishes them and is done; the finisher adds them to its own and
  // writes C through the epilogue (gemm_ws_epilogue.cuh: direct stores, or staged in shared
  // memory and stored with TMA).
  const float scale = scale_a[0] * scale_b[0];
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
    auto cols = [](int) { return 0; };  // tensor-wise scales: nothing per column
    auto pair = [&](int mb, int h, int g, int) {
      return to_out_pair(acc[mb][4 * g + 2 * h] * scale, acc[mb][4 * g + 2 * h + 1] * scale);
    };
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
