// A host program around kernels_cu/gemm_schedule.cuh (compiled with g++ by
// tests/test_gemm_schedule.py): for each case read from stdin it lists every unit of every CTA,
// computed by the header's own code, the code the TMA GEMMs run on the GPU.
//
// stdin, one case per line:
//   M N K tile_m tile_n tile_k group along_n stream_k split_k ctas cluster_m cluster_n
// stdout, per case:
//   case tiles_m tiles_n k_tiles workspace_slots     (tiles_m, tiles_n: of cluster tiles)
//   cta c count                                      (for every CTA)
//   u i index tile_m tile_n k0 k_count finalizes slot peers   (its units, in the order computed;
//                                                    tile_m, tile_n: the CTA's own tile)
//   end
#include <cstdio>

#include "gemm_schedule.cuh"

int main() {
  int M, N, K, tile_m, tile_n, tile_k, group, along_n, stream_k, split_k, ctas, cluster_m,
      cluster_n;
  while (std::scanf("%d %d %d %d %d %d %d %d %d %d %d %d %d", &M, &N, &K, &tile_m, &tile_n,
                    &tile_k, &group, &along_n, &stream_k, &split_k, &ctas, &cluster_m,
                    &cluster_n) == 13) {
    const GemmSchedule first(M, N, K, tile_m, tile_n, tile_k, group, along_n != 0,
                             stream_k != 0, split_k, ctas, 0, cluster_m, cluster_n);
    std::printf("case %d %d %d %d\n", first.tiles_m, first.tiles_n, first.k_tiles,
                first.workspace_slots());
    for (int c = 0; c < ctas; ++c) {
      const GemmSchedule work(M, N, K, tile_m, tile_n, tile_k, group, along_n != 0,
                              stream_k != 0, split_k, ctas, c, cluster_m, cluster_n);
      std::printf("cta %d %d\n", c, work.count);
      for (int i = 0; i < work.count; ++i) {
        const GemmUnit unit = work[i];
        const TileCoord tile = work.tile(unit);
        std::printf("u %d %d %d %d %d %d %d %d %d\n", i, unit.index, tile.m, tile.n, unit.k0,
                    unit.k_count, unit.finalizes ? 1 : 0, unit.slot, unit.peers);
      }
    }
    std::printf("end\n");
  }
  return 0;
}
