"""attention_decode's own fp16-cache variant as a row of ``compare attention_decode``: its inputs
made from the int8/fp8 problem's (the cache dequantized to fp16), the runner taking them in
place of its draws, and the config it runs (its best in the store, else its default, said so).
The timing itself needs a GPU (scripts/device_check.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from workbench.cli.main import app
from workbench.compare.attention_baselines import dense_cache
from workbench.compare.problems import classify
from workbench.errors import ConfigError
from workbench.references import ReferenceCall
from workbench.references.attention import fp16_cache_inputs
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.buffers import make_inputs
from workbench.runners.input_sets import InputSets
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import VariantBaseline, shape_label
from workbench.store import Store

ODD = [
    {"B": 3, "Hkv": 2, "S": 1001, "S_MIN": 1001},
    {"B": 5, "Hkv": 1, "S": 4099, "S_MIN": 1},
]
VARIANT = VariantBaseline(
    "variant:attention_decode_fp16",
    "attention_decode_fp16",
    "workbench.references.attention:fp16_cache_inputs",
)


def test_the_space_declares_its_fp16_variant_as_a_baseline() -> None:
    assert VARIANT in load_kernel("attention_decode").baselines


@pytest.mark.parametrize("layout", ["contiguous", "paged"])
@pytest.mark.parametrize(
    ("kv", "kscale"), [("int8", "token"), ("int8", "channel"), ("fp8", "token")]
)
@pytest.mark.parametrize("shape", ODD, ids=shape_label)
def test_the_fp16_inputs_are_the_dequantized_cache_in_the_fp16_variants_form(
    tmp_path: Path, shape: dict[str, int], kv: str, kscale: str, layout: str
) -> None:
    spec = load_kernel("attention_decode")
    space = Space(spec, shape=shape)
    config = {**space.default_config(), "KV": kv, "KSCALE": kscale, "LAYOUT": layout}
    inputs = make_inputs(space, 0, config)
    made = fp16_cache_inputs(ReferenceCall(inputs, {}, space.shape, config))
    # the fp16 variant takes them as they are (its runner's inputs, none drawn)
    fp16 = load_kernel("attention_decode_fp16")
    fp16_space = Space(fp16, shape=shape)
    fp16_config = {**fp16_space.default_config(), "LAYOUT": layout}
    sets = InputSets(fp16_space, 0, tmp_path, None, made)
    got = sets.get(fp16_config).arrays
    assert all(got[name] is made[name] or np.array_equal(got[name], made[name]) for name in made)
    # its cache is the problem's as the reference dequantizes it, rounded once to fp16
    k, v, mask = dense_cache(classify(space, config), inputs)
    k16, v16, mask16 = dense_cache(classify(fp16_space, fp16_config), got)
    assert np.array_equal(mask, mask16)
    assert np.array_equal(k.astype(np.float16).astype(np.float32), k16)
    assert np.array_equal(v.astype(np.float16).astype(np.float32), v16)
    assert np.array_equal(got["q"], inputs["q"]) and np.array_equal(
        got["seq_lens"], inputs["seq_lens"]
    )


def test_an_input_of_another_dtype_is_a_clear_error(tmp_path: Path) -> None:
    shape = ODD[0]
    space = Space(load_kernel("attention_decode"), shape=shape)
    int8 = make_inputs(space, 0, space.default_config())
    fp16 = Space(load_kernel("attention_decode_fp16"), shape=shape)
    sets = InputSets(fp16, 0, tmp_path, None, {"k": int8["k"]})
    with pytest.raises(ConfigError, match=r"given input k is int8 .*takes float16") as info:
        sets.get(fp16.default_config())
    assert "\n" not in str(info.value)


def _plan(store: str, kernel: str = "attention_decode") -> dict:
    r = CliRunner().invoke(
        app, ["compare", kernel, "--shapes", "odd", "--storage", store, "--json"]
    )
    assert r.exit_code == 3, r.output  # no GPU: the plan only
    doc = json.loads(r.stdout)
    return doc["shapes"][0]


def test_compare_runs_the_fp16_variants_best_else_its_default_and_says_which(
    tmp_path: Path,
) -> None:
    store_url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    shape = _plan(store_url)
    row = next(b for b in shape["baselines"] if b["name"] == "variant:attention_decode_fp16")
    assert row["would_run"]
    planned = shape["variants"]["variant:attention_decode_fp16"]
    fp16 = Space(load_kernel("attention_decode_fp16"), shape=ODD[0])
    assert planned["config"] == fp16.default_config()
    assert planned["origin"].startswith("default (no tuned study of attention_decode_fp16")

    # a tuned study of the fp16 variant at the shape: its best runs
    store = Store(store_url)
    study = store.study(
        kernel="attention_decode_fp16[QTYPE=float16,KSCALE=token,LAYOUT=contiguous,HEAD_DIM=128,GROUP=4]",
        shape_label=shape_label(ODD[0]),
        device_key="H200",
        parameters=[(p.name, p.values) for p in fp16.spec.parameters],
    )
    env = store.environment(DeviceInfo("H200", cc=90))
    run = store.start_run(study, env, sampler="tpe")
    best = {**fp16.default_config(), "SPLITS": 4, "COMBINE": "last"}
    assert not fp16.explain(best)
    store.record(study, run, env, fp16.default_config(), Measurement(TrialOutcome.OK, value=2.0))
    store.record(study, run, env, best, Measurement(TrialOutcome.OK, value=1.0))
    planned = _plan(store_url)["variants"]["variant:attention_decode_fp16"]
    assert planned["config"] == best
    assert planned["origin"] == f"best of study {study.name}"


def test_compare_keeps_the_problem_values_the_fp16_cache_allows(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.sqlite'}"
    r = CliRunner().invoke(
        app,
        ["compare", "attention_decode", "--shapes", "odd", "--storage", store, "--json",
         "-c", "KSCALE=channel,LAYOUT=paged,GROUP=8"],
    )  # fmt: skip
    assert r.exit_code == 3, r.output
    planned = json.loads(r.stdout)["shapes"][0]["variants"]["variant:attention_decode_fp16"]
    assert planned["config"]["LAYOUT"] == "paged" and planned["config"]["GROUP"] == 8
    assert planned["config"]["KSCALE"] == "token" and planned["config"]["KV"] == "fp16"
    assert planned["notes"] == ["KSCALE=channel is invalid with KV=fp16: KSCALE=token"]


def test_the_fp16_variant_is_no_baseline_of_itself(tmp_path: Path) -> None:
    shape = _plan(f"sqlite:///{tmp_path / 'store.sqlite'}", "attention_decode_fp16")
    row = next(b for b in shape["baselines"] if b["name"] == "variant:attention_decode_fp16")
    assert not row["would_run"] and "itself" in row["reason"]
