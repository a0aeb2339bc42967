"""Host buffers: input dtypes and distributions (never all zeros), output poison and fills,
scalar arguments, the argument order, and the kernelParams packing the driver receives."""

from __future__ import annotations

import ctypes
import textwrap
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.runners.buffers import (
    DTYPES,
    INT_POISON_BYTE,
    BufferArg,
    Fill,
    OutputRole,
    ScalarValue,
    input_config_names,
    input_config_values,
    input_shapes,
    kernel_arguments,
    make_inputs,
    named_scalars,
    output_buffers,
    pack_arguments,
    poison_pattern,
    typed_scalar,
)
from workbench.runners.input_sets import InputSets
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.schema import DType

FLOATS = [d for d in DType if d.value.startswith("float") or d is DType.BFLOAT16]
INTS = [d for d in DType if d not in FLOATS]


def space_with(write_space: Callable[..., Path], inputs: str, outputs: str, args: str) -> Space:
    """A space over the conftest's axpy kernel with the given buffers (YAML flow text)."""
    text = textwrap.dedent(
        """\
        name: bufs
        source: ../kernels/axpy.cu
        entry: {kernel: axpy}
        arches: [sm_90]
        parameters:
          BLOCK: {values: [32, 64], default: 32}
          SCALE: {values: [1, 2], default: 1}
        geometry: {grid: 1, block: BLOCK}
        shapes: {default: {n: 1000, m: 3}}
        inputs: %s
        outputs: %s
        args: %s
        reference: {python: "workbench.references.elementwise:scale", rtol: 1e-6}
        work: {bytes: 8 * n}
        """
    ) % (inputs, outputs, args)
    return Space(load_space(write_space(text)))


def test_every_dtype_has_a_host_type() -> None:
    assert set(DTYPES) == set(DType)
    assert DTYPES[DType.BFLOAT16] == np.dtype(ml_dtypes.bfloat16)
    assert DTYPES[DType.FLOAT8_E4M3] == np.dtype(ml_dtypes.float8_e4m3fn)
    assert DTYPES[DType.FLOAT8_E5M2] == np.dtype(ml_dtypes.float8_e5m2)
    assert DTYPES[DType.UINT32] == np.dtype(np.uint32)


@pytest.mark.parametrize("dtype", list(DType))
@pytest.mark.parametrize(
    "dist", ["uniform, low: -2, high: 3", "normal, mean: 1, std: 2", "randint, low: -3, high: 4"]
)
def test_inputs_of_every_dtype_and_distribution(
    write_space: Callable[..., Path], dtype: DType, dist: str
) -> None:
    sp = space_with(
        write_space,
        f"{{x: {{dtype: {dtype.value}, shape: [n, m], distribution: {dist}}}}}",
        "{y: {dtype: float32, shape: [n]}}",
        "[x, y]",
    )
    x = make_inputs(sp, seed=7)["x"]
    assert x.dtype == DTYPES[dtype] and x.shape == (1000, 3)
    wide = x.astype(np.float64)
    assert np.isfinite(wide).all() and np.count_nonzero(wide) > 0
    if dist.startswith("uniform"):
        assert wide.min() >= -2 and wide.max() <= 3 and wide.std() > 0.5
    if dist.startswith("randint"):
        assert set(np.unique(wide)) <= set(range(-3, 4)) and wide.max() == 3  # high excluded
    if dtype in INTS and dtype.value.startswith("uint"):
        assert wide.min() >= 0  # clipped into the type


def test_inputs_depend_on_shape_and_seed_only(write_space: Callable[..., Path]) -> None:
    one = "{x: {dtype: float32, shape: [n]}}"
    two = "{w: {dtype: int8, shape: [m], distribution: randint, low: -5, high: 5}, " + (
        "x: {dtype: float32, shape: [n]}}"
    )
    sp = space_with(write_space, one, "{y: {dtype: float32, shape: [n]}}", "[x, y]")
    a, b = make_inputs(sp, 1)["x"], make_inputs(sp, 1)["x"]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, make_inputs(sp, 2)["x"])
    # another input beside x leaves x as it was: one stream per input name
    sp2 = space_with(write_space, two, "{y: {dtype: float32, shape: [n]}}", "[x, w, y]")
    assert np.array_equal(make_inputs(sp2, 1)["x"], a)
    # a different shape draws a different array
    small = Space(sp.spec, shape={"n": 10, "m": 3})
    assert make_inputs(small, 1)["x"].shape == (10,)


SCALES_SPACE = """\
name: scales
source: ../kernels/axpy.cu
entry: {kernel: axpy}
arches: [sm_90]
parameters:
  BLOCK: {values: [32, 64], default: 32}
  PER: {values: [row, tensor], default: row, tunable: false}
derived:
  n_scales: n if PER == 'row' else 1
geometry: {grid: 1, block: BLOCK}
shapes: {default: {n: 1000}}
inputs:
  x: {dtype: float32, shape: [n]}
  scale: {dtype: float32, shape: [n_scales], low: 0.5, high: 2}
  pad:
    dtype: int8
    shape: ["BLOCK if PER == 'tensor' else 1"]
    distribution: randint
    low: 1
    high: 9
outputs: {y: {dtype: float32, shape: [n]}}
args: [x, y, scale, pad]
reference: {python: "workbench.references.elementwise:scale", rtol: 1e-6}
work: {bytes: 8 * n}
"""


def test_input_shapes_may_use_config_values(write_space: Callable[..., Path]) -> None:
    """A scale per row or one per tensor: the inputs follow the config's values (derived or
    parameters), drawn per those values; an input that does not use them stays the same."""
    sp = Space(load_space(write_space(SCALES_SPACE)))
    row, tensor = {"BLOCK": 32, "PER": "row"}, {"BLOCK": 64, "PER": "tensor"}
    assert input_config_names(sp) == ("BLOCK", "PER", "n_scales")
    assert input_shapes(sp, row) == {"x": (1000,), "scale": (1000,), "pad": (1,)}
    assert input_shapes(sp, tensor) == {"x": (1000,), "scale": (1,), "pad": (64,)}
    a, b = make_inputs(sp, 3, row), make_inputs(sp, 3, tensor)
    assert a["scale"].shape == (1000,) and b["scale"].shape == (1,) and b["pad"].shape == (64,)
    assert np.array_equal(a["x"], b["x"])  # one stream per name: x is x, whatever the config
    assert np.array_equal(make_inputs(sp, 3, row)["scale"], a["scale"])
    assert input_config_values(sp, tensor) == (("BLOCK", 64), ("PER", "tensor"), ("n_scales", 1))
    with pytest.raises(ConfigError, match="input shapes use BLOCK, PER, n_scales, values of"):
        make_inputs(sp, 3)


def test_input_sets_are_keyed_by_the_config_values_their_shapes_use(
    write_space: Callable[..., Path], tmp_path: Path
) -> None:
    text = SCALES_SPACE.replace("\"BLOCK if PER == 'tensor' else 1\"", "1")
    sp = Space(load_space(write_space(text)))
    sets = InputSets(sp, 0, tmp_path, sp.spec.reference.target if sp.spec.reference else None)
    row = sets.get({"BLOCK": 32, "PER": "row"})
    assert row.key == "n=1000;n_scales=1000;seed=0"
    assert sets.get({"BLOCK": 64, "PER": "row"}) is row  # BLOCK is not in any input shape
    tensor = sets.get({"BLOCK": 32, "PER": "tensor"})
    assert tensor.key == "n=1000;n_scales=1;seed=0"
    assert tensor.arrays["x"] is row.arrays["x"]  # drawn and written once
    assert tensor.files[0] == row.files[0] and tensor.files[0].name == "x"
    assert {f.name: f.nbytes for f in tensor.files} == {"x": 4000, "scale": 4, "pad": 1}
    assert tensor.expected is not row.expected  # the reference's cache is per set
    # the shape alone decides them: one set, drawn before any config
    plain = space_with(
        write_space,
        "{x: {dtype: float32, shape: [n]}}",
        "{y: {dtype: float32, shape: [n]}}",
        "[x, y]",
    )
    plain_sets = InputSets(plain, 0, tmp_path, None)
    plain_sets.prepare()
    assert plain_sets.get({"BLOCK": 64, "SCALE": 2}).key == "n=1000,m=3;seed=0"


def test_input_shape_that_fails_for_a_config_says_which(write_space: Callable[..., Path]) -> None:
    text = SCALES_SPACE.replace("n if PER == 'row' else 1", "n if PER == 'row' else 0")
    sp = Space(load_space(write_space(text)))
    with pytest.raises(ConfigError, match="input scale: shape `n_scales` gave 0"):
        input_shapes(sp, {"BLOCK": 32, "PER": "tensor"})


def test_input_that_underflows_to_zero_is_refused(write_space: Callable[..., Path]) -> None:
    # e4m3's smallest subnormal is 2**-9: everything in [1e-12, 2e-12] rounds to zero
    sp = space_with(
        write_space,
        "{x: {dtype: float8_e4m3, shape: [n], low: 1.0e-12, high: 2.0e-12}}",
        "{y: {dtype: float32, shape: [n]}}",
        "[x, y]",
    )
    with pytest.raises(ConfigError, match="only zeros"):
        make_inputs(sp, 0)


def test_narrow_floats_clip_instead_of_overflowing(write_space: Callable[..., Path]) -> None:
    sp = space_with(
        write_space,
        "{x: {dtype: float8_e4m3, shape: [n], distribution: normal, mean: 0, std: 1000}}",
        "{y: {dtype: float32, shape: [n]}}",
        "[x, y]",
    )
    x = make_inputs(sp, 0)["x"].astype(np.float64)
    assert np.isfinite(x).all() and x.max() == 448 and x.min() == -448


# -- outputs -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_poison_is_a_nan_no_gpu_computes(dtype: DType) -> None:
    pattern = poison_pattern(dtype)
    value = np.frombuffer(pattern, dtype=DTYPES[dtype]).astype(np.float64)
    assert np.isnan(value).all()
    # NVIDIA's canonical NaNs (0x7FFFFFFF, 0x7FFF, ...) have the sign bit clear; ours is set
    assert pattern[-1] & 0x80


@pytest.mark.parametrize("dtype", INTS)
def test_int_poison_is_the_fixed_pattern(dtype: DType) -> None:
    assert poison_pattern(dtype) == bytes([INT_POISON_BYTE]) * DTYPES[dtype].itemsize
    if dtype is DType.INT32:
        assert np.frombuffer(poison_pattern(dtype), np.int32)[0] == -1515870811


def test_output_roles_and_fills(write_space: Callable[..., Path]) -> None:
    sp = space_with(
        write_space,
        "{x: {dtype: float32, shape: [n]}}",
        "{y: {dtype: bfloat16, shape: [n]}, acc: {dtype: float32, shape: [1], init: 1.5}, "
        "count: {dtype: int32, shape: [m], init: 7}, "
        "ws: {dtype: float64, shape: ['BLOCK * 2'], scratch: true}}",
        "[x, y, acc, count, ws]",
    )
    outs = {o.name: o for o in output_buffers(sp, {"BLOCK": 64, "SCALE": 1})}
    y, acc, count, ws = outs["y"], outs["acc"], outs["count"], outs["ws"]
    assert y.role is OutputRole.POISONED and y.compared and not y.reset_each_launch
    assert np.isnan(y.initial().astype(np.float64)).all() and y.nbytes == 2000
    assert acc.role is OutputRole.INITIALIZED and acc.reset_each_launch
    assert acc.initial().tolist() == [1.5]
    assert count.initial().tolist() == [7, 7, 7]
    assert ws.role is OutputRole.SCRATCH and not ws.compared and ws.shape == (128,)
    assert not ws.initial().any()


def test_init_that_does_not_fit_is_refused(write_space: Callable[..., Path]) -> None:
    sp = space_with(
        write_space,
        "{x: {dtype: float32, shape: [n]}}",
        "{y: {dtype: int8, shape: [n], init: 300}}",
        "[x, y]",
    )
    with pytest.raises(ConfigError, match="init 300"):
        output_buffers(sp, {"BLOCK": 32, "SCALE": 1})


def test_output_dtype_from_an_expression(write_space: Callable[..., Path]) -> None:
    sp = space_with(
        write_space,
        "{x: {dtype: float32, shape: [n]}}",
        "{y: {dtype: \"'int32' if SCALE == 2 else 'float16'\", shape: [n]}}",
        "[x, y]",
    )
    assert output_buffers(sp, {"BLOCK": 32, "SCALE": 2})[0].dtype is DType.INT32
    assert output_buffers(sp, {"BLOCK": 32, "SCALE": 1})[0].dtype is DType.FLOAT16


@pytest.mark.parametrize(
    ("pattern", "size", "word"),
    [
        (b"\xff\xff\xff\xff", 1, 0xFF),
        (b"\x00\x3c", 2, 0x3C00),  # float16 1.0
        (b"\x00\x00\x80\x3f", 4, 0x3F800000),  # float32 1.0
        (b"\x00\x00\x00\x00\x00\x00\xf0\x3f", 8, 0x3FF0000000000000),  # float64 1.0
        (b"\xa5\xa5\xa5\xa5\xa5\xa5\xa5\xa5", 1, 0xA5),
        (b"\x01\x00\x01\x00", 2, 0x0001),
    ],
)
def test_fill_words_reproduce_the_pattern(pattern: bytes, size: int, word: int) -> None:
    """The (width, value) the driver memsets with gives back the element pattern."""
    fill = Fill(pattern)
    assert (fill.word_size, fill.word) == (size, word)
    count = 5 * len(pattern)
    if size == 8:  # emulate cuMemsetD2D32 of the low words, then of the high words
        words = np.zeros(count // 4, dtype=np.uint32)
        words[0::2], words[1::2] = word & 0xFFFFFFFF, word >> 32
        memset = words.view(np.uint8)
    else:
        memset = np.full(count // size, word, dtype=f"<u{size}").view(np.uint8)
    assert memset.tobytes() == pattern * 5
    host = fill.host(np.dtype(f"<u{len(pattern)}"), (5,))
    assert host.tobytes() == pattern * 5


# -- scalars, argument order and packing ---------------------------------------------------


def test_library_argument_lists() -> None:
    sp = Space(load_kernel("stream_scale", []), shape={"n": 4096})
    args = kernel_arguments(sp, sp.spec.default_config())
    assert args == (
        BufferArg("x"),
        BufferArg("y"),
        ScalarValue("int64", 4096),
        ScalarValue("float32", 1.5, "alpha"),
    )
    assert named_scalars(args) == {"alpha": 1.5}


def test_typed_scalars() -> None:
    assert typed_scalar(0.1, "float32") == float(np.float32(0.1)) != 0.1
    assert typed_scalar(0.1, "float64") == 0.1
    assert typed_scalar(4.0, "int32") == 4 and isinstance(typed_scalar(4.0, "int32"), int)
    assert typed_scalar(True, "int32") == 1
    assert typed_scalar(2**32 - 1, "uint32") == 2**32 - 1
    for value, dtype in [(2**31, "int32"), (-1, "uint32"), (1.5, "int64"), (1e39, "float32")]:
        with pytest.raises(ConfigError):
            typed_scalar(value, dtype)
    with pytest.raises(ConfigError, match="not a number"):
        typed_scalar("x", "int32")


def test_scalar_expressions_per_config(write_space: Callable[..., Path]) -> None:
    sp = space_with(
        write_space,
        "{x: {dtype: float32, shape: [n]}}",
        "{y: {dtype: float32, shape: [n]}}",
        "[{value: n * SCALE, dtype: int32, name: count}, x, {value: 1 / 3, dtype: float32}, y]",
    )
    args = kernel_arguments(sp, {"BLOCK": 32, "SCALE": 2})
    assert args[0] == ScalarValue("int32", 2000, "count")
    assert args[2] == ScalarValue("float32", float(np.float32(1 / 3)))
    assert [type(a) for a in args] == [ScalarValue, BufferArg, ScalarValue, BufferArg]


def test_packed_arguments_read_back_as_the_kernel_sees_them() -> None:
    values = [
        (np.dtype(np.uint64), 0x7F00_1234_5678),  # a device pointer
        (np.dtype(np.int32), -5),
        (np.dtype(np.float32), 1.5),
        (np.dtype(np.int64), -(2**40)),
        (np.dtype(np.uint32), 2**32 - 1),
        (np.dtype(np.float64), 0.1),
    ]
    pack = pack_arguments(values)
    pointers = (ctypes.c_uint64 * len(values)).from_address(pack.address)
    assert pack.sizes == (8, 4, 4, 8, 4, 8)
    for (dtype, value), ptr, size in zip(values, pointers, pack.sizes, strict=True):
        raw = ctypes.string_at(ptr, size)
        assert np.frombuffer(raw, dtype=dtype)[0] == value
        assert ptr % 8 == 0  # each value aligned for its type
    assert pointers[1] - pointers[0] == 8


def test_no_arguments_and_too_wide_ones() -> None:
    assert pack_arguments([]).address == 0
    with pytest.raises(ValueError):
        pack_arguments([(np.dtype(np.complex128), 1j)])


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.int64]
)
def test_arrays_travel_as_raw_bytes(tmp_path: Path, dtype: type) -> None:
    """np.save cannot round-trip ml_dtypes arrays; raw bytes with dtype and shape can."""
    from workbench.runners.protocol import read_raw, write_raw

    arr = np.arange(-6, 6, dtype=np.float64).reshape(3, 4).astype(dtype)
    nbytes = write_raw(tmp_path / "a.npy", arr)
    back = read_raw(tmp_path / "a.npy", np.dtype(dtype), (3, 4))
    assert nbytes == arr.nbytes and back.dtype == np.dtype(dtype)
    assert np.array_equal(back.astype(np.float64), arr.astype(np.float64))
    with pytest.raises(ValueError, match="expected"):
        read_raw(tmp_path / "a.npy", np.dtype(dtype), (4, 4))
