// gemm_w4a16_wgmma.cuh: the Hopper path of gemm_w4a16 (PATH=wgmma, sm_90a only), included by
// gemm_w4a16.cu after the helpers both paths share (the stage layout, load_weights, load_zeros,
// load_scales, dequant_word, the split-K arrival).
//
// wgmma reads its B operand only from shared memory and its A operand from shared memory or
// registers, so weights dequantized in registers must be A: the kernel computes C^T = W^T . A^T.
// Per k16 step, warpgroup (wk, wg_m) issues four wgmma.mma_async.m64n<WM>k16.f32.{f16,bf16}:
//
//   A (64 x 16, registers)  64 weight columns: wgmma j takes word j of every lane's 16 bytes of
//                           the four weight units (warp w: unit w), dequantized (CVT) and scaled
//                           (SCALE=element) exactly as on the mma path; which output column each
//                           row is, and which dequant_word output feeds which register:
//                           gemm_w4a16_wgmma_map.cuh
//   B (WM x 16, shared)     WM tokens of the activations, K-major (A's rows are K-contiguous), in
//                           the swizzled layout of gemm_smem_tiles.cuh, through a descriptor
//   D (64 x WM, registers)  fp32; register i of lane l in warp w: token 8 (i / 4) + 2 (l % 4) +
//                           i % 2, weight row 16 w + l / 4 + 8 ((i / 2) % 2) (wgmma_sm90.cuh)
//
// So a warpgroup covers BN = 256 columns (4 units) and WM tokens; BM / WM warpgroups along M and
// WARPS_K along K (each takes every WARPS_K-th k16 step, their sums meet in shared memory at the
// end, as the mma path's warps do). Stages come through wgmma_pipeline (gemm_wgmma_mainloop.cuh):
// cp.async of the activations (load_tile_async, swizzled) and of the weights, scales and zero
// points (load_weights), STAGES >= 3.
//
// Inside a k-tile the dequantization of step s + 1 overlaps the wgmma of step s: each step writes
// fresh fragment registers, then wgmma.fence, four wgmma, commit, and wgmma.wait_group 1 (the
// wgmma of step s - 1, and the registers it read, are done). SCALE=group: the first step of a
// group overwrites the partial sums (scale-d = 0), the group's end waits for all wgmma
// (wait_group 0) and adds s * part to the accumulators in fp32.
//
// Epilogue: D is transposed (rows are columns of C), so each accumulator is one scalar store of C
// (or one fp32 atomic into the split-K workspace; the last slice writes C, as on the mma path).
#pragma once

namespace w4 {

constexpr int WG_M = BM / WM;   // warpgroups along M (tokens)
constexpr int WG_MN = WG_M;     // warpgroups of one k16 step (BN = 256: one along N)
constexpr int ACC = WM / 2;     // fp32 accumulators per thread of one wgmma (64 x WM / 128)
constexpr int WGMMAS = 4;       // wgmma per k16 step: one per word of a lane's 16 bytes

#if DTYPE_float16
#define W4_WGMMA_TYPES ".f32.f16.f16"
#else
#define W4_WGMMA_TYPES ".f32.bf16.bf16"
#endif

// d (+)= A . B: A = this thread's 4 registers of the dequantized weights, B = WM tokens x 16
// elements of the activations (descriptor), K-major (not transposed), scale-a = scale-b = 1.
template <bool ACCUMULATE>
__device__ __forceinline__ void wgmma_w(float (&d)[ACC], u32 (&a)[4], u64 desc_b) {
  if constexpr (ACCUMULATE) {
    WGMMA_RS(WM, W4_WGMMA_TYPES, "1", ", 1, 1, 0", "+f", d, a, desc_b);
  } else {
    WGMMA_RS(WM, W4_WGMMA_TYPES, "0", ", 1, 1, 0", "+f", d, a, desc_b);
  }
}

// One k-tile of this warpgroup: for each group row of the tile, its share (every WARPS_K-th) of
// the row's k16 steps. `b_rows`: the warpgroup's WM rows of the stage's activation tile.
__device__ __forceinline__ void wgmma_stage(const Stage& st, u32 b_rows, int wk, int warp, int lane,
                                            float (&acc)[WGMMAS][ACC], float (&part)[WGMMAS][ACC]) {
  const int g = lane / 4;
  const int unit = w4map::unit_of_warp(warp);  // the weight unit of this warp (of the block's 4)
#if SCALE_group
  float(&sum)[WGMMAS][ACC] = part;  // a group's sums of a * (q - z), scaled at its end
#else
  float(&sum)[WGMMAS][ACC] = acc;
  (void)part;
#endif
  // (group rows are not unrolled, as on the mma path: each starts from its own scales)
#pragma unroll 1
  for (int r = 0; r < GROUP_ROWS; ++r) {
    const u32 srow = st.s + r * BN * 2, zrow = st.z + r * BN;
    Zero z[8];      // zero points of the unit's 8 n8 tiles at column g (this group)
    __half sc[8];   // their scales
    load_zeros(z, zrow, unit, g);
    load_scales(sc, srow, unit, g);
#pragma unroll
    for (int i = 0; i < ROW_KSTEPS / WARPS_K; ++i) {
      const int ks = r * ROW_KSTEPS + i * WARPS_K + wk;  // k16 step within the k-tile
      uint4 q;  // this lane's 16 bytes of the unit: words 0..3
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(q.x), "=r"(q.y), "=r"(q.z), "=r"(q.w)
                   : "r"(st.w + (ks * BNU + unit) * UNIT_BYTES + lane * 16));
      const u32 words[4] = {q.x, q.y, q.z, q.w};
      u32 frag[WGMMAS][4];  // A fragments of the four wgmma
#pragma unroll
      for (int j = 0; j < WGMMAS; ++j) {
        const int wd = w4map::word_of_wgmma(j);  // n8 tiles 2 wd, 2 wd + 1 of the unit
        T2 b[4];
        dequant_word(words[wd], z[2 * wd], z[2 * wd + 1], b);
#if SCALE_element
        const T2 sa = scale_pair(sc[2 * wd]), sb = scale_pair(sc[2 * wd + 1]);
        b[0] = __hmul2(b[0], sa);
        b[1] = __hmul2(b[1], sa);
        b[2] = __hmul2(b[2], sb);
        b[3] = __hmul2(b[3], sb);
#endif
#pragma unroll
        for (int reg = 0; reg < 4; ++reg) frag[j][reg] = as_u32(b[w4map::frag_source(reg)]);
      }
      const u64 desc_b = kslice_desc<BM, SW>(b_rows, ks);  // tokens x 32 bytes of K
      wgmma_fence();  // the fragments (and, after a group's end, the sums) are written
#pragma unroll
      for (int j = 0; j < WGMMAS; ++j) {
        if (PER_GROUP_SCALES && i == 0) {
          wgmma_w<false>(sum[j], frag[j], desc_b);  // a group's first step: part = A . B
        } else {
          wgmma_w<true>(sum[j], frag[j], desc_b);
        }
      }
      wgmma_commit();
      wgmma_wait<1>();  // step s - 1's wgmma (and the fragments it read) are done
    }
#if SCALE_group
    wgmma_wait<0>();  // the group's sums are final
#pragma unroll
    for (int j = 0; j < WGMMAS; ++j) fence_operands(part[j]);
    // acc += s * part: accumulator register x is weight row g + 8 ((x / 2) % 2) of the warp's 16,
    // i.e. n8 tile 2 wd + (x / 2) % 2 of the unit at column g (gemm_w4a16_wgmma_map.cuh)
#pragma unroll
    for (int j = 0; j < WGMMAS; ++j) {
      const int wd = w4map::word_of_wgmma(j);
      const float s0 = __half2float(sc[2 * wd]), s1 = __half2float(sc[2 * wd + 1]);
#pragma unroll
      for (int x = 0; x < ACC; ++x) acc[j][x] = fmaf(part[j][x], (x / 2) % 2 ? s1 : s0, acc[j][x]);
    }
#endif
  }
}

}  // namespace w4

extern "C" __global__ void __launch_bounds__(w4::THREADS, 1)
gemm_w4a16(const w4::T* __restrict__ A, const u32* __restrict__ qweight,
           const __half* __restrict__ scales, const u8* __restrict__ zeros,
           w4::T* __restrict__ C, float* __restrict__ workspace, int M, int N, int K) {
  using namespace w4;
  extern __shared__ __align__(16) unsigned char smem[];  // the WARPS_K reduction reuses it
  const u32 base = aligned_smem_base();                   // (STAGES, A | W | S | Z), 1 KB aligned
  const Problem p{A, qweight, scales, zeros, M, N, K, ceil_div(N, UNIT_N), K / G};

  // ---- tiling: this block's output tile and K slice ---------------------------------------
  const BlockWork work = block_work(K);
  const TileCoord tile = work.tile;
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const int kt_begin = work.kt_begin, k_tiles = work.k_tiles;

  // ---- partitioning: warpgroup (wg_m) of k-group wk; warp w of it reads weight unit w --------
  const int tid = threadIdx.x, lane = tid % 32, warp = (tid / 32) % 4;
  const int warpgroup = tid / 128, wk = warpgroup / WG_MN, wg_m = warpgroup % WG_MN;
#if HINT_evict_first
  const unsigned long long policy = evict_first_policy();
#else
  const unsigned long long policy = 0;
#endif

  float acc[WGMMAS][ACC];   // (4, WM/2): D of the four wgmma, 64 weight columns x WM tokens each
  float part[WGMMAS][ACC];  // SCALE=group: one group's sums (written by its first wgmma)
#pragma unroll
  for (int j = 0; j < WGMMAS; ++j)
#pragma unroll
    for (int x = 0; x < ACC; ++x) acc[j][x] = part[j][x] = 0.f;
#pragma unroll
  for (int j = 0; j < WGMMAS; ++j) {
    fence_operands(acc[j]);
    fence_operands(part[j]);
  }

  // ---- main loop: the wgmma pipeline over this slice's k-tiles ------------------------------
  auto load = [&](int kt, int slot) {
    const Stage st(base + slot * STAGE_BYTES);
    load_tile_async<BM, 2 * BK, SW, THREADS>(st.a, reinterpret_cast<const u8*>(A), m0, M,
                                            (kt_begin + kt) * BK * 2, K * 2, tid);
    load_weights(st, p, n0, kt_begin + kt, tid, policy);
  };
  auto consume = [&](int, int slot) {
    const Stage st(base + slot * STAGE_BYTES);
    wgmma_stage(st, st.a + wg_m * WM * SW, wk, warp, lane, acc, part);  // whole 8-row groups
  };
  wgmma_pipeline<STAGES>(k_tiles, load, consume);
#pragma unroll
  for (int j = 0; j < WGMMAS; ++j) fence_operands(acc[j]);  // read only after the last wait

  // ---- WARPS_K > 1: the k-groups' partial sums meet in shared memory -------------------------
  if constexpr (WARPS_K > 1) {
    __syncthreads();  // every warpgroup is done with the pipeline's shared memory
    float* red = reinterpret_cast<float*>(smem);  // (WARPS_K - 1, WG_MN, 4 * ACC, 128)
    constexpr int REGS = WGMMAS * ACC;
    const int t128 = tid % 128;
    if (wk > 0) {
#pragma unroll
      for (int x = 0; x < REGS; ++x)
        red[(((wk - 1) * WG_MN + wg_m) * REGS + x) * 128 + t128] = (&acc[0][0])[x];
    }
    __syncthreads();  // every k-group's partial sums are in shared memory
    if (wk == 0) {
#pragma unroll
      for (int w = 1; w < WARPS_K; ++w)
#pragma unroll
        for (int x = 0; x < REGS; ++x)
          (&acc[0][0])[x] += red[(((w - 1) * WG_MN + wg_m) * REGS + x) * 128 + t128];
    }
  }

  // ---- epilogue: warpgroups of k-group 0 hold the tile's sums; D is C^T ---------------------
  const int row0 = m0 + wg_m * WM;  // first token of the warpgroup
  // each accumulator of this thread with its output element (m, n), inside C only
  auto each_output = [&](auto&& visit) {
#pragma unroll
    for (int j = 0; j < WGMMAS; ++j)
#pragma unroll
      for (int x = 0; x < ACC; ++x) {
        const int m = row0 + wgmma_acc_col(lane, x);
        const int n = n0 + w4map::column_of_row(j, wgmma_acc_row(warp, lane, x));
        if (m < M && n < N) visit(static_cast<i64>(m) * N + n, acc[j][x]);
      }
  };
  if constexpr (SPLIT_K == 1) {
    if (wk != 0) return;
    each_output([&](i64 at, float v) { C[at] = to_t(v); });
  } else {
    // every slice adds its sums (fp32 atomics, resolved in L2); the last one to arrive reads
    // the totals, re-zeroes them and writes C (all threads take part in the barriers)
    if (wk == 0 && k_tiles > 0) each_output([&](i64 at, float v) { atomicAdd(workspace + at, v); });
    if (!splitk_arrive(workspace, M, N, tile.m * gridDim.x + tile.n) || wk != 0) return;
    each_output([&](i64 at, float) {
      const float v = __ldcg(workspace + at);
      __stcg(workspace + at, 0.f);
      C[at] = to_t(v);
    });
  }
}
