"""Space-file features attention_decode brought (issue 56), for any kernel: a second kernel
launched after the entry (``then:``), input bounds that are expressions of the shape and config
(``low: S_MIN, high: S + 1``), and the ``permutation`` draw (a page table)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.analysis.signature import then_problems
from workbench.compiler import CompileCache, compile_job, make_job
from workbench.errors import ConfigError, SpaceFileError
from workbench.runners.buffers import draw_input, input_specs, make_inputs
from workbench.runners.input_sets import InputSets
from workbench.runners.kernel_jobs import then_steps
from workbench.spaces import Space
from workbench.spaces.loader import load_space
from workbench.spaces.schema import Distribution, DType
from workbench.toolchain import Arch

SOURCE = r"""
extern "C" __global__ void first(const float* x, float* y, float* part, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) part[i] = 2.0f * x[i];
}
extern "C" __global__ void second(const float* part, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = part[i] + 1.0f;
}
"""

SPACE = """
name: two
source: two.cu
entry: {kernel: first}
arches: [sm_80]
parameters:
  BLOCK: {values: [64, 128], default: 128}
  TWO: {values: [true, false], default: true}
geometry: {grid: "cdiv(n, BLOCK)", block: BLOCK}
then:
  kernel: KERNEL
  when: TWO
  grid: cdiv(n, 64)
  block: 64
  args: ARGS
shapes: {default: {n: 1000, m: 10}}
inputs:
  x: {dtype: float32, shape: [n]}
  lens: {dtype: int32, shape: [4], distribution: randint, low: m, high: "n + 1"}
  table: {dtype: int32, shape: ["n // 100 + 1"], distribution: permutation, low: 1}
outputs:
  y: {dtype: float32, shape: [n]}
  part: {dtype: float32, shape: [n], scratch: true}
args: [x, y, part, {value: n, dtype: int32}]
reference: {python: ref.py:f, rtol: 1e-6, atol: 1e-6}
work: {bytes: 8 * n}
"""


def _space_file(tmp: Path, kernel: str = "second", args: str = "[part, y, {value: n}]") -> Path:
    (tmp / "workbench.toml").write_text("")
    (tmp / "two.cu").write_text(SOURCE)
    (tmp / "ref.py").write_text("def f(x):\n    return {'y': 2 * x + 1}\n")
    path = tmp / "two.yaml"
    path.write_text(SPACE.replace("KERNEL", kernel).replace("ARGS", args))
    return path


def test_then_launches_the_second_kernel_where_when_holds(tmp_path: Path) -> None:
    spec = load_space(_space_file(tmp_path))
    assert spec.then is not None and spec.then.kernel == "second"
    space = Space(spec, arch=Arch.parse("sm_80"))
    (step,) = then_steps(space, {"BLOCK": 128, "TWO": True})
    assert step.entry == "second" and step.launch.grid == (16, 1, 1)
    assert [type(a).__name__ for a in step.args] == ["BufferArg", "BufferArg", "ScalarValue"]
    assert then_steps(space, {"BLOCK": 128, "TWO": False}) == ()


def test_then_is_checked_against_the_binary(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path / "cache")
    for kernel, args, problem in (
        ("second", "[part, y, {value: n}]", None),
        ("third", "[part, y, {value: n}]", "then.kernel third is not in the binary"),
        ("second", "[part, y]", "then.args do not match"),
    ):
        folder = tmp_path / f"{kernel}{len(args)}"
        folder.mkdir()
        spec = load_space(_space_file(folder, kernel, args))
        space = Space(spec, arch=Arch.parse("sm_80"))
        result = compile_job(make_job(space, spec.default_config()), cache)
        assert result.ok and result.cubin is not None
        found = then_problems(spec, result.cubin, result.ptx)
        assert (problem is None and found == []) or (problem and problem in found[0]), found


def test_then_refuses_the_entry_itself(tmp_path: Path) -> None:
    with pytest.raises(SpaceFileError, match="the second kernel is the entry itself"):
        load_space(_space_file(tmp_path, "first"))


def test_bounds_that_are_expressions_follow_the_shape(tmp_path: Path) -> None:
    spec = load_space(_space_file(tmp_path))
    for shape in ({"n": 1000, "m": 10}, {"n": 20, "m": 20}):
        space = Space(spec, arch=Arch.parse("sm_80"), shape=shape)
        lens = input_specs(space)["lens"]
        assert (lens.low, lens.high) == (shape["m"], shape["n"] + 1)
        drawn = make_inputs(space, 3)["lens"]
        assert drawn.min() >= shape["m"] and drawn.max() <= shape["n"]
    # the runner keeps one array per (name, dtype, shape, bounds): two shapes of one size
    space = Space(spec, arch=Arch.parse("sm_80"), shape={"n": 1000, "m": 999})
    sets = InputSets(space, 0, tmp_path, None)
    assert sets.get({"BLOCK": 64, "TWO": True}).arrays["lens"].min() >= 999
    bad = Space(spec, arch=Arch.parse("sm_80"), shape={"n": 5, "m": 10})
    with pytest.raises(ConfigError, match="no integer in"):
        make_inputs(bad, 0)


def test_permutation_draws_each_value_once() -> None:
    spec = load_space(Path(__file__).parents[1] / "tuning_spaces" / "attention_decode.yaml")
    table = next(i for i in spec.inputs if i.name == "block_table")
    assert table.distribution is Distribution.PERMUTATION
    fixed = table.of_dtype(DType.INT32)
    rng = np.random.default_rng(0)
    values = draw_input(fixed, (6, 7), rng)
    assert values.shape == (6, 7) and values.dtype == np.int32
    assert sorted(values.reshape(-1).tolist()) == list(range(1, 43))
    assert not np.array_equal(values.reshape(-1), np.arange(1, 43))  # shuffled
