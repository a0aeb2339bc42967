// aos_soa: one particle update over three memory layouts of the same data.
//
// Each particle has F = 7 float32 fields: x y z vx vy vz mass. n particles fill 7 * n floats in
// every layout; only the place of field f of particle i differs (see offset()):
//   aos    array of structures   [x y z vx vy vz m][x y z vx vy vz m]...       i * 7 + f
//   soa    structure of arrays   [x x x ...][y y y ...]...[m m m ...]          f * n + i
//   aosoa  tiles of TILE particles, SoA inside a tile:
//          [x0..x(T-1) y0..y(T-1) ... m0..m(T-1)][next tile]...  tile * 7T + f * T + i % T
//          (the last tile holds the n % TILE leftover particles with that width instead of T)
//
// The update (a spring towards the origin, explicit Euler; dt and k are arguments):
//   v += dt * (-k * r / m)      r = (x, y, z), v = (vx, vy, vz)
//   r += dt * v                 (with the new v)
//   mass is copied, so out holds the whole new state (double buffering: in -> out).
//
// Why SoA wins: a warp's load of one field, 32 consecutive particles, VEC = 1 (4 bytes each):
//   soa    128 contiguous bytes: 4 sectors of 32 bytes per request, every byte used
//   aosoa  TILE >= 8: 32 / TILE runs of 4 * TILE bytes (>= one full sector): 4 sectors, every
//          byte used; TILE = 4: 8 runs of 16 bytes, 8 sectors, half of each used
//   aos    32 floats 28 bytes apart, spread over 896 bytes: 28 sectors per request, 1/7 of
//          their bytes used. The other 6 fields lie in the same sectors, so DRAM traffic can
//          stay minimal while L1 keeps those lines, but every request moves 7x the sectors
//          through L1, and L1 capacity (occupancy, ITEMS) decides how much is fetched again.
// With VEC > 1 a thread takes VEC consecutive particles and reads each field (soa, aosoa) as
// one VEC-wide load, or (aos) its group's 7 * VEC contiguous floats as 7 VEC-wide loads that
// are unpacked in registers: wide loads rescue part of the AoS cost (fewer requests), not the
// sectors a request touches.
//
// Macros (set by the space file):
//   LAYOUT  aos | soa | aosoa (LAYOUT_aos, ... are defined to 1 by the workbench)
//   TILE    AoSoA tile width in particles (the other layouts take the default)
//   BLOCK   threads per block;  ITEMS  particles per thread;  VEC  particles per load group
//
// Alignment: in and out 16-byte aligned. n is arbitrary: groups that are cut by n, or whose
// vector loads would be misaligned (soa with n % VEC != 0, the partial last tile of aosoa),
// take the scalar path.

// The workbench defines LAYOUT_<value> = 1 for the chosen layout only.
#ifndef LAYOUT_aos
#define LAYOUT_aos 0
#endif
#ifndef LAYOUT_soa
#define LAYOUT_soa 0
#endif
#ifndef LAYOUT_aosoa
#define LAYOUT_aosoa 0
#endif

// Preconditions (the space file states the same relations as constraints)
static_assert(LAYOUT_aos + LAYOUT_soa + LAYOUT_aosoa == 1, "LAYOUT: aos, soa or aosoa");
static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "BLOCK: whole warps, at most 1024");
static_assert(VEC == 1 || VEC == 2 || VEC == 4, "VEC: 1, 2 or 4 particles per load group");
static_assert(ITEMS % VEC == 0, "ITEMS: a whole number of VEC-particle groups");
static_assert(TILE % VEC == 0, "TILE % VEC == 0: a load group never straddles two tiles");
static_assert(LAYOUT_aosoa || TILE == 8, "TILE: only aosoa has tiles (the others keep 8)");
static_assert(7 * ITEMS + 16 <= 65536 / BLOCK,
              "registers: 7 floats per particle x ITEMS (+16) within 65536 / BLOCK per thread");

constexpr int F = 7;  // fields per particle: x y z vx vy vz mass

template <int N> struct VecOf;
template <> struct VecOf<1> { using T = float; };
template <> struct VecOf<2> { using T = float2; };
template <> struct VecOf<4> { using T = float4; };
using V = VecOf<VEC>::T;  // one load group's field: VEC floats

// The vector of floats [o, o + VEC) of a buffer, o a multiple of VEC. Indexing in units of V
// keeps a store whole: NVRTC 13 split `*(float4*)(out + f * n + i) = v` into four scalar
// stores (seen in the PTX), while `((float4*)out)[(f * n + i) / 4] = v` stays one st.v4.
__device__ __forceinline__ const V& vec_at(const float* buf, long long o) {
  return reinterpret_cast<const V*>(buf)[o / VEC];
}
__device__ __forceinline__ V& vec_at(float* buf, long long o) {
  return reinterpret_cast<V*>(buf)[o / VEC];
}

// Element j of a vector, and a vector from VEC values (registers only).
__device__ __forceinline__ float lane(float v, int) { return v; }
__device__ __forceinline__ float lane(float2 v, int j) { return j == 0 ? v.x : v.y; }
__device__ __forceinline__ float lane(float4 v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}
__device__ __forceinline__ V make_vec(const float* e) {
#if VEC == 4
  return make_float4(e[0], e[1], e[2], e[3]);
#elif VEC == 2
  return make_float2(e[0], e[1]);
#else
  return e[0];
#endif
}

// Where field f of particle i lives among the 7 * n floats.
__device__ __forceinline__ long long offset(long long i, int f, long long n) {
#if LAYOUT_aos
  return i * F + f;
#elif LAYOUT_soa
  return f * n + i;
#else
  const long long first = i / TILE * TILE;             // first particle of i's tile
  const long long width = min((long long)TILE, n - first);  // TILE, or less in the last tile
  return first * F + f * width + (i - first);
#endif
}

// Distance in floats from field f of particle i to field f of particle i + 1 when both are in
// one load group (a group never straddles an AoSoA tile: TILE % VEC == 0).
constexpr int NEXT = LAYOUT_aos ? F : 1;

// Can the group of VEC particles starting at i (a multiple of VEC) use VEC-wide accesses?
__device__ __forceinline__ bool vector_ok(long long i, long long n) {
#if LAYOUT_aos
  return i + VEC <= n;                                 // i * 7 * 4 bytes is VEC * 4-aligned
#elif LAYOUT_soa
  return i + VEC <= n && n % VEC == 0;                 // f * n keeps every field aligned
#else
  return i / TILE * TILE + TILE <= n;                  // a full tile (TILE % VEC == 0)
#endif
}

// p[j][f] = field f of particle i + j (1.0 for particles past n, which are never stored).
__device__ __forceinline__ void load_group(const float* in, long long i, long long n,
                                           float (&p)[VEC][F]) {
  if (vector_ok(i, n)) {
#if LAYOUT_aos
    float flat[VEC * F];  // the group's floats in memory order: (VEC particles, F fields)
#pragma unroll
    for (int k = 0; k < F; ++k) {
      const V v = vec_at(in, i * F + k * VEC);
#pragma unroll
      for (int j = 0; j < VEC; ++j) flat[k * VEC + j] = lane(v, j);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j)
#pragma unroll
      for (int f = 0; f < F; ++f) p[j][f] = flat[j * F + f];
#else
#pragma unroll
    for (int f = 0; f < F; ++f) {
      const V v = vec_at(in, offset(i, f, n));  // (VEC) particles
#pragma unroll
      for (int j = 0; j < VEC; ++j) p[j][f] = lane(v, j);
    }
#endif
  } else {
#pragma unroll
    for (int f = 0; f < F; ++f) {
      const long long o = offset(i, f, n);
#pragma unroll
      for (int j = 0; j < VEC; ++j) p[j][f] = i + j < n ? in[o + j * NEXT] : 1.0f;
    }
  }
}

// The store twin of load_group.
__device__ __forceinline__ void store_group(float* out, long long i, long long n,
                                            const float (&p)[VEC][F]) {
  if (vector_ok(i, n)) {
#if LAYOUT_aos
    float flat[VEC * F];  // the group's floats in memory order: (VEC particles, F fields)
#pragma unroll
    for (int j = 0; j < VEC; ++j)
#pragma unroll
      for (int f = 0; f < F; ++f) flat[j * F + f] = p[j][f];
#pragma unroll
    for (int k = 0; k < F; ++k) vec_at(out, i * F + k * VEC) = make_vec(flat + k * VEC);
#else
#pragma unroll
    for (int f = 0; f < F; ++f) {
      float e[VEC];  // (VEC) particles' field f
#pragma unroll
      for (int j = 0; j < VEC; ++j) e[j] = p[j][f];
      vec_at(out, offset(i, f, n)) = make_vec(e);
    }
#endif
  } else {
#pragma unroll
    for (int f = 0; f < F; ++f) {
      const long long o = offset(i, f, n);
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        if (i + j < n) out[o + j * NEXT] = p[j][f];
    }
  }
}

// One Euler step of one particle: q = (x, y, z, vx, vy, vz, mass), dtk = dt * k.
__device__ __forceinline__ void update(float (&q)[F], float dt, float dtk) {
  const float s = dtk * (1.0f / q[6]);  // dt * k / m
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    q[3 + d] = q[3 + d] - s * q[d];     // v += dt * (-k * r / m)
    q[d] = q[d] + dt * q[3 + d];        // r += dt * v
  }
}

// Thread t of block b handles GROUPS = ITEMS / VEC groups of VEC consecutive particles;
// consecutive threads take consecutive groups (its g-th group is b * GROUPS * BLOCK + g * BLOCK
// + t), so a warp's accesses are as contiguous as the layout allows.
extern "C" __global__ void __launch_bounds__(BLOCK)
aos_soa_update(const float* __restrict__ in, float* __restrict__ out, long long n, float dt,
               float k) {
  constexpr int GROUPS = ITEMS / VEC;  // load groups per thread
  const long long first = (long long)blockIdx.x * GROUPS * BLOCK + threadIdx.x;
  const float dtk = dt * k;

  // ---- load: every group's loads issued before any math ----
  float p[GROUPS][VEC][F];  // (group, particle, field)
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long i = (first + (long long)g * BLOCK) * VEC;  // first particle of the group
    if (i < n) load_group(in, i, n, p[g]);
  }
  // ---- update and store ----
#pragma unroll
  for (int g = 0; g < GROUPS; ++g) {
    const long long i = (first + (long long)g * BLOCK) * VEC;
    if (i >= n) continue;
#pragma unroll
    for (int j = 0; j < VEC; ++j) update(p[g][j], dt, dtk);
    store_group(out, i, n, p[g]);
  }
}
