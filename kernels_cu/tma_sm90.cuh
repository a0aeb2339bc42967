// tma_sm90.cuh: Hopper's asynchronous copy machinery as the warp-specialized kernels use it
// (sm_90; setmaxnreg needs sm_90a): tensor maps, TMA copies, mbarriers, named barriers and the
// register reallocation between warpgroups. Self-contained: kernels outside the GEMMs (a user's
// TMA copy, the workbench's tests) include it alone.
//
//   TmaDescriptor   the CUtensorMap a kernel takes by value: `const __grid_constant__
//                   TmaDescriptor map` (128 bytes, 64-byte aligned; the workbench encodes it
//                   per shape and config from the space file's {tensor_map: ...} argument).
//                   __grid_constant__ keeps it in the parameter space, where the TMA unit reads
//                   it; a copy in local memory would not be a valid tensor-map address.
//   mbarrier        a 64-bit shared-memory barrier with a phase bit: `count` arrivals plus the
//                   transaction bytes announced by expect_tx complete a phase (PTX ISA,
//                   "mbarrier"). Waiting on parity p returns once the phase with parity p has
//                   completed, i.e. once the barrier's current phase parity differs from p; a
//                   fresh barrier is in phase 0, so a wait on parity 1 passes at once.
//   TMA load        cp.async.bulk.tensor: one thread copies a whole box from global to shared
//                   memory, swizzled as the map says; elements outside the tensor are written
//                   as zeros, and the full box's bytes complete on the mbarrier.
//   multicast       a TMA load with .multicast::cluster writes its box into several CTAs of a
//                   thread-block cluster at once (the same offset in each), completing the
//                   bytes on each one's barrier; mapa + mbarrier.arrive.shared::cluster arrive
//                   on a barrier of another CTA of the cluster.
//   TMA store       the reverse, from shared memory through the map (elements outside the
//                   tensor are not written); bulk groups say when the source may be reused.
#pragma once

using tma_u32 = unsigned int;
using tma_u64 = unsigned long long;

struct alignas(64) TmaDescriptor {
  tma_u64 opaque[16];
};
static_assert(sizeof(TmaDescriptor) == 128, "a CUtensorMap is 128 bytes");

__device__ __forceinline__ tma_u32 shared_address(const void* p) {
  return static_cast<tma_u32>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ tma_u64 param_address(const TmaDescriptor* map) {
  return reinterpret_cast<tma_u64>(map);
}

// Fetch the descriptor into the TMA unit's cache ahead of the first copy.
__device__ __forceinline__ void tma_prefetch_descriptor(const TmaDescriptor* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(param_address(map)) : "memory");
}

// ---- mbarrier ----------------------------------------------------------------------------------
__device__ __forceinline__ void mbar_init(tma_u32 bar, tma_u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

// Makes the initialised barriers visible to the other threads and to the async proxy (TMA)
// before the __syncthreads that publishes them.
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also announces `bytes` more transaction bytes for the current phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(tma_u32 bar, tma_u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbar_arrive(tma_u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// One arrival on the barrier at the same shared-memory offset as `bar` in the CTA of rank
// `cta_rank` of this cluster (itself included): mapa turns the offset into that CTA's
// shared::cluster address. The default semantics (release, CTA scope), as CUTLASS's
// ClusterBarrier::arrive(cta_id) has them: the accesses a stage's release stands for are the
// wgmma reads of this CTA's own stage, complete (wgmma.wait_group) before the arrival; an
// explicit .release.cluster costs a MEMBAR.ALL.CTA + MEMBAR.ALL.GPU per arrival (ptxas 13.5).
__device__ __forceinline__ void mbar_arrive_cluster(tma_u32 bar, tma_u32 cta_rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(cta_rank)
      : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(tma_u32 bar, tma_u32 parity) {
  tma_u32 done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Block until the phase of parity `parity` has completed (try_wait itself suspends the thread
// for a while before it returns false, so the loop does not spin hot).
__device__ __forceinline__ void mbar_wait(tma_u32 bar, tma_u32 parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}


// ---- TMA ---------------------------------------------------------------------------------------
// Box at coordinates (c0 innermost, c1) of the map's tensor into shared memory at `dst`,
// completing its bytes on `bar`. dst must be aligned to the swizzle pattern's period (1024 bytes
// for the 128-byte swizzle; 128 bytes without a swizzle).
__device__ __forceinline__ void tma_load_2d(tma_u32 dst, const TmaDescriptor* map, int c0, int c1,
                                            tma_u32 bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(param_address(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The same box, multicast: written at offset `dst` of the shared memory of every CTA of the
// cluster whose bit is set in `cta_mask` (bit r: the CTA of rank r), each completing the box's
// bytes on its own barrier at offset `bar`. Every destination CTA must expect those bytes on
// that barrier (its producer's expect_tx) and must not be reusing the stage.
__device__ __forceinline__ void tma_load_2d_multicast(tma_u32 dst, const TmaDescriptor* map,
                                                      int c0, int c1, tma_u32 bar,
                                                      unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(param_address(map)), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
}

// Shared memory at `src` into the map's tensor at (c0, c1); issue after a fence.proxy.async
// that makes the generic-proxy writes of `src` visible to the TMA unit.
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* map, int c0, int c1,
                                             tma_u32 src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::
                   "l"(param_address(map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}

__device__ __forceinline__ void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// At most N committed store groups may still be reading their shared-memory source.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

// Every committed store group has completed (its writes are done, not just its reads): before
// the block exits, so that no store still reads shared memory the block gives back.
__device__ __forceinline__ void tma_store_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Generic-proxy writes to shared memory (st.shared, stmatrix) become visible to the async proxy
// (TMA stores, wgmma reads).
__device__ __forceinline__ void tma_fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// ---- named barriers ----------------------------------------------------------------------------
// bar.sync / bar.arrive on hardware barrier ID (1..15; 0 is __syncthreads) for `threads` threads
// (a multiple of 32): the arriving side does not wait. The ID is a compile-time constant, so
// ptxas reserves only the barriers used (a register ID makes it reserve all 16).
template <int ID>
__device__ __forceinline__ void named_barrier_sync(int threads) {
  static_assert(ID >= 1 && ID <= 15, "named barriers 1..15 (0 is __syncthreads)");
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "r"(threads) : "memory");
}
template <int ID>
__device__ __forceinline__ void named_barrier_arrive(int threads) {
  static_assert(ID >= 1 && ID <= 15, "named barriers 1..15 (0 is __syncthreads)");
  asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "r"(threads) : "memory");
}

// ---- thread-block clusters (sm_90) -------------------------------------------------------------
// This CTA's rank in its cluster, and the cluster's CTA count (1 when launched without one).
__device__ __forceinline__ tma_u32 cluster_ctarank() {
  tma_u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
__device__ __forceinline__ tma_u32 cluster_nctarank() {
  tma_u32 count;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(count));
  return count;
}

// Every thread of every CTA of the cluster (all of them, converged: .aligned) arrives, then
// waits for all the others: what each did before (barrier initialisation, its last accesses to
// another CTA's shared memory) is visible to all after (release / acquire, cluster scope).
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

// ---- register reallocation (sm_90a) ------------------------------------------------------------
// Every thread of a warpgroup executes these together; the counts are multiples of 8 in
// [24, 256]. A warpgroup that gives registers back lets the others take them.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <int REGS>
__device__ __forceinline__ void warpgroup_registers_release() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void warpgroup_registers_claim() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: 24..256, step 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
#endif
