"""Baselines of the user's own (`baselines: [{python: file.py:function}]`): named like a
reference, planned by `workbench compare` like a library's, called by name on the GPU."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_SPACE

from workbench.compare.baselines import Choice, baseline_for, select
from workbench.compare.problems import classify
from workbench.errors import SpaceFileError
from workbench.runners.reference import ReferenceNotFoundError, bind_by_name, load_function
from workbench.spaces import Space, load_space
from workbench.spaces.model import UserBaseline
from workbench.spaces.schema import BaselineKind

ROOT = Path(__file__).resolve().parents[1]
HAS_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.fixture
def rmsnorm(tmp_path: Path) -> Path:
    """The README's example kernel, copied into a project of its own."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    shutil.copytree(ROOT / "examples" / "rmsnorm", tmp_path / "rmsnorm")
    return tmp_path / "rmsnorm" / "rmsnorm.yaml"


def test_a_space_names_its_own_baseline_beside_it(rmsnorm: Path) -> None:
    spec = load_space(rmsnorm)
    mine, copy = spec.baselines
    assert mine == UserBaseline(
        "python:torch_rmsnorm", f"{rmsnorm.parent / 'baseline.py'}:torch_rmsnorm"
    )
    assert copy is BaselineKind.COPY


def test_a_missing_baseline_file_is_located(write_space: Callable[..., Path]) -> None:
    text = TINY_SPACE + "baselines: [{python: mine.py:fast}]\n"
    with pytest.raises(SpaceFileError) as info:
        load_space(write_space(text))
    message = str(info.value)
    assert (
        "[baselines[0].python]" in message and "baseline file 'mine.py' does not exist" in message
    )


def test_two_baselines_of_one_name_are_refused(write_space: Callable[..., Path]) -> None:
    path = write_space(
        TINY_SPACE + "baselines: [{python: a.py:fast}, {python: numpy.linalg:fast}]\n"
    )
    (path.parent / "a.py").write_text("def fast(x):\n    return x\n")
    with pytest.raises(SpaceFileError, match="the same function name"):
        load_space(path)


def test_compare_plans_it_with_the_problem_it_needs(rmsnorm: Path) -> None:
    space = Space(load_space(rmsnorm), shape={"rows": 4, "cols": 256})
    problem = classify(space, space.default_config())
    assert problem.user_baselines == {
        "python:torch_rmsnorm": f"{rmsnorm.parent / 'baseline.py'}:torch_rmsnorm"
    }
    assert problem.scalars["eps"] == pytest.approx(1e-6)  # what the function takes by name
    selections, _ = select(space.spec.baselines, problem, cc=90)
    mine = next(s for s in selections if s.name == "python:torch_rmsnorm")
    if HAS_CUPY:
        assert mine.choice is Choice.RUN
    else:  # (this machine: the GPU extra is not installed)
        assert mine.choice is Choice.SKIP and "no Python module 'cupy'" in mine.reason
    assert baseline_for("python:torch_rmsnorm", problem).label == "torch_rmsnorm"


def test_it_is_called_with_what_it_names(rmsnorm: Path) -> None:
    """The binding the GPU call uses (CuPy arrays there; NumPy here, which the function's
    arithmetic treats alike)."""
    (rmsnorm.parent / "numpy_baseline.py").write_text(
        "def mine(x, w, eps, cols):\n    return x * w + eps + cols\n"
    )
    fn = load_function(f"{rmsnorm.parent / 'numpy_baseline.py'}:mine", what="baseline")
    x, w = np.ones((2, 4), np.float32), np.full(4, 2, np.float32)
    kwargs = bind_by_name(fn, "baseline", {"x": x, "w": w}, {"eps": 0.5}, {"rows": 2, "cols": 4})
    assert fn(**kwargs).tolist() == [[6.5] * 4] * 2
    with pytest.raises(ReferenceNotFoundError, match="parameter 'gamma'"):
        bind_by_name(lambda x, gamma: x, "baseline", {"x": x})


@pytest.mark.slow
def test_compare_without_a_gpu_shows_the_plan(rmsnorm: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "workbench.cli.entry", "compare", str(rmsnorm)],
        cwd=rmsnorm.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "python:torch_rmsnorm: torch_rmsnorm (your baseline)" in done.stdout


HAS_TORCH = importlib.util.find_spec("torch") is not None


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli.entry", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("entry", "body", "said"),
    [
        ("bl.py:missing_fn", "def fast(x):\n    return x\n", "has no function 'missing_fn'"),
        ("nosuchmodule.x:fn", None, "no module named 'nosuchmodule'"),
        ("bl.py:fast", "def fast(x, gamma):\n    return x\n", "parameter 'gamma'"),
        ("bl.py:fast", "import sys\nsys.exit(0)\n", "bl.py:2 called sys.exit(0)"),
    ],
)
def test_a_baseline_that_cannot_be_called_is_a_located_error_before_any_gpu_work(
    entry: str, body: str | None, said: str, write_space: Callable[..., Path]
) -> None:
    path = write_space(TINY_SPACE + f"baselines: [{{python: {entry}}}]\n")
    if body is not None:
        (path.parent / "bl.py").write_text(body)
    for command in ("space", "compare"):
        done = run_cli(command, str(path), cwd=path.parent)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "[baselines]" in done.stderr and said in done.stderr, (command, done.stderr)
        assert "no GPU" not in done.stdout  # (found before compare looks for one)


def test_every_package_a_baseline_needs_is_named(rmsnorm: Path) -> None:
    """torch_rmsnorm imports PyTorch inside the function: the module loads without it, the
    check names it beside CuPy, and compare's skip reason gives both."""
    from workbench.compare.user_baselines import check_user_baselines

    spec = load_space(rmsnorm)
    missing = check_user_baselines(spec)["python:torch_rmsnorm"]
    assert missing == (() if HAS_TORCH else ("torch",))
    space = Space(spec, shape={"rows": 4, "cols": 256})
    selections, _ = select(spec.baselines, classify(space, space.default_config()), cc=90)
    mine = next(s for s in selections if s.name == "python:torch_rmsnorm")
    assert ("no Python module 'torch'" in mine.reason) is not HAS_TORCH
    assert ("no Python module 'cupy'" in mine.reason) is not HAS_CUPY
    if not HAS_TORCH:
        shown = run_cli("space", str(rmsnorm), "--sample", "0", cwd=rmsnorm.parent)
        assert shown.returncode == 0, shown.stderr
        assert "baseline python:torch_rmsnorm: needs torch, not installed here" in shown.stdout


def test_a_package_the_baselines_module_imports_is_missing_not_an_error(
    write_space: Callable[..., Path],
) -> None:
    from workbench.compare.user_baselines import check_user_baselines

    path = write_space(TINY_SPACE + "baselines: [{python: bl.py:fast}]\n")
    (path.parent / "bl.py").write_text(
        "import numpy\nimport not_installed_anywhere.sub\ndef fast(x):\n    return x\n"
    )
    assert check_user_baselines(load_space(path)) == {"python:fast": ("not_installed_anywhere",)}
