"""Reference of attention_decode: one decode step of attention over a (quantized) KV cache.

``out[b, h] = softmax(q[b, h] . K[b, h // GROUP, :L].T / sqrt(D)) . V[b, h // GROUP, :L]`` with
``L = seq_lens[b]``, on the cache dequantized exactly as the kernel reads it (``code * scale``;
fp16 caches as they are), computed in float32 (or float64, for the tests) and rounded once to
the query's type. The cache layouts are the kernel's (``kernels_cu/attention_decode.cu``):
slabs ``[SLABS, Hkv, SLAB_T, D]`` that are whole sequences (contiguous) or pages of
:data:`PAGE` tokens reached through a block table (paged).

Beside it: the reference quantizer of a KV cache (:func:`quantize_kv`, the quantize family's
formulas: per token and head, or per channel and head for keys as in KIVI) and the error a
quantized cache adds to the attention output against the fp16 cache (:func:`kv_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from workbench.references import ReferenceCall
from workbench.references.quantize import quantize_groups

#: Tokens per page of the paged layout.
PAGE = 16
#: Cache formats (the space's KV) and their host dtypes.
KV_DTYPES: Mapping[str, np.dtype] = {
    "fp16": np.dtype(np.float16),
    "int8": np.dtype(np.int8),
    "fp8": np.dtype(ml_dtypes.float8_e4m3fn),
}
#: Query and output types (the space's QTYPE).
Q_DTYPES: Mapping[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}


@dataclass(frozen=True)
class CacheLayout:
    """Where token ``t`` of sequence ``b`` lies in a cache of slabs ``[SLABS, Hkv, SLAB_T, D]``.

    Attributes:
        paged: pages of :data:`PAGE` tokens through ``block_table`` (else one slab per sequence).
        block_table: ``[B * pages_per_seq]`` page numbers (paged only).
        pages_per_seq: ``ceil(S / PAGE)``: the table's row length.
    """

    paged: bool
    block_table: np.ndarray | None = None
    pages_per_seq: int = 0

    def rows(self, b: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """(slab, row within the slab) of tokens ``0..length-1`` of sequence ``b``."""
        t = np.arange(length)
        if not self.paged:
            return np.full(length, b), t
        assert self.block_table is not None
        pages = self.block_table[b * self.pages_per_seq + t // PAGE]
        return pages.astype(np.int64), t % PAGE


def gather(cache: np.ndarray, layout: CacheLayout, b: int, hk: int, length: int) -> np.ndarray:
    """The first ``length`` tokens of sequence ``b``, KV head ``hk``: ``[length, ...]`` (the
    cache's trailing dimensions; token scales ``[SLABS, Hkv, SLAB_T]`` give ``[length]``)."""
    slab, row = layout.rows(b, length)
    return cache[slab, hk, row]


def decode_attention(
    q: np.ndarray,
    keys: list[list[np.ndarray]],
    values: list[list[np.ndarray]],
    dtype: type[np.floating] = np.float32,
) -> np.ndarray:
    """``out[b, h]`` for queries ``q`` [B, Hq, D] and per (b, KV head) keys and values
    ``[L_b, D]`` (already dequantized), computed in ``dtype``: ``[B, Hq, D]``."""
    batch, hq, d = q.shape
    hkv = len(keys[0])
    group = hq // hkv
    out = np.empty((batch, hq, d), dtype=dtype)
    scale = dtype(1.0) / np.sqrt(dtype(d))
    for b in range(batch):
        for hk in range(hkv):
            heads = slice(hk * group, (hk + 1) * group)
            k = keys[b][hk].astype(dtype, copy=False)
            v = values[b][hk].astype(dtype, copy=False)
            logits = (q[b, heads].astype(dtype) @ k.T) * scale  # [GROUP, L]
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            out[b, heads] = (p @ v) / p.sum(axis=1, keepdims=True)
    return out


def dequantized_cache(
    inputs: Mapping[str, np.ndarray],
    *,
    kv: str,
    kscale: str,
    layout: CacheLayout,
    seq_lens: np.ndarray,
    hkv: int,
    dtype: type[np.floating] = np.float32,
) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Keys and values of every (sequence, KV head) as the kernel dequantizes them:
    ``code * scale`` in ``dtype`` (exact in float32: a code has at most 8 significant bits and
    the scale 24, so each product has at most 32 and rounds once; fp16 caches are exact)."""
    k, v = inputs["k"], inputs["v"]
    keys: list[list[np.ndarray]] = []
    values: list[list[np.ndarray]] = []
    for b, length in enumerate(int(n) for n in seq_lens):
        keys.append([])
        values.append([])
        for hk in range(hkv):
            kb = gather(k, layout, b, hk, length).astype(dtype)
            vb = gather(v, layout, b, hk, length).astype(dtype)
            if kv != "fp16":
                if kscale == "channel":
                    d = k.shape[-1]
                    ks = inputs["k_scale"].reshape(-1, hkv, d)[b, hk].astype(dtype)[None, :]
                else:
                    ks = gather(inputs["k_scale"].reshape(k.shape[:3]), layout, b, hk, length)
                    ks = ks.astype(dtype)[:, None]
                vs = gather(inputs["v_scale"].reshape(v.shape[:3]), layout, b, hk, length)
                kb, vb = kb * ks, vb * vs.astype(dtype)[:, None]
            keys[b].append(kb)
            values[b].append(vb)
    return keys, values


def layout_of(call: ReferenceCall) -> CacheLayout:
    """The call's cache layout (the space's LAYOUT and shape S)."""
    if str(call.config.get("LAYOUT", "contiguous")) != "paged":
        return CacheLayout(paged=False)
    pages = -(-int(call.shape["S"]) // PAGE)
    return CacheLayout(True, np.asarray(call.inputs["block_table"]).reshape(-1), pages)


def attention_decode(call: ReferenceCall) -> dict[str, np.ndarray]:
    """The space ``attention_decode``: KV, KSCALE, LAYOUT and QTYPE from the config."""
    keys, values = dequantized_cache(
        call.inputs,
        kv=str(call.config.get("KV", "int8")),
        kscale=str(call.config.get("KSCALE", "token")),
        layout=layout_of(call),
        seq_lens=np.asarray(call.inputs["seq_lens"]),
        hkv=int(call.shape["Hkv"]),
    )
    out = decode_attention(np.asarray(call.inputs["q"]), keys, values)
    return {"out": out.astype(Q_DTYPES[str(call.config.get("QTYPE", "float16"))])}


# ---- the reference quantizer of a KV cache, and the error it adds ------------------------------
def quantize_kv(
    x: np.ndarray, fmt: str, granularity: str = "token"
) -> tuple[np.ndarray, np.ndarray]:
    """Quantize a cache ``x`` [..., S, D] (float) symmetrically with the quantize family's
    formulas (:func:`workbench.references.quantize.quantize_groups`): one scale per token
    (``[..., S]``: the row's max |x| / 127, or / 448 for fp8) or per channel (``[..., D]``: the
    column's over all S tokens, KIVI's keys).

    Returns:
        (codes like ``x`` in the format's dtype, float32 scales).
    """
    if fmt not in ("int8", "fp8"):
        raise ValueError(f"quantize_kv: format {fmt!r} is not int8 or fp8")
    if granularity not in ("token", "channel"):
        raise ValueError(f"quantize_kv: granularity {granularity!r} is not token or channel")
    x = np.asarray(x, np.float32)
    rows = np.swapaxes(x, -1, -2) if granularity == "channel" else x
    flat = rows.reshape(-1, rows.shape[-1])
    q = quantize_groups(flat, flat.shape[1], fmt)
    codes = q.codes.reshape(rows.shape)
    scales = q.scales.reshape(rows.shape[:-1])
    if granularity == "channel":
        codes = np.swapaxes(codes, -1, -2)
    return np.ascontiguousarray(codes), scales.astype(np.float32)


@dataclass(frozen=True)
class KvError:
    """The error of attention outputs on a quantized cache against the fp16 cache."""

    fmt: str
    kscale: str
    max_abs: float  #: largest |out_q - out_fp16|
    rms: float  #: root mean square of out_q - out_fp16
    rms_out: float  #: root mean square of out_fp16 (the scale of the outputs)

    @property
    def relative_rms(self) -> float:
        return self.rms / self.rms_out if self.rms_out else float("inf")


def kv_error(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, fmt: str, kscale: str = "token"
) -> KvError:
    """Attention of ``q`` [B, Hq, D] over the fp16 cache ``k``, ``v`` [B, Hkv, S, D] against the
    same cache quantized by :func:`quantize_kv` (keys per ``kscale``, values per token), both in
    float64 (the difference is the cache format's alone)."""
    batch, hkv = k.shape[:2]

    def per_head(x: np.ndarray) -> list[list[np.ndarray]]:
        return [[x[b, h] for h in range(hkv)] for b in range(batch)]

    return kv_error_heads(q, per_head(k), per_head(v), fmt, kscale)


def kv_error_heads(
    q: np.ndarray,
    keys: list[list[np.ndarray]],
    values: list[list[np.ndarray]],
    fmt: str,
    kscale: str = "token",
) -> KvError:
    """:func:`kv_error` over the keys and values ``[L_b, D]`` of every (sequence, KV head) of
    an fp16 cache (sequences of their own lengths): each head's are quantized on their own
    (per-channel k scales over the sequence's ``L_b`` tokens, as the kernel's per sequence)."""

    def dequantized(x: np.ndarray, granularity: str) -> np.ndarray:
        codes, scales = quantize_kv(x, fmt, granularity)
        per = scales[None, :] if granularity == "channel" else scales[:, None]
        return codes.astype(np.float64) * per

    exact_k = [[np.asarray(k, np.float64) for k in row] for row in keys]
    quant_k = [[dequantized(k, kscale) for k in row] for row in keys]
    quant_v = [[dequantized(v, "token") for v in row] for row in values]
    exact = decode_attention(q, exact_k, values, np.float64)
    quant = decode_attention(q, quant_k, quant_v, np.float64)
    diff = quant - exact
    return KvError(
        fmt,
        kscale,
        float(np.abs(diff).max()),
        float(np.sqrt(np.mean(diff**2))),
        float(np.sqrt(np.mean(exact**2))),
    )


#: The quantized cache formats :func:`kv_cache_error` measures, with their names in its rows.
CACHE_FORMATS: Mapping[tuple[str, str], str] = {
    ("int8", "token"): "int8, per-token k scales",
    ("int8", "channel"): "int8, per-channel k scales",
    ("fp8", "token"): "fp8 E4M3, per-token k scales",
    ("fp8", "channel"): "fp8 E4M3, per-channel k scales",
}


def kv_cache_error(call: ReferenceCall) -> list[dict[str, str | float]]:
    """The space's ``accuracy`` figure: what each 8-bit cache format costs against the fp16
    cache, on the fp16 cache of ``call.inputs`` (drawn with ``KV=fp16``: the space file's
    ``accuracy.draw``) in the study's layout and sequence lengths, with its queries; one row per
    format (:data:`CACHE_FORMATS`), the study's own marked (``call.config`` is the study's).

    Raises:
        ValueError: the inputs hold no fp16 cache (drawn with another KV).
    """
    k = np.asarray(call.inputs["k"])
    if k.dtype != KV_DTYPES["fp16"]:
        raise ValueError(f"kv_cache_error needs the fp16 cache (draw KV=fp16), not {k.dtype}")
    keys, values = dequantized_cache(
        call.inputs,
        kv="fp16",
        kscale="token",
        layout=layout_of(call),
        seq_lens=np.asarray(call.inputs["seq_lens"]),
        hkv=int(call.shape["Hkv"]),
    )
    q = np.asarray(call.inputs["q"])
    own = (str(call.config.get("KV", "int8")), str(call.config.get("KSCALE", "token")))
    rows: list[dict[str, str | float]] = []
    for (fmt, kscale), name in CACHE_FORMATS.items():
        err = kv_error_heads(q, keys, values, fmt, kscale)
        rows.append(
            {
                "cache": name,
                "relative rms error": err.relative_rms,
                "rms error": err.rms,
                "max abs error": err.max_abs,
                "this study": "yes" if (fmt, kscale) == own else "",
            }
        )
    return rows


def fp16_cache_inputs(call: ReferenceCall) -> dict[str, np.ndarray]:
    """The inputs of the fp16-cache variant (``KV=fp16``) for the same logical problem as
    ``call`` (an int8 or fp8 cache): the cache dequantized as the kernel reads it (``code *
    scale``, in float32) and rounded once to fp16, in the same layout (slabs, pages, block
    table), with the same queries and lengths; the fp16 variant's scales are one unused 1.0.
    An fp16 cache is returned as it is."""
    kv = str(call.config.get("KV", "int8"))
    inputs = {name: np.asarray(a) for name, a in call.inputs.items()}
    if kv == "fp16":
        return inputs
    k, v = inputs["k"], inputs["v"]
    slabs, hkv, _, d = k.shape
    v_scale = inputs["v_scale"].reshape(v.shape[:3])[..., None]
    if str(call.config.get("KSCALE", "token")) == "channel":
        # per (sequence, head, channel): a slab's owner is its sequence (a page's: the table's)
        batch = int(call.shape["B"])
        owner = np.arange(slabs) % batch
        layout = layout_of(call)
        if layout.paged:
            assert layout.block_table is not None
            table = layout.block_table.reshape(batch, -1)
            owner[table] = np.arange(batch)[:, None]
        k_scale = inputs["k_scale"].reshape(batch, hkv, d)[owner][:, :, None, :]
    else:
        k_scale = inputs["k_scale"].reshape(k.shape[:3])[..., None]
    one = np.ones(1, np.float32)
    return {
        **inputs,
        "k": (k.astype(np.float32) * k_scale).astype(np.float16),
        "v": (v.astype(np.float32) * v_scale).astype(np.float16),
        "k_scale": one,
        "v_scale": one.copy(),
    }
