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
// Persistent CTAs: the grid is at most one CTA per SM; each CTA walks its own list of work
// units (a unit: some k-tiles of one output tile), given by gemm_schedule.cuh's GemmSchedule:
// SCHED=static (whole tiles, or SPLIT_K slices of each, dealt round-robin) or SCHED=streamk (the
// k-iterations of all tiles divided evenly among the CTAs), tiles in grouped order along M or N
// (GROUP_M, RASTER). The units of a tile meet in the workspace (the fixup, below).
//
// Consumer schedules:
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
// Thread-block clusters (CLUSTER_M x CLUSTER_N CTAs: 1x1, 2x1 or 1x2; the launch's cluster
// dimension is (CLUSTER_M * CLUSTER_N, 1, 1)). The scheduler deals cluster tiles
// (gemm_schedule.cuh): at every unit the CTAs of a 2x1 cluster hold vertically adjacent tiles,
// which read the same BN rows of B, and those of a 1x2 cluster horizontally adjacent ones, which
// read the same BM rows of A. Rank r = blockIdx.x % size sits at row r % CLUSTER_M and column
// r / CLUSTER_M of the cluster tile. The shared operand is loaded once for the cluster: each CTA
// loads 1/2 of its box (BN / 2 rows of B, or BM / 2 rows of A: a box of the tensor map that
// size) with a multicast TMA load that writes the rows into the same place of the stage in both
// CTAs; the other operand each CTA loads whole for itself. The protocol, in CUTLASS's way:
//   start      thread 0 of each CTA checks that the launch's cluster is the one the kernel was
//              built for (a trap otherwise, not a hang), initialises its barriers, fences the
//              init at cluster scope, and all threads of the cluster meet at barrier.cluster
//              (arrive.release / wait.acquire) instead of __syncthreads: no CTA writes into a
//              peer's stages or arrives on its barriers before that peer's barriers exist.
//   full[s]    still one arrival, the CTA's own producer's expect_tx of the whole stage's bytes
//              (STAGE_BYTES: its own operand box plus both halves of the shared one); the
//              peer's multicast half completes its bytes on this CTA's full[s] too. Bytes that
//              land before the expect_tx leave the transaction count negative for a moment; the
//              phase cannot complete without the producer's arrival.
//   empty[s]   a producer's multicast overwrites stage s in the peer as well, so its empty[s]
//              collects the releases of the consumers of every CTA its loads write into (the
//              CTAs of its cluster row and column, itself included: WS_CLUSTER_PEERS): each
//              consumer warp releases a stage on each of those CTAs' empty barriers (lane r
//              arrives on rank r's, through mapa), and the producer waits on its own. The
//              arrivals and the wait keep PTX's default semantics (release and acquire at CTA
//              scope), as CUTLASS's ClusterBarrier has them: a release stands for the wgmma
//              reads of the stage, complete before it (wgmma.wait_group); cluster scope would
//              cost a MEMBAR.ALL.GPU per release and an L1 invalidation (CCTL.IVALL) per
//              wait in SASS. Every CTA of a cluster walks the
//              same units and k-tiles, so stage s in round r holds the same k-tile in both.
//   exit       a CTA's shared memory must outlive every access from its peers: their multicast
//              writes into its stages (its consumers wait for those bytes before they finish)
//              and their consumers' arrivals on its empty barriers. So the producer thread,
//              after its last load, waits for each stage's release once more (the phase after
//              its last fill; a stage never filled passes at once): then every arrival of every
//              peer on this CTA's barriers has happened, and the CTA may exit. The peer's
//              shared memory is covered by the peer's producer in the same way.
// Clusters do not combine with the fixup (SPLIT_K > 1, SCHED=streamk): its workspace slots and
// counters are numbered per tile of one CTA. A cluster never waits for another cluster, so the
// launch completes whether or not all clusters are resident at once.
//
// Shared memory (1024-byte aligned base): NSTAGES x [A tile TILE_M x TILE_K | B tile
// TILE_N x TILE_K], each tile TILE_K / SW swizzle atoms of rows x SW bytes (gemm_smem_tiles.cuh's
// layout: one TMA box of rows x SW bytes per atom writes exactly that), then the 2 x NSTAGES
// mbarriers.
#pragma once
#include "gemm_schedule.cuh"
#include "gemm_wgmma_mainloop.cuh"
#include "tma_sm90.cuh"

// ---- the work schedule (SCHED, RASTER, SPLIT_K, GROUP_M, CLUSTER_M, CLUSTER_N; SCHED_static
// etc. are defined to 1) ----------------------------------------------------------------------
#if !defined(CLUSTER_M) || !defined(CLUSTER_N)
#error "CLUSTER_M, CLUSTER_N: the thread-block cluster's shape in tiles (1x1, 2x1 or 1x2)"
#endif
#if SCHED_streamk
constexpr bool WS_STREAM_K = true;
#elif SCHED_static
constexpr bool WS_STREAM_K = false;
#else
#error "SCHED must be static or streamk"
#endif
#if RASTER_n
constexpr bool WS_ALONG_N = true;
#elif RASTER_m
constexpr bool WS_ALONG_N = false;
#else
#error "RASTER must be m or n"
#endif
// Preconditions of the schedule (the space files state the same relations as constraints)
static_assert(SPLIT_K >= 1, "SPLIT_K: K slices per output tile");
static_assert(!WS_STREAM_K || SPLIT_K == 1,
              "SCHED=streamk divides the K range itself: SPLIT_K belongs to SCHED=static");
static_assert(GROUP_M >= 1, "GROUP_M: at least one tile row (column) per group");
// Whether units share tiles, i.e. the kernel runs the fixup through the workspace.
constexpr bool WS_FIXUP = WS_STREAM_K || SPLIT_K > 1;

// ---- the cluster (CLUSTER_M x CLUSTER_N CTAs) -------------------------------------------------
constexpr int WS_CLUSTER_M = CLUSTER_M;  // tile rows of a cluster tile (they share B)
constexpr int WS_CLUSTER_N = CLUSTER_N;  // tile columns (they share A)
constexpr int WS_CLUSTER = WS_CLUSTER_M * WS_CLUSTER_N;
// CTAs a CTA's loads write into, itself included: its cluster row and column
constexpr int WS_CLUSTER_PEERS = WS_CLUSTER_M + WS_CLUSTER_N - 1;
static_assert(WS_CLUSTER_M >= 1 && WS_CLUSTER_N >= 1 && WS_CLUSTER <= 2,
              "CLUSTER_M x CLUSTER_N: 1x1, 2x1 or 1x2 (a 2x2 cluster is not built)");
static_assert(WS_CLUSTER == 1 || !WS_FIXUP,
              "CLUSTER_M x CLUSTER_N: clusters need SPLIT_K=1 and SCHED=static (the fixup's "
              "workspace slots and counters are numbered per tile of one CTA)");

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
  // arrival from each consumer warp that reads the stage (in every CTA the stage's loads write:
  // WS_CLUSTER_PEERS).
  __device__ __forceinline__ void init(u32 empty_arrivals) const {
    for (int s = 0; s < NSTAGES; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), empty_arrivals);
    }
    mbar_fence_init();
  }
};

// This CTA's rank in its cluster (the schedule's; ws_start checks the hardware's agrees) and
// the CTAs its loads of A and of B write into (bit r: rank r).
__device__ __forceinline__ int ws_cluster_rank() { return int(blockIdx.x) % WS_CLUSTER; }
__device__ __forceinline__ unsigned short ws_a_mask(int rank) {  // its cluster row: every column
  unsigned short mask = 0;
#pragma unroll
  for (int c = 0; c < WS_CLUSTER_N; ++c) mask |= 1u << (rank % WS_CLUSTER_M + c * WS_CLUSTER_M);
  return mask;
}
__device__ __forceinline__ unsigned short ws_b_mask(int rank) {  // its cluster column: every row
  unsigned short mask = 0;
#pragma unroll
  for (int r = 0; r < WS_CLUSTER_M; ++r) mask |= 1u << (r + rank / WS_CLUSTER_M * WS_CLUSTER_M);
  return mask;
}

// The start of every CTA: barriers initialised, and visible to every thread that waits or
// arrives on them (with clusters, the peers' threads too) before anyone does.
template <int TILE_M, int TILE_N, int TILE_K, int NSTAGES>
__device__ __forceinline__ void ws_start(const WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>& pipe,
                                         int consumer_warps) {
  if (threadIdx.x == 0) {
    if constexpr (WS_CLUSTER > 1) {
      // launched without the cluster it was built for, a multicast would write into CTAs that
      // do not expect it and the producers would wait forever: stop with an error instead
      if (cluster_nctarank() != u32(WS_CLUSTER) || cluster_ctarank() != u32(ws_cluster_rank())) {
        __trap();
      }
    }
    pipe.init(u32(consumer_warps * WS_CLUSTER_PEERS));
  }
  if constexpr (WS_CLUSTER > 1) {
    cluster_sync();  // every CTA of the cluster has initialised its barriers
  } else {
    __syncthreads();  // the barriers are initialised before anyone waits on them
  }
}

// The schedule of this CTA: its units work[0 .. count - 1] (GemmUnit: tile index, k0, k_count,
// and the unit's part in the fixup), in the order the producer loads them and the consumers take
// them; in cluster units with clusters (the same units for every CTA of a cluster).
using WsUnit = GemmUnit;
__device__ __forceinline__ GemmSchedule ws_schedule(int M, int N, int K, int tile_m, int tile_n,
                                                    int tile_k) {
  return GemmSchedule(M, N, K, tile_m, tile_n, tile_k, GROUP_M, WS_ALONG_N, WS_STREAM_K, SPLIT_K,
                      int(gridDim.x), int(blockIdx.x), WS_CLUSTER_M, WS_CLUSTER_N);
}

// The same, computed afresh at each call (a few integer divisions): the consumers build it again
// for each unit rather than keep a dozen values of it in registers over the main loop, next to up
// to 192 accumulators (kept, they made ptxas spill around the fixup). The empty asm hides that
// the inputs are the same at every call. It is built on each side of the warpgroup split, too:
// nothing of it is live across the producer's setmaxnreg.dec to 40 registers.
__device__ __forceinline__ GemmSchedule ws_schedule_again(int M, int N, int K, int tile_m,
                                                          int tile_n, int tile_k) {
  asm volatile("" : "+r"(M), "+r"(N), "+r"(K));
  return ws_schedule(M, N, K, tile_m, tile_n, tile_k);
}

// The loads of one operand's box of one atom: `rows` rows at `row0` into `dst` (the atom's place
// in the stage), whole (SHARE 1), or this CTA's part `part` of SHARE (rows / SHARE rows at
// row0 + part * rows / SHARE, the tensor map's box) multicast to the CTAs of `mask`.
template <int ROWS, int SW, int SHARE>
__device__ __forceinline__ void ws_load_box(u32 dst, const TmaDescriptor* map, int k, int row0,
                                            u32 full, int part, unsigned short mask) {
  if constexpr (SHARE == 1) {
    tma_load_2d(dst, map, k, row0, full);
  } else {
    constexpr int PART_ROWS = ROWS / SHARE;
    static_assert(PART_ROWS % 8 == 0,
                  "a multicast part of a box starts on the 1024-byte period of the 128-byte "
                  "swizzle (whole groups of 8 rows: BN % 16 == 0 for 2x1, BM % 16 for 1x2)");
    tma_load_2d_multicast(dst + u32(part * PART_ROWS * SW), map, k, row0 + part * PART_ROWS,
                          full, mask);
  }
}

// The producer thread: every k-tile of every local unit, in order, into the ring of stages.
// A box is rows x SW bytes at (k, first row): TILE_K / SW boxes per operand per stage (with
// clusters, the shared operand's box is this CTA's part of the rows, multicast).
template <int TILE_M, int TILE_N, int TILE_K, int NSTAGES, int SW>
__device__ __forceinline__ void ws_produce(const WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>& pipe,
                                           const TmaDescriptor* map_a, const TmaDescriptor* map_b,
                                           const GemmSchedule& work) {
  using Pipe = WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>;
  tma_prefetch_descriptor(map_a);
  tma_prefetch_descriptor(map_b);
  const int rank = ws_cluster_rank();
  const unsigned short a_mask = ws_a_mask(rank);  // (multicast only where the operand is shared)
  const unsigned short b_mask = ws_b_mask(rank);
  int s = 0;       // stage of the next k-tile
  u32 round = 0;   // how many times the ring has wrapped (its parity is the phase)
  for (int i = 0; i < work.count; ++i) {
    const WsUnit unit = work[i];
    const TileCoord tile = work.tile(unit);
    const int m0 = tile.m * TILE_M;
    const int n0 = tile.n * TILE_N;
    for (int kt = unit.k0; kt < unit.k0 + unit.k_count; ++kt) {
      mbar_wait(pipe.empty(s), (round & 1) ^ 1);  // the consumers (of every CTA it feeds)
                                                  // have released stage s
      mbar_arrive_expect_tx(pipe.full(s), Pipe::STAGE_BYTES);  // (the whole stage, clusters too)
#pragma unroll
      for (int atom = 0; atom < TILE_K / SW; ++atom) {
        const int k = kt * TILE_K + atom * SW;
        // A: shared by the cluster's row (1x2: part rank / CLUSTER_M); B: by its column (2x1)
        ws_load_box<TILE_M, SW, WS_CLUSTER_N>(pipe.a(s) + u32(atom) * (TILE_M * SW), map_a, k,
                                              m0, pipe.full(s), rank / WS_CLUSTER_M, a_mask);
        ws_load_box<TILE_N, SW, WS_CLUSTER_M>(pipe.b(s) + u32(atom) * (TILE_N * SW), map_b, k,
                                              n0, pipe.full(s), rank % WS_CLUSTER_M, b_mask);
      }
      if (++s == NSTAGES) {
        s = 0;
        ++round;
      }
    }
  }
  if constexpr (WS_CLUSTER > 1) {
    // Before this CTA may exit: every stage released once more after its last fill (a stage
    // never filled passes at once), i.e. every consumer of every peer has made its last
    // arrival on this CTA's barriers (the header's "exit")
#pragma unroll 1
    for (int i = 0; i < NSTAGES; ++i) {
      mbar_wait(pipe.empty(s), (round & 1) ^ 1);
      if (++s == NSTAGES) {
        s = 0;
        ++round;
      }
    }
  }
}

// A consumer warp's release of stage s: one arrival per warp on the empty barrier of every CTA
// whose producer writes into this CTA's stage s (lane r on rank r's; without clusters lane 0 on
// this CTA's own).
template <int TILE_M, int TILE_N, int TILE_K, int NSTAGES>
__device__ __forceinline__ void ws_release(const WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>& pipe,
                                           int s) {
  const int lane = int(threadIdx.x % 32);
  if constexpr (WS_CLUSTER > 1) {
    const unsigned short peers = ws_a_mask(ws_cluster_rank()) | ws_b_mask(ws_cluster_rank());
    if (lane < WS_CLUSTER && (peers >> lane & 1)) mbar_arrive_cluster(pipe.empty(s), u32(lane));
  } else {
    if (lane == 0) mbar_arrive(pipe.empty(s));
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
  int s = int(first % NSTAGES);
  u32 round = first / NSTAGES;
  int previous = -1;  // the stage whose wgmma may still run
  for (int kt = 0; kt < k_tiles; ++kt) {
    mbar_wait(pipe.full(s), round & 1);  // the stage's bytes have landed
    multiply(pipe.a(s), pipe.b(s));
    wgmma_wait<1>();  // the previous k-tile's wgmma are done: its stage may be refilled
    if (previous >= 0) ws_release(pipe, previous);
    previous = s;
    if (++s == NSTAGES) {
      s = 0;
      ++round;
    }
  }
  issued();
  wgmma_wait<0>();
  if (previous >= 0) ws_release(pipe, previous);
}

// A consumer warpgroup's walk over the local units: all of them (cooperative) or every other
// one from `consumer` (ping-pong, taking turns on the tensor cores in unit order). For each:
// `reset()` the accumulators, run the main loop with `multiply`, then `store(work, unit)`.
// `schedule()` gives the CTA's GemmSchedule (ws_schedule_again: built where it is used).
// `first` counts the producer's k-tiles before the unit (the other warpgroup's units included).
template <bool COOPERATIVE, int TILE_M, int TILE_N, int TILE_K, int NSTAGES, class Schedule,
          class Reset, class Multiply, class Store>
__device__ __forceinline__ void ws_consume_units(
    const WsPipeline<TILE_M, TILE_N, TILE_K, NSTAGES>& pipe, Schedule&& schedule, int consumer,
    Reset&& reset, Multiply&& multiply, Store&& store) {
  const int count = schedule().count;
  u32 first = 0;
  for (int i = 0; i < count; ++i) {
    const int k_count = schedule()[i].k_count;
    if (COOPERATIVE || i % 2 == consumer) {
      reset();
      if (!COOPERATIVE && i > 0) ws_wait_turn(consumer);  // unit i - 1's warpgroup has issued
      auto hand_over = [&] {
        if (!COOPERATIVE && i + 1 < count) ws_give_turn(1 - consumer);
      };
      ws_consume(pipe, first, k_count, multiply, hand_over);
      const GemmSchedule work = schedule();
      store(work, work[i]);
    }
    first += u32(k_count);
  }
}

// ---- the fixup: the units of a tile meet in the workspace -----------------------------------
// (gemm_schedule.cuh says which unit finalizes a tile and which slots its peers write.)
// workspace, 4-byte words, left as it was found (zero counters) by every launch:
//   [0, slots * TILE_M * TILE_N)        partial tiles, one per slot (int32 or fp32)
//   [slots * TILE_M * TILE_N, + tiles)  one arrival counter per output tile
// A partial tile is stored striped over the THREADS consumer threads of a unit, in 16-byte
// vectors: thread t's accumulators 4q .. 4q + 3 (in its fragment order) go to vector q * THREADS
// + t, so that every warp stores and loads 512 contiguous bytes, and the finisher, whose threads
// hold the same fragments, reads back exactly what the peer's thread of the same rank wrote. The
// whole fragment is stored, rows and columns past M and N included (their sums are zeros: TMA
// fills the boxes past the edges with zeros), so nothing needs a guard.
template <int TILE_M, int TILE_N>
struct WsWorkspace {
  static constexpr i64 SLOT_WORDS = i64(TILE_M) * TILE_N;
  static_assert(SLOT_WORDS % 4 == 0, "a partial tile is whole 16-byte vectors");
  i32* base;  // 16-byte aligned (cudaMalloc: 256)
  int slots;
  template <class V>
  __device__ __forceinline__ V* slot(int s) const {
    return reinterpret_cast<V*>(base + i64(s) * SLOT_WORDS);
  }
  __device__ __forceinline__ i32* counter(int tile) const {
    return base + i64(slots) * SLOT_WORDS + tile;
  }
};

template <class T>
struct Vec4Of;
template <>
struct Vec4Of<i32> {
  using type = int4;
};
template <>
struct Vec4Of<float> {
  using type = float4;
};

// Count one arrival at `counter`, releasing (GPU scope) every write that happened before it in
// this thread, and every write that a named barrier this thread passed has ordered before it
// (the partial tiles the other threads of the unit stored).
__device__ __forceinline__ void ws_arrive_release(i32* counter) {
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;\n" ::"l"(counter) : "memory");
}

// The counter, read with acquire semantics (GPU scope): the writes released before the
// arrivals it counts are visible after it.
__device__ __forceinline__ i32 ws_load_acquire(const i32* counter) {
  i32 value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(counter) : "memory");
  return value;
}

// The fixup of one unit, for its THREADS consumer threads (256: both warpgroups, cooperative;
// 128: one, ping-pong), `thread` its rank among them, named barrier ID theirs alone. acc holds
// the unit's MB x NB accumulators per thread (in wgmma fragment order). Returns whether this
// unit writes the tile of C: then acc holds the tile's full sums.
//   a peer       stores its partials in its slot (plain 16-byte stores, L2), meets the other
//                threads of the unit at the named barrier, and one thread counts the arrival
//                with a release: no atomics on the data, one fence for the whole unit.
//   a finisher   with peers: one thread waits (acquire) until the counter reaches `peers`, and
//                resets it to 0 for the next launch (every peer has arrived: no one else
//                touches it in this launch); after the named barrier every thread adds the
//                peers' partials to its own, slot after slot: a fixed order, so the sums are
//                the same at every launch (for fp32 too).
template <int ID, int THREADS, int TILE_M, int TILE_N, int MB, int NB, class T>
__device__ __forceinline__ bool ws_fixup(const WsWorkspace<TILE_M, TILE_N>& ws,
                                         const WsUnit& unit, int thread, T (&acc)[MB][NB]) {
  static_assert(NB % 4 == 0, "whole 16-byte vectors of accumulators per thread");
  static_assert(THREADS * MB * NB == TILE_M * TILE_N, "the unit's threads hold the whole tile");
  using V = typename Vec4Of<T>::type;
  const bool leader = thread == 0;
  if (!unit.finalizes) {
    V* slot = ws.template slot<V>(unit.slot);
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
      for (int j = 0; j < NB; j += 4) {
        const int q = (mb * NB + j) / 4;
        __stcg(slot + q * THREADS + thread, V{acc[mb][j], acc[mb][j + 1], acc[mb][j + 2],
                                              acc[mb][j + 3]});
      }
    }
    named_barrier_sync<ID>(THREADS);  // every thread of the unit has stored its partials
    if (leader) ws_arrive_release(ws.counter(unit.index));
    return false;
  }
  if (unit.peers == 0) return true;  // the unit computed the whole tile
  if (leader) {
    i32* counter = ws.counter(unit.index);
    while (ws_load_acquire(counter) != unit.peers) {
    }
    *counter = 0;  // every peer has arrived: reset for the next launch
  }
  named_barrier_sync<ID>(THREADS);  // the leader has seen every peer's arrival
  // One peer's partial tile per iteration, in this order. The count is hidden from the
  // optimiser so that this stays a loop where it is a constant (static split-K): unrolled into
  // the epilogue, SPLIT_K = 2's one iteration made ptxas 13 spill at 192 accumulators.
  int peers = unit.peers;
  asm("" : "+r"(peers));
#pragma unroll 1
  for (int p = 0; p < peers; ++p) {
    const V* slot = ws.template slot<V>(unit.slot + p);
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
#pragma unroll
      for (int j = 0; j < NB; j += 4) {
        const V v = __ldcg(slot + ((mb * NB + j) / 4) * THREADS + thread);
        acc[mb][j] += v.x;
        acc[mb][j + 1] += v.y;
        acc[mb][j + 2] += v.z;
        acc[mb][j + 3] += v.w;
      }
    }
  }
  return true;
}

// The fixup of `unit` by the consumer warpgroup `consumer` (both, cooperative: named barrier 3
// over 256 threads; ping-pong: barrier 3 + consumer over its 128).
template <bool COOPERATIVE, int TILE_M, int TILE_N, int MB, int NB, class T>
__device__ __forceinline__ bool ws_unit_fixup(const WsWorkspace<TILE_M, TILE_N>& ws,
                                              const WsUnit& unit, int consumer,
                                              T (&acc)[MB][NB]) {
  if constexpr (COOPERATIVE) {
    return ws_fixup<3, 256>(ws, unit, int(threadIdx.x) - 128, acc);
  } else if (consumer == 0) {
    return ws_fixup<3, 128>(ws, unit, int(threadIdx.x) % 128, acc);
  } else {
    return ws_fixup<4, 128>(ws, unit, int(threadIdx.x) % 128, acc);
  }
}

// What a consumer does with a finished unit before its epilogue (int8 and fp8 alike): fence
// the accumulators, meet the unit's peers in the workspace (split-K, stream-K) and find its
// tile. False where it has nothing to store: a peer that published its partial sums, or a
// cluster's tile past the edge of C (its loads fed the partner CTA).
template <bool COOPERATIVE, int TILE_M, int TILE_N, int MB, int NB, class T>
__device__ __forceinline__ bool ws_unit_tile(const GemmSchedule& work, const WsUnit& unit,
                                             i32* workspace, int consumer, int M, int N,
                                             T (&acc)[MB][NB], TileCoord& tile) {
#pragma unroll
  for (int mb = 0; mb < MB; ++mb) fence_operands(acc[mb]);
  if constexpr (WS_FIXUP) {
    const WsWorkspace<TILE_M, TILE_N> ws{workspace, work.workspace_slots()};
    if (!ws_unit_fixup<COOPERATIVE>(ws, unit, consumer, acc)) return false;  // a peer: published
  }
  tile = work.tile(unit);
  if constexpr (WS_CLUSTER > 1) return tile.m * TILE_M < M && tile.n * TILE_N < N;
  return true;
}
