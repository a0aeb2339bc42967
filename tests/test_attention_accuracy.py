"""The report's accuracy section for attention_decode: what each 8-bit KV cache costs against
the fp16 cache, computed on the CPU by the space's ``accuracy`` function (no GPU, no timing),
for a study that was only compiled and for a measured one."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import SpaceFileError
from workbench.references.attention import CACHE_FORMATS, kv_error
from workbench.report import ReportOptions, build_reports
from workbench.report.accuracy import gather_problem_accuracy
from workbench.report.data import gather_studies
from workbench.report.page import num
from workbench.runners.accuracy import AccuracyFigureError, check_rows
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.buffers import make_inputs
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.model import shape_label
from workbench.store import Store
from workbench.store.records import COMPILE_ONLY

SPACE = Path(__file__).resolve().parents[1] / "tuning_spaces" / "attention_decode.yaml"
#: a study's shape above the figure's cap (B <= 4, S <= 2048): computed at the capped one
STUDY_SHAPE = {"B": 6, "Hkv": 2, "S": 3000, "S_MIN": 3000}
CAPPED = {"B": 4, "Hkv": 2, "S": 2048, "S_MIN": 2048}


def _expected(kv: str, kscale: str) -> dict[str, tuple[float, float, float]]:
    """kv_error of every format on the fp16 cache the runner draws at the capped shape (seed 0,
    KV=fp16): what the report must show."""
    spec = load_kernel("attention_decode")
    space = Space(spec, shape=CAPPED)
    config = {**space.default_config(), "KV": "fp16"}
    inputs = make_inputs(space, 0, config)
    assert (inputs["seq_lens"] == CAPPED["S"]).all()  # (full sequences: kv_error's dense cache)
    out = {}
    for (fmt, ks), name in CACHE_FORMATS.items():
        e = kv_error(inputs["q"], inputs["k"], inputs["v"], fmt, ks)
        out[name] = (e.relative_rms, e.rms, e.max_abs)
    return out


def _store(tmp_path: Path, kernel: str, device: str, measured: bool) -> Store:
    spec = load_space(SPACE)
    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    study = store.study(
        kernel=kernel,
        shape_label=shape_label(STUDY_SHAPE),
        device_key=device,
        parameters=[(p.name, p.values) for p in spec.parameters],
        arch="sm_90a",
        space_path=str(SPACE),
        unit="ms",
    )
    if measured:
        env = store.environment(DeviceInfo("H200", cc=90))
        run = store.start_run(study, env, sampler="tpe")
        config = {**Space(spec, shape=STUDY_SHAPE).default_config(), "KV": "fp8"}
        store.record(study, run, env, config, Measurement(TrialOutcome.OK, value=0.125))
    return store


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kernel", "device", "measured", "own"),
    [
        ("attention_decode_fp8", f"{COMPILE_ONLY} sm_90a", False, "fp8 E4M3, per-token k scales"),
        ("attention_decode[KSCALE=channel]", "H200", False, "int8, per-channel k scales"),
        ("attention_decode_fp8", "H200", True, "fp8 E4M3, per-token k scales"),
    ],
)
def test_the_report_shows_the_cache_formats_error_beside_the_speed(
    tmp_path: Path, kernel: str, device: str, measured: bool, own: str
) -> None:
    store = _store(tmp_path, kernel, device, measured)
    (data,) = gather_studies(store)
    acc = gather_problem_accuracy(data)
    assert acc is not None and acc.rows is not None, acc
    rows = acc.rows
    assert dict(rows.shape) == CAPPED and dict(rows.capped) == {"B": 6, "S": 3000, "S_MIN": 3000}
    expected = _expected("fp8", "token")
    assert [r["cache"] for r in rows.rows] == list(expected)
    for r in rows.rows:
        rel, rms, max_abs = expected[str(r["cache"])]
        assert r["relative rms error"] == pytest.approx(rel, rel=1e-12)
        assert r["rms error"] == pytest.approx(rms, rel=1e-12)
        assert r["max abs error"] == pytest.approx(max_abs, rel=1e-12)
        assert (r["this study"] == "yes") == (r["cache"] == own)
    # an 8-bit cache costs something, fp8 more than int8 (3 mantissa bits against ~7)
    int8 = expected["int8, per-token k scales"][0]
    fp8 = expected["fp8 E4M3, per-token k scales"][0]
    assert 0.002 < int8 < fp8 < 0.2

    result = build_reports(store, None, ReportOptions(out_dir=tmp_path / "reports"))
    page = next(p for p in result.pages if p.name != "index.html").read_text()
    section = page[page.index("id='accuracy'") :] if "id='accuracy'" in page else page
    assert "Error next to speed" in page
    for name, (rel, _, _) in expected.items():
        assert re.search(rf"{re.escape(name)}</td><td class='num'>{re.escape(num(rel))}<", section)
    assert "B=4,Hkv=2,S=2048,S_MIN=2048 (capped from the study&#x27;s B=6, S=3000" in section
    if measured:
        assert "Speed of this study&#x27;s best config: 0.125 ms" in section
    elif device.startswith(COMPILE_ONLY):
        assert "nothing of this study ran (it was compiled without a GPU)" in section
    else:
        assert "no config of this study ran correctly" in section


def test_a_study_at_a_small_shape_is_not_capped(tmp_path: Path) -> None:
    spec = load_space(SPACE)
    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    shape = {"B": 2, "Hkv": 1, "S": 333, "S_MIN": 1}  # mixed lengths, paged
    store.study(
        kernel="attention_decode_paged",
        shape_label=shape_label(shape),
        device_key="H200",
        parameters=[(p.name, p.values) for p in spec.parameters],
        arch="sm_90a",
        space_path=str(SPACE),
    )
    (data,) = gather_studies(store)
    acc = gather_problem_accuracy(data)
    assert acc is not None and acc.rows is not None
    assert dict(acc.rows.shape) == shape and not acc.rows.capped
    assert acc.rows.shape_text == shape_label(shape)
    assert all(np.isfinite(float(r["rms error"])) for r in acc.rows.rows)


def test_rows_are_checked() -> None:
    good = [{"cache": "int8", "error": np.float64(0.01)}]
    assert check_rows(good, "f") == [{"cache": "int8", "error": 0.01}]
    for bad, said in [
        ({"cache": "int8"}, "expected a non-empty list of rows"),
        ([], "expected a non-empty list of rows"),
        ([{"a": 1}, {"b": 2}], "row 1 has columns"),
        ([{"a": [1, 2]}], "expected a number or a word"),
        ([{"a": float("nan")}], "'a' is nan"),
    ]:
        with pytest.raises(AccuracyFigureError, match=said):
            check_rows(bad, "f")


@pytest.mark.parametrize(
    ("block", "said"),
    [
        ("draw: {NOPE: 1}", "no parameter 'NOPE'"),
        ("draw: {KV: fp4}", "'fp4' is not one of KV's values"),
        ("shape: {T: 4}", "no shape dimension 'T'"),
        ("shape: {B: 0}", "0 is not a positive size"),
    ],
)
def test_a_wrong_accuracy_block_is_a_located_error(tmp_path: Path, block: str, said: str) -> None:
    text = SPACE.read_text()
    cut = text.replace("  draw: {KV: fp16}\n  shape: {B: 4, S: 2048, S_MIN: 2048}", "  " + block)
    assert cut != text
    (tmp_path / "workbench.toml").write_text("")
    (tmp_path / "kernels_cu").mkdir()
    shutil.copy(SPACE.parents[1] / "kernels_cu" / "attention_decode.cu", tmp_path / "kernels_cu")
    (tmp_path / "spaces").mkdir()
    path = tmp_path / "spaces" / "attention_decode.yaml"
    path.write_text(cut)
    with pytest.raises(SpaceFileError, match=said) as info:
        load_space(path)
    assert "\n" not in str(info.value)
