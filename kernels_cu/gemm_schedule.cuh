// gemm_schedule.cuh: which output tiles, and which k-tiles of them, the blocks of a GEMM compute.
//
// Plain index math with no CUDA types, so that the same text compiles under NVRTC (device code,
// __host__ __device__) and as host C++ with g++ (GEMM_SCHED_FN is then plain `inline`): the
// tests compile a small host program around this header and enumerate every CTA's work units
// for many shapes and configs (tests/test_gemm_schedule.py), i.e. they check the code the
// kernels run, not a copy of it.
//
//   tile_of_block   the rasterisation: the output tile of the b-th block (or unit) in grouped
//                   order, along M or along N.
//   GemmSchedule    the persistent schedule of the warp-specialized TMA GEMMs (gemm_tma_ws.cuh):
//                   grid = min(units, SMs) CTAs, each walking its own list of work units, a unit
//                   being k-tiles k0 .. k0 + k_count - 1 of one output tile. In thread-block
//                   clusters of cluster_m x cluster_n CTAs (below) the units are those of
//                   cluster tiles. Two kinds:
//     static        unit u = slice u % SPLIT_K of tile u / SPLIT_K; CTA c takes u = c, c + G,
//                   c + 2G, ... (G CTAs); SPLIT_K = 1 is one unit per tile.
//     stream-K      the tiles' k-iterations, tiles x k_tiles in all, are divided evenly among the
//                   G CTAs; CTA c takes the contiguous range [start(c), start(c + 1)), which may
//                   begin and end in the middle of a tile: one unit per tile it touches.
//
// Clusters (gemm_tma_ws.cuh: CLUSTER_M x CLUSTER_N, 1x1, 2x1 or 1x2). The schedule is dealt in
// cluster units: a cluster tile is cluster_m x cluster_n output tiles (cluster_m tile rows,
// cluster_n tile columns), the grid is clusters x (cluster_m * cluster_n) CTAs, CTA c belongs to
// cluster c / size with rank c % size (consecutive CTAs form a cluster: the launch's cluster
// dimension is (size, 1, 1)), and the clusters walk the cluster tiles exactly as CTAs walk
// tiles without clusters (static or stream-K, the same raster and GROUP_M, counted in cluster
// tiles). Every CTA of a cluster therefore has the same units in the same order, each on its own
// tile of the cluster tile: rank r takes row r % cluster_m and column r / cluster_m of it. So at
// every unit the CTAs of a 2x1 cluster hold vertically adjacent tiles (the same columns of B)
// and those of a 1x2 cluster horizontally adjacent ones (the same rows of A), which is what lets
// them share that operand's loads (TMA multicast). Where the tile count along M (N) is odd, the
// last cluster tiles of a 2x1 (1x2) cluster have a tile past the edge of C: its CTA still loads
// and multiplies (zeros: TMA fills the boxes past the tensor) so that its partner gets its half
// of the shared operand, and stores nothing. With clusters the kernels take no fixup (SPLIT_K = 1
// and SCHED=static, their constraint): the workspace below is numbered per cluster tile.
//
// The fixup (how the units of one tile meet). Exactly one unit of each tile *finalizes* it: it
// waits until the tile's other units ("peers") have published their partial accumulators, adds
// them to its own in a fixed order (its own first, then slot after slot), and runs the
// epilogue; every other unit stores its partials in a workspace slot of its own and signals the
// tile's arrival counter. The workspace (4-byte words, gemm_tma_ws.cuh):
//     [slots x TILE_M*TILE_N partial tiles][tiles arrival counters]
// (workspace_slots() and the space files' ws_slots give the same count).
//   static      the last slice (SPLIT_K - 1) finalizes; slice s < SPLIT_K - 1 of tile t writes
//               slot t * (SPLIT_K - 1) + s; the finisher's peers are the slots
//               t * (SPLIT_K - 1) .. + SPLIT_K - 2.
//   stream-K    the unit that covers the tile's last k-tile finalizes. A CTA has at most one unit
//               that does not: the last unit of its range (it ends inside a tile); it writes
//               slot c (one slot per CTA). The finisher of a tile is the first unit of the range
//               of CTA c_end; its peers are CTAs c_first .. c_end - 1, slots c_first ..
//               c_end - 1. Each CTA walks its units BACKWARDS (last tile of its range first),
//               so the unit it publishes is the first one it computes.
//
// Why no unit waits forever (all G CTAs are resident at once: the grid is at most one CTA per
// SM and one CTA fits on an SM; a CTA computes its units one after the other, and inside a CTA
// a unit depends only on earlier units of the same CTA: the producer's ring, the ping-pong
// turns). A unit waits only for its peers, never for anything else outside its CTA:
//   stream-K    the peers a finisher waits for are each the FIRST unit its CTA computes, and
//               such a unit never waits (it is not a finisher): it completes no matter what any
//               other CTA does. The peers also belong to lower-numbered CTAs only.
//   static      order the units by u. A CTA computes its units in increasing u, and a finisher
//               (slice SPLIT_K - 1, unit u) waits only for units u - SPLIT_K + 1 .. u - 1. So
//               every wait points to a smaller u: take the unfinished unit with the smallest u;
//               whatever it waits for is finished, so it finishes too.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GEMM_SCHED_FN __host__ __device__ __forceinline__
#else
#define GEMM_SCHED_FN inline
#endif

GEMM_SCHED_FN int sched_min(int a, int b) { return a < b ? a : b; }
GEMM_SCHED_FN int sched_max(int a, int b) { return a > b ? a : b; }

// ---- rasterisation ---------------------------------------------------------------------------
struct TileCoord {
  int m;  // tile row
  int n;  // tile column
};

// The tile of block (or unit) `block` in grouped ("swizzled") order, so that blocks running at
// the same time share rows of A and columns of B in L2. Along M (the default): `group`
// consecutive tile rows are walked column by column, m fastest. Along N: `group` consecutive
// tile columns are walked row by row, n fastest. group = 1 is plain row-major (along M) or
// column-major (along N) order of the tiles. The last group may be narrower.
GEMM_SCHED_FN TileCoord tile_of_block(int block, int tiles_m, int tiles_n, int group,
                                      bool along_n = false) {
  const int major = along_n ? tiles_n : tiles_m;  // the direction consecutive blocks advance in
  const int minor = along_n ? tiles_m : tiles_n;
  const int per_group = group * minor;
  const int first = block / per_group * group;
  const int width = sched_min(major - first, group);  // the last group may be short
  const int in_group = block % per_group;
  const int along = first + in_group % width;
  const int across = in_group / width;
  return along_n ? TileCoord{across, along} : TileCoord{along, across};
}

// ---- the persistent schedule -----------------------------------------------------------------
// One work unit: k-tiles k0 .. k0 + k_count - 1 of the output tile `index` in raster order
// (GemmSchedule::tile gives its coordinates; the index also numbers its arrival counter).
struct GemmUnit {
  int index;
  int k0;
  int k_count;     // >= 1
  bool finalizes;  // this unit adds its peers' partials and writes the tile of C
  int slot;        // finalizes: its first peer's workspace slot; else the slot it writes
  int peers;       // finalizes: the other units of the tile (slots slot .. slot + peers - 1)
};

struct GemmSchedule {
  int cluster_m, cluster_n, rank;  // the cluster shape (in tiles) and this CTA's rank in it
  int tiles_m, tiles_n, k_tiles;   // (cluster) tiles, k-tiles per tile
  int group;
  bool along_n;
  bool stream_k;
  int slices;  // static: K slices per tile (SPLIT_K)
  int ctas, cta;  // clusters, and this CTA's cluster (CTAs and this CTA without clusters)
  int per_slice;  // static: k-tiles per slice (the last one may have fewer)
  // stream-K: this CTA's k-iterations [begin, end) counted from the start of its first tile
  // (begin < k_tiles), and the CTA holding the first k-tile of that tile
  int first_tile, begin, end, first_cta;
  int count;  // units of this CTA

  // ctas_ CTAs (a multiple of the cluster size), cta_ this CTA's number in the grid.
  GEMM_SCHED_FN GemmSchedule(int M, int N, int K, int tile_m, int tile_n, int tile_k,
                             int group_, bool along_n_, bool stream_k_, int split_k, int ctas_,
                             int cta_, int cluster_m_ = 1, int cluster_n_ = 1)
      : cluster_m(cluster_m_),
        cluster_n(cluster_n_),
        rank(cta_ % (cluster_m_ * cluster_n_)),
        tiles_m((M + tile_m * cluster_m_ - 1) / (tile_m * cluster_m_)),
        tiles_n((N + tile_n * cluster_n_ - 1) / (tile_n * cluster_n_)),
        k_tiles((K + tile_k - 1) / tile_k),
        group(group_),
        along_n(along_n_),
        stream_k(stream_k_),
        slices(stream_k_ ? 1 : split_k),
        ctas(ctas_ / (cluster_m_ * cluster_n_)),
        cta(cta_ / (cluster_m_ * cluster_n_)),
        per_slice(0),
        first_tile(0),
        begin(0),
        end(0),
        first_cta(0),
        count(0) {
    if (!stream_k) {
      per_slice = (k_tiles + slices - 1) / slices;
      const int units = tiles() * slices;
      count = cta < units ? (units - 1 - cta) / ctas + 1 : 0;
      return;
    }
    const int total = tiles() * k_tiles;  // (< 2^31: a constraint of the space files)
    const int share = total / ctas;
    const int extra = total % ctas;
    const int lo = iteration_start(cta, share, extra);
    const int hi = iteration_start(cta + 1, share, extra);
    if (hi <= lo) return;  // (only with more CTAs than k-iterations, which the grid avoids)
    first_tile = lo / k_tiles;
    const int base = first_tile * k_tiles;
    begin = lo - base;
    end = hi - base;
    count = (end - 1) / k_tiles + 1;
    first_cta = cta_of_iteration(base, share, extra);
  }

  GEMM_SCHED_FN int tiles() const { return tiles_m * tiles_n; }

  // Stream-K, with share = total / ctas and extra = total % ctas of the total k-iterations
  // (32-bit: 64-bit divisions are calls on the GPU, which cost the consumers registers):
  // the first k-iteration of CTA c (c = ctas: the total); the first `extra` CTAs take one
  // iteration more than the others.
  GEMM_SCHED_FN static int iteration_start(int c, int share, int extra) {
    return c * share + (c < extra ? c : extra);
  }

  // Stream-K: the CTA whose range holds k-iteration x (0 <= x < total).
  GEMM_SCHED_FN static int cta_of_iteration(int x, int share, int extra) {
    const int wide = extra * (share + 1);  // the iterations of the CTAs that take one more
    return x < wide ? x / (share + 1) : extra + (x - wide) / share;
  }

  // Workspace slots of partial tiles this schedule needs (the space files' ws_slots).
  GEMM_SCHED_FN int workspace_slots() const {
    return stream_k ? ctas : (slices > 1 ? tiles() * (slices - 1) : 0);
  }

  // The i-th unit this CTA computes (0 <= i < count).
  GEMM_SCHED_FN GemmUnit operator[](int i) const {
    GemmUnit unit;
    if (!stream_k) {
      const int u = cta + i * ctas;
      unit.index = u / slices;
      const int slice = u % slices;
      unit.k0 = slice * per_slice;
      unit.k_count = sched_min(per_slice, k_tiles - unit.k0);
      unit.finalizes = slice == slices - 1;
      unit.slot = unit.index * (slices - 1) + (unit.finalizes ? 0 : slice);
      unit.peers = unit.finalizes ? slices - 1 : 0;
    } else {
      const int pos = count - 1 - i;  // backwards: the range's last tile first
      unit.index = first_tile + pos;
      const int lo = sched_max(begin, pos * k_tiles);  // this unit's iterations [lo, hi)
      const int hi = sched_min(end, (pos + 1) * k_tiles);
      unit.k0 = lo - pos * k_tiles;
      unit.k_count = hi - lo;
      unit.finalizes = hi == (pos + 1) * k_tiles;
      // only the range's first unit can start inside its tile: its peers are CTAs
      // first_cta .. cta - 1
      const bool shared = unit.finalizes && unit.k0 > 0;
      unit.slot = unit.finalizes ? (shared ? first_cta : 0) : cta;
      unit.peers = shared ? cta - first_cta : 0;
    }
    return unit;
  }

  // The coordinates of this CTA's tile of a unit (computed where they are needed: in a kernel,
  // after the fixup, so that they do not hold registers while the partial tiles are added): in
  // clusters, its place in the unit's cluster tile. It may lie past the edge of C (clusters).
  GEMM_SCHED_FN TileCoord tile(const GemmUnit& unit) const {
    const TileCoord t = tile_of_block(unit.index, tiles_m, tiles_n, group, along_n);
    return TileCoord{t.m * cluster_m + rank % cluster_m, t.n * cluster_n + rank / cluster_m};
  }
};
