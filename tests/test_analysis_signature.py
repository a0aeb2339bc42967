"""A kernel's parameters read from its binary (cubin KPARAM_INFO, PTX, demangled C++ name) and
checked against the space file's ``args``: a mismatch is found when compiling, without a GPU."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from workbench.analysis.cubin import ParamSlot, read_cubin
from workbench.analysis.signature import (
    KernelParameter,
    argument_problems,
    cxx_parameter_types,
    demangle,
    kernel_parameters,
    ptx_parameter_types,
)
from workbench.cli.main import app
from workbench.compiler import CompileCache, compile_job, make_job
from workbench.errors import SpaceFileError
from workbench.search.configs import select_configs
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.numba_abi import abi_args
from workbench.spaces.registry import builtin_spaces_dir
from workbench.spaces.targets import resolve_arches
from workbench.static.sweep import static_sweep

LIBRARY = sorted(p.stem for p in builtin_spaces_dir().glob("*.yaml"))

#: A C++ template kernel (mangled name): every C++ type is known from the demangled name.
TEMPLATE_KERNEL = """\
template <int BLOCK>
__global__ void scale_add(const float* __restrict__ x, float* __restrict__ y, long long n,
                          float alpha) {
  long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}
"""

TEMPLATE_SPACE = """\
name: scale_add
source: ../kernels/scale_add.cu
entry: {{template: "scale_add<{{BLOCK}}>"}}
arches: [sm_90]
parameters:
  BLOCK: {{values: [64, 128], default: 128}}
geometry: {{grid: "cdiv(n, BLOCK)", block: BLOCK}}
shapes: {{default: {{n: 1000}}}}
inputs: {{x: {{dtype: float32, shape: [n]}}}}
outputs: {{y: {{dtype: float32, shape: [n], init: 1}}}}
args: {args}
reference: {{python: "workbench.references.elementwise:scale", rtol: 1e-6}}
work: {{bytes: 12 * n}}
"""

RIGHT = "[x, y, {value: n, dtype: int64}, {name: alpha, value: 2, dtype: float32}]"


@pytest.fixture
def template_space(project: Path) -> Any:
    """Write scale_add.cu and a space for it with the given ``args``; returns the path."""
    (project / "kernels" / "scale_add.cu").write_text(TEMPLATE_KERNEL)

    def write(args: str) -> Path:
        path = project / "spaces" / "scale_add.yaml"
        path.write_text(TEMPLATE_SPACE.format(args=args))
        return path

    return write


def _line(path: Path, prefix: str) -> int:
    """The 1-based line of the file that starts with ``prefix``."""
    return 1 + next(
        i for i, ln in enumerate(path.read_text().splitlines()) if ln.startswith(prefix)
    )


def _compiled(space: Space, cache: CompileCache) -> Any:
    result = compile_job(make_job(space, select_configs(space)[0]), cache)
    assert result.ok and result.cubin is not None and result.entry, result.log
    return result


def test_the_cubin_lists_every_parameter_with_its_offset_and_size(
    project: Path, cache_dir: Path
) -> None:
    # extern "C" axpy(const float* x, float* y, int n): no C++ types, the PTX says .u64/.u32
    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    result = _compiled(space, CompileCache(cache_dir))
    kernel = read_cubin(result.cubin).kernels["axpy"]
    assert kernel.params == (ParamSlot(0, 0, 8), ParamSlot(1, 8, 8), ParamSlot(2, 16, 4))
    assert kernel.param_bytes == 20
    params = kernel_parameters(result.cubin, "axpy", result.ptx)
    assert params == (
        KernelParameter(8, "u64"),
        KernelParameter(8, "u64"),
        KernelParameter(4, "u32"),
    )
    assert argument_problems(space.spec.args, params) == []


@pytest.mark.parametrize("kernel", LIBRARY)
def test_every_library_space_matches_its_kernel(kernel: str, cache_dir: Path) -> None:
    spec = load_kernel(kernel)
    space = Space(spec, arch=resolve_arches(spec, None)[0])
    result = _compiled(space, CompileCache(cache_dir))
    params = kernel_parameters(result.cubin, result.entry, result.ptx)
    args = abi_args(spec)  # (a Numba kernel's arrays: one parameter per struct field)
    assert params is not None and len(params) == len(args)
    assert argument_problems(args, params) == []
    if result.entry.startswith("_Z") and spec.language != "numba":
        # C++ kernels: the demangled name gave every type (Numba's mangled names give none)
        assert all(p.c_type for p in params), params
    else:  # extern "C" and PTX kernels: the PTX declaration did
        assert all(p.ptx_type for p in params), params


def test_reduce_parameters_read_as_their_cxx_types(cache_dir: Path) -> None:
    spec = load_kernel("reduce")
    result = _compiled(Space(spec, arch=resolve_arches(spec, None)[0]), CompileCache(cache_dir))
    params = kernel_parameters(result.cubin, result.entry, result.ptx)
    assert params is not None
    assert [p.c_type for p in params] == [
        "float const*",
        "float*",
        "float*",
        "unsigned int*",
        "long long",
    ]
    assert [p.is_pointer for p in params] == [True, True, True, True, False]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (RIGHT, []),
        (
            "[x, y, {value: n, dtype: int32}, {value: 2, dtype: float32}]",
            ["args[2] (n) is int32 (4 bytes), but the kernel's parameter 2 is long long (8 bytes)"],
        ),
        (  # two arguments swapped: the buffer lands on the count
            "[x, {value: n, dtype: int64}, y, {value: 2, dtype: float32}]",
            [
                "args[2] (y) is a buffer (a device pointer, 8 bytes), but the kernel's "
                "parameter 2 is long long (8 bytes)"
            ],
        ),
        (  # same size, other kind: only the types tell
            "[x, y, {value: n, dtype: int64}, {name: alpha, value: 2, dtype: int32}]",
            ["args[3] (alpha) is int32 (4 bytes), but the kernel's parameter 3 is float (4 bytes)"],
        ),
        (
            "[x, y, {value: n, dtype: int64}, {value: 2, dtype: float64}]",
            ["args[3] (2) is float64 (8 bytes), but the kernel's parameter 3 is float (4 bytes)"],
        ),
        (
            "[x, y, {value: n, dtype: int64}]",
            [
                "args lists 3 arguments but the kernel takes 4 parameters "
                "(float const*, float*, long long, float)"
            ],
        ),
        (  # an int64 0 where the kernel takes a pointer is a null pointer: allowed
            "[{value: 0, dtype: int64}, y, {value: n, dtype: int64}, {value: 2, dtype: float32}]",
            [],
        ),
    ],
)
def test_args_are_checked_against_the_cxx_signature(
    template_space: Any, cache_dir: Path, args: str, expected: list[str]
) -> None:
    spec = load_space(template_space(args))
    result = _compiled(Space(spec), CompileCache(cache_dir))
    params = kernel_parameters(result.cubin, result.entry, result.ptx)
    assert params is not None
    assert argument_problems(spec.args, params) == expected


def test_ptx_types_tell_a_float_from_an_integer_without_cxx_types() -> None:
    # an extern "C" kernel or hand-written PTX: .f32 against an int32 of the same size
    params = (KernelParameter(8, "u64"), KernelParameter(4, "f32"))
    spec_args = load_kernel("stream_scale").args  # x, y, n (int64), alpha (float32)
    assert argument_problems(spec_args[:1] + spec_args[3:], params) == []
    wrong = argument_problems(spec_args[:1] + spec_args[2:3], (KernelParameter(8, "f64"),) * 2)
    assert wrong == [
        "args[0] (x) is a buffer (a device pointer, 8 bytes), but the kernel's parameter 0 is "
        ".f64 (8 bytes)",
        "args[1] (n) is int64 (8 bytes), but the kernel's parameter 1 is .f64 (8 bytes)",
    ]


POINTER_KINDS_KERNEL = """\
struct P2 { float a; int b; };
template <int COLS>
__global__ void shapes(const float (*__restrict__ in)[COLS], float (*out)[COLS], P2 p, int n) {
  if (threadIdx.x < n) out[threadIdx.x][0] = in[threadIdx.x][0] * p.a + p.b;
}
"""


def test_pointers_to_arrays_are_pointers_and_structs_by_value_take_no_scalar(
    project: Path, cache_dir: Path
) -> None:
    (project / "kernels" / "scale_add.cu").write_text(POINTER_KINDS_KERNEL)
    path = project / "spaces" / "shapes.yaml"
    text = TEMPLATE_SPACE.format(args="[x, y, {value: 1, dtype: int64}, {value: n, dtype: int32}]")
    path.write_text(text.replace("scale_add<{BLOCK}>", "shapes<4>"))
    spec = load_space(path)
    result = _compiled(Space(spec), CompileCache(cache_dir))
    params = kernel_parameters(result.cubin, result.entry, result.ptx)
    assert params is not None
    assert [p.c_type for p in params] == ["float const (*) [4]", "float (*) [4]", "P2", "int"]
    assert [p.is_pointer for p in params] == [True, True, False, False]
    assert params[2].is_aggregate and params[2].size == 8
    # the int64 has the struct's size, but a struct by value has no args type
    assert argument_problems(spec.args, params) == [
        "args[2] (1) is int64 (8 bytes), but the kernel's parameter 2 is P2 (8 bytes), "
        "passed by value as bytes (no args type can pass it)"
    ]


def test_integers_narrower_than_args_types_take_an_int32() -> None:
    """bool, char and short parameters have no args dtype: an int32 or uint32 feeds them (the
    driver copies their size from the start of the value); nothing else does."""
    from workbench.expressions import Expression
    from workbench.spaces.model import ScalarArg

    def arg(dtype: str) -> ScalarArg:
        return ScalarArg(Expression.parse("1"), dtype, "flag")

    flag = KernelParameter(1, "u8", "bool")
    assert argument_problems([arg("int32")], [flag]) == []
    assert argument_problems([arg("uint32")], [KernelParameter(2, "s16")]) == []  # PTX only
    assert argument_problems([arg("int64")], [flag]) == [
        "args[0] (flag) is int64 (8 bytes), but the kernel's parameter 0 is bool (1 byte)"
    ]
    assert argument_problems([arg("float32")], [flag]) == [
        "args[0] (flag) is float32 (4 bytes), but the kernel's parameter 0 is bool (1 byte)"
    ]
    # a __half by value is a float of 2 bytes: no args type fits it
    half = KernelParameter(2, "b8[2]", "__half")
    assert argument_problems([arg("int32")], [half]) != []
    assert argument_problems([arg("float32")], [half]) != []
    # untyped bits of hand-written PTX (.b8, .b16) take an int32 like .u8 and .s16 do
    assert argument_problems([arg("int32")], [KernelParameter(1, "b8")]) == []
    assert argument_problems([arg("int32")], [KernelParameter(2, "b16")]) == []
    # a __grid_constant__ scalar is a byte array in PTX, but its C++ type says what it holds
    grid_constant = KernelParameter(8, "b8[8]", "long long")
    assert argument_problems([arg("int64")], [grid_constant]) == []
    assert argument_problems([arg("float64")], [grid_constant]) != []
    # an enum by C++ name: its PTX type says it is an integer
    op = KernelParameter(4, "u32", "Op")
    assert argument_problems([arg("int32")], [op]) == []
    assert argument_problems([arg("float32")], [op]) != []


def test_ptx_parameter_declarations() -> None:
    ptx = textwrap.dedent(
        """\
        .visible .entry other(.param .u32 a)
        {
        }
        .visible .entry k(
            .param .u64 .ptr .global .align 16 k_param_0,
            .param .align 8 .b8 k_param_1[24],
            .param .f32 k_param_2,
            .param .s8 k_param_3
        )
        {
        }
        .entry none()
        {
        }
        """
    )
    assert ptx_parameter_types(ptx, "k") == ("u64", "b8[24]", "f32", "s8")
    # comments hold types, commas and parentheses that are not declarations
    commented = textwrap.dedent(
        """\
        .visible .entry c(
            .param .u64 c_x,      // .f32 input, read (once)
            .param .u64 c_y,      /* .f32 output,
                                     written ) */
            .param .f32 c_alpha
        )
        """
    )
    assert ptx_parameter_types(commented, "c") == ("u64", "u64", "f32")
    assert ptx_parameter_types(ptx, "other") == ("u32",)
    assert ptx_parameter_types(ptx, "none") == ()
    assert ptx_parameter_types(ptx, "missing") is None
    # an aggregate or untyped bits say nothing about float against integer
    assert KernelParameter(24, "b8[24]").is_float is None
    assert KernelParameter(4, "b32").is_float is None
    assert KernelParameter(4, "s32").is_float is False


def test_demangled_parameter_lists() -> None:
    assert demangle("axpy") is None  # extern "C": nothing to demangle
    assert cxx_parameter_types("axpy") is None
    # f(void (*)(int), Pair<int, float>): parentheses and commas inside one parameter
    assert cxx_parameter_types("_Z1fPFviE4PairIifE") == ("void (*)(int)", "Pair<int, float>")
    assert cxx_parameter_types("_Z1gv") == ()
    assert cxx_parameter_types("_Z3fooPK6__halfS1_fi") == (
        "__half const*",
        "__half const*",
        "float",
        "int",
    )
    assert cxx_parameter_types("_Znot_a_name") is None


# -- the commands ------------------------------------------------------------------------------


def test_compile_refuses_args_that_do_not_fit_after_showing_the_table(
    template_space: Any, cache_dir: Path, tmp_path: Path
) -> None:
    path = template_space("[x, y, {value: n, dtype: int32}, {value: 2, dtype: float32}]")
    out = tmp_path / "records.json"
    result = CliRunner().invoke(
        app, ["compile", str(path), "--cache-dir", str(cache_dir), "--json", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert (
        f"{path}:{_line(path, 'args:')} [args]: args do not match the kernel's parameters: "
        "args[2] (n) is int32" in " ".join(result.output.split())
    )
    (record,) = json.loads(out.read_text())  # the records are written before the refusal
    assert record["ok"] and record["registers"] > 0
    assert record["args_problems"] == [
        "args[2] (n) is int32 (4 bytes), but the kernel's parameter 2 is long long (8 bytes)"
    ]
    assert any(lint.startswith("error: args do not match") for lint in record["lints"])


def test_compile_accepts_args_that_fit(template_space: Any, cache_dir: Path) -> None:
    path = template_space(RIGHT)
    result = CliRunner().invoke(app, ["compile", str(path), "--cache-dir", str(cache_dir)])
    assert result.exit_code == 0, result.output
    assert "args do not match" not in result.output


def test_tune_without_a_gpu_refuses_args_that_do_not_fit(
    template_space: Any, cache_dir: Path, tmp_path: Path
) -> None:
    from workbench.gpu import probe_gpu

    if probe_gpu().available:
        pytest.skip("a GPU is present: tune measures (the runner's refusal is tested below)")
    path = template_space("[x, y, {value: n, dtype: int64}]")
    result = CliRunner().invoke(
        app,
        [
            "tune",
            str(path),
            "--cache-dir",
            str(cache_dir),
            "--storage",
            str(tmp_path / "store.sqlite"),
        ],
    )
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "args lists 3 arguments but the kernel takes 4 parameters" in flat
    assert "To tune: run on a machine" not in flat


def test_the_static_sweep_keeps_the_findings_of_every_config(
    template_space: Any, cache_dir: Path
) -> None:
    spec = load_space(template_space("[x, y, {value: n, dtype: int64}, {value: 2, dtype: int32}]"))
    space = Space(spec)
    configs = select_configs(space, all_configs=True)
    records = static_sweep(space, configs, cache=CompileCache(cache_dir))
    assert len(records) == 2
    for r in records:  # the binary is fine and inspected; the args are not
        assert r.ok and r.registers and r.sass_instructions
        assert r.args_problems == [
            "args[3] (2) is int32 (4 bytes), but the kernel's parameter 3 is float (4 bytes)"
        ]
        assert (
            r.lints[-1].text
            == f"error: args do not match the kernel's parameters: {r.args_problems[0]}"
        )


def test_the_runner_stops_before_launching_mismatched_args(
    template_space: Any, cache_dir: Path
) -> None:
    from test_runner_isolation import EmulatedExecutor

    from workbench.runners.worker_runner import WorkerRunner

    spec = load_space(
        template_space("[x, y, {value: n, dtype: int32}, {value: 2, dtype: float32}]")
    )
    runner = WorkerRunner(Space(spec), CompileCache(cache_dir), executor_factory=EmulatedExecutor)
    try:
        with pytest.raises(
            SpaceFileError, match=r"scale_add\.yaml:\d+ \[args\]: args do not match"
        ):
            runner.evaluate({"BLOCK": 64})
        assert runner.verdicts == {}  # nothing was launched or verified
    finally:
        runner.close()


@pytest.mark.parametrize(
    ("reference", "words"),
    [
        (
            "workbench.references.elementwise:nope",
            "workbench.references.elementwise has no function 'nope'",
        ),
        ("workbench.references.gone:scale", "no module named 'workbench.references.gone'"),
    ],
)
def test_compile_refuses_a_reference_that_does_not_exist(
    template_space: Any, cache_dir: Path, reference: str, words: str
) -> None:
    path = template_space(RIGHT)
    path.write_text(path.read_text().replace("workbench.references.elementwise:scale", reference))
    result = CliRunner().invoke(app, ["compile", str(path), "--cache-dir", str(cache_dir)])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "1 configs, 1 compiled, 0 failed" in flat  # the table came first
    line = _line(path, "reference:")
    assert f"{path}:{line} [reference]: reference '{reference}': {words}" in flat


def test_profile_plan_refuses_mismatched_args(template_space: Any, cache_dir: Path) -> None:
    path = template_space("[x, y, {value: n, dtype: int64}, {value: 2, dtype: float64}]")
    result = CliRunner().invoke(
        app, ["profile", str(path), "--dry-run", "--cache-dir", str(cache_dir)]
    )
    assert result.exit_code == 2, result.output
    assert "[args]: args do not match the kernel's parameters: args[3] (2) is float64" in (
        " ".join(result.output.split())
    )
