"""workbench.quant.int4: GPTQ and AWQ checkpoints <-> logical int4 weights <-> gemm_w4a16's
tiled layout, bit-exact both ways, checked against independent element-by-element packers (the
formats as their projects document them) and against a NumPy emulation of what the kernel's
lanes do with the words they load (mma.m16n8k16 B fragments, the lop3 magic-number
conversion)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from workbench.quant.int4 import (
    AWQ_ORDER,
    AwqCheckpoint,
    GptqCheckpoint,
    Int4LayoutError,
    Int4Weights,
    TiledInt4,
    from_tiled,
    pack_awq,
    pack_gptq,
    padded_columns,
    repack_awq,
    repack_gptq,
    to_tiled,
    unpack_awq,
    unpack_gptq,
)


def random_weights(
    k: int, n: int, group: int, *, symmetric: bool, seed: int = 0, zero_min: int = 0
) -> Int4Weights:
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 16, size=(k, n), dtype=np.uint8)
    scales = rng.uniform(0.001, 0.01, size=(k // group, n)).astype(np.float16)
    zeros = None
    if not symmetric:
        zeros = rng.integers(zero_min, 16, size=(k // group, n), dtype=np.uint8)
    return Int4Weights(q, scales, zeros, group)


def assert_same_weights(a: Int4Weights, b: Int4Weights) -> None:
    assert a.group == b.group
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.scales.view(np.uint16), b.scales.view(np.uint16))
    assert (a.zeros is None) == (b.zeros is None)
    if a.zeros is not None and b.zeros is not None:
        np.testing.assert_array_equal(a.zeros, b.zeros)


def assert_same_tiled(a: TiledInt4, b: TiledInt4) -> None:
    assert (a.n, a.group) == (b.n, b.group)
    np.testing.assert_array_equal(a.qweight, b.qweight)
    np.testing.assert_array_equal(a.scales.view(np.uint16), b.scales.view(np.uint16))
    assert (a.zeros is None) == (b.zeros is None)
    if a.zeros is not None and b.zeros is not None:
        np.testing.assert_array_equal(a.zeros, b.zeros)


# -- independent packers: one element at a time, straight from the formats' descriptions ------
def gptq_by_hand(w: Int4Weights, zero_offset: int) -> tuple[np.ndarray, np.ndarray]:
    """qweight[r, n] holds q[8r + i, n] in bits 4i..4i+3; qzeros[g, c] holds z[g, 8c + i] -
    zero_offset in bits 4i..4i+3."""
    qweight = np.zeros((w.k // 8, w.n), dtype=np.uint32)
    for k in range(w.k):
        for n in range(w.n):
            qweight[k // 8, n] |= np.uint32(int(w.q[k, n]) << (4 * (k % 8)))
    z = w.zero_points()
    qzeros = np.zeros((z.shape[0], w.n // 8), dtype=np.uint32)
    for g in range(z.shape[0]):
        for n in range(w.n):
            qzeros[g, n // 8] |= np.uint32((int(z[g, n]) - zero_offset) << (4 * (n % 8)))
    return qweight.view(np.int32), qzeros.view(np.int32)


def awq_by_hand(w: Int4Weights) -> tuple[np.ndarray, np.ndarray]:
    """AutoAWQ's WQLinear_GEMM.from_linear: nibble i of word [k, c] is column 8c + order[i],
    order = [0, 2, 4, 6, 1, 3, 5, 7]; the zero points the same way, stored as they are."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    qweight = np.zeros((w.k, w.n // 8), dtype=np.uint32)
    z = w.zero_points()
    qzeros = np.zeros((z.shape[0], w.n // 8), dtype=np.uint32)
    for c in range(w.n // 8):
        for i in range(8):
            qweight[:, c] |= w.q[:, 8 * c + order[i]].astype(np.uint32) << np.uint32(4 * i)
            qzeros[:, c] |= z[:, 8 * c + order[i]].astype(np.uint32) << np.uint32(4 * i)
    return qweight.view(np.int32), qzeros.view(np.int32)


SHAPES = [(128, 64, 32), (256, 136, 64), (384, 200, 128), (128, 8, 128)]


@pytest.mark.parametrize("k,n,group", SHAPES)
@pytest.mark.parametrize("symmetric", [True, False])
def test_gptq_and_awq_pack_as_their_projects_do(
    k: int, n: int, group: int, symmetric: bool
) -> None:
    w = random_weights(k, n, group, symmetric=symmetric, seed=k + n, zero_min=1)
    for offset in (1, 0):
        ckpt = pack_gptq(w, zero_offset=offset)
        qweight, qzeros = gptq_by_hand(w, offset)
        np.testing.assert_array_equal(ckpt.qweight, qweight)
        np.testing.assert_array_equal(ckpt.qzeros, qzeros)
        assert ckpt.qweight.shape == (k // 8, n) and ckpt.qzeros.shape == (k // group, n // 8)
    awq = pack_awq(w)
    qweight, qzeros = awq_by_hand(w)
    np.testing.assert_array_equal(awq.qweight, qweight)
    np.testing.assert_array_equal(awq.qzeros, qzeros)
    assert awq.qweight.shape == (k, n // 8) and awq.qzeros.shape == (k // group, n // 8)


def test_symmetric_gptq_v1_stores_sevens() -> None:
    """AutoGPTQ's symmetric checkpoints: every stored zero is 8 - 1 = 7 (0x77777777)."""
    ckpt = pack_gptq(random_weights(128, 64, 128, symmetric=True))
    assert (ckpt.qzeros.view(np.uint32) == 0x77777777).all()
    assert unpack_gptq(ckpt).zeros is None  # all 8: read back as symmetric
    assert unpack_gptq(ckpt, symmetric=False).zeros is not None


@pytest.mark.parametrize("k,n,group", SHAPES)
@pytest.mark.parametrize("symmetric", [True, False])
def test_round_trips_are_bit_exact_and_both_checkpoints_give_one_kernel_layout(
    k: int, n: int, group: int, symmetric: bool
) -> None:
    w = random_weights(k, n, group, symmetric=symmetric, seed=3 * k + n, zero_min=1)
    gptq, gptq2, awq = pack_gptq(w), pack_gptq(w, zero_offset=0), pack_awq(w)
    assert_same_weights(unpack_gptq(gptq), w)
    assert_same_weights(unpack_gptq(gptq2), w)
    assert_same_weights(unpack_awq(awq), w)
    tiled = to_tiled(w)
    assert_same_tiled(repack_gptq(gptq), tiled)
    assert_same_tiled(repack_gptq(gptq2), tiled)
    assert_same_tiled(repack_awq(awq), tiled)
    assert_same_weights(from_tiled(tiled), w)
    # and back to the checkpoints, word for word
    back = from_tiled(repack_awq(awq))
    np.testing.assert_array_equal(pack_awq(back).qweight, awq.qweight)
    np.testing.assert_array_equal(pack_gptq(back).qweight, gptq.qweight)
    np.testing.assert_array_equal(pack_gptq(back).qzeros, gptq.qzeros)
    np.testing.assert_array_equal(pack_awq(back).qzeros, awq.qzeros)


@pytest.mark.parametrize("n", [1, 63, 65, 173])
def test_the_kernel_layout_pads_any_n_to_64_columns(n: int) -> None:
    w = random_weights(64, n, 32, symmetric=False, seed=n)
    t = to_tiled(w)
    n_pad = padded_columns(n)
    assert n_pad % 64 == 0 and n_pad - 64 < n <= n_pad and t.n_pad == n_pad
    assert t.qweight.shape == (64 // 16, 2 * n_pad) and t.qweight.dtype == np.int32
    assert t.scales.shape == (2, n_pad) and t.zeros is not None and t.zeros.shape == (2, n_pad)
    assert_same_weights(from_tiled(t), w)
    # the padding is zero: its columns hold no weights, scales or zero points
    padded = from_tiled(TiledInt4(t.qweight, t.scales, t.zeros, n_pad, 32))
    assert not padded.q[:, n:].any() and not padded.scales[:, n:].any()


def test_every_word_is_a_permutation_of_nibbles() -> None:
    """Each unit is a bijection between the 1024 nibbles of 16 x 64 weights and its 128 words."""
    k, n = 32, 128
    q = (np.arange(k * n) % 16).astype(np.uint8).reshape(k, n)
    rng = np.random.default_rng(1)
    q = rng.permuted(q, axis=1)
    w = Int4Weights(q, np.ones((1, n), np.float16), None, 32)
    t = to_tiled(w)
    words = t.qweight.view(np.uint32)
    for value in range(16):  # every value appears as often in the words as in q
        count = sum(int(((words >> s) & 15 == value).sum()) for s in range(0, 32, 4))
        assert count == int((q == value).sum())


# -- what the kernel's lanes compute from the words --------------------------------------------
def _f16_pairs(bits: np.ndarray) -> np.ndarray:
    """uint32 words as (low, high) fp16 pairs, float64."""
    return (
        np.stack([(bits & 0xFFFF), (bits >> 16)], axis=-1)
        .astype(np.uint16)
        .view(np.float16)
        .astype(np.float64)
    )


def _bf16_pairs(bits: np.ndarray) -> np.ndarray:
    pairs = np.stack([(bits & 0xFFFF), (bits >> 16)], axis=-1).astype(np.uint16)
    return pairs.view(ml_dtypes.bfloat16).astype(np.float64)


def kernel_fragments(t: TiledInt4, z: np.ndarray, dtype: str) -> np.ndarray:
    """(q - z) as the kernel's CVT=lop3 makes it, placed where mma.m16n8k16 says each B
    fragment element belongs: lane l = 4g + t, register b0 = rows (2t, 2t+1), b1 = rows (2t+8,
    2t+9), column g of the n8 tile. Returns float64 [K, n_pad]."""
    k, n_pad = t.k, t.n_pad
    words = t.qweight.view(np.uint32).reshape(k // 16, n_pad // 64, 32, 4)
    out = np.full((k, n_pad), np.nan)
    rows_of = np.arange(k) // t.group
    for lane in range(32):
        g, tt = lane // 4, lane % 4
        for j in range(4):
            w = words[:, :, lane, j]  # (K/16, n_pad/64)
            if dtype == "float16":
                regs = [
                    _f16_pairs((w & 0x000F000F) | 0x64006400) - 1024,  # tile 2j, b0
                    (_f16_pairs((w & 0x00F000F0) | 0x64006400) / 16) - 64,  # tile 2j, b1
                    _f16_pairs(((w >> 8) & 0x000F000F) | 0x64006400) - 1024,  # tile 2j+1, b0
                    (_f16_pairs(((w >> 8) & 0x00F000F0) | 0x64006400) / 16) - 64,
                ]
            else:
                regs = [
                    _bf16_pairs(((w >> s) & 0x000F000F) | 0x43004300) - 128 for s in (0, 4, 8, 12)
                ]
            for r, reg in enumerate(regs):
                tile = 2 * j + r // 2
                row = 2 * tt + 8 * (r % 2)
                for unit in range(n_pad // 64):
                    col = 64 * unit + 8 * tile + g
                    for h in range(2):  # the register's low and high halves: rows +0, +1
                        kk = np.arange(k // 16) * 16 + row + h
                        out[kk, col] = reg[:, unit, h] - z[rows_of[kk], col]
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_kernels_conversion_of_the_words_gives_the_weights(dtype: str) -> None:
    k, n, group = 64, 100, 32
    w = random_weights(k, n, group, symmetric=False, seed=7)
    t = to_tiled(w)
    n_pad = t.n_pad
    z = np.zeros((k // group, n_pad))
    z[:, :n] = w.zero_points()
    got = kernel_fragments(t, z, dtype)
    assert not np.isnan(got).any()  # every element of W is some lane's fragment element
    want = w.q.astype(np.float64) - w.zero_points()[np.arange(k) // group].astype(np.float64)
    np.testing.assert_array_equal(got[:, :n], want)
    # and the scales: position 8g + j of a unit is column 8j + g (one 16-byte chunk per g)
    scales = t.scales.reshape(k // group, n_pad // 64, 8, 8)
    for g in range(8):
        for j in range(8):
            col = 8 * j + g
            expect = np.zeros((k // group, n_pad // 64), np.float16)
            for unit in range(n_pad // 64):
                if 64 * unit + col < n:
                    expect[:, unit] = w.scales[:, 64 * unit + col]
            np.testing.assert_array_equal(scales[:, :, g, j], expect)


# -- refusals ----------------------------------------------------------------------------------
def test_layout_errors_say_what_is_wrong() -> None:
    w = random_weights(128, 64, 64, symmetric=False, seed=2, zero_min=1)
    w0 = Int4Weights(w.q, w.scales, np.zeros_like(w.zero_points()), 64)
    with pytest.raises(Int4LayoutError, match="zero point of 0"):
        pack_gptq(w0)  # v1 stores z - 1
    assert_same_weights(unpack_gptq(pack_gptq(w0, zero_offset=0)), w0)
    ckpt = pack_gptq(w)
    with pytest.raises(Int4LayoutError, match="act-order"):
        unpack_gptq(ckpt, g_idx=np.random.default_rng(0).permutation(128) // 64)
    assert_same_weights(unpack_gptq(ckpt, g_idx=np.arange(128) // 64), w)
    with pytest.raises(Int4LayoutError, match="not all 8"):
        unpack_gptq(ckpt, symmetric=True)
    with pytest.raises(Int4LayoutError, match="qzeros: expected int32"):
        unpack_gptq(GptqCheckpoint(ckpt.qweight, ckpt.qzeros[:1], ckpt.scales, 64))
    with pytest.raises(Int4LayoutError, match="group size 16"):
        unpack_awq(AwqCheckpoint(pack_awq(w).qweight, pack_awq(w).qzeros, w.scales, 16))
    with pytest.raises(Int4LayoutError, match="multiple of 8"):
        pack_awq(random_weights(64, 12, 32, symmetric=True))
    with pytest.raises(Int4LayoutError, match="above 15"):
        Int4Weights(w.q + 16, w.scales, None, 64)
    with pytest.raises(Int4LayoutError, match="whole number of groups"):
        Int4Weights(w.q[:100], w.scales, None, 64)
    with pytest.raises(Int4LayoutError, match="qweight: expected int32"):
        from_tiled(TiledInt4(to_tiled(w).qweight[:, :-1], to_tiled(w).scales, None, 64, 64))


def test_dequantize_is_exact() -> None:
    w = random_weights(128, 16, 32, symmetric=False, seed=4)
    rows = np.arange(128) // 32
    want = w.scales[rows].astype(np.float64) * (
        w.q.astype(np.float64) - w.zeros[rows].astype(np.float64)  # type: ignore[index]
    )
    np.testing.assert_array_equal(w.dequantize().astype(np.float64), want)
    assert AWQ_ORDER == (0, 2, 4, 6, 1, 3, 5, 7)
