"""The warp-divergence lesson of kernels_cu/divergence.cu with Numba's CUDA target
(tuning_spaces/divergence_numba.yaml): y = f_c(x) with case c = x & 3 and f_c = ROUNDS[c]
rounds of the lowbias32 integer hash with the case's key.

VARIANT branchy runs only the element's case (a warp holding all four cases runs them one
after another, lanes masked off); masked runs all four for every element and keeps one (no
divergence, 85 rounds each). Knobs are module globals that Numba freezes into the kernel.
"""

from numba import cuda, int64, uint32

VARIANT = "branchy"  #: branchy | masked
ITEMS = 4  #: elements per thread
ROUNDS = (1, 4, 16, 64)
KEYS = (0x9E3779B9, 0x85EBCA6B, 0xC2B2AE35, 0x27D4EB2F)
MASK = 0xFFFFFFFF  # uint32 arithmetic in int64 registers: the low 32 bits after every step


def divergence(x, y, n):
    base = cuda.blockIdx.x * cuda.blockDim.x * ITEMS + cuda.threadIdx.x
    for j in range(ITEMS):
        i = base + j * cuda.blockDim.x
        if i < n:
            v = int64(x[i])
            c = v & 3
            out = v
            for case in range(4):
                if VARIANT == "masked" or c == case:
                    h = v
                    for _ in range(ROUNDS[case]):
                        h = (h + KEYS[case]) & MASK
                        h ^= h >> 16
                        h = (h * 0x7FEB352D) & MASK
                        h ^= h >> 15
                        h = (h * 0x846CA68B) & MASK
                        h ^= h >> 16
                    if c == case:
                        out = h
            y[i] = uint32(out)
