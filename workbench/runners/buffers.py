"""Host-side buffers of one problem: random inputs, output initial contents, scalar arguments,
and the kernel's argument list, all from the space file's ``inputs``/``outputs``/``args``.

Inputs depend on (space, shape, seed) and, where an input's shape uses a parameter or a derived
value (``scale: {shape: [n_scales]}``), on the values those names take: they are drawn once per
shape and per those values, so that every config of a search that agrees on them sees the same
data (one input's array depends only on the seed, its name and its shape). Outputs are poisoned
before a launch (NaN for floats, a fixed bit pattern for integers) so that an element the kernel
never wrote cannot pass for a result; ``init:`` outputs (accumulators) start from their value,
``scratch`` outputs from zero. Nothing here touches a GPU.
"""

from __future__ import annotations

import enum
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from workbench.devices import arch_namespace
from workbench.errors import ConfigError, ExpressionError
from workbench.expressions import Expression
from workbench.runners.tensor_maps import (
    TENSOR_MAP_ALIGN,
    TENSOR_MAP_BYTES,
    TensorMapValue,
    check_tensor_map,
)
from workbench.spaces.model import ArgSpec, InputSpec, OutputSpec, ScalarArg, TensorMapArg, Value
from workbench.spaces.numba_abi import NUMBA, array_fields
from workbench.spaces.schema import Distribution, DType
from workbench.spaces.space import Space

#: Host dtype of each space-file dtype (ml_dtypes for the formats numpy lacks).
DTYPES: Mapping[DType, np.dtype] = {
    DType.INT8: np.dtype(np.int8),
    DType.UINT8: np.dtype(np.uint8),
    DType.INT16: np.dtype(np.int16),
    DType.INT32: np.dtype(np.int32),
    DType.UINT32: np.dtype(np.uint32),
    DType.INT64: np.dtype(np.int64),
    DType.FLOAT16: np.dtype(np.float16),
    DType.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    DType.FLOAT32: np.dtype(np.float32),
    DType.FLOAT64: np.dtype(np.float64),
    DType.FLOAT8_E4M3: np.dtype(ml_dtypes.float8_e4m3fn),
    DType.FLOAT8_E5M2: np.dtype(ml_dtypes.float8_e5m2),
}
FLOAT_DTYPES = frozenset(
    {
        DType.FLOAT16,
        DType.BFLOAT16,
        DType.FLOAT32,
        DType.FLOAT64,
        DType.FLOAT8_E4M3,
        DType.FLOAT8_E5M2,
    }
)
#: Poison byte of float outputs: all-ones is a NaN in every float format above (e4m3fn's only
#: NaN is S.1111.111) with the sign bit set, so it differs from the canonical NaN a GPU computes
#: (0x7FFFFFFF for fp32, 0x7FFF for fp16) and "never written" stays distinguishable.
FLOAT_POISON_BYTE = 0xFF
#: Poison byte of integer outputs: 0xA5A5A5A5 (-1515870811 as int32) is no count, index or
#: small sum. Only elements that also differ from the reference are reported as untouched.
INT_POISON_BYTE = 0xA5
#: By-value argument types of ``args`` entries.
SCALAR_DTYPES: Mapping[str, np.dtype] = {
    name: np.dtype(name) for name in ("int32", "int64", "uint32", "float32", "float64")
}
#: Each scalar or pointer argument gets an 8-byte slot: every by-value type here is at most 8
#: bytes and 8-byte slots keep each one aligned. Raw by-value bytes (a 128-byte tensor map) get
#: their size, aligned to ``TENSOR_MAP_ALIGN``.
ARG_SLOT_BYTES = 8
#: Draws before giving up on an input that keeps coming out all zeros.
ZERO_REDRAWS = 8


def numpy_dtype(dtype: DType) -> np.dtype:
    """The host dtype of a space-file dtype."""
    return DTYPES[dtype]


def is_float(dtype: DType) -> bool:
    return dtype in FLOAT_DTYPES


# -- inputs --------------------------------------------------------------------------------
def make_inputs(
    space: Space, seed: int, config: Mapping[str, Value] | None = None
) -> dict[str, np.ndarray]:
    """Random inputs for ``space``'s shape (and ``config``'s values, where input shapes use
    them): one independent stream per input name.

    Raises:
        ConfigError: an input's shape needs a config and none is given, or fails to evaluate,
            or its distribution gives only zeros in its dtype.
    """
    shapes = input_shapes(space, config)
    specs = input_specs(space, config)
    return {name: draw_named_input(s, shapes[name], seed) for name, s in specs.items()}


def input_config_names(space: Space) -> tuple[str, ...]:
    """The parameters and derived values that input shapes and dtypes (a problem variant's:
    ``dtype: DTYPE``) use, sorted (empty: the problem shape alone gives every input)."""
    config_names = set(space.spec.parameter_names) | {name for name, _ in space.spec.derived}
    used = {name for spec in space.spec.inputs for expr in spec.shape for name in expr.names}
    used |= {name for spec in space.spec.inputs for name in spec.bound_names}
    used |= {n for spec in space.spec.inputs if not _fixed(spec) for n in spec.dtype.names}  # type: ignore[union-attr]
    return tuple(sorted(used & config_names))


def input_specs(space: Space, config: Mapping[str, Value] | None = None) -> dict[str, InputSpec]:
    """Every input with its dtype (and that dtype's draw) for ``config``, by name.

    Bounds that are expressions (``low: S_MIN``) are evaluated for the shape and ``config``.

    Raises:
        ConfigError: an input's dtype is a problem variant's and no config is given, or the
            config's names no dtype; a bound fails to evaluate.
    """
    inputs = space.spec.inputs
    if all(_fixed(spec) and spec.bounds is None for spec in inputs):
        return {spec.name: spec for spec in inputs}
    if config is None and not all(_fixed(spec) for spec in inputs):
        raise ConfigError(
            f"{space.spec.name}: input dtypes are problem variants' (values of the config): "
            "the inputs need a config"
        )
    env = _config_env(space, config) if config is not None else _shape_env(space)
    out = {}
    for spec in inputs:
        fixed = spec if _fixed(spec) else spec.of_dtype(spec.dtype_for(env))
        try:
            out[spec.name] = fixed.with_bounds(env)
        except ExpressionError as exc:
            raise ConfigError(f"{space.spec.name}: input {spec.name}: {exc}") from exc
    return out


def _fixed(spec: InputSpec) -> bool:
    return isinstance(spec.dtype, DType)


def input_config_values(
    space: Space, config: Mapping[str, Value]
) -> tuple[tuple[str, object], ...]:
    """``(name, value)`` of each of :func:`input_config_names` for ``config``: with the shape and
    the seed, what decides the inputs.

    Raises:
        ConfigError: a derived value fails to evaluate.
    """
    names = input_config_names(space)
    if not names:
        return ()
    env = _config_env(space, config)
    return tuple((name, env[name]) for name in names)


def input_shapes(
    space: Space, config: Mapping[str, Value] | None = None
) -> dict[str, tuple[int, ...]]:
    """The shape of every input, by name (nothing drawn); ``config`` gives the parameters and
    derived values the shapes use.

    Raises:
        ConfigError: a shape uses a config value and no config is given, or fails to evaluate.
    """
    names = input_config_names(space)
    if names and config is None:
        raise ConfigError(
            f"{space.spec.name}: input shapes use {', '.join(names)}, values of the config: "
            "the inputs need a config"
        )
    env = _config_env(space, config) if names and config is not None else _shape_env(space)
    return {
        spec.name: eval_shape(spec.shape, env, f"input {spec.name}") for spec in space.spec.inputs
    }


def draw_named_input(spec: InputSpec, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Input ``spec`` (its dtype fixed: see :func:`input_specs`) at ``shape`` from its own
    stream: the same (seed, name, shape) always gives the same array, whatever else the space
    holds."""
    rng = np.random.default_rng([seed, zlib.crc32(spec.name.encode())])
    return draw_input(spec, shape, rng)


def draw_input(spec: InputSpec, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """One input array, never all zeros.

    ``randint`` draws integers from ``low`` up to but excluding ``high`` (numpy's convention,
    as the space loader reads it); integer dtypes round and clip a float distribution into
    their range; narrow float formats clip to their largest finite value instead of
    overflowing to inf/NaN.

    Raises:
        ConfigError: ``ZERO_REDRAWS`` draws in a row came out all zeros.
    """
    assert isinstance(spec.dtype, DType), "an input's dtype is resolved before its draw"
    for _ in range(ZERO_REDRAWS):
        arr = _cast(_draw(spec, shape, rng), spec.dtype)
        if (arr != 0).any():
            return arr
    raise ConfigError(
        f"input {spec.name}: the {spec.distribution.value} distribution gives only zeros in "
        f"{spec.dtype.value}; widen it (inputs must never be all zeros)"
    )


_INTS = tuple(d for d in DType if d not in FLOAT_DTYPES)


def _draw(spec: InputSpec, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    # draw narrow floats in float32: half the memory of float64 for a 2**28-element input
    work = np.float64 if spec.dtype in (DType.FLOAT64, *_INTS) else np.float32
    if spec.distribution is Distribution.RANDINT:
        low, high = math.ceil(spec.low), math.ceil(spec.high)
        if high <= low:
            raise ConfigError(f"input {spec.name}: no integer in [{spec.low}, {spec.high})")
        return rng.integers(low, high, size=shape, dtype=np.int64)
    if spec.distribution is Distribution.PERMUTATION:
        count = math.prod(shape)
        return (rng.permutation(count) + math.ceil(spec.low)).reshape(shape)
    if spec.distribution is Distribution.NORMAL:
        values = rng.standard_normal(size=shape, dtype=work)
        values *= spec.std
        values += spec.mean
        return values
    values = rng.random(size=shape, dtype=work)
    values *= spec.high - spec.low
    values += spec.low
    return values


def _cast(values: np.ndarray, dtype: DType) -> np.ndarray:
    target = numpy_dtype(dtype)
    if not is_float(dtype):
        info = np.iinfo(target)
        if values.dtype.kind == "f":
            values = np.rint(values)
        return np.clip(values, info.min, info.max).astype(target)
    if dtype not in (DType.FLOAT32, DType.FLOAT64):
        limit = float(ml_dtypes.finfo(target).max)
        values = np.clip(values, -limit, limit)
    return values.astype(target)


# -- outputs -------------------------------------------------------------------------------
class OutputRole(enum.Enum):
    """How an output starts before a launch."""

    POISONED = "poisoned"  #: NaN / bit pattern; compared with the reference
    INITIALIZED = "initialized"  #: the space file's ``init:`` value (accumulators); compared
    SCRATCH = "scratch"  #: zeroed before every launch; never compared


@dataclass(frozen=True)
class Fill:
    """The initial content of a buffer: one element's bytes, repeated.

    ``word_size``/``word`` give the shortest repeating unit (1, 2, 4 or 8 bytes), so that a
    device can set it with one memset of that width (cuMemsetD8/D16/D32).
    """

    pattern: bytes

    @property
    def word_size(self) -> int:
        for size in (1, 2, 4):
            unit = self.pattern[:size]
            if len(self.pattern) % size == 0 and unit * (len(self.pattern) // size) == (
                self.pattern
            ):
                return size
        return len(self.pattern)

    @property
    def word(self) -> int:
        """The repeating unit as an unsigned little-endian integer."""
        return int.from_bytes(self.pattern[: self.word_size], "little")

    def host(self, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """A host array of ``shape`` holding this fill."""
        count = math.prod(shape)
        unit = np.frombuffer(self.pattern, dtype=np.uint8)
        return np.tile(unit, count).view(dtype).reshape(shape)


@dataclass(frozen=True)
class OutputBuffer:
    """One output of one config: dtype, shape, role and initial content; ``nonfinite_allowed``:
    the space declares it ``nonfinite: allowed`` (the reference may hold NaN or inf there)."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    role: OutputRole
    fill: Fill
    nonfinite_allowed: bool = False

    @property
    def np_dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.np_dtype.itemsize

    @property
    def compared(self) -> bool:
        """Whether the reference checks this output."""
        return self.role is not OutputRole.SCRATCH

    @property
    def reset_each_launch(self) -> bool:
        """Whether timed launches restore it first (accumulators, semaphores, workspaces)."""
        return self.role is not OutputRole.POISONED

    def initial(self) -> np.ndarray:
        """The host array the buffer holds before a launch."""
        return self.fill.host(self.np_dtype, self.shape)


def poison_pattern(dtype: DType) -> bytes:
    """One element of poison: NaN for float formats, ``INT_POISON_BYTE``s for integers."""
    byte = FLOAT_POISON_BYTE if is_float(dtype) else INT_POISON_BYTE
    return bytes([byte]) * numpy_dtype(dtype).itemsize


def output_buffers(space: Space, config: Mapping[str, Value]) -> tuple[OutputBuffer, ...]:
    """The outputs of ``config``: shapes and dtypes evaluated, roles and fills decided.

    Raises:
        ConfigError: a shape or dtype expression fails, or an ``init`` value does not fit.
    """
    env = _config_env(space, config)
    return tuple(_output(spec, env) for spec in space.spec.outputs)


def _output(spec: OutputSpec, env: Mapping[str, object]) -> OutputBuffer:
    dtype = spec.dtype_for(env)
    shape = eval_shape(spec.shape, env, f"output {spec.name}")
    if spec.scratch:
        role, pattern = OutputRole.SCRATCH, bytes(numpy_dtype(dtype).itemsize)
    elif spec.init is not None:
        role, pattern = OutputRole.INITIALIZED, _init_pattern(spec.name, spec.init, dtype)
    else:
        role, pattern = OutputRole.POISONED, poison_pattern(dtype)
    return OutputBuffer(spec.name, dtype, shape, role, Fill(pattern), spec.nonfinite_allowed)


def _init_pattern(name: str, value: float, dtype: DType) -> bytes:
    target = numpy_dtype(dtype)
    if not is_float(dtype):
        info = np.iinfo(target)
        if not float(value).is_integer() or not info.min <= value <= info.max:
            raise ConfigError(f"output {name}: init {value} is not a {dtype.value} value")
        return np.array(int(value), dtype=target).tobytes()
    return np.array(value, dtype=np.float64).astype(target).tobytes()


# -- scalar arguments and the argument list ------------------------------------------------
@dataclass(frozen=True)
class BufferArg:
    """A kernel argument that is the device address of an input or output buffer (for a Numba
    kernel, its array struct: ``numba_shape`` and ``itemsize`` are set)."""

    name: str
    numba_shape: tuple[int, ...] | None = None
    itemsize: int = 0


@dataclass(frozen=True)
class ScalarValue:
    """A by-value kernel argument, already converted to its C type's value."""

    dtype: str  #: int32, int64, uint32, float32 or float64
    value: int | float
    name: str | None = None

    @property
    def np_dtype(self) -> np.dtype:
        return SCALAR_DTYPES[self.dtype]


KernelArg = BufferArg | ScalarValue | TensorMapValue


def kernel_arguments(
    space: Space, config: Mapping[str, Value], args: Sequence[ArgSpec] | None = None
) -> tuple[KernelArg, ...]:
    """The kernel's arguments in ``args`` order: buffers by name, scalars evaluated and typed,
    tensor maps evaluated and checked (zeroed where their ``when`` is false).

    Args:
        args: another list than the space's ``args`` (the ``then`` kernel's).

    Raises:
        ConfigError: a scalar expression fails or its value does not fit its type.
        TensorMapError: a tensor map that the driver's encoder would refuse.
    """
    env = _config_env(space, config)
    arrays = _numba_arrays(space, config) if space.spec.language == NUMBA else {}
    out: list[KernelArg] = []
    label = "args" if args is None else "then.args"
    for i, arg in enumerate(space.spec.args if args is None else args):
        if isinstance(arg, ScalarArg):
            where = f"{label}[{i}]" + (f" ({arg.name})" if arg.name else "")
            value = _evaluate(arg.value, env, where)
            out.append(ScalarValue(arg.dtype, typed_scalar(value, arg.dtype, where), arg.name))
        elif isinstance(arg, TensorMapArg):
            out.append(tensor_map_value(space, arg, env, f"{label}[{i}]"))
        elif arg in arrays:
            shape, itemsize = arrays[arg]
            out.append(BufferArg(arg, shape, itemsize))
        else:
            out.append(BufferArg(arg))
    return tuple(out)


def _numba_arrays(
    space: Space, config: Mapping[str, Value]
) -> dict[str, tuple[tuple[int, ...], int]]:
    """Shape and item size of every buffer, which a Numba kernel's array structs carry."""
    specs = input_specs(space, config)
    out = {
        name: (shape, numpy_dtype(specs[name].dtype).itemsize)  # type: ignore[arg-type]
        for name, shape in input_shapes(space, config).items()
    }
    for b in output_buffers(space, config):
        out[b.name] = (b.shape, b.np_dtype.itemsize)
    return out


def tensor_map_value(
    space: Space, arg: TensorMapArg, env: Mapping[str, object], key: str
) -> TensorMapValue:
    """``arg`` (the entry ``key`` of ``args``) for one config: its buffer's dtype and shape,
    the box and swizzle evaluated and checked against the encoder's rules, or a zeroed map
    where ``when`` is false.

    Raises:
        ConfigError: an expression fails.
        TensorMapError: a rule of ``cuTensorMapEncodeTiled`` is broken.
    """
    where = f"{key} ({arg.label})"
    dtype, shape = _buffer_layout(space, arg.buffer, env)
    if not _evaluate(arg.when, env, f"{where} when"):
        return TensorMapValue(arg.buffer, dtype, shape, (), 0, arg.l2_promotion, arg.name, True)
    # (numbers, or the encoder's checks below say what is wrong with them)
    box: Any = tuple(_integral(_evaluate(e, env, f"{where} box")) for e in arg.box)
    swizzle: Any = _integral(_evaluate(arg.swizzle, env, f"{where} swizzle"))
    value = TensorMapValue(
        arg.buffer,
        dtype,
        shape,
        box,
        swizzle,
        arg.l2_promotion,
        arg.name,
    )
    return check_tensor_map(value, where, key)


def _buffer_layout(
    space: Space, name: str, env: Mapping[str, object]
) -> tuple[DType, tuple[int, ...]]:
    for spec in space.spec.inputs:
        if spec.name == name:
            return spec.dtype_for(env), eval_shape(spec.shape, env, f"input {name}")
    for out in space.spec.outputs:
        if out.name == name:
            return out.dtype_for(env), eval_shape(out.shape, env, f"output {name}")
    raise ConfigError(f"{space.spec.name}: no buffer {name}")  # the loader checked the names


def _integral(value: object) -> object:
    """A float that holds a whole number as an int (``BK / 2``); anything else unchanged."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def named_scalars(args: Sequence[KernelArg]) -> dict[str, int | float]:
    """The named scalar arguments, as the reference sees them (``call.scalars``)."""
    return {a.name: a.value for a in args if isinstance(a, ScalarValue) and a.name}


def typed_scalar(value: object, dtype: str, where: str = "scalar") -> int | float:
    """``value`` as the C type ``dtype`` holds it (float32 rounding applied).

    Raises:
        ConfigError: not a number, not an integer for an integer type, or out of range.
    """
    target = SCALAR_DTYPES[dtype]
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int | float):
        raise ConfigError(f"{where}: {value!r} is not a number")
    if target.kind in "iu":
        if isinstance(value, float):
            if not value.is_integer():
                raise ConfigError(f"{where}: {value!r} is not an integer ({dtype})")
            value = int(value)
        info = np.iinfo(target)
        if not info.min <= value <= info.max:
            raise ConfigError(f"{where}: {value} does not fit in {dtype}")
        return value
    if not math.isfinite(value) or abs(value) > float(np.finfo(target).max):
        raise ConfigError(f"{where}: {value!r} is not a finite {dtype}")
    return float(target.type(value))


@dataclass(frozen=True, eq=False)
class ArgPack:
    """Kernel arguments laid out for ``cuLaunchKernel``'s ``kernelParams``: ``pointers`` is the
    ``void**`` array, each entry the address of the argument's value inside ``storage``.

    Keep the pack alive until the launch call has returned (the driver copies the values).
    """

    storage: np.ndarray
    pointers: np.ndarray
    sizes: tuple[int, ...]

    @property
    def address(self) -> int:
        """The ``void**`` to pass as ``kernelParams`` (0 for a kernel without arguments)."""
        return int(self.pointers.ctypes.data) if len(self.sizes) else 0


#: One value to pack: ``(dtype, value)`` for a scalar or a pointer, or raw by-value bytes.
PackItem = tuple[np.dtype, int | float] | bytes


def pack_arguments(values: Sequence[PackItem]) -> ArgPack:
    """Lay out the values; a device pointer is ``(uint64, address)``, a tensor map its 128 bytes
    (placed on a ``TENSOR_MAP_ALIGN``-byte boundary, as the driver wants a ``CUtensorMap``).

    Raises:
        ValueError: a type wider than ``ARG_SLOT_BYTES``, or empty raw bytes.
    """
    raws, offsets, end = [], [], 0
    for i, item in enumerate(values):
        if isinstance(item, bytes | bytearray):
            if not item:
                raise ValueError(f"argument {i}: no bytes to pass")
            raw, align = bytes(item), TENSOR_MAP_ALIGN
        else:
            dt = np.dtype(item[0])
            if dt.itemsize > ARG_SLOT_BYTES:
                raise ValueError(f"argument {i}: {dt} is wider than {ARG_SLOT_BYTES} bytes")
            raw, align = np.array(item[1], dtype=dt).tobytes(), ARG_SLOT_BYTES
        offset = -(-end // align) * align
        raws.append(raw)
        offsets.append(offset)
        end = offset + max(len(raw), ARG_SLOT_BYTES)
    # room to move the start to a TENSOR_MAP_ALIGN boundary (numpy promises less)
    backing = np.zeros(max(1, end) + TENSOR_MAP_ALIGN, dtype=np.uint8)
    start = -int(backing.ctypes.data) % TENSOR_MAP_ALIGN
    storage = backing[start : start + max(1, end)]
    for raw, offset in zip(raws, offsets, strict=True):
        storage[offset : offset + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    base = int(storage.ctypes.data)
    pointers = np.array([base + offset for offset in offsets] or [0], dtype=np.uint64)
    return ArgPack(storage, pointers, tuple(len(raw) for raw in raws))


#: Encodes a tensor map for a buffer's device address: the 128 bytes of its ``CUtensorMap``.
TensorMapEncoder = Callable[[TensorMapValue, int], bytes]


def launch_arguments(
    args: Sequence[KernelArg],
    addresses: Mapping[str, int],
    encode: TensorMapEncoder | None = None,
) -> ArgPack:
    """``cuLaunchKernel``'s ``kernelParams`` for ``args``: each buffer as the device address in
    ``addresses`` (a 64-bit pointer), each scalar as its C type, each tensor map as the 128
    bytes ``encode`` makes for its buffer's address (zero bytes for a zeroed map).

    Raises:
        KeyError: a buffer argument or a tensor map's buffer has no address.
        ValueError: a tensor map to encode and no ``encode`` (no driver), or an encoding that
            is not 128 bytes.
    """
    values: list[PackItem] = []
    for arg in args:
        if isinstance(arg, BufferArg) and arg.numba_shape is not None:
            address = _address(addresses, arg.name)
            values.extend(array_fields(address, arg.numba_shape, arg.itemsize))
        elif isinstance(arg, BufferArg):
            values.append((np.dtype(np.uint64), _address(addresses, arg.name)))
        elif isinstance(arg, TensorMapValue):
            values.append(_tensor_map_bytes(arg, addresses, encode))
        else:
            values.append((arg.np_dtype, arg.value))
    return pack_arguments(values)


def _address(addresses: Mapping[str, int], name: str) -> int:
    if name not in addresses:
        raise KeyError(f"buffer {name} has no device address")
    return addresses[name]


def _tensor_map_bytes(
    arg: TensorMapValue, addresses: Mapping[str, int], encode: TensorMapEncoder | None
) -> bytes:
    if arg.zeroed:
        return bytes(TENSOR_MAP_BYTES)
    address = _address(addresses, arg.buffer)
    if encode is None:
        raise ValueError(f"tensor map of {arg.buffer}: nothing to encode it with (no driver)")
    raw = encode(arg, address)
    if len(raw) != TENSOR_MAP_BYTES:
        raise ValueError(f"tensor map of {arg.buffer}: {len(raw)} bytes, not {TENSOR_MAP_BYTES}")
    return raw


# -- expressions ---------------------------------------------------------------------------
def eval_shape(
    exprs: Sequence[Expression], env: Mapping[str, object], where: str
) -> tuple[int, ...]:
    """Evaluate a buffer shape: every dimension a positive integer.

    Raises:
        ConfigError: an expression fails or gives something else.
    """
    dims = []
    for expr in exprs:
        value = _evaluate(expr, env, where)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}: shape `{expr.text}` gave {value!r}, not a size >= 1")
        dims.append(value)
    return tuple(dims)


def _evaluate(expr: Expression, env: Mapping[str, object], where: str) -> object:
    try:
        return expr.evaluate(env)
    except ExpressionError as exc:
        raise ConfigError(f"{where}: {exc}") from exc


def _config_env(space: Space, config: Mapping[str, Value]) -> dict[str, object]:
    try:
        return space.env(config)
    except ExpressionError as exc:
        raise ConfigError(f"{space.spec.name}: {exc}") from exc


def _shape_env(space: Space) -> dict[str, object]:
    """Names an input shape may use: the problem shape, ``device.*`` and ``arch.*``."""
    env: dict[str, object] = {**space.device.namespace(), **arch_namespace(space.arch)}
    for name, size in space.shape.items():
        env[name] = env[f"shape.{name}"] = size
    return env
