"""The ways a user names and writes a reference: a plain function beside the space file that
takes the inputs by name, `file.py:function`, `module:function`; checked before compiling and
runnable on the CPU with `workbench space --check-reference`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_SPACE

from workbench.errors import SpaceFileError
from workbench.references import ReferenceCall
from workbench.runners.buffers import Fill, OutputBuffer, OutputRole
from workbench.runners.reference import (
    ReferenceNotFoundError,
    ReferenceOutputError,
    check_reference,
    resolve_reference,
    run_reference,
    try_reference,
)
from workbench.spaces import Space, load_space
from workbench.spaces.schema import DType

Y = OutputBuffer("y", DType.FLOAT32, (4,), OutputRole.INITIALIZED, Fill(bytes(4)))
WORKBENCH = [sys.executable, "-m", "workbench.cli.entry"]
PLAIN = "import numpy as np\ndef scaled(x, SCALE, n):\n    return (x * SCALE).astype(np.float32)\n"


def tiny_with(reference: str) -> str:
    old = 'reference: {python: "workbench.references.elementwise:scale", rtol: 1e-6}'
    assert old in TINY_SPACE
    return TINY_SPACE.replace(old, reference)


def call(x: np.ndarray, config: dict) -> ReferenceCall:
    return ReferenceCall(inputs={"x": x}, scalars={}, shape={"n": x.size}, config=config)


def test_a_plain_function_gets_inputs_config_and_shape_by_name(tmp_path: Path) -> None:
    (tmp_path / "ref.py").write_text(PLAIN)
    fn = resolve_reference(f"{tmp_path / 'ref.py'}:scaled")
    out = run_reference(fn, call(np.ones(4, np.float32), {"SCALE": 3, "BLOCK": 64}), (Y,))
    assert out["y"].tolist() == [3.0] * 4


def test_a_plain_function_may_return_a_dict_and_its_config_reads_are_noted(
    tmp_path: Path,
) -> None:
    from workbench.runners.reference import RecordingConfig

    (tmp_path / "ref.py").write_text("def f(x, SCALE):\n    return {'y': x * SCALE}\n")
    fn = resolve_reference(f"{tmp_path / 'ref.py'}:f")
    cfg = RecordingConfig({"SCALE": 2, "BLOCK": 64})
    assert run_reference(fn, call(np.ones(4, np.float32), cfg), (Y,))["y"].tolist() == [2.0] * 4
    assert cfg.read == {"SCALE"}  # the expected-output cache keys on SCALE only


def test_an_array_is_refused_where_several_outputs_are_compared(tmp_path: Path) -> None:
    (tmp_path / "ref.py").write_text("def f(x):\n    return x\n")
    fn = resolve_reference(f"{tmp_path / 'ref.py'}:f")
    other = OutputBuffer("z", DType.FLOAT32, (4,), OutputRole.INITIALIZED, Fill(bytes(4)))
    with pytest.raises(ReferenceOutputError, match=r"a dict of output arrays by name \(y, z\)"):
        run_reference(fn, call(np.ones(4, np.float32), {}), (Y, other))


def test_the_space_file_names_a_file_beside_it_in_every_natural_way(
    write_space: Callable[..., Path],
) -> None:
    forms = [
        "reference: {python: ref.py:scaled, rtol: 1e-6}",
        "reference: {python: ./ref.py:scaled, rtol: 1e-6}",
        "reference: {file: ref.py, function: scaled, rtol: 1e-6}",
    ]
    for i, form in enumerate(forms):
        path = write_space(tiny_with(form), name=f"case{i}.yaml")
        (path.parent / "ref.py").write_text(PLAIN)
        spec = load_space(path)
        assert spec.reference is not None
        assert spec.reference.target == f"{path.parent / 'ref.py'}:scaled", form
        check_reference(spec)
    module_form = load_space(write_space(tiny_with("reference: {python: numpy:add, rtol: 0.1}")))
    assert module_form.reference is not None and module_form.reference.target == "numpy:add"


def test_the_short_form_needs_a_tolerance_for_float_outputs(
    write_space: Callable[..., Path],
) -> None:
    path = write_space(tiny_with("reference: ref.py:scaled"))
    (path.parent / "ref.py").write_text(PLAIN)
    with pytest.raises(SpaceFileError, match=r"reference: \{python: ref.py:scaled, rtol"):
        load_space(path)
    ints = tiny_with("reference: ref.py:scaled").replace(
        "y: {dtype: float32, shape: [n], init: 1}", "y: {dtype: int32, shape: [n], init: 1}"
    )
    spec = load_space(write_space(ints))
    assert spec.reference is not None and spec.reference.exact


def test_a_missing_reference_file_is_located_and_says_where_it_looked(
    write_space: Callable[..., Path],
) -> None:
    text = tiny_with("reference: {python: refs.py:scaled, rtol: 1e-6}")
    with pytest.raises(SpaceFileError) as info:
        load_space(write_space(text))
    msg = str(info.value)
    assert "reference file 'refs.py' does not exist" in msg and "spaces/refs.py" in msg
    assert (
        f":{text.splitlines().index('reference: {python: refs.py:scaled, rtol: 1e-6}') + 1}" in msg
    )


def test_a_parameter_nothing_provides_is_found_before_compiling(
    write_space: Callable[..., Path],
) -> None:
    path = write_space(tiny_with("reference: {python: ref.py:f, rtol: 1e-6}"))
    (path.parent / "ref.py").write_text("def f(x, alpha):\n    return x\n")
    with pytest.raises(ReferenceNotFoundError) as info:
        check_reference(load_space(path))
    assert "parameter 'alpha'" in str(info.value) and "by name" in str(info.value)


def test_try_reference_runs_it_on_the_cpu(write_space: Callable[..., Path]) -> None:
    path = write_space(tiny_with("reference: {python: ref.py:scaled, rtol: 1e-6}"))
    (path.parent / "ref.py").write_text(PLAIN)
    space = Space(load_space(path), shape={"n": 10})
    got = try_reference(space, space.default_config())
    assert got["y"].shape == (10,) and got["y"].dtype == np.float32


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WORKBENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_space_check_reference_shows_the_smallest_shape_run(
    write_space: Callable[..., Path],
) -> None:
    path = write_space(tiny_with("reference: {python: ref.py:scaled, rtol: 1e-6}"))
    (path.parent / "ref.py").write_text(PLAIN)
    good = run_cli("space", str(path), "--check-reference", "--sample", "0", cwd=path.parent)
    assert good.returncode == 0, good.stderr
    assert "reference ok on shape {'n': 10}: y float32 (10,)\n" in good.stdout  # no stray word
    (path.parent / "ref.py").write_text("def scaled(x):\n    return x[:-1]\n")  # one short
    bad = run_cli("space", str(path), "--check-reference", "--sample", "0", cwd=path.parent)
    assert bad.returncode != 0
    assert "output y has shape (9,); expected (10,)" in bad.stderr + bad.stdout


@pytest.mark.slow
def test_space_check_reference_refuses_nan_unless_the_output_allows_it(
    write_space: Callable[..., Path],
) -> None:
    """`finite False` with exit 0 let a reference of NaNs through to a tune, where the NaN
    poison of an unwritten output would match it: now a located error naming the output."""
    text = tiny_with("reference: {python: ref.py:scaled, rtol: 1e-6}")
    path = write_space(text)
    (path.parent / "ref.py").write_text(
        "import numpy as np\ndef scaled(x):\n    y = x.copy()\n    y[3] = np.nan\n    return y\n"
    )
    bad = run_cli("space", str(path), "--check-reference", "--sample", "0", cwd=path.parent)
    assert bad.returncode != 0
    line = text.splitlines().index("reference: {python: ref.py:scaled, rtol: 1e-6}") + 1
    errors = [ln for ln in (bad.stderr + bad.stdout).splitlines() if "NaN/inf" in ln]
    assert len(errors) == 1, bad.stderr + bad.stdout
    assert f"case.yaml:{line} [reference]" in errors[0]
    assert "output y holds 1 NaN/inf of 10 elements (first at index 3: nan)" in errors[0]
    assert "`nonfinite: allowed`" in errors[0]
    allowed = text.replace(
        "y: {dtype: float32, shape: [n], init: 1}",
        "y: {dtype: float32, shape: [n], init: 1, nonfinite: allowed}",
    )
    path = write_space(allowed)
    good = run_cli("space", str(path), "--check-reference", "--sample", "0", cwd=path.parent)
    assert good.returncode == 0, good.stderr
    assert "y float32 (10,), 1 NaN/inf (nonfinite: allowed)\n" in good.stdout  # one line


def test_space_refuses_a_reference_whose_function_is_missing(
    write_space: Callable[..., Path],
) -> None:
    path = write_space(tiny_with("reference: {python: ref.py:nope, rtol: 1e-6}"))
    (path.parent / "ref.py").write_text(PLAIN)
    out = run_cli("space", str(path), cwd=path.parent)
    assert (
        out.returncode != 0 and "has no function 'nope' (it has: scaled)" in out.stderr + out.stdout
    )


def test_a_source_outside_the_root_says_what_the_root_is_and_how_to_widen_it(
    write_space: Callable[..., Path], project: Path
) -> None:
    path = write_space(TINY_SPACE.replace("../kernels/axpy.cu", "../../elsewhere/axpy.cu"))
    with pytest.raises(SpaceFileError) as info:
        load_space(path)
    msg = str(info.value)
    assert f"outside the project root {project}" in msg and "workbench.toml" in msg


def test_kernels_cuts_a_long_description_at_a_word() -> None:
    from workbench.cli.space_cmds import clip_words

    text = "Float32 or float16 (DTYPE) reduction of a whole tensor, accumulated in float32"
    assert clip_words(text, 200) == text
    cut = clip_words(text, 40)
    assert cut == "Float32 or float16 (DTYPE) reduction of…" and len(cut) <= 40
    assert text.startswith(cut[:-1])  # whole words only


@pytest.mark.slow
def test_the_compile_table_marks_the_default_config(project: Path) -> None:
    space = str(project / "spaces" / "tiny.yaml")
    out = run_cli("compile", space, "-c", "BLOCK=64", "-c", "BLOCK=128", cwd=project)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("│")]
    assert "2*" in rows[1] and "*" not in rows[0].split("│")[1]  # BLOCK=128 is the default
    assert "* the space's default config" in out.stdout


def test_a_space_may_pin_cublaslt_fp8_by_name(write_space: Callable[..., Path]) -> None:
    from workbench.spaces.schema import BaselineKind

    spec = load_space(write_space(TINY_SPACE + "baselines: [cublaslt_fp8, copy]\n"))
    assert spec.baselines == (BaselineKind.CUBLASLT_FP8, BaselineKind.COPY)


@pytest.mark.parametrize("short", ['""', "no_colon", '" spaced:f"'])
def test_a_malformed_short_reference_is_a_located_error(
    write_space: Callable[..., Path], short: str
) -> None:
    """(Hypothesis found `reference: ""` raising pydantic's error instead of the loader's.)"""
    with pytest.raises(SpaceFileError) as info:
        load_space(write_space(tiny_with(f"reference: {short}")))
    assert "[reference]" in str(info.value)


def test_a_reference_run_too_large_for_memory_is_refused_before_drawing(
    write_space: Callable[..., Path],
) -> None:
    from workbench.runners.reference import ReferenceTooLargeError, check_memory

    path = write_space(tiny_with("reference: {python: ref.py:scaled, rtol: 1e-6}"))
    (path.parent / "ref.py").write_text(PLAIN)
    space = Space(load_space(path), shape={"n": 1_000_000})  # x and y: 4 MB each
    check_memory(space, space.default_config(), available=33_000_000)
    with pytest.raises(ReferenceTooLargeError) as info:
        check_memory(space, space.default_config(), available=31_000_000)
    assert "need 8 MB (x 4 MB, y 4 MB), more than 25% of the 31 MB" in str(info.value)
    huge = run_cli(
        "space", str(path), "--check-reference", "--shape", "n=1000000000000", "--sample", "0",
        cwd=path.parent,
    )  # fmt: skip
    assert huge.returncode == 2, huge.stderr
    assert "give a smaller --shape" in huge.stderr and "Traceback" not in huge.stderr
