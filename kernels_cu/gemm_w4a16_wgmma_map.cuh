// gemm_w4a16_wgmma_map.cuh: where the wgmma path of gemm_w4a16 (PATH=wgmma) puts each weight and
// finds each output: the index math of gemm_w4a16_wgmma.cuh, in plain C++ so that a host program
// can run it (tests/data/w4a16_wgmma_map_harness.cpp, tests/test_w4a16_wgmma_map.py).
//
// The path computes C^T = W^T . A^T: a warpgroup's wgmma.m64nNk16 takes 64 weight columns as its
// M (the dequantized weights, from registers) and N = WM tokens (the activations, from shared
// memory). A warpgroup covers four 64-column weight units (256 columns); warp w of the warpgroup
// reads unit w, lane l its 16 bytes of it (4 words, conflict-free, as on the mma path), and word
// j of those feeds the warpgroup's wgmma j (j = 0..3): so wgmma j multiplies, in row 16 w + r of
// its A (r = 0..15), column 64 w + 16 j + r of the warpgroup's 256 (word j of a lane holds n8
// tiles 2j and 2j + 1 of its unit, i.e. unit columns 16 j .. 16 j + 15).
//
// Fragments: dequant_word(word j) returns out[0..3] = (tile 2j: k 2t..2t+1, k 2t+8..2t+9; tile
// 2j+1: the same), each for column g = lane / 4 of its tile; a wgmma A fragment of warp w wants,
// in register i, row 16 w + g + 8 (i % 2) and k 2t + 8 (i / 2) (PTX ISA, wgmma .m64nNk16 matrix
// A), so register i is out[W4_FRAG_SOURCE(i)] = out[0], out[2], out[1], out[3].
#pragma once

#if defined(__CUDACC__)
#define W4_HD __host__ __device__
#else
#define W4_HD
#endif

namespace w4map {

// The dequant_word output that feeds register i (0..3) of a wgmma A fragment.
W4_HD constexpr int frag_source(int i) { return 2 * (i % 2) + i / 2; }

// The column (0..255, of the warpgroup's four units) that row `row` (0..63) of wgmma j's A and
// D holds: unit row / 16, within it n8 tile 2 j + (row % 16) / 8, column row % 8 of the tile.
W4_HD constexpr int column_of_row(int j, int row) { return 64 * (row / 16) + 16 * j + row % 16; }

// The weight unit (0..3 of the warpgroup's) that warp w reads, and the word of a lane's 16
// bytes that wgmma j takes.
W4_HD constexpr int unit_of_warp(int w) { return w; }
W4_HD constexpr int word_of_wgmma(int j) { return j; }

}  // namespace w4map
