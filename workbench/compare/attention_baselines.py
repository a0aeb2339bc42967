"""Decode-attention baseline through PyTorch: ``torch.nn.functional.scaled_dot_product_attention``
on the fp16 cache, what a user runs without attention_decode (GQA through ``enable_gqa``, torch
2.5+).

It takes attention_decode's inputs: the cache is dequantized on the host while preparing (not
timed) with the reference's own dequantization (:mod:`workbench.references.attention`), gathered
from pages where the layout is paged, rounded to fp16 (bf16 where the queries are bf16) and laid
out ``[B, Hkv, S, D]``. Sequences shorter than the cache's capacity get a boolean mask of their
valid keys (SDPA then takes its memory-efficient or math path, not flash attention).

With fp16 queries it computes on the fp16 cache that the fp16-cache variant takes
(:func:`~workbench.references.attention.fp16_cache_inputs`), so it is verified against that
variant's reference on those inputs (:class:`~workbench.compare.baselines.VerifiedOn`): the
int8/fp8 reference is off a perfect SDPA by more than the tolerance at most shapes. With bf16
queries its cache is rounded to bf16, which no variant of the space holds: it is checked against
the space's reference, which a perfect SDPA misses by more than the tolerance too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported, VerifiedOn, register
from workbench.compare.gemm_baselines import _torch_version, _TorchRun, to_torch, torch_on_stream
from workbench.compare.problems import BaselineProblem, Family
from workbench.references import ReferenceCall
from workbench.references.attention import Q_DTYPES, dequantized_cache, layout_of
from workbench.spaces.schema import BaselineKind


def dense_cache(
    problem: BaselineProblem, inputs: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(K, V as float32 ``[B, Hkv, S, D]`` with zeros past each sequence's length, the
    ``[B, S]`` mask of valid keys) of an attention_decode problem's inputs."""
    call = ReferenceCall(inputs, {}, problem.shape, problem.config)
    hkv, s_cap = problem.dim("Hkv"), problem.dim("S")
    lens = np.asarray(inputs["seq_lens"])
    keys, values = dequantized_cache(
        inputs,
        kv=str(problem.config.get("KV", "int8")),
        kscale=str(problem.config.get("KSCALE", "token")),
        layout=layout_of(call),
        seq_lens=lens,
        hkv=hkv,
    )
    d = np.asarray(inputs["q"]).shape[-1]
    k = np.zeros((len(lens), hkv, s_cap, d), np.float32)
    v = np.zeros_like(k)
    for b, length in enumerate(int(n) for n in lens):
        for h in range(hkv):
            k[b, h, :length], v[b, h, :length] = keys[b][h], values[b][h]
    mask = np.arange(s_cap)[None, :] < lens[:, None]
    return k, v, mask


#: the fp16 cache SDPA computes on with fp16 queries, as the fp16-cache variant takes it
FP16_CACHE = VerifiedOn("attention_decode_fp16", "workbench.references.attention:fp16_cache_inputs")


@register
class TorchSdpa(Baseline):
    """``scaled_dot_product_attention`` of one query per sequence over the fp16 cache."""

    name = "torch_sdpa"
    kind = BaselineKind.TORCH
    title = "PyTorch scaled_dot_product_attention on the fp16 KV cache (enable_gqa)"
    label = "torch SDPA fp16"
    families = frozenset({Family.ATTENTION_DECODE})
    min_cc = 70
    modules = ("torch",)

    def verified_on(self, problem: BaselineProblem) -> VerifiedOn | None:
        if problem.family is not Family.ATTENTION_DECODE:
            return None
        if str(problem.config.get("QTYPE", "float16")) != "float16":
            return None  # (a bf16 cache: no variant computes on it)
        return FP16_CACHE

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        torch = torch_on_stream(stream)
        functional = torch.nn.functional
        dtype = str(problem.config.get("QTYPE", "float16"))
        k, v, mask = dense_cache(problem, inputs)
        kt = to_torch(torch, k.astype(Q_DTYPES[dtype]), dtype)
        vt = to_torch(torch, v.astype(Q_DTYPES[dtype]), dtype)
        q = to_torch(torch, np.asarray(inputs["q"]), dtype).unsqueeze(2)  # [B, Hq, 1, D]
        full = bool(mask.all())
        attn_mask = None if full else torch.from_numpy(mask[:, None, None, :]).cuda()
        group = problem.dim("Hkv") and q.shape[1] // problem.dim("Hkv")
        try:
            functional.scaled_dot_product_attention(q, kt, vt, attn_mask=attn_mask, enable_gqa=True)
        except TypeError as exc:  # torch < 2.5: no enable_gqa
            raise BaselineUnsupported(
                f"PyTorch {torch.__version__} has no enable_gqa (GQA, {group} query heads per "
                "KV head): torch 2.5 or newer"
            ) from exc

        def call(o: Any) -> Any:
            out = functional.scaled_dot_product_attention(
                q, kt, vt, attn_mask=attn_mask, enable_gqa=True
            )
            return out.squeeze(2)

        out = torch.empty(tuple(np.asarray(inputs["q"]).shape), dtype=q.dtype, device=q.device)
        run = _TorchRun(torch, call, out, "out", dtype)
        run.use_out = False  # (SDPA has no out= argument)
        return run

    def version(self) -> str:
        return _torch_version()
