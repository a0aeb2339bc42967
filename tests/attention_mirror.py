"""A NumPy mirror of kernels_cu/attention_decode.cu's arithmetic, for CPU tests.

Index for index and in float32, what the kernel does: the split of each sequence into SPLITS
slices of ceil(len / SPLITS) tokens, KEY_SLOTS = THREADS * VEC / D keys in flight per block
(key t = base + j * KEY_SLOTS + slot of iteration base), the paged row of a token through the
block table (``cache_row``), logits in log2 units (q prescaled by log2(e) / sqrt(D); scales
after or before the dot product), one online-softmax rescale per iteration with exp2, the
butterfly merge of the key slots in a warp, the merge of the warps, and the combine of the
slices by their maxima. Only the order of the float32 sums inside a dot product differs (NumPy
sums the D products pairwise, the kernel per lane then by shuffles): a test of the index math
and of the merges, not of the last bit.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

PAGE = 16
LOG2E = np.float32(1.4426950408889634)


def cache_row(b: int, hk: int, t: int, hkv: int, s_cap: int, table: np.ndarray | None) -> int:
    """The kernel's cache_row: the row (elements / D) of token t of sequence b, KV head hk."""
    if table is None:
        return (b * hkv + hk) * s_cap + t
    page = int(table[b * -(-s_cap // PAGE) + t // PAGE])
    return (page * hkv + hk) * PAGE + t % PAGE


def _merge(m: np.ndarray, lsum: np.ndarray, o: np.ndarray) -> tuple[float, float, np.ndarray]:
    """Merge states (m_i, l_i, o_i) along axis 0 as the kernel does: rescale by 2^(m_i - M)."""
    big = np.float32(m.max())
    if big == -np.inf:
        return big, np.float32(0), np.zeros(o.shape[1:], np.float32)
    w = np.exp2((m - big).astype(np.float32)).astype(np.float32)
    return (
        big,
        np.float32((w * lsum).sum(dtype=np.float32)),
        (w[:, None] * o).sum(0, dtype=np.float32),
    )


def mirror(
    inputs: Mapping[str, np.ndarray],
    config: Mapping[str, object],
    shape: Mapping[str, int],
    drop_split: int | None = None,
) -> np.ndarray:
    """The kernel's output (float32, before the rounding to QTYPE) for the space's inputs.

    Args:
        drop_split: leave this slice out of the combine (a broken kernel, for the tests that
            show the tolerance catches one).
    """
    d = int(config["HEAD_DIM"])
    vec, threads, keys_per_iter = int(config["VEC"]), int(config["THREADS"]), int(config["KEYS"])
    splits, group = int(config["SPLITS"]), int(config["GROUP"])
    kv, kscale = str(config["KV"]), str(config["KSCALE"])
    before = config["DEQUANT"] == "before"
    paged = config["LAYOUT"] == "paged"
    batch, hkv, s_cap = int(shape["B"]), int(shape["Hkv"]), int(shape["S"])
    tpk = d // vec
    key_slots = threads // tpk
    slots_per_warp = 32 // tpk
    warps = threads // 32
    table = np.asarray(inputs["block_table"]).reshape(-1) if paged else None
    k = np.asarray(inputs["k"]).astype(np.float32).reshape(-1, d)
    v = np.asarray(inputs["v"]).astype(np.float32).reshape(-1, d)
    scaled = kv != "fp16"
    ks_tok = np.asarray(inputs["k_scale"], np.float32).reshape(-1)
    vs_tok = np.asarray(inputs["v_scale"], np.float32).reshape(-1)
    q = np.asarray(inputs["q"]).astype(np.float32)
    lens = np.asarray(inputs["seq_lens"]).astype(np.int64)
    qscale = np.float32(1 / np.sqrt(np.float32(d))) * LOG2E
    out = np.empty((batch, hkv * group, d), np.float32)
    for b in range(batch):
        length = int(lens[b])
        chunk = -(-length // splits)
        for hk in range(hkv):
            qf = (q[b, hk * group : (hk + 1) * group] * qscale).astype(np.float32)  # [G, D]
            kcs = None
            if scaled and kscale == "channel":
                kcs = ks_tok.reshape(batch, hkv, d)[b, hk]
                if not before:
                    qf = (qf * kcs).astype(np.float32)
            parts = []
            for split in range(splits):
                t0 = min(length, split * chunk)
                t1 = min(length, t0 + chunk)
                m = np.full((key_slots, group), -np.inf, np.float32)
                lsum = np.zeros((key_slots, group), np.float32)
                acc = np.zeros((key_slots, group, d), np.float32)
                for base in range(t0, t1, keys_per_iter):
                    for slot in range(key_slots):
                        ts = [
                            base + j * key_slots + slot for j in range(keys_per_iter // key_slots)
                        ]
                        ts = [t for t in ts if t < t1]
                        if not ts:
                            continue
                        rows = [cache_row(b, hk, t, hkv, s_cap, table) for t in ts]
                        kr, vr = k[rows], v[rows]  # [n, D]
                        ks = ks_tok[rows] if scaled and kscale == "token" else np.ones(len(ts))
                        vs = vs_tok[rows] if scaled else np.ones(len(ts))
                        ks, vs = ks.astype(np.float32), vs.astype(np.float32)
                        if before and scaled:
                            kr = (kr * (kcs if kscale == "channel" else ks[:, None])).astype(
                                np.float32
                            )
                            vr = (vr * vs[:, None]).astype(np.float32)
                        s = (kr @ qf.T).astype(np.float32)  # [n, G]
                        if not before and scaled and kscale == "token":
                            s = (s * ks[:, None]).astype(np.float32)
                        m_new = np.maximum(m[slot], s.max(0))
                        alpha = np.where(m_new == -np.inf, 1, np.exp2(m[slot] - m_new))
                        p = np.exp2(s - m_new).astype(np.float32)  # [n, G]
                        pv = p * vs[:, None] if not before else p
                        lsum[slot] = lsum[slot] * alpha + p.sum(0, dtype=np.float32)
                        acc[slot] = acc[slot] * alpha[:, None] + (pv.T @ vr).astype(np.float32)
                        m[slot] = m_new
                # the warps' butterflies, then the warps: per query head
                state = []
                for h in range(group):
                    per_warp = [
                        _merge(
                            m[w * slots_per_warp : (w + 1) * slots_per_warp, h],
                            lsum[w * slots_per_warp : (w + 1) * slots_per_warp, h],
                            acc[w * slots_per_warp : (w + 1) * slots_per_warp, h],
                        )
                        for w in range(warps)
                    ]
                    state.append(
                        _merge(
                            np.array([s[0] for s in per_warp], np.float32),
                            np.array([s[1] for s in per_warp], np.float32),
                            np.stack([s[2] for s in per_warp]),
                        )
                    )
                parts.append(state)
            for h in range(group):
                kept = [p[h] for i, p in enumerate(parts) if i != drop_split]
                _, lb, ob = _merge(
                    np.array([s[0] for s in kept], np.float32),
                    np.array([s[1] for s in kept], np.float32),
                    np.stack([s[2] for s in kept]),
                )
                out[b, hk * group + h] = ob / lb
    return out
