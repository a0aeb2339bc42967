"""torch SDPA's row of ``compare attention_decode`` is verified against what it computes on: the
fp16 variant's reference on the int8/fp8 cache dequantized and rounded to fp16 (the cache SDPA
takes), not the int8/fp8 reference, which a perfect SDPA misses by more than the tolerance. The
outputs here are computed in NumPy (float64, rounded once to fp16); running SDPA needs a GPU."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from workbench.compare.attention_baselines import FP16_CACHE, TorchSdpa, dense_cache
from workbench.compare.baselines import REGISTRY, baseline_for
from workbench.compare.problems import classify
from workbench.compare.run import _expected, baseline_expected, check_outputs, verifying_variant
from workbench.errors import ConfigError
from workbench.runners.buffers import make_inputs
from workbench.spaces import Space, load_kernel

#: an odd shape where the fp16 rounding moves the outputs past the int8/fp8 tolerance
#: (measured: the old check fails a perfect SDPA there, in both formats)
ODD = {"B": 3, "Hkv": 2, "S": 1001, "S_MIN": 1001}


def _exact(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Attention of ``q`` [B, Hq, D] over the dense cache ``k``, ``v`` [B, Hkv, S, D] (its
    ``mask``-ed keys) in float64, rounded once to fp16."""
    batch, hq, d = q.shape
    group = hq // k.shape[1]
    out = np.empty((batch, hq, d))
    for b in range(batch):
        for h in range(hq):
            keys = k[b, h // group][mask[b]].astype(np.float64)
            values = v[b, h // group][mask[b]].astype(np.float64)
            logits = keys @ q[b, h].astype(np.float64) / np.sqrt(d)
            p = np.exp(logits - logits.max())
            out[b, h] = p @ values / p.sum()
    return out.astype(np.float16)


@pytest.mark.parametrize("kv", ["int8", "fp8"])
def test_a_perfect_sdpa_passes_its_check_and_real_errors_still_fail(kv: str) -> None:
    space = Space(load_kernel("attention_decode"), shape=ODD)
    config = {**space.default_config(), "KV": kv}
    inputs = make_inputs(space, 0, config)
    problem = classify(space, config)
    own = baseline_for("torch_sdpa", problem).verified_on(problem)
    assert own == FP16_CACHE
    expected = lambda: baseline_expected(own, space, config, inputs)  # noqa: E731
    # what SDPA computes: the cache as the reference dequantizes it, rounded to fp16
    k, v, mask = dense_cache(problem, inputs)
    k16, v16 = k.astype(np.float16), v.astype(np.float16)
    perfect = _exact(inputs["q"], k16, v16, mask)
    assert check_outputs("torch_sdpa", {"out": perfect}, problem, inputs, expected).ok
    # the old check, against the int8/fp8 reference on the original inputs, marks it wrong
    int8_reference = lambda: _expected(space, config, inputs)  # noqa: E731
    old = check_outputs("torch_sdpa", {"out": perfect}, problem, inputs, int8_reference)
    assert not old.ok and "differs" in old.reason
    # a wrong head: query head 1 given head 0's output
    wrong_head = perfect.copy()
    wrong_head[:, 1] = perfect[:, 0]
    verdict = check_outputs("torch_sdpa", {"out": wrong_head}, problem, inputs, expected)
    assert not verdict.ok and "(0, 1," in verdict.reason
    # one split missing: sequence 2 without the second half of its keys
    half = mask.copy()
    half[2, ODD["S"] // 2 :] = False
    split = perfect.copy()
    split[2] = _exact(inputs["q"], k16, v16, half)[2]
    verdict = check_outputs("torch_sdpa", {"out": split}, problem, inputs, expected)
    assert not verdict.ok and "(2, " in verdict.reason


def test_the_check_is_the_fp16_variants_reference_on_the_fp16_cache() -> None:
    space = Space(load_kernel("attention_decode"), shape=ODD)
    config = space.default_config()
    sibling, chosen = verifying_variant(FP16_CACHE, space, config)
    assert sibling.spec.name == "attention_decode_fp16" and chosen["KV"] == "fp16"
    assert FP16_CACHE.note == (
        "verified against attention_decode_fp16's reference on the inputs made by "
        "workbench.references.attention:fp16_cache_inputs"
    )


def test_bf16_queries_and_other_baselines_keep_the_problems_reference() -> None:
    space = Space(load_kernel("attention_decode"), shape=ODD)
    bf16 = classify(space, {**space.default_config(), "QTYPE": "bfloat16"})
    assert TorchSdpa().verified_on(bf16) is None  # its cache is bf16: no variant holds it
    gemm = Space(load_kernel("gemm_int8"), shape={"M": 64, "N": 96, "K": 128})
    gemm_problem = classify(gemm, gemm.spec.default_config())
    assert all(b.verified_on(gemm_problem) is None for b in REGISTRY.values())


def test_a_space_without_the_variant_is_a_clear_error() -> None:
    spec = load_kernel("attention_decode")
    space = Space(replace(spec, variants=()), shape=ODD)
    with pytest.raises(ConfigError, match="has no variant attention_decode_fp16"):
        verifying_variant(FP16_CACHE, space, space.default_config())
