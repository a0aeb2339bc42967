// attention_decode: one decode step of attention over a KV cache stored as fp16, int8 or fp8 E4M3
// (split-KV "flash-decoding" with an online softmax in fp32).
//
//   out[b, h, :] = softmax_t(q[b, h, :] . K[b, h / GROUP, t, :] / sqrt(D)) . V[b, h / GROUP, t, :]
//                  over the sequence's first seq_lens[b] tokens t,
//
// with K and V dequantized: k = k_code * k_scale, v = v_code * v_scale (fp16 cache: no scales).
//
// ---- layouts (tuning_spaces/attention_decode.yaml draws them; the reference reads the same) ----
//   q, out       [B, Hq, D] QTYPE (fp16 / bf16), Hq = Hkv * GROUP: query head h reads KV head
//                h / GROUP (GQA; torch SDPA's enable_gqa).
//   k, v         [SLABS, Hkv, SLAB_T, D] of the cache format:
//                  contiguous: SLABS = B, SLAB_T = S (slab = sequence b, row = token t);
//                  paged:      SLABS = B * pages_per_seq + 1 pages of SLAB_T = PAGE = 16 tokens;
//                              token t of sequence b is row t % 16 of page
//                              block_table[b * pages_per_seq + t / 16] (page 0 is never
//                              referenced: serving engines keep it as the null page).
//   v_scale      [SLABS, Hkv, SLAB_T] fp32: one per (token, head) (int8 / fp8 only).
//   k_scale      KSCALE_token: like v_scale; KSCALE_channel: [B, Hkv, D] fp32, one per
//                (channel, head) of a sequence (KIVI's per-channel keys).
//   seq_lens     [B] int32, 1 <= seq_lens[b] <= S.
//   workspace    [B, Hq, SPLITS, D + 2] fp32 (SPLITS > 1): each split's unnormalized output
//                sum_t 2^(s_t - m) v_t, its running max m and its sum l = sum_t 2^(s_t - m)
//                (s_t: the logit in log2 units).
//   tickets      [B * gridDim.y] u32 (COMBINE_last): arrivals per output group, zero before a
//                launch and left zero by it.
//
// ---- tunables (the space file states every relation between them as a constraint) ------------
//   THREADS    threads per block
//   KEYS       keys of the block per iteration: KEY_SLOTS = THREADS / TPK keys in flight at a
//              time, KPT = KEYS / KEY_SLOTS of them per thread, all loaded before the first use
//   VEC        cache elements per load (VEC * element bytes = 4, 8 or 16 bytes); TPK = D / VEC
//              lanes share one key row and sum its dot product with shuffles
//   SPLITS     slices of every sequence (blockIdx.x), each ceil(len / SPLITS) tokens
//   COMBINE    kernel: the splits' partial results are merged by attention_decode_combine, a
//              second launch (the space file's `then:`); last: the block that finishes a
//              group's last split merges them (a ticket per group, __threadfence)
//   HEADS      kv: one block per KV head serves its GROUP query heads (the cache read once);
//              q: one block per query head (the cache read GROUP times, the rest from L2)
//   DEQUANT    after: scales factor out of the dot product (per-token k scale: one multiply per
//              key; per-channel k scale: folded into q once; v scale: folded into the softmax
//              weight); before: every element is dequantized before it is used
//   POLICY     plain | cs | evict_first: the load form of the cache stream (cache_policy.cuh)
// Problem variants: QTYPE, KV (fp16 / int8 / fp8), KSCALE, LAYOUT, HEAD_DIM, GROUP.
//
// Launch: grid (SPLITS, Hkv * (HEADS_q ? GROUP : 1), B), block THREADS, SMEM_BYTES of dynamic
// shared memory (the per-warp softmax states merged at the end); then, where SPLITS > 1 and
// COMBINE_kernel: attention_decode_combine, grid B * Hq, block D.
#include <cuda_bf16.h>

// Each text knob arrives as NAME=value and NAME_value=1: the other values of NAME are 0 here, so
// that they can be read in C++ expressions as well as in #if.
#ifndef QTYPE_float16
#define QTYPE_float16 0
#endif
#ifndef QTYPE_bfloat16
#define QTYPE_bfloat16 0
#endif
#ifndef KV_fp16
#define KV_fp16 0
#endif
#ifndef KV_int8
#define KV_int8 0
#endif
#ifndef KV_fp8
#define KV_fp8 0
#endif
#ifndef KSCALE_token
#define KSCALE_token 0
#endif
#ifndef KSCALE_channel
#define KSCALE_channel 0
#endif
#ifndef LAYOUT_contiguous
#define LAYOUT_contiguous 0
#endif
#ifndef LAYOUT_paged
#define LAYOUT_paged 0
#endif
#ifndef COMBINE_kernel
#define COMBINE_kernel 0
#endif
#ifndef COMBINE_last
#define COMBINE_last 0
#endif
#ifndef HEADS_kv
#define HEADS_kv 0
#endif
#ifndef HEADS_q
#define HEADS_q 0
#endif
#ifndef DEQUANT_after
#define DEQUANT_after 0
#endif
#ifndef DEQUANT_before
#define DEQUANT_before 0
#endif
#ifndef POLICY_plain
#define POLICY_plain 0
#endif
#ifndef POLICY_cs
#define POLICY_cs 0
#endif
#ifndef POLICY_evict_first
#define POLICY_evict_first 0
#endif

// quantize_common.cuh names a template parameter VEC: keep the knob's value, free the name
constexpr int ATTN_VEC = VEC;
#undef VEC

#include "cache_policy.cuh"
#include "quantize_common.cuh"

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ < 800
#error "attention_decode needs sm_80 or newer (createpolicy, ld.global.L2::cache_hint)"
#endif
#if !(QTYPE_float16 || QTYPE_bfloat16)
#error "QTYPE must be float16 or bfloat16"
#endif
#if !(KV_fp16 || KV_int8 || KV_fp8)
#error "KV must be fp16, int8 or fp8"
#endif
#if !(KSCALE_token || KSCALE_channel)
#error "KSCALE must be token or channel"
#endif
#if !(LAYOUT_contiguous || LAYOUT_paged)
#error "LAYOUT must be contiguous or paged"
#endif
#if !(COMBINE_kernel || COMBINE_last)
#error "COMBINE must be kernel or last"
#endif
#if !(HEADS_kv || HEADS_q)
#error "HEADS must be kv or q"
#endif
#if !(DEQUANT_after || DEQUANT_before)
#error "DEQUANT must be after or before"
#endif
#if !(POLICY_plain || POLICY_cs || POLICY_evict_first)
#error "POLICY must be plain, cs or evict_first"
#endif

namespace attn {

#if QTYPE_float16
using QT = __half;
__device__ __forceinline__ float q_to_float(QT v) { return __half2float(v); }
__device__ __forceinline__ QT float_to_q(float v) { return __float2half_rn(v); }
#else
using QT = __nv_bfloat16;
__device__ __forceinline__ float q_to_float(QT v) { return __bfloat162float(v); }
__device__ __forceinline__ QT float_to_q(float v) { return __float2bfloat16_rn(v); }
#endif

#if KV_fp16
using KVT = __half;
#else
using KVT = unsigned char;  // an int8 code (as its byte) or an E4M3 byte
#endif
constexpr bool SCALED = !KV_fp16;
constexpr int ELEM_BYTES = sizeof(KVT);

constexpr int D = HEAD_DIM;
constexpr int QH = HEADS_kv ? GROUP : 1;  // query heads of one block
constexpr int VEC = ATTN_VEC;   // cache elements per load
constexpr int TPK = D / VEC;              // lanes that share one key row
constexpr int KEY_SLOTS = THREADS / TPK;  // keys in flight in the block
constexpr int KPT = KEYS / KEY_SLOTS;     // keys per thread per iteration
constexpr int WARPS = THREADS / 32;
constexpr int LOAD_BYTES = VEC * ELEM_BYTES;
[[maybe_unused]] constexpr int PAGE = 16;  // tokens per page of the paged layout
constexpr Policy POL = POLICY_cs ? Policy::cs : POLICY_evict_first ? Policy::evict_first : Policy::plain;
constexpr float LOG2E = 1.4426950408889634f;
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// ---- preconditions (each is a constraint of tuning_spaces/attention_decode.yaml) ----
static_assert(D == 64 || D == 128, "HEAD_DIM is 64 or 128");
static_assert(GROUP == 1 || GROUP == 4 || GROUP == 8, "GROUP (Hq / Hkv) is 1, 4 or 8");
static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps, at most 1024 threads");
static_assert(LOAD_BYTES == 4 || LOAD_BYTES == 8 || LOAD_BYTES == 16,
              "VEC * element bytes: one load of 4, 8 or 16 bytes");
static_assert(D % VEC == 0 && TPK <= 32 && (32 % TPK) == 0,
              "D / VEC lanes of one warp (a power of two <= 32) share a key row");
static_assert(THREADS % TPK == 0, "whole key rows per block");
static_assert(KEYS % KEY_SLOTS == 0 && KPT >= 1, "KEYS is a whole number of KEY_SLOTS = THREADS * VEC / D");
static_assert(KPT <= 8, "at most 8 keys per thread per iteration (registers)");
static_assert(!(KV_fp8 && __CUDA_ARCH__ < 890 && VEC * KPT > 8),
              "sm_80 decodes E4M3 in software: at most 8 codes per thread per iteration");
static_assert(!(KV_fp16 && DEQUANT_before), "an fp16 cache has no scales: one DEQUANT value");
static_assert(!(KV_fp16 && KSCALE_channel), "an fp16 cache has no scales: one KSCALE value");
static_assert(!(SPLITS == 1 && COMBINE_last), "one split has nothing to combine: one COMBINE value");
static_assert(!(GROUP == 1 && HEADS_q), "one query head per KV head: one HEADS value");

// ---- one cache row slice: VEC elements as floats (codes, not yet scaled) ----
template <int N>
__device__ __forceinline__ void decode(const typename RawBytes<N * ELEM_BYTES>::T& raw, float (&out)[N]) {
  const KVT* e = reinterpret_cast<const KVT*>(&raw);
#pragma unroll
  for (int i = 0; i < N; ++i) {
#if KV_fp16
    out[i] = __half2float(e[i]);
#elif KV_int8
    out[i] = static_cast<float>(static_cast<signed char>(e[i]));
#else
    out[i] = decode_e4m3(e[i]);
#endif
  }
}

// Row index (in elements / D) of token t of sequence b, KV head hk: where its D elements start
// divided by D, and where its token scale is.
__device__ __forceinline__ size_t cache_row(const int* __restrict__ block_table, int b, int hk,
                                            int t, int hkv, int s, int pages_per_seq) {
#if LAYOUT_paged
  const int page = block_table[b * pages_per_seq + t / PAGE];
  return (static_cast<size_t>(page) * hkv + hk) * PAGE + (t % PAGE);
#else
  (void)block_table;
  (void)pages_per_seq;
  return (static_cast<size_t>(b) * hkv + hk) * s + t;
#endif
}

// The merge of online-softmax states (m, l, o): both in log2 units, m = -inf for "no key yet".
__device__ __forceinline__ float rescale(float m_old, float m_new) {
  // 2^(m_old - m_new), 0 where m_old is -inf, 1 where both are (nothing to rescale)
  return m_new == neg_inf() ? 1.0f : exp2f(m_old - m_new);
}

// out[d] of one (b, query head) from its SPLITS partial results ws[SPLITS][D + 2]:
//   M = max_s m_s, out = sum_s 2^(m_s - M) o_s[d] / sum_s 2^(m_s - M) l_s.
// LOAD reads a workspace float (ordinary in the combine kernel; __ldcg in the last block,
// whose L1 may hold stale lines of what other blocks wrote).
template <class LOAD>
__device__ __forceinline__ float combine_splits(const float* ws, int d, LOAD load) {
  float m = neg_inf();
#pragma unroll 4
  for (int s = 0; s < SPLITS; ++s) m = fmaxf(m, load(ws + s * (D + 2) + D));
  float num = 0.0f, den = 0.0f;
#pragma unroll 4
  for (int s = 0; s < SPLITS; ++s) {
    const float* part = ws + s * (D + 2);
    const float w = rescale(load(part + D), m);  // an empty split: m_s = -inf, weight 0
    num = fmaf(w, load(part + d), num);
    den = fmaf(w, load(part + D + 1), den);
  }
  return num / den;
}

}  // namespace attn

using namespace attn;

extern "C" __global__ void __launch_bounds__(THREADS)
    attention_decode(const QT* __restrict__ q, const KVT* __restrict__ k, const KVT* __restrict__ v,
                     const float* __restrict__ k_scale, const float* __restrict__ v_scale,
                     const int* __restrict__ block_table, const int* __restrict__ seq_lens,
                     QT* __restrict__ out, float* __restrict__ workspace,
                     unsigned* __restrict__ tickets, int batch, int hkv, int s_cap,
                     int pages_per_seq) {
  extern __shared__ float smem[];  // [QH][WARPS][D + 2]: each warp's merged state, then the block's
  const int split = blockIdx.x, b = blockIdx.z;
  const int hk = HEADS_kv ? blockIdx.y : blockIdx.y / GROUP;  // KV head
  const int h0 = HEADS_kv ? blockIdx.y * GROUP : blockIdx.y;  // first query head of the block
  const int hq_total = hkv * GROUP;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int part = threadIdx.x % TPK;  // which VEC-slice of a row this thread holds
  const int slot = threadIdx.x / TPK;  // which of the KEY_SLOTS keys in flight
  const int d0 = part * VEC;
  (void)batch;

  // ---- this block's tokens: split `split` of the sequence ----
  const int len = seq_lens[b];
  const int chunk = (len + SPLITS - 1) / SPLITS;
  const int t_begin = min(len, split * chunk), t_end = min(len, t_begin + chunk);

  unsigned long long policy = 0;
  if constexpr (POL == Policy::evict_first) policy = l2_evict_first_policy();

  // ---- q slice, prescaled by 1/sqrt(D) * log2(e) (softmax in base 2: exp2f) ----
  float qf[QH][VEC];  // (QH, VEC)
  {
    const float qscale = rsqrtf(static_cast<float>(D)) * LOG2E;
#if KSCALE_channel && DEQUANT_after
    float cs[VEC];  // per-channel k scales of this slice, folded into q once
    const float* kcs = k_scale + (static_cast<size_t>(b) * hkv + hk) * D + d0;
#pragma unroll
    for (int i = 0; i < VEC; ++i) cs[i] = kcs[i];
#endif
#pragma unroll
    for (int h = 0; h < QH; ++h) {
      const QT* qrow = q + (static_cast<size_t>(b) * hq_total + h0 + h) * D + d0;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        qf[h][i] = q_to_float(qrow[i]) * qscale;
#if KSCALE_channel && DEQUANT_after
        qf[h][i] *= cs[i];
#endif
      }
    }
  }
#if KSCALE_channel && DEQUANT_before
  float kcs[VEC];  // per-channel k scales of this slice, applied to every element
  {
    const float* p = k_scale + (static_cast<size_t>(b) * hkv + hk) * D + d0;
#pragma unroll
    for (int i = 0; i < VEC; ++i) kcs[i] = p[i];
  }
#endif

  // ---- online softmax state of this thread's key slot (the TPK lanes of a slot agree) ----
  float m[QH], l[QH], acc[QH][VEC];  // acc: (QH, VEC) unnormalized output slice
#pragma unroll
  for (int h = 0; h < QH; ++h) {
    m[h] = neg_inf();
    l[h] = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[h][i] = 0.0f;
  }

  using Raw = typename RawBytes<LOAD_BYTES>::T;
  // ================================ main loop: KEYS keys per iteration =========================
  for (int base = t_begin; base < t_end; base += KEYS) {
    // -- loads: KPT keys per thread, K and V slices and their token scales, all issued first --
    Raw kraw[KPT], vraw[KPT];  // (KPT) rows' VEC-slices
    float ks[KPT], vs[KPT];
    bool valid[KPT];
#pragma unroll
    for (int j = 0; j < KPT; ++j) {
      const int t = base + j * KEY_SLOTS + slot;  // adjacent slots read adjacent rows
      valid[j] = t < t_end;
      ks[j] = vs[j] = 1.0f;
      if (valid[j]) {
        const size_t row = cache_row(block_table, b, hk, t, hkv, s_cap, pages_per_seq);
        kraw[j] = load_stream<POL, LOAD_BYTES>(k + row * D + d0, policy);
        vraw[j] = load_stream<POL, LOAD_BYTES>(v + row * D + d0, policy);
        if constexpr (SCALED) {
#if KSCALE_token
          ks[j] = load_stream_float<POL>(k_scale + row, policy);
#endif
          vs[j] = load_stream_float<POL>(v_scale + row, policy);
        }
      } else {
        kraw[j] = Raw{};
        vraw[j] = Raw{};
      }
    }

    // -- logits: s[j][h] = q_h . k_j (log2 units), summed over the TPK lanes of the slot --
    float s[KPT][QH];  // (KPT, QH)
    (void)ks;          // (read only where the k scale is per token)
#pragma unroll
    for (int j = 0; j < KPT; ++j) {
      float kf[VEC];
      decode<VEC>(kraw[j], kf);
#if DEQUANT_before
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
#if KSCALE_channel
        kf[i] *= kcs[i];
#else
        kf[i] *= ks[j];
#endif
      }
#endif
#pragma unroll
      for (int h = 0; h < QH; ++h) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < VEC; ++i) dot = fmaf(qf[h][i], kf[i], dot);
        dot = group_sum<TPK>(dot);  // SHFL.BFLY: every lane of the slot gets the row's dot
#if DEQUANT_after && KSCALE_token
        dot *= ks[j];  // the per-token scale factors out of the dot product
#endif
        s[j][h] = valid[j] ? dot : neg_inf();
      }
    }

    // -- online softmax: one rescale per iteration, then accumulate p * v --
    float vf[KPT][VEC];
#pragma unroll
    for (int j = 0; j < KPT; ++j) {
      decode<VEC>(vraw[j], vf[j]);
#if DEQUANT_before
#pragma unroll
      for (int i = 0; i < VEC; ++i) vf[j][i] *= vs[j];
#endif
    }
#pragma unroll
    for (int h = 0; h < QH; ++h) {
      float m_new = m[h];
#pragma unroll
      for (int j = 0; j < KPT; ++j) m_new = fmaxf(m_new, s[j][h]);
      const float alpha = rescale(m[h], m_new);
      l[h] *= alpha;
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[h][i] *= alpha;
#pragma unroll
      for (int j = 0; j < KPT; ++j) {
        const float p = valid[j] ? exp2f(s[j][h] - m_new) : 0.0f;
        l[h] += p;
#if DEQUANT_after
        const float pv = p * vs[j];  // the per-token v scale folded into the weight
#else
        const float pv = p;
#endif
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[h][i] = fmaf(pv, vf[j][i], acc[h][i]);
      }
      m[h] = m_new;
    }
  }

  // ================================ merge the key slots =======================================
  // -- within a warp: slots differ in lane bits >= log2(TPK); butterfly over them --
#pragma unroll
  for (int offset = TPK; offset < 32; offset <<= 1) {
#pragma unroll
    for (int h = 0; h < QH; ++h) {
      const float m_other = __shfl_xor_sync(0xffffffffu, m[h], offset);
      const float l_other = __shfl_xor_sync(0xffffffffu, l[h], offset);
      const float m_new = fmaxf(m[h], m_other);
      const float a = rescale(m[h], m_new), c = rescale(m_other, m_new);
      l[h] = l[h] * a + l_other * c;
#pragma unroll
      for (int i = 0; i < VEC; ++i) {
        const float o_other = __shfl_xor_sync(0xffffffffu, acc[h][i], offset);
        acc[h][i] = acc[h][i] * a + o_other * c;
      }
      m[h] = m_new;
    }
  }
  // -- across warps: lanes 0..TPK-1 of each warp publish [QH][WARPS][D + 2] --
  if (lane < TPK) {
#pragma unroll
    for (int h = 0; h < QH; ++h) {
      float* st = smem + (h * WARPS + warp) * (D + 2);
#pragma unroll
      for (int i = 0; i < VEC; ++i) st[d0 + i] = acc[h][i];
      if (lane == 0) {
        st[D] = m[h];
        st[D + 1] = l[h];
      }
    }
  }
  __syncthreads();  // wait for every warp's state

  // -- the block's state per (query head, dim): thread idx covers (h, d) = divmod(idx, D) --
  for (int idx = threadIdx.x; idx < QH * D; idx += THREADS) {
    const int h = idx / D, d = idx % D;
    const float* st = smem + h * WARPS * (D + 2);
    float mb = neg_inf();
    for (int w = 0; w < WARPS; ++w) mb = fmaxf(mb, st[w * (D + 2) + D]);
    float o = 0.0f, lb = 0.0f;
    for (int w = 0; w < WARPS; ++w) {
      const float a = rescale(st[w * (D + 2) + D], mb);
      o = fmaf(a, st[w * (D + 2) + d], o);
      lb = fmaf(a, st[w * (D + 2) + D + 1], lb);
    }
    const size_t head = static_cast<size_t>(b) * hq_total + h0 + h;
    if constexpr (SPLITS == 1) {
      out[head * D + d] = float_to_q(o / lb);  // len >= 1: lb >= 1 (the max term is 2^0)
    } else {
      float* part_ws = workspace + (head * SPLITS + split) * (D + 2);
      part_ws[d] = o;
      if (d == 0) {
        part_ws[D] = mb;
        part_ws[D + 1] = lb;
      }
    }
  }

#if COMBINE_last
  // ================================ last block of the group combines ==========================
  __shared__ bool last;
  __threadfence();  // this block's partial results are visible before its ticket is
  __syncthreads();  // every thread has written and fenced
  if (threadIdx.x == 0) {
    unsigned* ticket = tickets + static_cast<size_t>(b) * gridDim.y + blockIdx.y;
    last = atomicAdd(ticket, 1u) == SPLITS - 1;
    if (last) *ticket = 0u;  // every split has arrived: leave it zero for the next launch
  }
  __syncthreads();  // wait for the ticket
  if (!last) return;
  __threadfence();  // see every other split's partial results
  for (int idx = threadIdx.x; idx < QH * D; idx += THREADS) {
    const int h = idx / D, d = idx % D;
    const size_t head = static_cast<size_t>(b) * hq_total + h0 + h;
    const float* ws = workspace + head * SPLITS * (D + 2);
    out[head * D + d] = float_to_q(combine_splits(ws, d, [](const float* p) { return __ldcg(p); }));
  }
#else
  (void)tickets;
#endif
}

// The second launch of COMBINE_kernel (SPLITS > 1): one block per (b, query head), one thread
// per output element.
extern "C" __global__ void __launch_bounds__(D)
    attention_decode_combine(const float* __restrict__ workspace, QT* __restrict__ out, int heads) {
  const int head = blockIdx.x, d = threadIdx.x;  // head = b * Hq + h
  if (head >= heads) return;
  const float* ws = workspace + static_cast<size_t>(head) * SPLITS * (D + 2);
  out[static_cast<size_t>(head) * D + d] = float_to_q(combine_splits(ws, d, [](const float* p) { return *p; }));
}
