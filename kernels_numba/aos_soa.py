"""The AoS / SoA / AoSoA particle update of kernels_cu/aos_soa.cu, written with Numba's CUDA
target (tuning_spaces/aos_soa_numba.yaml): the same layouts, the same float32 operations in
the same order, one particle's 7 fields in a local array.

Knobs are module globals: the workbench sets them before Numba compiles ``update``, and Numba
freezes their values into the kernel (the defaults below let the file run on its own).
"""

from numba import cuda, float32

LAYOUT = "soa"  #: aos | soa | aosoa: where field f of particle i lives
TILE = 8  #: AoSoA tile width in particles
ITEMS = 2  #: particles per thread
F = 7  # fields per particle: x y z vx vy vz mass


def update(particles, updated, n, dt, k):
    dtk = dt * k
    base = cuda.blockIdx.x * cuda.blockDim.x * ITEMS + cuda.threadIdx.x
    for j in range(ITEMS):
        i = base + j * cuda.blockDim.x
        if i < n:
            # field f of particle i is at start + f * step
            if LAYOUT == "aos":
                start, step = i * F, 1
            elif LAYOUT == "soa":
                start, step = i, n
            else:  # aosoa: full tiles of TILE particles, the last one narrower
                first = i // TILE * TILE
                step = n - first  # (min() would need a driver to compile)
                if step > TILE:
                    step = TILE
                start = first * F + (i - first)
            q = cuda.local.array(F, float32)
            for f in range(F):
                q[f] = particles[start + f * step]
            s = dtk * (float32(1.0) / q[6])  # dt * k / m
            for d in range(3):
                q[3 + d] = q[3 + d] - s * q[d]  # v += dt * (-k * r / m)
                q[d] = q[d] + dt * q[3 + d]  # r += dt * v
            for f in range(F):
                updated[start + f * step] = q[f]
