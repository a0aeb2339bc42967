"""The space-file loader: valid files load; every malformed one gives a located SpaceFileError."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from conftest import TINY_SPACE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench.compiler.jobs import make_job
from workbench.errors import CompileError, SpaceFileError
from workbench.spaces import Space, load_space
from workbench.spaces.model import MAX_SOURCE_BYTES
from workbench.spaces.registry import builtin_spaces_dir
from workbench.spaces.schema import Role

WriteSpace = Callable[..., Path]


def edit(old: str, new: str) -> str:
    assert old in TINY_SPACE, old
    return TINY_SPACE.replace(old, new, 1)


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_tiny_space_loads(project: Path) -> None:
    spec = load_space(project / "spaces" / "tiny.yaml")
    assert spec.name == "tiny"
    assert spec.parameter_names == ("BLOCK", "SCALE", "WAVES")
    assert spec.parameter("BLOCK").role is Role.DEFINE
    assert spec.parameter("WAVES").role is Role.LAUNCH
    assert spec.source == (project / "kernels" / "axpy.cu").resolve()
    assert spec.default_config() == {"BLOCK": 128, "SCALE": 2, "WAVES": 1}
    assert spec.shapes("two") == ({"n": 10}, {"n": 20})


@pytest.mark.parametrize("path", sorted(builtin_spaces_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_builtin_spaces_load(path: Path) -> None:
    spec = load_space(path)
    assert spec.parameters and spec.arches and spec.outputs


# (old text, new text, expected key, text expected in the message, needle locating the line)
BAD_CASES = [
    ("name: tiny", "name: tiny\nsauce: 1", "sauce", "unknown key 'sauce'", "sauce"),
    (
        "{values: [32, 64, 128, 256], default: 128}",
        "{valuez: [32], default: 32}",
        "parameters.BLOCK.valuez",
        "unknown key 'valuez'",
        "valuez",
    ),
    (
        '"BLOCK * SCALE <= 512"',
        '"BLOCK * BK <= 512"',
        "constraints[0].expr",
        "unknown name(s) BK",
        "BK",
    ),
    (
        '"BLOCK * SCALE <= 512"',
        "\"__import__('os').system('touch HACKED') == 0\"",
        "constraints[0].expr",
        "",
        "__import__",
    ),
    (
        '"BLOCK * SCALE <= 512"',
        '"BLOCK.__class__ == 1"',
        "constraints[0].expr",
        "attribute",
        "__class__",
    ),
    ('"BLOCK * SCALE <= 512"', '"2 ** 10 ** 9 > BLOCK"', "constraints[0].expr", "exponent", "**"),
    # option knobs' values are checked: a quoted "false" must not turn fast math on, and a
    # register cap that is not a number must not end a sweep in a traceback
    (
        "  WAVES: {values: [1, 2], default: 1, role: launch}",
        '  WAVES: {values: [1, 2], default: 1, role: launch}\n  FM: {values: ["false", true], '
        "role: option, option: fast_math}",
        "parameters.FM.values",
        "option fast_math: 'false' is not true or false (unquoted)",
        "FM:",
    ),
    (
        "  WAVES: {values: [1, 2], default: 1, role: launch}",
        "  WAVES: {values: [1, 2], default: 1, role: launch}\n  RR: {values: [0, 64, abc], "
        "role: option, option: maxrregcount}",
        "parameters.RR.values",
        "option maxrregcount: 'abc' is not an integer from 0 to 255",
        "RR:",
    ),
    (
        "source: ../kernels/axpy.cu",
        "source: ../kernels/nope.cu",
        "source",
        "does not exist",
        "source:",
    ),
    (
        "source: ../kernels/axpy.cu",
        "source: ../../../../../../etc/passwd",
        "source",
        "outside the project",
        "source:",
    ),
    (
        "arches: [sm_80, sm_90]",
        "arches: [sm_80, sm_9000x]",
        "arches[1]",
        "not a CUDA arch",
        "arches",
    ),
    (
        "{values: [32, 64, 128, 256], default: 128}",
        "{values: [32, 64], default: 128}",
        "parameters.BLOCK.default",
        "not one of the values",
        "BLOCK",
    ),
    (
        "  SCALE: {values: [1, 2, 3], default: 2}",
        "  SCALE: {values: [1, 2, 3], default: 2}\n  SCALE: {values: [4], default: 4}",
        "parameters",
        "duplicate key 'SCALE'",
        "values: [4]",
    ),
    (
        "x: {dtype: float32, shape: [n]}",
        "x: {dtype: float32, shape: [n], distribution: uniform, low: 0, high: 0}",
        "inputs.x",
        "zeros",
        "x: {",
    ),
    (
        "args: [x, y, {value: n, dtype: int32}]",
        "args: [x, {value: n, dtype: int32}]",
        "args",
        "not passed",
        "args:",
    ),
    (
        "{values: [1, 2, 3], default: 2}",
        "{values: 5}",
        "parameters.SCALE.values",
        "valid list",
        "SCALE",
    ),
    (
        "geometry:\n  grid: cdiv(n, BLOCK)\n  block: BLOCK\n",
        "",
        "",
        "missing required key 'geometry'",
        None,
    ),
    (
        "entry:\n  kernel: axpy",
        'entry:\n  template: "axpy<{BLOK}>"',
        "entry.template",
        "{BLOK}",
        "template",
    ),
    (
        "BLOCK: {values: [32, 64, 128, 256], default: 128}",
        "BLOCK: {values: [32, 64, 128, 256], default: 128, role: text}",
        "parameters.BLOCK.role",
        "PTX",
        "BLOCK",
    ),
    ("grid: cdiv(n, BLOCK)", "grid: cdiv(n, BLOCK) +", "geometry.grid[0]", "", "grid"),
    (
        "dtype: float32, shape: [n]}",
        "dtype: float31, shape: [n]}",
        "inputs.x.dtype",
        "float32",
        "float31",
    ),
    (
        "work: {flops: 2 * n, bytes: 12 * n}",
        "work: {flops: 2 * n, bytes: 12 * n, unit: MB/s}",
        "work.unit",
        "GB/s",
        "unit:",
    ),
    (  # a mapping in args (a name or a scalar): its own mistake, not "should be a string"
        "{value: n, dtype: int32}]",
        "{value: n, dtype: int16}]",
        "args[2].dtype",
        "Input should be 'int32', 'int64', 'uint32', 'float32' or 'float64' (got 'int16')",
        "int16",
    ),
    ("{value: n, dtype: int32}]", "5]", "args[2]", "Input should be a valid string", "5]"),
    (
        '{python: "workbench.references.elementwise:scale", rtol: 1e-6}',
        "{file: ../kernels, function: scale, rtol: 1e-6}",
        "reference.file",
        "reference file '../kernels' is a directory",
        "file:",
    ),
    (
        '{python: "workbench.references.elementwise:scale", rtol: 1e-6}',
        "{file: ../kernels/axpy.cu, function: scale, rtol: 1e-6}",
        "reference.file",
        "reference file '../kernels/axpy.cu' is not a .py file",
        "file:",
    ),
    (
        '{python: "workbench.references.elementwise:scale", rtol: 1e-6}',
        "{file: ../refs/gone.py, function: scale, rtol: 1e-6}",
        "reference.file",
        "reference file '../refs/gone.py' does not exist",
        "file:",
    ),
    # per-arch defaults: a declared arch, known parameters, values in their domains, valid
    (
        "constraints:\n",
        "defaults:\n  sm_75: {BLOCK: 64}\nconstraints:\n",
        "defaults.sm_75",
        "sm_75 is not among the space's arches (sm_80, sm_90)",
        "sm_75",
    ),
    (
        "constraints:\n",
        "defaults:\n  banana: {BLOCK: 64}\nconstraints:\n",
        "defaults.banana",
        "'banana' is not a CUDA architecture",
        "banana",
    ),
    (
        "constraints:\n",
        "defaults:\n  sm_90: {BLOCK: 64}\n  '90': {BLOCK: 32}\nconstraints:\n",
        "defaults.90",
        "sm_90 is given twice (as 'sm_90')",
        "'90'",
    ),
    (
        "constraints:\n",
        "defaults:\n  sm_90:\n    BLOK: 64\nconstraints:\n",
        "defaults.sm_90.BLOK",
        "unknown parameter 'BLOK'; parameters: BLOCK, SCALE, WAVES",
        "BLOK",
    ),
    (
        "constraints:\n",
        "defaults:\n  sm_90:\n    BLOCK: 100\nconstraints:\n",
        "defaults.sm_90.BLOCK",
        "100 is not one of BLOCK's values [32, 64, 128, 256]",
        "BLOCK: 100",
    ),
    (
        "constraints:\n",
        "defaults:\n  sm_90: {BLOCK: 256, SCALE: 3}\nconstraints:\n",
        "defaults.sm_90",
        "the sm_90 default is invalid on sm_90 (H200) at the default shape: violates "
        "BLOCK * SCALE <= 512",
        "sm_90:",
    ),
]


@pytest.mark.parametrize(
    "old,new,key,message,needle", BAD_CASES, ids=[c[2] or c[3][:20] for c in BAD_CASES]
)
def test_bad_space_is_located(
    write_space: WriteSpace,
    project: Path,
    old: str,
    new: str,
    key: str,
    message: str,
    needle: str | None,
) -> None:
    text = edit(old, new)
    path = write_space(text)
    with pytest.raises(SpaceFileError) as info:
        load_space(path)
    err = info.value
    assert err.path == path.absolute()
    assert message in str(err)
    if key:
        assert err.key == key
    if needle is not None:
        assert err.line == line_of(text, needle)
    assert not (project / "spaces" / "HACKED").exists()
    assert not Path("HACKED").exists()


def test_yaml_syntax_error_has_line(write_space: WriteSpace) -> None:
    text = edit("arches: [sm_80, sm_90]", "arches: [sm_80, sm_90")
    with pytest.raises(SpaceFileError, match="YAML syntax error") as info:
        load_space(write_space(text))
    assert info.value.line is not None


@pytest.mark.parametrize(
    "text,message",
    [
        ("", "empty"),
        ("- 1\n- 2\n", "expected a mapping"),
        ("a: &x [1]\nb: *x\n", "anchors and aliases"),
        ("a: !!python/object:os.system 1\n", "tag !!python/object:os.system is not allowed"),
        ("name: !custom 1\n", "tag"),
    ],
)
def test_degenerate_files(write_space: WriteSpace, text: str, message: str) -> None:
    with pytest.raises(SpaceFileError, match=message):
        load_space(write_space(text))


def test_billion_laughs_is_refused_fast(write_space: WriteSpace) -> None:
    lines = ["a0: [x, x, x, x, x, x, x, x, x, x]"]
    lines += [
        f"a{i}: [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 12)
    ]
    text = "\n".join(
        f"{line.split(':')[0]}: &{line.split(':')[0]}{line.split(':', 1)[1]}" for line in lines
    )
    start = time.perf_counter()
    with pytest.raises(SpaceFileError):
        load_space(write_space(text))
    assert time.perf_counter() - start < 2.0


def test_missing_file(project: Path) -> None:
    with pytest.raises(SpaceFileError, match="cannot read"):
        load_space(project / "spaces" / "absent.yaml")


# ---- property tests: nothing but SpaceFileError, whatever the file holds ------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False),
    st.text(max_size=30),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
_top_keys = st.sampled_from(
    [
        "name",
        "source",
        "entry",
        "arches",
        "parameters",
        "derived",
        "constraints",
        "geometry",
        "shapes",
        "inputs",
        "outputs",
        "args",
        "reference",
        "work",
        "baselines",
        "expect_sass",
        "language",
        "junk",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=st.dictionaries(_top_keys, _values, max_size=10))
def test_random_documents_only_raise_space_file_error(write_space: WriteSpace, doc: dict) -> None:
    path = write_space(yaml.safe_dump(doc))
    with contextlib.suppress(SpaceFileError):
        load_space(path)


_base = yaml.safe_load(TINY_SPACE)


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


_ALL_PATHS = _paths(_base)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(_ALL_PATHS), value=_values, delete=st.booleans())
def test_mutated_valid_file_only_raises_space_file_error(
    write_space: WriteSpace, path: tuple, value: object, delete: bool
) -> None:
    doc = yaml.safe_load(TINY_SPACE)
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    with contextlib.suppress(SpaceFileError):
        load_space(write_space(yaml.safe_dump(doc)))


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300))
def test_random_text_only_raises_space_file_error(write_space: WriteSpace, text: str) -> None:
    with contextlib.suppress(SpaceFileError):
        load_space(write_space(text))


def test_a_space_may_give_its_default_config_per_arch(write_space: WriteSpace) -> None:
    """``defaults:`` replaces the parameters' defaults on one arch (an arch named as --arch
    takes it: ``90`` is sm_90), and there only."""
    from workbench.spaces import Space
    from workbench.toolchain import Arch

    spec = load_space(
        write_space(edit("constraints:\n", "defaults:\n  '90': {BLOCK: 64}\nconstraints:\n"))
    )
    assert spec.arch_defaults == {"sm_90": {"BLOCK": 64}}
    assert Space(spec, arch=Arch.parse("sm_90")).default_config() == {
        "BLOCK": 64,
        "SCALE": 2,
        "WAVES": 1,
    }
    assert Space(spec, arch=Arch.parse("sm_80")).default_config()["BLOCK"] == 128
    assert spec.default_config()["BLOCK"] == 128  # (no arch: the parameters' defaults)


def test_output_dtype_may_depend_on_the_config(write_space: WriteSpace) -> None:
    from workbench.errors import ConfigError
    from workbench.spaces.schema import DType

    text = edit(
        "y: {dtype: float32, shape: [n], init: 1}",
        "y: {dtype: \"'float16' if SCALE == 1 else 'float32'\", shape: [n], init: 1}",
    )
    spec = load_space(write_space(text))
    (y,) = spec.outputs
    assert y.dtype_for({"SCALE": 1}) is DType.FLOAT16
    assert y.dtype_for({"SCALE": 2}) is DType.FLOAT32
    bad = load_space(
        write_space(
            edit(
                "y: {dtype: float32, shape: [n], init: 1}",
                "y: {dtype: \"'float17'\", shape: [n], init: 1}",
            )
        )
    )
    with pytest.raises(ConfigError, match="float17"):
        bad.outputs[0].dtype_for({})
    with pytest.raises(SpaceFileError, match="unknown name"):
        load_space(
            write_space(
                edit(
                    "y: {dtype: float32, shape: [n], init: 1}",
                    "y: {dtype: \"'float16' if NOPE else 'float32'\", shape: [n], init: 1}",
                )
            )
        )


def test_an_output_may_declare_that_it_holds_nan_or_inf(write_space: WriteSpace) -> None:
    from workbench.runners.buffers import output_buffers

    plain = load_space(write_space(TINY_SPACE))
    assert not plain.outputs[0].nonfinite_allowed
    text = edit(
        "y: {dtype: float32, shape: [n], init: 1}",
        "y: {dtype: float32, shape: [n], init: 1, nonfinite: allowed}",
    )
    spec = load_space(write_space(text))
    assert spec.outputs[0].nonfinite_allowed
    space = Space(spec, shape={"n": 10})
    (y,) = output_buffers(space, space.default_config())
    assert y.nonfinite_allowed  # what verification and the reference check read
    for value, message in (("yes", "'allowed'"), ("true", "'allowed'")):
        bad = edit("init: 1}", f"init: 1, nonfinite: {value}}}")
        with pytest.raises(SpaceFileError, match=message) as info:
            load_space(write_space(bad))
        assert info.value.key == "outputs.y.nonfinite"
        assert info.value.line == line_of(bad, "nonfinite")
    scratch = edit(
        "init: 1}",
        "init: 1}\n  ws: {dtype: float32, shape: [n], scratch: true, nonfinite: allowed}",
    )
    with pytest.raises(SpaceFileError, match="scratch output is never compared") as info:
        load_space(write_space(scratch))
    assert info.value.key == "outputs.ws.nonfinite"


def test_the_documented_example_space_loads(tmp_path: Path) -> None:
    """The space-file reference's example, as written there (its source copied beside it)."""
    import shutil

    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "space-files.md").read_text()
    block = page.split("# Tuning-space files", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (tmp_path / "kernels_cu").mkdir()
    shutil.copy(root / "kernels_cu" / "reduce.cu", tmp_path / "kernels_cu" / "reduce.cu")
    (tmp_path / "spaces").mkdir()
    (tmp_path / "spaces" / "reduce.yaml").write_text(block)
    spec = load_space(tmp_path / "spaces" / "reduce.yaml")
    assert spec.name == "reduce" and "UNROLL" in spec.parameter_names
    # and its args fit the kernel: the default config compiles with no mismatch
    from workbench.compiler import CompileCache
    from workbench.search.configs import select_configs
    from workbench.spaces import Space
    from workbench.static.sweep import static_sweep

    space = Space(spec)
    cache = CompileCache(tmp_path / "cache")
    (record,) = static_sweep(space, select_configs(space), cache=cache)
    assert record.ok and record.args_problems == [], record.error


def test_a_source_that_is_a_fifo_is_named_as_one(project: Path) -> None:
    """A FIFO exists but is no file: reading it would block for ever."""
    source = project / "kernels" / "axpy.cu"
    source.unlink()
    os.mkfifo(source)
    with pytest.raises(SpaceFileError, match=r"'\.\./kernels/axpy\.cu' is not a regular file"):
        load_space(project / "spaces" / "tiny.yaml")


def test_a_source_past_the_size_cap_is_refused_unread(project: Path) -> None:
    """A sparse file (no disk used) one byte past the cap: refused when the space loads, and
    by the compile job if it grows after that."""
    tiny = project / "spaces" / "tiny.yaml"
    space = Space(load_space(tiny))
    source = project / "kernels" / "axpy.cu"
    os.truncate(source, MAX_SOURCE_BYTES + 1)
    with pytest.raises(SpaceFileError, match="is larger than 64 MiB, the most a source"):
        load_space(tiny)
    with pytest.raises(CompileError, match="larger than 64 MiB"):
        make_job(space, space.spec.default_config())
