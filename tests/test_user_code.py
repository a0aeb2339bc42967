"""User Python cannot decide how a command ends: a reference module, a reference function or a
Numba kernel module that exits, crashes or hangs is a located error of that code, and the
command's own exit status still says what happened (issue 52, item 1)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import TINY_SPACE

from workbench.compiler import make_job
from workbench.errors import CompileError, WorkbenchError
from workbench.runners.reference import (
    ReferenceFailedError,
    ReferenceNotFoundError,
    check_reference,
    try_reference,
)
from workbench.spaces import Space, load_space
from workbench.user_code import TIMEOUT_ENV, call_timeout, load_timeout

WORKBENCH = [sys.executable, "-m", "workbench.cli.entry"]
GOOD = "import numpy as np\ndef scaled(x, SCALE):\n    return (x * SCALE).astype(np.float32)\n"
#: module bodies that end or stop the process running them at import, and what the error says
AT_IMPORT = {
    "sys.exit(0)": ("import sys\nsys.exit(0)\n", "ref.py:2 called sys.exit(0)"),
    "SystemExit(3)": ("raise SystemExit(3)\n", "ref.py:1 called sys.exit(3)"),
    "KeyboardInterrupt": ("raise KeyboardInterrupt\n", "ref.py:1 failed: KeyboardInterrupt"),
    "os._exit(0)": ("import os\nos._exit(0)\n", "ended its process (os._exit(0)"),
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "ended its process (killed by SIGSEGV)"),
    "endless loop": ("while True:\n    pass\n", "did not finish in 2 s"),
}


def reference_space(write_space: Callable[..., Path], body: str) -> Path:
    path = write_space(
        TINY_SPACE.replace(
            'reference: {python: "workbench.references.elementwise:scale", rtol: 1e-6}',
            "reference: {python: ref.py:scaled, rtol: 1e-6}",
        )
    )
    (path.parent / "ref.py").write_text(body)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("case", list(AT_IMPORT))
def test_a_reference_module_that_ends_its_process_at_import_is_a_located_error(
    case: str, write_space: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2 s for the endless loop to be cut; a process that ends itself is not waited for, and on a
    # loaded machine (pytest-xdist workers compiling) starting one can take longer than 2 s
    monkeypatch.setenv(TIMEOUT_ENV, "2" if case == "endless loop" else "120")
    body, said = AT_IMPORT[case]
    path = reference_space(write_space, body)
    with pytest.raises(ReferenceNotFoundError) as info:
        check_reference(load_space(path))
    assert said in str(info.value) and "ref.py:scaled" in str(info.value)
    monkeypatch.setenv(TIMEOUT_ENV, "120")
    (path.parent / "ref.py").write_text(GOOD)  # the next load runs in a working process
    check_reference(load_space(path))


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("import sys\ndef scaled(x):\n    sys.exit(0)\n", "called sys.exit(0)"),
        ("def scaled(x):\n    raise KeyboardInterrupt\n", "raised KeyboardInterrupt"),
        ("import os\ndef scaled(x):\n    os._exit(7)\n", "ended its process (os._exit(7)"),
    ],
)
def test_a_reference_function_that_exits_is_a_failed_reference(
    body: str, said: str, write_space: Callable[..., Path]
) -> None:
    path = reference_space(write_space, body)
    space = Space(load_space(path), shape={"n": 10})
    with pytest.raises(ReferenceFailedError) as info:
        try_reference(space, space.default_config())
    assert said in str(info.value)


def test_the_reference_runs_in_another_process_and_its_results_come_back(
    write_space: Callable[..., Path],
) -> None:
    path = reference_space(
        write_space,
        "import os\nimport numpy as np\n"
        "def scaled(x):\n    return np.full(x.shape, os.getpid(), np.float32)\n",
    )
    space = Space(load_space(path), shape={"n": 10})
    got = try_reference(space, space.default_config())["y"]
    assert got.shape == (10,) and int(got[0]) not in (0, __import__("os").getpid())


def test_the_timeouts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert load_timeout() < call_timeout()
    monkeypatch.setenv(TIMEOUT_ENV, "7.5")
    assert load_timeout() == call_timeout() == 7.5
    for bad in ("soon", "0", "-1"):
        monkeypatch.setenv(TIMEOUT_ENV, bad)
        with pytest.raises(WorkbenchError, match=TIMEOUT_ENV):
            load_timeout()


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WORKBENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_compile_fail_on_cannot_be_turned_green_by_a_reference_that_exits(
    write_space: Callable[..., Path],
) -> None:
    path = reference_space(write_space, "import sys\nsys.exit(0)\n")
    kernel = path.parent.parent / "kernels" / "axpy.cu"
    kernel.write_text(kernel.read_text().replace("y[i] =", "y[i] = undeclared +"))
    one = run_cli("compile", str(path), "-c", "default", "--fail-on", "warning", cwd=path.parent)
    assert one.returncode != 0
    assert "called sys.exit(0)" in one.stdout + one.stderr
    report = path.parent / "records.json"
    every = run_cli(
        "compile", str(path), "--all", "--fail-on", "warning", "--json", str(report),
        cwd=path.parent,
    )  # fmt: skip
    assert every.returncode != 0 and "called sys.exit(0)" in every.stdout + every.stderr
    assert json.loads(report.read_text())  # the records are written before the error


@pytest.mark.slow
def test_tune_json_cannot_be_turned_green_by_a_reference_that_exits(
    write_space: Callable[..., Path],
) -> None:
    path = reference_space(write_space, "import os\nos._exit(0)\n")
    out = run_cli("tune", str(path), "--json", cwd=path.parent)
    assert out.returncode != 0
    assert "ended its process (os._exit(0)" in out.stdout + out.stderr


NUMBA_SPACE = """\
name: axpy_numba
source: ../kernels/axpy.py
entry: {kernel: axpy}
arches: [sm_90]
parameters:
  SCALE: {values: [1, 2], default: 2}
geometry:
  grid: cdiv(n, 128)
  block: 128
shapes: {default: {n: 1000}}
inputs:
  x: {dtype: float32, shape: [n]}
outputs:
  y: {dtype: float32, shape: [n], init: 1}
args: [x, y, {value: n, dtype: int64}]
work: {flops: 2 * n, bytes: 12 * n}
"""
NUMBA_KERNEL = """\
from numba import cuda
SCALE = 2


def axpy(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = SCALE * x[i] + y[i]
"""


@pytest.mark.parametrize(
    ("prefix", "said"),
    [
        ("import sys\nsys.exit(0)\n", "axpy.py:2: running the module called sys.exit(0)"),
        ("import os\nos._exit(0)\n", "ended its process (os._exit(0)"),
    ],
)
def test_a_numba_module_that_exits_fails_its_compile_not_the_command(
    prefix: str, said: str, write_space: Callable[..., Path]
) -> None:
    path = write_space(NUMBA_SPACE)
    source = path.parent.parent / "kernels" / "axpy.py"
    source.write_text(prefix + NUMBA_KERNEL)
    space = Space(load_space(path))
    with pytest.raises(CompileError) as info:
        make_job(space, space.default_config())
    assert said in str(info.value)
    source.write_text(NUMBA_KERNEL)  # the next module compiles in a working process
    fixed = Space(load_space(path))
    assert ".entry" in make_job(fixed, fixed.default_config()).source
