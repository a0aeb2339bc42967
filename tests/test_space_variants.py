"""Problem variants in space files: an input whose dtype is a variant's (``dtype: DTYPE``), named
variants (``variants:``) as kernels of their own, and recordings made before a space gained a
variant parameter. The library's folded files are tested in test_kernels_folded.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import invoke
from conftest import TINY_SPACE
from recording_helpers import record_space

from workbench.errors import ConfigError, SpaceFileError, UnknownKernelError
from workbench.runners.buffers import input_config_names, make_inputs
from workbench.runners.recordings import RecordingError, load_recording
from workbench.search.problem import SpaceProblem
from workbench.search.start import plan_space_replay
from workbench.spaces import Space, load_kernel, load_space, resolve_space
from workbench.spaces.registry import builtin_spaces_dir
from workbench.store import Store

WriteSpace = Callable[..., Path]

#: the tiny space with its input's dtype a problem variant, and a name for the float16 one
VARIANT_SPACE = (
    TINY_SPACE.replace(
        "  WAVES: {values: [1, 2], default: 1, role: launch}\n",
        "  WAVES: {values: [1, 2], default: 1, role: launch}\n"
        "  DTYPE: {values: [float32, float16], default: float32, tunable: false}\n",
    )
    .replace(
        "  x: {dtype: float32, shape: [n]}",
        "  x: {dtype: DTYPE, shape: [n]}",
    )
    .replace(
        "constraints:",
        "variants:\n"
        "  tiny: {set: {DTYPE: float32}}\n"
        "  tiny_f16: {set: {DTYPE: float16}, defaults: {BLOCK: 64}}\n"
        "constraints:",
    )
)


def test_an_input_takes_the_dtype_its_problem_variant_names(write_space: WriteSpace) -> None:
    space = Space(load_space(write_space(VARIANT_SPACE)))
    assert "DTYPE" in input_config_names(space)  # (drawn once per value, not per config)
    f16 = make_inputs(space, 0, dict(space.default_config(), DTYPE="float16"))["x"]
    f32 = make_inputs(space, 0, space.default_config())["x"]
    assert f16.dtype == np.float16 and f32.dtype == np.float32
    with pytest.raises(ConfigError, match="the inputs need a config"):
        make_inputs(space, 0)


def test_per_dtype_draws_each_dtype_its_own_way(write_space: WriteSpace) -> None:
    text = VARIANT_SPACE.replace(
        "  x: {dtype: DTYPE, shape: [n]}",
        "  x: {dtype: DTYPE, shape: [n], low: -1, high: 1, "
        "per_dtype: {float16: {low: 100, high: 200}}}",
    )
    space = Space(load_space(write_space(text)))
    f16 = make_inputs(space, 0, dict(space.default_config(), DTYPE="float16"))["x"]
    f32 = make_inputs(space, 0, space.default_config())["x"]
    assert f16.min() >= 100 and f16.max() <= 200
    assert f32.min() >= -1 and f32.max() <= 1


# (edit of VARIANT_SPACE, key the error names, text of its message, needle on its line)
BAD_VARIANTS = [
    (
        ("DTYPE: {values: [float32, float16], default: float32, tunable: false}",
         "DTYPE: {values: [float32, float16], default: float32}"),
        "inputs.x.dtype", "reads DTYPE, a tunable parameter", "dtype: DTYPE",
    ),
    (
        ("x: {dtype: DTYPE, shape: [n]}", "x: {dtype: DTYPEZ, shape: [n]}"),
        "inputs.x.dtype", "'DTYPEZ' is not a dtype (int8, uint8", "DTYPEZ",
    ),
    (
        ("DTYPE: {values: [float32, float16]", "DTYPE: {values: [float32, e4m3]"),
        "inputs.x.dtype", "names no dtype for DTYPE=e4m3", "dtype: DTYPE",
    ),
    (
        ("x: {dtype: DTYPE, shape: [n]}",
         "x: {dtype: DTYPE, shape: [n], per_dtype: {int8: {low: -3}}}"),
        "inputs.x.per_dtype.int8", "the input's dtype is never int8", "per_dtype",
    ),
    (
        ("x: {dtype: DTYPE, shape: [n]}",
         "x: {dtype: float32, shape: [n], per_dtype: {float32: {low: -3}}}"),
        "inputs.x.per_dtype", "per_dtype is for a dtype that a problem variant chooses",
        "per_dtype",
    ),
    (
        ("x: {dtype: DTYPE, shape: [n]}",
         "x: {dtype: DTYPE, shape: [n], per_dtype: {float16: {low: 0, high: 0}}}"),
        "inputs.x.per_dtype.float16", "must not be all zeros", "per_dtype",
    ),
    (
        ("tiny_f16: {set: {DTYPE: float16}", "tiny_f16: {set: {BLOCK: 64}"),
        "variants.tiny_f16.set.BLOCK", "BLOCK is tunable", "tiny_f16:",
    ),
    (
        ("tiny_f16: {set: {DTYPE: float16}", "tiny_f16: {set: {DTYPE: bfloat16}"),
        "variants.tiny_f16.set.DTYPE", "'bfloat16' is not one of DTYPE's values", "tiny_f16:",
    ),
    (
        ("tiny_f16: {set: {DTYPE: float16}", "tiny_f16: {set: {DTYPE: float32}"),
        "variants.tiny_f16", "variants tiny and tiny_f16 can both hold", "tiny_f16:",
    ),
    (
        ("defaults: {BLOCK: 64}", "defaults: {sm_75: {BLOCK: 64}}"),
        "variants.tiny_f16.defaults.sm_75", "sm_75 is not among the space's arches", "tiny_f16:",
    ),
    (
        ("defaults: {BLOCK: 64}", "defaults: {BLOCKS: 64}"),
        "variants.tiny_f16.defaults.BLOCKS", "neither a parameter", "tiny_f16:",
    ),
    (
        ("defaults: {BLOCK: 64}", "defaults: {BLOCK: 256, SCALE: 3}"),
        "variants.tiny_f16", "the default of tiny_f16 is invalid on sm_90", "tiny_f16:",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "key", "message", "needle"), BAD_VARIANTS, ids=lambda x: "")
def test_a_bad_variant_or_input_dtype_is_located(
    write_space: WriteSpace,
    edit: tuple[str, str],
    key: str,
    message: str,
    needle: str,
) -> None:
    assert edit[0] in VARIANT_SPACE, edit[0]
    text = VARIANT_SPACE.replace(*edit)
    with pytest.raises(SpaceFileError) as info:
        load_space(write_space(text))
    err = info.value
    assert err.key == key and message in str(err), str(err)
    assert err.line == next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture
def variant_dir(project: Path) -> Path:
    """A user's space directory holding the variant space as tiny.yaml."""
    (project / "spaces" / "tiny.yaml").write_text(VARIANT_SPACE)
    return project / "spaces"


def test_a_variant_name_is_a_kernel(variant_dir: Path) -> None:
    """``tiny_f16`` is ``tiny --set DTYPE=float16``: one problem, one label, one default."""
    spec = load_kernel("tiny_f16", [variant_dir])
    assert spec.name == "tiny_f16" and spec.path == variant_dir / "tiny.yaml"
    assert spec.parameter("DTYPE").values == ("float16",)
    problem = SpaceProblem(Space(spec))
    assert problem.kernel == "tiny_f16" and problem.pinned == {"DTYPE": "float16"}
    assert problem.defaults() == [{"BLOCK": 64, "SCALE": 2, "WAVES": 1, "DTYPE": "float16"}]
    full = Space(load_kernel("tiny", [variant_dir]))
    via = SpaceProblem(full, full.parse_pins(["DTYPE=float16"]))
    assert (via.kernel, via.pinned, via.defaults()) == (
        problem.kernel,
        problem.pinned,
        problem.defaults(),
    )
    assert SpaceProblem(full).kernel == "tiny"  # DTYPE=float32: the variant named tiny
    # `-c` takes the variant's defaults for what it does not name, as `--set` does
    assert full.parse_config(["DTYPE=float16"]) == problem.defaults()[0]
    with pytest.raises(UnknownKernelError, match=r"known kernels: .*reduce_f16, .*tiny, tiny_f16"):
        resolve_space("tiny_f32", [variant_dir])


def test_a_file_of_a_variants_name_shadows_it(variant_dir: Path) -> None:
    (variant_dir / "tiny_f16.yaml").write_text(TINY_SPACE.replace("name: tiny", "name: tiny_f16"))
    spec = load_kernel("tiny_f16", [variant_dir])
    assert spec.path == variant_dir / "tiny_f16.yaml" and "DTYPE" not in spec.parameter_names


def test_kernels_lists_a_variant_with_what_it_stands_for(variant_dir: Path) -> None:
    code, out, err = invoke("kernels", "--spaces", str(variant_dir), "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    row = rows["tiny_f16"]
    assert row["variant_of"] == "tiny" and row["set"] == {"DTYPE": "float16"}
    assert row["description"] == "= tiny --set DTYPE=float16"
    assert row["points"] == rows["tiny"]["points"] // 2


# ---- recordings made before a space gained a problem variant ----------------------------------


def _recording_of_the_old_file(project: Path, kernel: str | None = None) -> Path:
    """A recording of the tiny space as it was (no DTYPE): every valid config."""
    (project / "old").mkdir(exist_ok=True)
    (project / "old" / "tiny.yaml").write_text(TINY_SPACE)
    space = Space(load_space(project / "old" / "tiny.yaml"))
    configs = list(space.iter_valid())
    path = project / "old.json"
    return record_space(space, path, [(c, 1.0 + c["BLOCK"] / 100) for c in configs], kernel=kernel)


def test_a_recording_from_before_a_variant_parameter_replays(
    project: Path, variant_dir: Path, tmp_path: Path
) -> None:
    """It lacks DTYPE, which the space now has as a problem variant: its configs are taken as
    the value its label names (``tiny``: float32), and a tune of float16 does not replay them."""
    old = load_recording(_recording_of_the_old_file(project))
    space = Space(load_kernel("tiny", [variant_dir]))
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    plan = plan_space_replay(store, space, old)
    valid = plan.problem.valid_configs()
    assert valid and len(valid) == len(old.entries)
    assert {c["DTYPE"] for c in valid} == {"float32"}
    best = min(valid, key=lambda c: c["BLOCK"])
    m = plan.runner.evaluate(best)
    assert m.value == pytest.approx(1.0 + best["BLOCK"] / 100)
    f16 = plan_space_replay(store, space, old, {"DTYPE": "float16"})
    with pytest.raises(ConfigError, match="DTYPE is pinned to 'float16'"):
        f16.problem.check_not_empty()


def test_a_recording_names_its_variant_by_its_label(
    project: Path, variant_dir: Path, tmp_path: Path
) -> None:
    """One recorded as ``tiny_f16`` (a file of its own before the fold) is float16's."""
    old = load_recording(_recording_of_the_old_file(project, kernel="tiny_f16"))
    spec = load_kernel("tiny_f16", [variant_dir])
    plan = plan_space_replay(Store(f"sqlite:///{tmp_path / 's.sqlite'}"), Space(spec), old)
    assert {c["DTYPE"] for c in plan.problem.valid_configs()} == {"float16"}


def test_a_recording_without_a_tunable_parameter_is_not_of_the_space(
    project: Path, write_space: WriteSpace
) -> None:
    old = load_recording(_recording_of_the_old_file(project))
    grown = TINY_SPACE.replace(
        "  WAVES: {values: [1, 2], default: 1, role: launch}\n",
        "  WAVES: {values: [1, 2], default: 1, role: launch}\n  UNROLL: {values: [1, 2]}\n",
    )
    spec = load_space(write_space(grown))
    with pytest.raises(RecordingError, match=r"does not record parameter\(s\) UNROLL of tiny"):
        old.for_space(spec)
    single = load_space(
        write_space(grown.replace("UNROLL: {values: [1, 2]}", "UNROLL: {values: [4]}"))
    )
    assert {e.config["UNROLL"] for e in old.for_space(single).entries.values()} == {4}
    # a tunable knob that says what configs had before it existed (gemm_int8's SCHED): that
    before = load_space(
        write_space(
            grown.replace("UNROLL: {values: [1, 2]}", "UNROLL: {values: [1, 2], before: 2}")
        )
    )
    assert before.parameter("UNROLL").before == 2
    replayed = old.for_space(before)  # (its value, not the default 1)
    assert {e.config["UNROLL"] for e in replayed.entries.values()} == {2}
    assert len(replayed.entries) == len(old.entries)
    with pytest.raises(SpaceFileError, match="before 3 is not one of the values") as info:
        load_space(
            write_space(
                grown.replace("UNROLL: {values: [1, 2]}", "UNROLL: {values: [1, 2], before: 3}")
            )
        )
    assert info.value.key == "parameters.UNROLL.before"


def test_the_gemm_recordings_replay_after_the_scheduler_knobs(tmp_path: Path) -> None:
    """gemm_int8's H200 recordings predate SCHED, RASTER and EPILOGUE (issue 54): they replay
    as the static schedule along M with the direct epilogue, which is what every recorded TMA
    config ran."""
    folder = builtin_spaces_dir() / "recordings" / "gemm_int8"
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    paths = sorted(folder.glob("*.json.gz"))
    assert paths
    for path in paths:
        recording = load_recording(path)
        assert not {"SCHED", "RASTER", "EPILOGUE"} & set(recording.parameter_names), path
        space = Space(load_kernel("gemm_int8"), shape=dict(recording.shape or {}))
        valid = plan_space_replay(store, space, recording).problem.valid_configs()
        held = {(c["SCHED"], c["RASTER"], c["EPILOGUE"]) for c in valid}
        assert valid and held == {("static", "m", "direct")}, path


def test_the_h200_recordings_replay_in_the_folded_files(tmp_path: Path) -> None:
    """Recorded before reduce had DTYPE and quantize_fp8 had IN, OUT and SYMMETRIC: each
    replays as the problem its label names (float32; fp16 -> fp8, symmetric)."""
    folder = builtin_spaces_dir() / "recordings"
    cases = [
        ("reduce", {"DTYPE": "float32"}),
        ("quantize_fp8", {"IN": "float16", "OUT": "fp8", "SYMMETRIC": True}),
        ("quantize_int8", {"IN": "float16", "OUT": "int8"}),
    ]
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    for kernel, filled in cases:
        (path,) = (folder / kernel).glob("*.json.gz")
        recording = load_recording(path)
        assert not set(filled) & set(recording.parameter_names), kernel
        space = Space(load_kernel(kernel), shape=dict(recording.shape or {}))
        valid = plan_space_replay(store, space, recording).problem.valid_configs()
        assert valid and all(c[k] == v for c in valid for k, v in filled.items()), kernel


def test_the_no_gpu_compile_stage_starts_from_the_variants_own_default(
    private_dirs: Path,
) -> None:
    """`tune reduce --set DTYPE=float16` compiles reduce_f16's default (ITEMS=16, VEC=8), as
    `tune reduce_f16` does, not the float32 variant's (ITEMS=8, VEC=4)."""
    from workbench.gpu import probe_gpu

    if probe_gpu().available:
        pytest.skip("a GPU is present: tune measures")
    firsts = []
    for args in (["reduce", "--set", "DTYPE=float16"], ["reduce_f16"]):
        code, out, err = invoke("tune", *args, "--shape", "n=4096", "--sample", "0", "--json")
        assert code == 3, err
        (record,) = json.loads(out)["records"]
        firsts.append(record["config"])
    assert firsts[0] == firsts[1]
    assert (firsts[0]["ITEMS"], firsts[0]["VEC"], firsts[0]["DTYPE"]) == (16, 8, "float16")
