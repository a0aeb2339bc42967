// RMSNorm of LLM inference: y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w[:]
// (Llama, Mistral: one row per token, cols = hidden size). A user kernel outside the library:
// the "your own kernel" example of the README.
//
// One block per row. Each thread loads VEC elements per instruction, squares and sums them in
// float32, the block reduces the sums (warp shuffles, then one shared-memory step), and a
// second pass scales x (hot in L1/L2 by then) by the row's factor and by w.
//
// Knobs (template parameters, set by rmsnorm.yaml):
//   T       float or __half    element type of x, w and y (accumulation in float32)
//   BLOCK   threads per row
//   VEC     elements per load instruction (16 bytes at most)
//   UNROLL  loads in flight per thread before the adds
#include <cuda_fp16.h>

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// VEC elements moved as one aligned vector
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Vec { T v[VEC]; };

template <typename T, int BLOCK, int VEC, int UNROLL>
__global__ void __launch_bounds__(BLOCK) rmsnorm(const T* __restrict__ x,
                                                 const T* __restrict__ w, T* __restrict__ y,
                                                 int rows, int cols, float eps) {
  const int row = blockIdx.x;
  if (row >= rows) return;
  const T* xr = x + static_cast<long long>(row) * cols;
  T* yr = y + static_cast<long long>(row) * cols;
  const int nvec = cols / VEC;  // (the space requires cols % VEC == 0: aligned rows)

  float sum = 0.f;
  for (int base = threadIdx.x; base < nvec; base += BLOCK * UNROLL) {
    Vec<T, VEC> in[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {  // all loads of the step before any add
      const int i = base + u * BLOCK;
      if (i < nvec) in[u] = reinterpret_cast<const Vec<T, VEC>*>(xr)[i];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      if (base + u * BLOCK < nvec) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float f = to_float(in[u].v[k]);
          sum += f * f;
        }
      }
    }
  }

  // block sum: shuffles inside each warp, then the warps' sums through shared memory
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  __shared__ float warp_sums[BLOCK / 32];
  __shared__ float scale;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < BLOCK / 32; ++i) total += warp_sums[i];
    scale = rsqrtf(total / cols + eps);
  }
  __syncthreads();
  const float s = scale;

  for (int i = threadIdx.x; i < nvec; i += BLOCK) {  // second pass: x is hot in L1/L2
    const Vec<T, VEC> xv = reinterpret_cast<const Vec<T, VEC>*>(xr)[i];
    const Vec<T, VEC> wv = reinterpret_cast<const Vec<T, VEC>*>(w)[i];
    Vec<T, VEC> out;
#pragma unroll
    for (int k = 0; k < VEC; ++k) out.v[k] = from_float<T>(to_float(xv.v[k]) * s * to_float(wv.v[k]));
    reinterpret_cast<Vec<T, VEC>*>(yr)[i] = out;
  }
}
