"""Hopper tensor maps (``CUtensorMap``) as kernel arguments: what one config's map holds, and
whether ``cuTensorMapEncodeTiled`` would take it, decided on the host before any launch.

A space file's ``{tensor_map: A, box: [BM, BK], swizzle: 128}`` entry becomes, per config, a
:class:`TensorMapValue`: the buffer's dtype and shape, the box and swizzle evaluated, every rule
of the driver's encoder checked by :func:`tensor_map_problem` (one message per rule). The worker
encodes it with the buffer's device address (``Gpu.encode_tensor_map``) and passes the 128 bytes
by value. Where the entry's ``when`` is false the map is zeroed: the kernel's parameter exists on
every path of its signature, and a path that does not read it must not be refused for a box
that only another path uses.

Rules (CUDA Driver API, ``cuTensorMapEncodeTiled``; tiled mode, no interleave, unit element
strides): rank 1 to 5; every dimension at most 2^32 elements; each global stride (bytes, of every
dimension but the innermost) a multiple of 16 and below 2^40; each box extent 1 to 256 elements;
the box's inner extent in bytes a multiple of 16 and, with a swizzle, no wider than the swizzle
span. A box may be larger than the tensor along a dimension: the part outside is zero-filled on
loads (and dropped on stores), which is how tiles at the M/N/K edges of a GEMM work.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.errors import ConfigError
from workbench.spaces.schema import DType

#: Size and alignment of a ``CUtensorMap`` (cuda.h: ``alignas(64) cuuint64_t opaque[16]``).
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64
MAX_RANK = 5
MAX_BOX_EXTENT = 256
#: Global strides and the box's inner extent are whole 16-byte units.
TMA_GRANULE_BYTES = 16
MAX_GLOBAL_DIM = 1 << 32
MAX_GLOBAL_STRIDE = 1 << 40
#: Swizzle spans in bytes (0: none) and the L2 promotion sizes the encoder knows.
SWIZZLE_SPANS = (0, 32, 64, 128)
L2_PROMOTIONS = (0, 64, 128, 256)
#: Element size of each dtype a tensor map can describe (bytes move as they are: int8 and the
#: fp8 formats travel as 8-bit elements).
ELEMENT_BYTES: Mapping[DType, int] = {
    DType.INT8: 1,
    DType.UINT8: 1,
    DType.FLOAT8_E4M3: 1,
    DType.FLOAT8_E5M2: 1,
    DType.INT16: 2,
    DType.FLOAT16: 2,
    DType.BFLOAT16: 2,
    DType.INT32: 4,
    DType.UINT32: 4,
    DType.FLOAT32: 4,
    DType.INT64: 8,
    DType.FLOAT64: 8,
}


class TensorMapError(ConfigError):
    """A tensor map that ``cuTensorMapEncodeTiled`` would refuse, found before any launch;
    ``key``: its entry in the space file (``args[4]``), where known."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        self.key = key
        super().__init__(message)


@dataclass(frozen=True)
class TensorMapValue:
    """One config's tensor map of ``buffer``: shapes outermost first, like the space file.

    ``zeroed`` maps (the entry's ``when`` is false) are passed as 128 zero bytes, unchecked.
    """

    buffer: str
    dtype: DType
    shape: tuple[int, ...]  #: the buffer's shape, in elements
    box: tuple[int, ...]  #: elements per copy along each dimension
    swizzle: int  #: bytes: 0, 32, 64 or 128
    l2_promotion: int = 256
    name: str | None = None
    zeroed: bool = False

    @property
    def label(self) -> str:
        return self.name or self.buffer

    @property
    def element_bytes(self) -> int:
        return ELEMENT_BYTES[self.dtype]

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def global_dims(self) -> tuple[int, ...]:
        """The encoder's ``globalDim``: innermost dimension first."""
        return tuple(reversed(self.shape))

    @property
    def global_strides(self) -> tuple[int, ...]:
        """The encoder's ``globalStrides``: the byte stride of each dimension but the innermost,
        innermost first (a dense row-major buffer)."""
        dims = self.global_dims
        return tuple(self.element_bytes * math.prod(dims[:i]) for i in range(1, len(dims)))

    @property
    def box_dims(self) -> tuple[int, ...]:
        """The encoder's ``boxDim``: innermost dimension first."""
        return tuple(reversed(self.box))

    @property
    def box_bytes(self) -> int:
        """Bytes one copy of the whole box moves (and completes on an mbarrier), out-of-bounds
        elements included."""
        return self.element_bytes * math.prod(self.box)


def tensor_map_problem(
    dtype: DType, shape: Sequence[int], box: Sequence[object], swizzle: object, l2_promotion: int
) -> str | None:
    """The first rule of ``cuTensorMapEncodeTiled`` that a map of a dense row-major buffer of
    ``dtype`` and ``shape`` with this box and swizzle breaks; None when it would encode.

    Shapes are outermost first. Each rule has its own message.
    """
    element = ELEMENT_BYTES.get(dtype)
    if element is None:
        return f"a tensor map cannot describe {dtype.value} elements"
    if not 1 <= len(shape) <= MAX_RANK:
        return f"the buffer has {len(shape)} dimensions; a tensor map has 1 to {MAX_RANK}"
    if len(box) != len(shape):
        return f"box has {len(box)} dimensions but the buffer has {len(shape)}"
    for d, extent in enumerate(box):
        if isinstance(extent, bool) or not isinstance(extent, int):
            return f"box[{d}] is {extent!r}, not a whole number of elements"
        if extent < 1:
            return f"box[{d}] is {extent}: a box extent is at least 1 element"
        if extent > MAX_BOX_EXTENT:
            return f"box[{d}] is {extent} elements: a box extent is at most {MAX_BOX_EXTENT}"
    if isinstance(swizzle, bool) or swizzle not in SWIZZLE_SPANS:
        return f"swizzle is {swizzle!r}: expected 0 (none), 32, 64 or 128 bytes"
    if l2_promotion not in L2_PROMOTIONS:
        return f"l2_promotion is {l2_promotion!r}: expected 0 (none), 64, 128 or 256 bytes"
    for d, size in enumerate(shape):
        if size > MAX_GLOBAL_DIM:
            return f"dimension {d} has {size} elements: a tensor map allows at most 2^32"
    row = element
    for d in range(len(shape) - 1, 0, -1):  # the stride of dimension d - 1, in bytes
        row *= shape[d]
        if row % TMA_GRANULE_BYTES:
            return (
                f"dimension {d - 1} has a stride of {row} bytes: global strides must be "
                f"multiples of {TMA_GRANULE_BYTES} bytes (pad the innermost dimension)"
            )
        if row >= MAX_GLOBAL_STRIDE:
            return f"dimension {d - 1} has a stride of {row} bytes: at most 2^40 - 1"
    inner = box[-1] * element  # type: ignore[operator]
    if inner % TMA_GRANULE_BYTES:
        return (
            f"the box's inner extent is {inner} bytes: it must be a multiple of "
            f"{TMA_GRANULE_BYTES} bytes"
        )
    if swizzle and inner > swizzle:
        return (
            f"the box's inner extent is {inner} bytes, wider than the {swizzle}-byte swizzle "
            "span (split the box along its inner dimension)"
        )
    return None


def check_tensor_map(value: TensorMapValue, where: str, key: str | None = None) -> TensorMapValue:
    """``value`` if ``cuTensorMapEncodeTiled`` would take it (zeroed maps always pass).

    Raises:
        TensorMapError: the first rule it breaks, named with ``where`` (and its ``key``).
    """
    if value.zeroed:
        return value
    problem = tensor_map_problem(
        value.dtype, value.shape, value.box, value.swizzle, value.l2_promotion
    )
    if problem is not None:
        raise TensorMapError(f"{where}: tensor map of {value.buffer}: {problem}", key=key)
    return value


def check_global_address(value: TensorMapValue, address: int) -> None:
    """The encoder's rule on the buffer's device address (known only in the worker).

    Raises:
        TensorMapError: the address is not 16-byte aligned.
    """
    if address % TMA_GRANULE_BYTES:
        raise TensorMapError(
            f"tensor map of {value.buffer}: the buffer's address {address:#x} is not "
            f"{TMA_GRANULE_BYTES}-byte aligned"
        )
