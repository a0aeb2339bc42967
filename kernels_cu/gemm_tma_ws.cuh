// gemm_tma_ws.cuh: the warp-specialized, persistent TMA -> wgmma pipeline shared by the int8 and
// FP8 Hopper GEMMs (PATH=tma_coop / tma_pingpong, sm_90a). Both operands are 1-byte, K-major,
// and read 32 bytes of K per wgmma, so everything but the instruction and the accumulator type
// is common.
//
// Roles (384 threads, three warpgroups of 128):
//   warpgroup 0   producer: gives registers back (setmaxnreg.dec to WS_PRODUCER_REGS); one
//                 thread issues the TMA loads of every k-tile of every tile of this CTA into
//                 NSTAGES shared-memory stages, the other 127 threads exit.
//   warpgroups 1, 2   consumers: take registers (setmaxnreg.inc to WS_CONSUMER_REGS), wait for
//                 each stage, multiply it with wgmma, release it, and write their part of C.
//
// Persistent CTAs: the grid is at most one CTA per SM; CTA c walks output tiles c, c + gridDim.x,
// ... (its local tiles 0, 1, 2, ...), each mapped to a tile of C in grouped order (GROUP_M tile
// rows together, tile_of_block in gemm_common.cuh).
//
// Schedules:
//   cooperative   (tma_coop) both consumer warpgroups work on every local tile, each on half of its BM
//                 rows (BM / 2 = 64 or 128 rows: one or two m64 wgmma per 32 bytes of K).
//   pingpong      (tma_pingpong) consumer warpgroup w takes the local tiles i with i % 2 == w, each a whole
//                 BM-row tile (64 or 128 rows); while one multiplies, the other runs its
//                 epilogue. Named barriers hand the tensor cores over in tile order: the
//                 warpgroup of local tile i starts its multiplications after the warpgroup of
//                 tile i - 1 has issued its last ones.
//
// Pipeline (CUTLASS's PipelineTmaAsync, in spirit): stage s has a "full" and an "empty"
// mbarrier. The producer's j-th k-tile (counted over all its tiles) goes to stage j % NSTAGES in
// round r = j / NSTAGES:
//   producer   wait empty[s] for parity (r & 1) ^ 1 (a fresh barrier passes parity 1 at once,
//              so round 0 does not wait), arrive on full[s] announcing the stage's bytes
//              (expect_tx), issue the TMA loads; they complete their bytes on full[s].
//   consumer   wait full[s] for parity r & 1, issue the wgmma of the stage, commit; after
//              wgmma.wait_group(1) the previous k-tile's wgmma have finished reading their
//              stage, and lane 0 of each warp arrives on its empty barrier.
// The expected bytes are always the whole boxes: TMA writes a box entirely, zeros where it
// lies outside the tensor (the M, N and K edges), and counts every byte.
//
// Shared memory (1024-byte aligned base): NSTAGES x [A tile TILE_M x TILE_K | B tile
// TILE_N x TILE_K], each tile TILE_K / SW swizzle atoms of rows x SW bytes (gemm_smem_tiles.cuh's
// layout: one TMA box of rows x SW bytes per atom writes exactly that), then the 2 x NSTAGES
// mbarriers.
#pragma once
#include "gemm_wgmma_mainloop.cuh"
#include "tma_sm90.cuh"

constexpr int WS_THREADS = 384;         // producer warpgroup + two consumer warpgroups
constexpr int WS_PRODUCER_REGS = 40;    // what the TMA-issuing thread needs
constexpr int WS_CONSUMER_REGS = 232;   // accumulators + descriptors + epilogue
constexpr int WS_LAUNCH_REGS = 168;     // 65536 / 384, rounded down to 8: the launch's share
static_assert(WS_PRODUCER_REGS + 2 * WS_CONSUMER_REGS <= 3 * WS_LAUNCH_REGS,
              "setmaxnreg: the warpgroups' registers must fit what the launch allocates");
static_assert(WS_LAUNCH_REGS == 65536 / WS_THREADS / 8 * 8,
              "WS_LAUNCH_REGS: what __launch_bounds__(WS_THREADS, 1) lets ptxas allocate");
static_assert(WS_PRODUCER_REGS % 8 == 0 && WS_CONSUMER_REGS % 8 == 0 && WS_PRODUCER_REGS >= 24 &&
                  WS_CONSUMER_REGS <= 256,
              "setmaxnreg takes a multiple of 8 registers from 24 to 256");
// The balance above holds only if the launch allocates exactly WS_LAUNCH_REGS per thread: with
// fewer, the pool never has the registers the consumers' setmaxnreg.inc waits for, and the
// kernel hangs. ptxas gives 168 because of __launch_bounds__(WS_THREADS, 1) (ptxas 13.5, this
// PTX without .maxntid: 91 registers and no warning). The count is exported for the host: the
// runner reads it from the cubin (workbench.analysis.register_budget) and refuses to launch a
// binary allocated any other count.
extern "C" __device__ const int workbench_setmaxnreg_budget = WS_LAUNCH_REGS;

// Ping-pong turns: named barrier 1 + w is "consumer warpgroup w may multiply". The warpgroup
// that waits (128 threads) and the one that hands over (128) meet there: 256 threads.
__device__ __forceinline__ void ws_wait_turn(int consumer) {
  if (consumer == 0) {
    named_barrier_sync<1>(256);
  } else {
    named_barrier_sync<2>(256);
  }
}
__device__ __forceinline__ void ws_give_turn(int consumer) {
  if (consumer == 0) {
    named_barrier_arrive<1>(256);
  } else {
    named_barrier_arrive<2>(256);
  }
}

// Addresses of the stages and barriers of one CTA's pipeline.
template <int TILE_M, int TILE_N, int TILE_K, int NSTAGES>
struct WsPipeline {
  static constexpr u32 A_BYTES = TILE_M * TILE_K;
  static constexpr u32 B_BYTES = TILE_N * TILE_K;
  static constexpr u32 STAGE_BYTES = A_BYTES + B_BYTES;  // expect_tx of one stage
  static constexpr u32 BARRIER_BYTES = 2 * NSTAGES * 8;
  static_assert(STAGE_BYTES % 1024 == 0, "stages start on the swizzle pattern's period");

  u32 base;  // 1024-byte aligned
  __device__ __forceinline__ u32 a(int s) const { return base + u32(s) * STAGE_BYTES; }
  __device__ __forceinline__ u32 b(int s) const { return a(s) + A_BYTES; }
  __device__ __forceinline__ u32 full(int s) const { return base + NSTAGES * STAGE_BYTES + 8 * s; }
  __device__ __forceinline__ u32 empty(int s) const { return full(NSTAGES) + 8 * s; }

  // One thread: full barriers take the producer's one arrival (plus the bytes), empty ones an
  // arrival from each consumer warp that reads the stage.
  __device__ __forceinline__ void init(u32 empty_arrivals) const {
    for (int s = 0; s < NSTAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), empty_arrivals);
    }
    mbar_fence_init();
  }
};

// One unit of work: K slice `slice` (k-tiles k0 .. k0 + k_count - 1) of output tile `index`
// (in grouped order: `tile`). Without split-K a unit is a whole tile.
struct WsUnit {
  TileCoord tile;
  int index;
  int slice;
  int k0;
  int k_count;
};

// The units this CTA walks: u = blockIdx.x + i * gridDim.x for its local units i, unit u being
// slice u % slices of tile u / slices (a tile's slices go to neighbouring CTAs, which run at
// the same time). Every slice has at least one k-tile (a constraint of the space).
struct WsWork {
  int tiles_m, tiles_n, k_tiles, slices, per_slice, count;
  __device__ __forceinline__ WsWork(int M, int N, int K, int tile_m, int tile_n, int tile_k,
                                    int split) {
    tiles_m = (M + tile_m - 1) / tile_m;
    tiles_n = (N + tile_n - 1) / tile_n;
    k_tiles = (K + tile_k - 1) / tile_k;
    slices = split;
    per_slice = (k_tiles + split - 1) / split;
    const int total = tiles_m * tiles_n * split;
    count = int(blockIdx.x) < total ? (total - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  }
  __device__ __forceinline__ WsUnit operator[](int i) const {
    const int u = int(blockIdx.x) + i * int(gridDim.x);
    const int index = u / slices;
    const int slice = u % slices;
    const int k0 = slice * per_slice;
    return WsUnit{tile_of_block(index, tiles_m, tiles_n, GROUP_M), index, slice, k0,
                  min(per_slice, k_tiles - k0)};
  }
};

// The producer thread: every k-tile of every local unit, in order, into the ring of stages.
// A box is rows x SW bytes at (k, first row): TILE_K / SW boxes per operand per stage.
template <int TILE_M, int TILE_N, int TILE_K, int NSTAGES, int SW>
__device__ __forceinline__ void ws_produce(const WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>& pipe,
                                           const TmaDescriptor* map_a, const TmaDescriptor* map_b,
                                           const WsWork& work) {
  using Pipe = WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>;
  tma_prefetch_descriptor(map_a);
  tma_prefetch_descriptor(map_b);
  int s = 0;       // stage of the next k-tile
  u32 round = 0;   // how many times the ring has wrapped (its parity is the phase)
  for (int i = 0; i < work.count; ++i) {
    const WsUnit unit = work[i];
    const int m0 = unit.tile.m * TILE_M;
    const int n0 = unit.tile.n * TILE_N;
    for (int kt = unit.k0; kt < unit.k0 + unit.k_count; ++kt) {
      mbar_wait(pipe.empty(s), (round & 1) ^ 1);  // the consumers have released stage s
      mbar_arrive_expect_tx(pipe.full(s), Pipe::STAGE_BYTES);
#pragma unroll
      for (int atom = 0; atom < TILE_K / SW; ++atom) {
        const int k = kt * TILE_K + atom * SW;
        tma_load_2d(pipe.a(s) + u32(atom) * (TILE_M * SW), map_a, k, m0, pipe.full(s));
        tma_load_2d(pipe.b(s) + u32(atom) * (TILE_N * SW), map_b, k, n0, pipe.full(s));
      }
      if (++s == NSTAGES) {
        s = 0;
        ++round;
      }
    }
  }
}

// A consumer warpgroup's main loop over the k_tiles k-tiles of one tile, which are the
// producer's k-tiles first .. first + k_tiles - 1. `multiply(a_stage, b_stage)` fences, issues
// one stage's wgmma for this warpgroup's rows and commits them. After the last one is issued,
// `issued()` runs (the ping-pong hand-over); on return every wgmma has completed and every
// stage is released.
template <int TILE_M, int TILE_N, int TILE_K, int NSTAGES, class Multiply, class Issued>
__device__ __forceinline__ void ws_consume(const WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>& pipe,
                                           u32 first, int k_tiles, Multiply&& multiply,
                                           Issued&& issued) {
  const bool signals = threadIdx.x % 32 == 0;  // one arrival per warp
  int s = int(first % NSTAGES);
  u32 round = first / NSTAGES;
  int previous = -1;  // the stage whose wgmma may still run
  for (int kt = 0; kt < k_tiles; ++kt) {
    mbar_wait(pipe.full(s), round & 1);  // the stage's bytes have landed
    multiply(pipe.a(s), pipe.b(s));
    wgmma_wait<1>();  // the previous k-tile's wgmma are done: its stage may be refilled
    if (previous >= 0 && signals) mbar_arrive(pipe.empty(previous));
    previous = s;
    if (++s == NSTAGES) {
      s = 0;
      ++round;
    }
  }
  issued();
  wgmma_wait<0>();
  if (previous >= 0 && signals) mbar_arrive(pipe.empty(previous));
}

// A consumer warpgroup's walk over the local units: all of them (cooperative) or every other
// one from `consumer` (ping-pong, taking turns on the tensor cores in unit order). For each:
// `reset()` the accumulators, run the main loop with `multiply`, then `store(unit)`. `first`
// counts the producer's k-tiles before the unit (the other warpgroup's units included).
template <bool COOPERATIVE, int TILE_M, int TILE_N, int TILE_K, int NSTAGES, class Reset,
          class Multiply, class Store>
__device__ __forceinline__ void ws_consume_units(
    const WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>& pipe, const WsWork& work, int consumer,
    Reset&& reset, Multiply&& multiply, Store&& store) {
  u32 first = 0;
  for (int i = 0; i < work.count; ++i) {
    const WsUnit unit = work[i];
    if (COOPERATIVE || i % 2 == consumer) {
      reset();
      if (!COOPERATIVE && i > 0) ws_wait_turn(consumer);  // unit i - 1's warpgroup has issued
      auto hand_over = [&] {
        if (!COOPERATIVE && i + 1 < work.count) ws_give_turn(1 - consumer);
      };
      ws_consume(pipe, first, unit.k_count, multiply, hand_over);
      store(unit);
    }
    first += u32(unit.k_count);
  }
}

// ---- split-K: the slices of a tile meet in the workspace -------------------------------------
// gemm_common.cuh's protocol (splitk_add, then the arrival count, the last slice takes the
// totals and leaves zeros), for the consumer threads of one unit instead of a whole block:
// named barrier ID over `threads` threads (256: both consumers, cooperative; 128: one, ping-
// pong), `leader` one of them. True, in every one of them, for the slice that arrives last.
template <int ID>
__device__ __forceinline__ bool ws_splitk_arrive(i32* workspace, int M, int N, int tile,
                                                 int slices, int threads, bool leader) {
  __threadfence();  // this thread's partial sums are visible GPU-wide before the arrival
  named_barrier_sync<ID>(threads);  // every thread of the unit has added and fenced
  u32 last = 0;
  if (leader) {
    i32* counter = workspace + static_cast<i64>(M) * N + tile;
    last = atomicAdd(counter, 1) == slices - 1;
    if (last) *counter = 0;  // every slice has arrived: reset for the next launch
  }
  u32 any;
  asm volatile(
      "{\n"
      ".reg .pred p, q;\n"
      "setp.ne.u32 q, %1, 0;\n"
      "bar.red.or.pred p, %2, %3, q;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(any)
      : "r"(last), "n"(ID), "r"(threads)
      : "memory");  // the leader's answer, to all
  if (any) __threadfence();  // the other slices' sums are seen after their arrival
  return any != 0;
}
