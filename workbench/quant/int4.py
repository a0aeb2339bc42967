"""Group-wise int4 weights (W4A16): GPTQ and AWQ checkpoints, and gemm_w4a16's tiled layout.

The logical weights of a linear layer ``y = x . W`` with ``W[K, N]`` (K input features, N
outputs) are int4 codes ``q[K, N]`` in 0..15, one scale ``s[K/G, N]`` (fp16) and one zero point
``z[K/G, N]`` (0..15) per group of G rows along K and column: ``w = s * (q - z)``. Symmetric
GPTQ has ``z = 8`` everywhere (:attr:`Int4Weights.zeros` is None).

Checkpoint layouts (as AutoGPTQ / GPTQModel and AutoAWQ write them):

- GPTQ: ``qweight`` int32 ``[K/8, N]``, nibble ``i`` (bits ``4i..4i+3``) of word ``[r, n]`` is
  ``q[8r + i, n]``; ``qzeros`` int32 ``[K/G, N/8]``, nibble ``i`` of ``[g, c]`` is the zero of
  column ``8c + i``; ``scales`` fp16 ``[K/G, N]``. The original ("v1") format stores ``z - 1``
  in ``qzeros`` (AutoGPTQ subtracts one before packing and its kernels add it back: symmetric
  checkpoints hold 0x77777777); "v2" (GPTQModel's internal format) stores ``z``. Act-order
  checkpoints carry a ``g_idx`` that permutes the groups; only the trivial one (``k // G``) is
  accepted here.
- AWQ: ``qweight`` int32 ``[K, N/8]``, nibble ``i`` of word ``[k, c]`` is ``q[k, 8c +
  AWQ_ORDER[i]]`` with ``AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]``; ``qzeros`` int32 ``[K/G, N/8]``
  in the same order, storing ``z``; ``scales`` fp16 ``[K/G, N]``.

The kernel layout of gemm_w4a16 (:class:`TiledInt4`, described again in
``kernels_cu/gemm_w4a16.cu``): N is padded to a multiple of 64 (``n_pad``) and W cut into
"units" of 16 rows by 64 columns, each 512 contiguous bytes, units in row-major order (``[K/16,
n_pad/64]``). Lane ``l`` of a warp loads bytes ``16l..16l+15`` of a unit: four words, word ``j``
holding the mma.m16n8k16 B fragments of lane ``l`` for the unit's n8 tiles ``2j`` and ``2j+1``
(column ``g = l // 4`` of each, rows ``2t, 2t+1, 2t+8, 2t+9`` with ``t = l % 4``), in the nibble
order :data:`NIBBLE_ROW` / :data:`NIBBLE_TILE` that the kernel's lop3 conversion reads.
Scales and zero points stay one row per group, padded to ``n_pad`` columns, and permuted within
each unit so that position ``8g + j`` holds column ``8j + g``: the 8 values a fragment column
``g`` needs are one 16-byte (scales) or 8-byte (zeros, uint8) chunk. Padding holds zeros.

Every conversion here is a permutation of nibbles: ``unpack(pack(x)) == x`` bit for bit, and a
GPTQ and an AWQ checkpoint of the same weights repack to the same :class:`TiledInt4`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from workbench.errors import WorkbenchError

#: AWQ's nibble order: nibble ``i`` of a packed word holds column ``8c + AWQ_ORDER[i]``.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
#: Group sizes of the checkpoint formats that the kernel supports.
GROUP_SIZES = (32, 64, 128)
#: The zero point of symmetric int4 (GPTQ ``sym=True``): ``w = s * (q - 8)``.
SYMMETRIC_ZERO = 8
#: Rows and columns of one unit of the kernel layout, and its 32-bit words.
UNIT_K, UNIT_N, UNIT_WORDS = 16, 64, 128
#: Within a lane's word: the k row offset (added to ``2t``) and the n8 tile offset (added to
#: ``2j``) of nibble ``i``. Nibbles ``i`` and ``i + 4`` are the low and high halves of one
#: fragment register: rows ``2t`` and ``2t + 1`` (or ``+ 8``) of the same tile.
NIBBLE_ROW = (0, 8, 0, 8, 1, 9, 1, 9)
NIBBLE_TILE = (0, 0, 1, 1, 0, 0, 1, 1)


class Int4LayoutError(WorkbenchError):
    """Arrays that are not the layout they claim to be (shape, dtype, group size, act-order)."""


@dataclass(frozen=True)
class Int4Weights:
    """The logical weights: ``w[k, n] = scales[k // group, n] * (q[k, n] - zero[k // group, n])``.

    Attributes:
        q: uint8 ``[K, N]``, codes 0..15.
        scales: float16 ``[K/G, N]``.
        zeros: uint8 ``[K/G, N]``, 0..15; None for symmetric weights (zero point 8).
        group: G, rows of K per group.
    """

    q: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray | None
    group: int

    def __post_init__(self) -> None:
        k, n = _shape2(self.q, "q")
        if self.group < 1 or k % self.group:
            raise Int4LayoutError(f"K = {k} is not a whole number of groups of {self.group}")
        _expect(self.q, np.uint8, (k, n), "q")
        if self.q.size and int(self.q.max()) > 15:
            raise Int4LayoutError("q holds values above 15: int4 codes are 0..15")
        _expect(self.scales, np.float16, (k // self.group, n), "scales")
        if self.zeros is not None:
            _expect(self.zeros, np.uint8, (k // self.group, n), "zeros")
            if self.zeros.size and int(self.zeros.max()) > 15:
                raise Int4LayoutError("zeros holds values above 15: int4 zero points are 0..15")

    @property
    def k(self) -> int:
        return int(self.q.shape[0])

    @property
    def n(self) -> int:
        return int(self.q.shape[1])

    def zero_points(self) -> np.ndarray:
        """uint8 ``[K/G, N]``: the zero points, 8 everywhere for symmetric weights."""
        if self.zeros is not None:
            return self.zeros
        return np.full(self.scales.shape, SYMMETRIC_ZERO, dtype=np.uint8)

    def dequantize(self) -> np.ndarray:
        """float32 ``[K, N]``: ``s * (q - z)``, exact (an fp16 scale times an integer of at
        most 4 bits has at most 15 significant bits)."""
        rows = np.arange(self.k) // self.group
        codes = self.q.astype(np.float32) - self.zero_points()[rows].astype(np.float32)
        return codes * self.scales[rows].astype(np.float32)


@dataclass(frozen=True)
class GptqCheckpoint:
    """A GPTQ layer's tensors (``qweight [K/8, N]``, ``qzeros [K/G, N/8]`` int32, ``scales``)."""

    qweight: np.ndarray
    qzeros: np.ndarray
    scales: np.ndarray
    group: int
    #: what ``qzeros`` stores: 1 for ``z - 1`` (the original "v1" format), 0 for ``z`` ("v2")
    zero_offset: int = 1


@dataclass(frozen=True)
class AwqCheckpoint:
    """An AWQ (GEMM) layer's tensors (``qweight [K, N/8]``, ``qzeros [K/G, N/8]`` int32, in
    AWQ's nibble order, and ``scales``)."""

    qweight: np.ndarray
    qzeros: np.ndarray
    scales: np.ndarray
    group: int


@dataclass(frozen=True)
class TiledInt4:
    """gemm_w4a16's layout (module docstring): the arrays the kernel takes.

    Attributes:
        qweight: int32 ``[K/16, 2 * n_pad]`` (units of 128 words, row-major).
        scales: float16 ``[K/G, n_pad]``, permuted within each 64-column unit.
        zeros: uint8 ``[K/G, n_pad]`` permuted likewise; None for symmetric weights.
        n: the true number of columns (``n_pad`` rounds it up to 64).
        group: G.
    """

    qweight: np.ndarray
    scales: np.ndarray
    zeros: np.ndarray | None
    n: int
    group: int

    @property
    def k(self) -> int:
        return int(self.qweight.shape[0]) * UNIT_K

    @property
    def n_pad(self) -> int:
        return padded_columns(self.n)


def padded_columns(n: int) -> int:
    """Columns of the kernel layout for ``n`` true ones: a whole number of 64-column units."""
    return -(-n // UNIT_N) * UNIT_N


# -- GPTQ ---------------------------------------------------------------------------------------
def pack_gptq(w: Int4Weights, *, zero_offset: int = 1) -> GptqCheckpoint:
    """The GPTQ checkpoint tensors of ``w`` (``zero_offset`` 1: the v1 format, ``z - 1``).

    Raises:
        Int4LayoutError: N or K is not a multiple of 8, or a zero point is below the offset
            (v1 cannot store ``z = 0``).
    """
    _multiple(w.k, 8, "K (GPTQ packs 8 rows per word)")
    _multiple(w.n, 8, "N (GPTQ packs 8 zero points per word)")
    stored = w.zero_points().astype(np.int16) - zero_offset
    if stored.size and int(stored.min()) < 0:
        raise Int4LayoutError(f"a zero point of 0 cannot be stored with zero_offset={zero_offset}")
    qweight = _pack_nibbles(w.q.reshape(w.k // 8, 8, w.n).transpose(0, 2, 1))
    qzeros = _pack_nibbles(stored.astype(np.uint8).reshape(-1, w.n // 8, 8))
    return GptqCheckpoint(qweight, qzeros, w.scales.copy(), w.group, zero_offset)


def unpack_gptq(
    ckpt: GptqCheckpoint, *, g_idx: np.ndarray | None = None, symmetric: bool | None = None
) -> Int4Weights:
    """The logical weights of a GPTQ checkpoint.

    Args:
        ckpt: the tensors.
        g_idx: the checkpoint's ``g_idx`` (group of each row of K), if it has one; it must be the
            trivial ``k // G`` (no act-order reordering).
        symmetric: drop the zero points (they must all be 8); None: drop them when they are.

    Raises:
        Int4LayoutError: wrong shapes or dtypes, an act-order ``g_idx``, or ``symmetric=True``
            with zero points other than 8.
    """
    k8, n = _shape2(ckpt.qweight, "qweight")
    k = 8 * k8
    _check_groups(k, ckpt.group)
    _expect(ckpt.qweight, np.int32, (k8, n), "qweight")
    _expect(ckpt.qzeros, np.int32, (k // ckpt.group, n // 8), "qzeros")
    if g_idx is not None and not np.array_equal(np.asarray(g_idx), np.arange(k) // ckpt.group):
        raise Int4LayoutError("act-order checkpoints (a g_idx other than k // G) are not supported")
    q = _unpack_nibbles(ckpt.qweight).transpose(0, 2, 1).reshape(k, n)
    zeros = _unpack_nibbles(ckpt.qzeros).reshape(k // ckpt.group, n) + np.uint8(ckpt.zero_offset)
    return _weights(q, ckpt.scales, zeros, ckpt.group, symmetric)


# -- AWQ ----------------------------------------------------------------------------------------
def pack_awq(w: Int4Weights) -> AwqCheckpoint:
    """The AWQ (GEMM) checkpoint tensors of ``w`` (symmetric weights get zero points of 8).

    Raises:
        Int4LayoutError: N is not a multiple of 8.
    """
    _multiple(w.n, 8, "N (AWQ packs 8 columns per word)")
    order = list(AWQ_ORDER)
    qweight = _pack_nibbles(w.q.reshape(w.k, w.n // 8, 8)[:, :, order])
    zeros = w.zero_points().reshape(-1, w.n // 8, 8)[:, :, order]
    return AwqCheckpoint(qweight, _pack_nibbles(zeros), w.scales.copy(), w.group)


def unpack_awq(ckpt: AwqCheckpoint, *, symmetric: bool | None = None) -> Int4Weights:
    """The logical weights of an AWQ checkpoint (``symmetric`` as in :func:`unpack_gptq`).

    Raises:
        Int4LayoutError: wrong shapes or dtypes, or ``symmetric=True`` with zero points other
            than 8.
    """
    k, n8 = _shape2(ckpt.qweight, "qweight")
    _check_groups(k, ckpt.group)
    _expect(ckpt.qweight, np.int32, (k, n8), "qweight")
    _expect(ckpt.qzeros, np.int32, (k // ckpt.group, n8), "qzeros")
    inverse = np.argsort(AWQ_ORDER)  # column j sits in nibble inverse[j]
    q = _unpack_nibbles(ckpt.qweight)[:, :, inverse].reshape(k, 8 * n8)
    zeros = _unpack_nibbles(ckpt.qzeros)[:, :, inverse].reshape(k // ckpt.group, 8 * n8)
    return _weights(q, ckpt.scales, zeros, ckpt.group, symmetric)


# -- the kernel layout --------------------------------------------------------------------------
def to_tiled(w: Int4Weights) -> TiledInt4:
    """gemm_w4a16's arrays for ``w`` (padding columns hold zeros).

    Raises:
        Int4LayoutError: K is not a multiple of 16.
    """
    _multiple(w.k, UNIT_K, "K (the kernel's units are 16 rows)")
    n_pad = padded_columns(w.n)
    q = np.zeros((w.k, n_pad), dtype=np.uint8)
    q[:, : w.n] = w.q
    units = q.reshape(w.k // UNIT_K, UNIT_K, n_pad // UNIT_N, UNIT_N).transpose(0, 2, 1, 3)
    rows, cols = _unit_gather()
    nibbles = units[:, :, rows, cols]  # (K/16, n_pad/64, 32 lanes, 4 words, 8 nibbles)
    qweight = _pack_nibbles(nibbles).reshape(w.k // UNIT_K, 2 * n_pad)
    zeros = None if w.zeros is None else _permute_columns(_pad(w.zeros, n_pad))
    return TiledInt4(qweight, _permute_columns(_pad(w.scales, n_pad)), zeros, w.n, w.group)


def from_tiled(t: TiledInt4) -> Int4Weights:
    """The logical weights of gemm_w4a16's arrays (the padding columns dropped).

    Raises:
        Int4LayoutError: arrays of the wrong shape or dtype.
    """
    k, n_pad = t.k, t.n_pad
    _check_groups(k, t.group)
    _expect(t.qweight, np.int32, (k // UNIT_K, 2 * n_pad), "qweight")
    _expect(t.scales, np.float16, (k // t.group, n_pad), "scales")
    nibbles = _unpack_nibbles(t.qweight.reshape(k // UNIT_K, n_pad // UNIT_N, 32, 4))
    rows, cols = _unit_gather()
    units = np.empty((k // UNIT_K, n_pad // UNIT_N, UNIT_K, UNIT_N), dtype=np.uint8)
    units[:, :, rows, cols] = nibbles
    q = units.transpose(0, 2, 1, 3).reshape(k, n_pad)[:, : t.n]
    scales = _unpermute_columns(t.scales)[:, : t.n]
    zeros = None
    if t.zeros is not None:
        _expect(t.zeros, np.uint8, (k // t.group, n_pad), "zeros")
        zeros = _unpermute_columns(t.zeros)[:, : t.n]
    return Int4Weights(np.ascontiguousarray(q), np.ascontiguousarray(scales), zeros, t.group)


def repack_gptq(
    ckpt: GptqCheckpoint, *, g_idx: np.ndarray | None = None, symmetric: bool | None = None
) -> TiledInt4:
    """A GPTQ checkpoint in gemm_w4a16's layout (see :func:`unpack_gptq`)."""
    return to_tiled(unpack_gptq(ckpt, g_idx=g_idx, symmetric=symmetric))


def repack_awq(ckpt: AwqCheckpoint, *, symmetric: bool | None = None) -> TiledInt4:
    """An AWQ checkpoint in gemm_w4a16's layout (see :func:`unpack_awq`)."""
    return to_tiled(unpack_awq(ckpt, symmetric=symmetric))


# -- helpers ------------------------------------------------------------------------------------
@cache
def _unit_gather() -> tuple[np.ndarray, np.ndarray]:
    """(row, column) inside a 16 x 64 unit of nibble ``i`` of word ``j`` of lane ``l``, as two
    ``[32, 4, 8]`` index arrays: column ``g + 8 * (2j + NIBBLE_TILE[i])``, row ``2t +
    NIBBLE_ROW[i]`` (``g = l // 4``, ``t = l % 4``)."""
    lane = np.arange(32)[:, None, None]
    word = np.arange(4)[None, :, None]
    nib = np.arange(8)[None, None, :]
    g, t = lane // 4, lane % 4
    rows = 2 * t + np.asarray(NIBBLE_ROW)[nib] + 0 * word
    cols = g + 8 * (2 * word + np.asarray(NIBBLE_TILE)[nib])
    rows, cols = np.broadcast_arrays(rows, cols)
    return rows.copy(), cols.copy()


def _pack_nibbles(nibbles: np.ndarray) -> np.ndarray:
    """int32 words of the last axis (8 values 0..15, value ``i`` in bits ``4i..4i+3``)."""
    shifts = np.arange(0, 32, 4, dtype=np.uint32)
    words = (nibbles.astype(np.uint32) << shifts).sum(axis=-1, dtype=np.uint32)
    return words.view(np.int32)


def _unpack_nibbles(words: np.ndarray) -> np.ndarray:
    """uint8 ``[..., 8]``: nibble ``i`` of every int32 word."""
    shifts = np.arange(0, 32, 4, dtype=np.uint32)
    return ((words.view(np.uint32)[..., None] >> shifts) & 0xF).astype(np.uint8)


def _permute_columns(a: np.ndarray) -> np.ndarray:
    """Within each 64-column unit, column ``8j + g`` goes to position ``8g + j``."""
    rows, n_pad = a.shape
    blocks = a.reshape(rows, n_pad // UNIT_N, 8, 8)  # (.., j, g)
    return np.ascontiguousarray(blocks.transpose(0, 1, 3, 2).reshape(rows, n_pad))


def _unpermute_columns(a: np.ndarray) -> np.ndarray:
    # the permutation is a transpose of 8 x 8 blocks: its own inverse
    return _permute_columns(a)


def _pad(a: np.ndarray, n_pad: int) -> np.ndarray:
    out = np.zeros((a.shape[0], n_pad), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


def _weights(
    q: np.ndarray, scales: np.ndarray, zeros: np.ndarray, group: int, symmetric: bool | None
) -> Int4Weights:
    all_eight = bool((zeros == SYMMETRIC_ZERO).all())
    if symmetric and not all_eight:
        raise Int4LayoutError("symmetric=True, but the checkpoint's zero points are not all 8")
    keep = None if (symmetric or (symmetric is None and all_eight)) else zeros
    return Int4Weights(np.ascontiguousarray(q), scales.astype(np.float16, copy=False), keep, group)


def _shape2(a: np.ndarray, name: str) -> tuple[int, int]:
    if a.ndim != 2:
        raise Int4LayoutError(f"{name} must be 2-D, got shape {a.shape}")
    return int(a.shape[0]), int(a.shape[1])


def _expect(a: np.ndarray, dtype: type, shape: tuple[int, int], name: str) -> None:
    if a.dtype != np.dtype(dtype) or a.shape != shape:
        raise Int4LayoutError(
            f"{name}: expected {np.dtype(dtype)} {list(shape)}, got {a.dtype} {list(a.shape)}"
        )


def _multiple(value: int, of: int, what: str) -> None:
    if value % of:
        raise Int4LayoutError(f"{what} must be a multiple of {of}, got {value}")


def _check_groups(k: int, group: int) -> None:
    if group not in GROUP_SIZES:
        raise Int4LayoutError(f"group size {group}: expected one of {list(GROUP_SIZES)}")
    _multiple(k, group, f"K (groups of {group})")
