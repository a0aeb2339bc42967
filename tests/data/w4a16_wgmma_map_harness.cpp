// Host harness of kernels_cu/gemm_w4a16_wgmma_map.cuh (tests/test_w4a16_wgmma_map.py): prints
// the wgmma path's index maps over their whole domains, one table per line:
//   frag_source i=0..3 | unit_of_warp w=0..3 | word_of_wgmma j=0..3 | column_of_row j, row
#include <cstdio>

#include "gemm_w4a16_wgmma_map.cuh"

int main() {
  std::printf("frag_source");
  for (int i = 0; i < 4; ++i) std::printf(" %d", w4map::frag_source(i));
  std::printf("\nunit_of_warp");
  for (int w = 0; w < 4; ++w) std::printf(" %d", w4map::unit_of_warp(w));
  std::printf("\nword_of_wgmma");
  for (int j = 0; j < 4; ++j) std::printf(" %d", w4map::word_of_wgmma(j));
  std::printf("\ncolumn_of_row");
  for (int j = 0; j < 4; ++j)
    for (int row = 0; row < 64; ++row) std::printf(" %d", w4map::column_of_row(j, row));
  std::printf("\n");
  return 0;
}
