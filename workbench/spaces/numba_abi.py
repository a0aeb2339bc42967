"""How a Numba CUDA kernel takes its arguments: each array is a struct that Numba passes
flattened, one 8-byte parameter per field (read from the ``.entry`` of the PTX Numba writes):
``meminfo``, ``parent`` (null on the device), ``nitems``, ``itemsize``, ``data`` (the device
address), then ``shape[ndim]`` and ``strides[ndim]`` (bytes, C order); a scalar is one
parameter of its type. The one place the workbench knows it: the args check expands a space's
``args`` with :func:`abi_args`, the launch packs an array with :func:`array_fields`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench.expressions import Expression
from workbench.spaces.model import ArgSpec, ScalarArg, SpaceSpec

NUMBA = "numba"
#: the fields before ``shape`` and ``strides``
HEAD_FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data")


def abi_args(spec: SpaceSpec) -> tuple[ArgSpec, ...]:
    """``args`` as the kernel's parameters see them: for a Numba kernel each buffer becomes
    its struct's fields (the data pointer a buffer, the rest 64-bit integers); other kernels'
    ``args`` unchanged."""
    if spec.language != NUMBA:
        return spec.args
    ndims = {b.name: len(b.shape) for b in spec.inputs} | {
        b.name: len(b.shape) for b in spec.outputs
    }
    out: list[ArgSpec] = []
    zero = Expression.parse("0")
    for arg in spec.args:
        if not isinstance(arg, str):
            out.append(arg)
            continue
        ndim = ndims[arg]
        fields = [*HEAD_FIELDS, *(f"shape[{d}]" for d in range(ndim))]
        fields += [f"strides[{d}]" for d in range(ndim)]
        for field in fields:
            if field == "data":
                out.append(arg)
            else:
                out.append(ScalarArg(zero, "int64", f"{arg}.{field}"))
    return tuple(out)


def array_fields(address: int, shape: Sequence[int], itemsize: int) -> list[tuple[np.dtype, int]]:
    """The launch values of one C-contiguous array at ``address``, in parameter order."""
    strides, step = [], itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    u64, i64 = np.dtype(np.uint64), np.dtype(np.int64)
    nitems = int(np.prod(shape)) if len(shape) else 1
    head = [(u64, 0), (u64, 0), (i64, nitems), (i64, itemsize), (u64, address)]
    return head + [(i64, int(d)) for d in shape] + [(i64, s) for s in reversed(strides)]
