// int_types.cuh: the fixed-width integer names the kernels use (NVRTC has no <cstdint>).
//
// One place for them: gemm_common.cuh (the int8 / fp8 GEMMs), the Hopper helpers
// (wgmma_sm90.cuh, gemm_smem_tiles.cuh) and gemm_w4a16 include this header, so the helpers do
// not pull in an epilogue (OUT, EPI) that a kernel without one does not define.
#pragma once

using i8 = signed char;
using u8 = unsigned char;
using i32 = int;
using u32 = unsigned int;
using i64 = long long;
using u64 = unsigned long long;
