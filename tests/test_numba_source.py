"""Kernels written in Python with Numba's CUDA target: compiled without a GPU (Numba -> PTX ->
ptxas -> CUBIN), inspected like CUDA C++, located errors, and the argument layout Numba's PTX
declares."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gpu_checks import gpu, verify_on_gpu

from workbench.compiler import CompileCache, make_job
from workbench.errors import CompileError
from workbench.runners.buffers import BufferArg, kernel_arguments, launch_arguments
from workbench.search.configs import select_configs
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.numba_abi import abi_args
from workbench.static.sweep import static_sweep
from workbench.toolchain import Arch

KERNEL = """\
from numba import cuda

BLOCK = 128
SCALE = 2


def axpy(x, y, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = SCALE * x[i] + y[i]
"""

SPACE = """\
name: axpy_numba
source: ../kernels/axpy.py
entry: {kernel: axpy}
arches: [sm_90]
parameters:
  SCALE: {values: [1, 2, 3], default: 2}
  BLOCK: {values: [64, 128], default: 128, role: launch}
geometry:
  grid: cdiv(n, BLOCK)
  block: BLOCK
shapes: {default: {n: 1000}}
inputs:
  x: {dtype: float32, shape: [n]}
outputs:
  y: {dtype: float32, shape: [n], init: 1}
args: [x, y, {value: n, dtype: int64}]
reference: {python: "workbench.references.elementwise:scale", rtol: 1e-6}
work: {flops: 2 * n, bytes: 12 * n}
"""


@pytest.fixture
def numba_project(tmp_path: Path) -> Callable[[str], Path]:
    """A project with kernels/axpy.py holding ``source`` and spaces/axpy_numba.yaml."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "spaces").mkdir()
    (tmp_path / "spaces" / "axpy_numba.yaml").write_text(SPACE)

    def write(source: str) -> Path:
        (tmp_path / "kernels" / "axpy.py").write_text(source)
        return tmp_path / "spaces" / "axpy_numba.yaml"

    return write


@pytest.mark.slow
def test_every_config_of_the_library_examples_compiles(tmp_path: Path) -> None:
    space = Space(load_kernel("aos_soa_numba"), arch=Arch.parse("sm_90"))
    records = static_sweep(
        space, select_configs(space, all_configs=True), cache=CompileCache(tmp_path)
    )
    assert len(records) == space.count_valid() == 72
    for r in records:
        assert r.ok, r.error
        assert r.spill_stores == 0 and r.args_problems == [] and r.lints == [], r.label
        assert {"LDG", "STG", "MUFU"} <= set(r.opcodes)  # (MUFU: the 1 / mass)


def test_aos_and_soa_load_alike_and_differ_in_address_arithmetic(tmp_path: Path) -> None:
    """Numba emits one 4-byte LDG.E per field in both layouts (no vector loads, unlike the
    CUDA C++ kernel's VEC): the layouts differ in where the loads go, which only a GPU run
    measures (sectors per request), and in the SASS in the index arithmetic around them."""
    space = Space(load_kernel("aos_soa_numba"), arch=Arch.parse("sm_90"))
    configs = [space.parse_config([f"LAYOUT={lay}", "ITEMS=1"]) for lay in ("aos", "soa")]
    aos, soa = static_sweep(space, configs, cache=CompileCache(tmp_path))
    assert aos.global_memory_ops == soa.global_memory_ops == ["LDG.E", "STG.E"]
    assert aos.opcodes["LDG"] == soa.opcodes["LDG"] == 7  # the 7 fields of one particle
    assert aos.opcodes["STG"] == soa.opcodes["STG"] == 7
    assert aos.opcodes != soa.opcodes  # f * n + i against i * 7 + f


@pytest.mark.slow
def test_branchy_diverges_and_masked_does_not(tmp_path: Path) -> None:
    """Every divergence_numba config compiles; branchy's SASS has the reconvergence regions of
    divergent branches (BSSY/BSYNC), masked has none and selects its result."""
    space = Space(load_kernel("divergence_numba"), arch=Arch.parse("sm_90"))
    cache = CompileCache(tmp_path)
    records = static_sweep(space, select_configs(space, all_configs=True), cache=cache)
    assert len(records) == 40 and all(r.ok and r.lints == [] for r in records)
    configs = [space.parse_config([f"VARIANT={v}", "ITEMS=1"]) for v in ("branchy", "masked")]
    branchy, masked = static_sweep(space, configs, cache=cache)
    assert branchy.opcodes.get("BSSY", 0) >= 4 and branchy.opcodes.get("BSYNC", 0) >= 4
    assert "BSSY" not in masked.opcodes and masked.opcodes["SEL"] > branchy.opcodes["SEL"]


def test_a_knob_reaches_the_kernel_as_a_frozen_global(numba_project: Callable[[str], Path]) -> None:
    space = Space(load_space(numba_project(KERNEL)))
    two = make_job(space, space.parse_config(["SCALE=2"]))
    three = make_job(space, space.parse_config(["SCALE=3"]))
    assert two.language == "ptx" and two.entry_kernel and "axpy" in two.entry_kernel
    assert two.key() != three.key()  # a different constant in the code
    # 3 folded into the code (as a double: Numba types int * float32 as float64)
    assert "0d4008000000000000" in three.source and "0d4008000000000000" not in two.source


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def axpy(x, y, n)\n    pass\n", r"axpy\.py:1: syntax error"),
        (
            "import numpy\nraise ValueError('no')\n",
            r"axpy\.py:2: running the module failed: ValueError",
        ),
        (
            "SCALE = 2\ndef other(x, y, n):\n    return SCALE\n",
            r"no function 'axpy' \(it has: other\)",
        ),
        (
            "from numba import cuda\ndef axpy(x, y, n):\n    y[0] = x[0]\n",
            r"no function reads SCALE",
        ),
        (
            "from numba import cuda\nSCALE = 2\ndef axpy(x, y, n):\n    y[0] = x.nope + SCALE\n",
            r"axpy\.py:4: Numba cannot compile it: Unknown attribute 'nope'",
        ),
    ],
)
def test_a_broken_source_gets_a_located_one_line_error(
    numba_project: Callable[[str], Path], source: str, message: str
) -> None:
    space = Space(load_space(numba_project(source)))
    with pytest.raises(CompileError, match=message) as info:
        make_job(space, space.default_config())
    assert "\n" not in str(info.value)


def _params(ptx: str) -> list[str]:
    """The ``.param`` types of the PTX's kernel, in order."""
    entry = ptx[ptx.index(".entry") :]
    return re.findall(r"\.param\s+\.(\w+)", entry[: entry.index(")")])


def test_the_launch_packs_what_numbas_ptx_declares(numba_project: Callable[[str], Path]) -> None:
    space = Space(load_space(numba_project(KERNEL)))
    config = space.default_config()
    params = _params(make_job(space, config).source)
    # two 1-D arrays (meminfo, parent, nitems, itemsize, data, shape, strides) and an int64
    assert params == ["u64"] * 14 + ["u64"]
    args = kernel_arguments(space, config)
    assert args[0] == BufferArg("x", (1000,), 4)
    pack = launch_arguments(args, {"x": 0x1000, "y": 0x2000})
    assert pack.sizes == (8,) * 15 and len(abi_args(space.spec)) == 15
    fields = np.frombuffer(pack.storage.tobytes(), dtype=np.uint64)[:7].tolist()
    assert fields == [
        0,
        0,
        1000,
        4,
        0x1000,
        1000,
        4,
    ]  # null meminfo/parent, n, 4 B, data, shape, stride


def test_a_2d_array_passes_its_shape_and_strides() -> None:
    from workbench.spaces.numba_abi import array_fields

    values = [v for _, v in array_fields(0xABC, (3, 5), 2)]
    assert values == [0, 0, 15, 2, 0xABC, 3, 5, 10, 2]  # C order: a row is 5 x 2 bytes


@pytest.mark.slow
def test_kernels_lists_it_and_emit_writes_ptx_and_sass(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "workbench.cli.entry"]
    listed = subprocess.run(
        [*run, "kernels", "--json"], capture_output=True, text=True, timeout=120
    )
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["aos_soa_numba"]["language"] == "numba"
    out = tmp_path / "emitted"
    done = subprocess.run(
        [*run, "compile", "aos_soa_numba", "--arch", "sm_90", "--emit", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    suffixes = {p.suffix for p in out.iterdir()}
    assert {".ptx", ".sass", ".cubin"} <= suffixes


# -- on a GPU (-m gpu; skipped cleanly without one) ----------------------------------------


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("n", [37, 4099, 1 << 22])
def test_the_numba_kernels_verify_beside_their_cuda_twins(n: int, tmp_path: Path) -> None:
    """Same inputs, same reference, same runner: the Numba layouts and the CUDA C++ ones."""
    layouts = ["LAYOUT=aos", "LAYOUT=soa", "LAYOUT=aosoa,TILE=4", "LAYOUT=aosoa,TILE=32"]
    verify_on_gpu(
        "aos_soa_numba", {"n": n}, [f"{lay},ITEMS={i}" for lay in layouts for i in (1, 4)], tmp_path
    )
    verify_on_gpu("aos_soa", {"n": n}, [f"{lay},ITEMS=4" for lay in layouts], tmp_path)
    variants = [f"VARIANT={v},ITEMS={i}" for v in ("branchy", "masked") for i in (1, 8)]
    verify_on_gpu("divergence_numba", {"n": n}, variants, tmp_path)
