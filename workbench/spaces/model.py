"""A loaded tuning space: frozen dataclasses, expressions already parsed and checked."""

from __future__ import annotations

import errno
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.errors import ExpressionError, SpaceFileError
from workbench.expressions import Expression
from workbench.spaces.schema import BaselineKind, Distribution, DType, Role

Value = bool | int | float | str
Config = dict[str, Value]
Shape = dict[str, int]

#: A parameter's place in an entry template (``gemm<{BM}, {BN}>``): the loader checks each names
#: a parameter, the compiler fills them in.
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

#: The most bytes a kernel source (or a header it includes) may hold: 50x the largest header of
#: the CUDA toolkit (cuda.h, 1.3 MB); a source is read whole, hashed and handed to NVRTC.
MAX_SOURCE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Parameter:
    """One tunable knob and its domain, in declaration order."""

    name: str
    values: tuple[Value, ...]
    default: Value
    role: Role
    option: str | None = None
    description: str = ""
    line: int | None = None
    tunable: bool = True
    #: the value configs had before the parameter existed (None: not declared)
    before: Value | None = None


@dataclass(frozen=True)
class Constraint:
    """A boolean expression every valid config satisfies; ``reason`` says why it exists."""

    expr: Expression
    reason: str
    line: int | None = None

    def describe(self) -> str:
        return f"{self.expr.text}" + (f" ({self.reason})" if self.reason else "")


@dataclass(frozen=True)
class Geometry:
    """Launch geometry as expressions; ``grid``/``block`` have one to three dimensions."""

    grid: tuple[Expression, ...]
    block: tuple[Expression, ...]
    shared_bytes: Expression
    cluster: tuple[Expression, ...] | None = None
    #: the space file's line of ``geometry.cluster`` (for errors that name it)
    cluster_line: int | None = None


@dataclass(frozen=True)
class ThenLaunch:
    """A second kernel of the entry's binary, launched after it where ``when`` holds."""

    kernel: str  #: its plain symbol
    when: Expression
    geometry: Geometry
    args: tuple[ArgSpec, ...]


@dataclass(frozen=True)
class Draw:
    """How an input's values are drawn: a distribution and its bounds."""

    distribution: Distribution
    low: float
    high: float
    mean: float
    std: float


@dataclass(frozen=True)
class InputSpec:
    """A random input buffer (never zeros) of ``dtype`` and ``shape``.

    ``dtype`` is fixed, or an expression of problem variants (``tunable: false`` parameters)
    naming a dtype (see :meth:`dtype_for`); ``per_dtype`` draws such a dtype its own way.
    """

    name: str
    dtype: DType | Expression
    shape: tuple[Expression, ...]
    distribution: Distribution
    low: float
    high: float
    mean: float
    std: float
    per_dtype: Mapping[DType, Draw] = field(default_factory=dict)
    #: ``low`` and ``high`` as expressions of the shape and config (None: the numbers above),
    #: resolved per problem by :meth:`with_bounds`
    bounds: tuple[Expression, Expression] | None = None

    @property
    def bound_names(self) -> frozenset[str]:
        """The names the bounds' expressions use (none for numbers)."""
        if self.bounds is None:
            return frozenset()
        return frozenset(self.bounds[0].names) | frozenset(self.bounds[1].names)

    def with_bounds(self, env: Mapping[str, object]) -> InputSpec:
        """This input with its bounds' expressions evaluated in ``env`` (itself without any).

        Raises:
            ExpressionError: an expression fails, or gives no number.
        """
        if self.bounds is None:
            return self
        low, high = (e.evaluate(env) for e in self.bounds)
        for what, value in (("low", low), ("high", high)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ExpressionError(f"input {self.name}: {what} is {value!r}, not a number")
        return replace(self, low=float(low), high=float(high), bounds=None)  # type: ignore[arg-type]

    def dtype_for(self, env: Mapping[str, object]) -> DType:
        """The dtype for one config (or problem variant).

        Raises:
            ConfigError: the expression fails or names no dtype.
        """
        return _dtype_for("input", self.name, self.dtype, env)

    def draw(self, dtype: DType) -> Draw:
        """How the values of this input are drawn when its dtype is ``dtype``."""
        own = Draw(self.distribution, self.low, self.high, self.mean, self.std)
        return self.per_dtype.get(dtype, own)

    def of_dtype(self, dtype: DType) -> InputSpec:
        """This input with its dtype (and that dtype's draw) fixed."""
        d = self.draw(dtype)
        return replace(
            self,
            dtype=dtype,
            distribution=d.distribution,
            low=d.low,
            high=d.high,
            mean=d.mean,
            std=d.std,
            per_dtype={},
        )


@dataclass(frozen=True)
class OutputSpec:
    """An output buffer; poisoned before each launch unless ``init`` is given.

    ``dtype`` is fixed, or an expression of the config naming a dtype (see :meth:`dtype_for`);
    a ``scratch`` buffer is zeroed before each launch and not compared with the reference;
    ``nonfinite_allowed`` (``nonfinite: allowed``): the reference may hold NaN or inf in it.
    """

    name: str
    dtype: DType | Expression
    shape: tuple[Expression, ...]
    init: float | None
    scratch: bool = False
    nonfinite_allowed: bool = False

    def dtype_for(self, env: Mapping[str, object]) -> DType:
        """The dtype for one config.

        Raises:
            ConfigError: the expression fails or names no dtype.
        """
        return _dtype_for("output", self.name, self.dtype, env)


def _dtype_for(kind: str, name: str, dtype: DType | Expression, env: Mapping[str, object]) -> DType:
    if isinstance(dtype, DType):
        return dtype
    from workbench.errors import ConfigError, ExpressionError

    try:
        return DType(dtype.evaluate(env))
    except (ExpressionError, ValueError) as exc:
        names = ", ".join(d.value for d in DType)
        raise ConfigError(
            f"{kind} {name}: dtype `{dtype.text}` gave {exc}; expected one of {names}"
        ) from exc


@dataclass(frozen=True)
class ScalarArg:
    """A by-value kernel argument computed from the shape and parameters."""

    value: Expression
    dtype: str
    name: str | None = None


@dataclass(frozen=True)
class TensorMapArg:
    """A by-value ``CUtensorMap`` (128 bytes, 64-byte aligned) describing ``buffer`` for TMA
    copies: its box (outermost dimension first, like the buffer's shape) and swizzle are
    expressions of the config. Where ``when`` is false the kernel gets 128 zero bytes and
    nothing is checked or encoded (the path of the config does not read the map)."""

    buffer: str
    box: tuple[Expression, ...]
    swizzle: Expression
    when: Expression
    l2_promotion: int = 256
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name or self.buffer


#: One entry of a space's ``args``: a buffer's name, a scalar, or a tensor map.
ArgSpec = str | ScalarArg | TensorMapArg


@dataclass(frozen=True)
class Reference:
    """Where the CPU reference lives and how its output is compared."""

    target: str  #: ``module:function`` or ``/abs/path/file.py:function``
    exact: bool
    rtol: Expression
    atol: Expression


@dataclass(frozen=True)
class UserBaseline:
    """A baseline of the user's own: a Python function that ``workbench compare`` times and
    verifies like a library's."""

    name: str  #: ``python:FUNCTION``, its name in tables and the store
    target: str  #: ``module:function`` or ``/abs/path/file.py:function``


@dataclass(frozen=True)
class AccuracyFigure:
    """The problem's own accuracy, computed on the CPU for the report (``accuracy:``): a
    function of inputs drawn with ``draw`` over the study's config, at the study's shape with
    each dimension of ``cap`` at most that."""

    target: str  #: ``module:function`` or ``/abs/path/file.py:function``
    title: str
    draw: Mapping[str, Value] = field(default_factory=dict)
    cap: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class VariantBaseline:
    """Another named variant of the same space file as a baseline of ``workbench compare``:
    its best config in the store at the shape (else its default), on the problem's inputs as
    ``inputs`` makes them for it (None: the same arrays)."""

    name: str  #: ``variant:NAME``, its name in tables and the store
    variant: str
    inputs: str | None  #: ``module:function`` or ``/abs/path/file.py:function``


@dataclass(frozen=True)
class WorkModel:
    """FLOPs (or integer ops) and minimum DRAM bytes of one launch, as expressions."""

    flops: Expression
    bytes: Expression
    unit: str


@dataclass(frozen=True)
class ExpectSass:
    """Opcode prefixes the binary must contain when ``when`` holds."""

    opcodes: tuple[str, ...]
    when: Expression


@dataclass(frozen=True)
class SpaceVariant:
    """A named problem variant of a space file (``variants:``): the kernel name ``name`` is
    the file with the ``tunable: false`` parameters of ``values`` at those values, and its
    other defaults (``defaults``; per arch, ``arch_defaults``) over the file's."""

    name: str
    values: Mapping[str, Value]
    defaults: Mapping[str, Value] = field(default_factory=dict)
    arch_defaults: Mapping[str, Mapping[str, Value]] = field(default_factory=dict)
    description: str = ""

    def matches(self, config: Mapping[str, Value]) -> bool:
        """Whether ``config`` (or a problem variant's pins) takes this variant's values."""
        return all(
            name in config and _same_value(config[name], v) for name, v in self.values.items()
        )


@dataclass(frozen=True)
class SpaceSpec:
    """Everything one space file says, resolved and checked."""

    name: str
    path: Path
    description: str
    source: Path
    language: str
    entry_template: str | None
    entry_kernel: str | None
    arches: tuple[str, ...]
    include_dirs: tuple[Path, ...]
    parameters: tuple[Parameter, ...]
    derived: tuple[tuple[str, Expression], ...]
    constraints: tuple[Constraint, ...]
    geometry: Geometry
    default_shape: Shape
    shape_sets: Mapping[str, tuple[Shape, ...]]
    inputs: tuple[InputSpec, ...]
    outputs: tuple[OutputSpec, ...]
    args: tuple[ArgSpec, ...]
    reference: Reference | None
    work: WorkModel
    baselines: tuple[BaselineKind | UserBaseline | VariantBaseline, ...]
    #: the space file's text this spec was parsed from: what it describes, whatever the file
    #: holds by the time a hash of the space is taken (see :func:`space_sha256`)
    text: str = field(compare=False, repr=False)
    expect_sass: tuple[ExpectSass, ...] = field(default=())
    #: per arch (``sm_90a``), the values that replace the parameters' defaults there
    arch_defaults: Mapping[str, Mapping[str, Value]] = field(default_factory=dict)
    #: the named problem variants (``variants:``), in the file's order
    variants: tuple[SpaceVariant, ...] = ()
    #: 1-based line of each top-level key of the file, for errors found after loading
    key_lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)
    #: the kernel source's bytes as a store kept them with a study (a space rebuilt from the
    #: store, :func:`~workbench.spaces.loader.load_kept_space`); None: read from ``source``
    kept_source: bytes | None = field(default=None, compare=False, repr=False)
    #: the second kernel launched after the entry (a combine pass), if any
    then: ThenLaunch | None = None
    #: the problem's own accuracy figure for the report (``accuracy:``), if any
    accuracy: AccuracyFigure | None = None

    @property
    def kept(self) -> bool:
        """Rebuilt from a store's copy: its files (source, includes, reference, baselines) may
        not be on this machine, and its source came from the store, not from ``source``."""
        return self.kept_source is not None

    def source_bytes(self) -> bytes:
        """The kernel source: the store's copy of a kept space, else the file.

        Raises:
            OSError: the file cannot be read, or is too large (see :func:`read_source`).
        """
        return self.kept_source if self.kept_source is not None else read_source(self.source)

    def error(self, key: str, message: str) -> SpaceFileError:
        """An error about top-level ``key`` of the file, found after loading (by a compile, a
        lookup): named with the file, the key's line and the key."""
        return SpaceFileError(self.path, message, line=self.key_lines.get(key), key=key)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def parameter(self, name: str) -> Parameter:
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def shape_names(self) -> tuple[str, ...]:
        """Problem-size variables (``n``, or ``M``, ``N``, ``K``)."""
        return tuple(self.default_shape)

    def shapes(self, set_name: str | None = None) -> tuple[Shape, ...]:
        """The shapes of a named set, or the default shape alone."""
        if set_name is None or set_name == "default":
            return (dict(self.default_shape),)
        return self.shape_sets[set_name]

    def default_config(
        self, arch: str | None = None, pins: Mapping[str, Value] | None = None
    ) -> Config:
        """The parameters' defaults, with ``arch``'s values (``defaults:`` in the file) over
        them: the config a command takes when none is named, and completes a partial one from.

        With ``pins`` (problem variants' values, ``--set``), the default of that problem: the
        pins over the defaults and, where they make a named variant, that variant's defaults
        (then its ``arch``'s) in between.
        """
        config: Config = {p.name: p.default for p in self.parameters}
        config.update(self.arch_defaults.get(arch or "", {}))
        config.update(pins or {})
        variant = self.variant_of(config)
        if variant is not None:
            config.update(variant.defaults)
            config.update(variant.arch_defaults.get(arch or "", {}))
            config.update(pins or {})
        return config

    def with_before_values(self, config: Mapping[str, Value]) -> Config:
        """``config`` as recorded before some parameters existed: each one it lacks that
        declares ``before:`` takes that value (what every config had then)."""
        filled = dict(config)
        for p in self.parameters:
            if p.name not in filled and p.before is not None:
                filled[p.name] = p.before
        return filled

    def variant_of(self, config: Mapping[str, Value]) -> SpaceVariant | None:
        """The named variant whose values ``config`` takes (the loader makes it unique)."""
        return next((v for v in self.variants if v.matches(config)), None)


def space_sha256(spec: SpaceSpec) -> str:
    """Hash of the space file as parsed into ``spec`` and of its source (a changed kernel is a
    different space). The file's part is the text the spec came from, not the file read again:
    a file saved since the parse is another space (issue 52: a valid set listed from the old
    constraints was kept under the new file's hash). The same bytes as the file's, so a hash
    stored by an earlier version still matches.

    Raises:
        OSError: the source cannot be read.
    """
    # (a space kept by a store hashes as its files did: the store's copy is checked by it)
    h = hashlib.sha256(spec.text.encode("utf-8"))
    h.update(spec.source_bytes())
    return h.hexdigest()


def read_source(path: Path) -> bytes:
    """A kernel source's or header's bytes, at most MAX_SOURCE_BYTES of them.

    Raises:
        OSError: it cannot be read, or it is larger (EFBIG, naming the file and the cap).
    """
    with path.open("rb") as f:
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise OSError(errno.EFBIG, source_too_large(), str(path))
    return data


def source_too_large() -> str:
    return f"larger than {MAX_SOURCE_BYTES // 2**20} MiB, the most a source file may hold"


def base_kernel(kernel: str) -> str:
    """A study's kernel without its pinned problem variant: ``reduce[OP=max]`` -> ``reduce``."""
    return kernel.split("[", 1)[0]


def shape_label(shape: Mapping[str, int]) -> str:
    """``M=1,N=4096,K=4096``: a stable, readable key for a problem shape."""
    return ",".join(f"{k}={v}" for k, v in shape.items())


def parse_shape_label(label: str) -> dict[str, int] | None:
    """:func:`shape_label` read back (``M=1,N=4096`` -> a shape); None for a label that is not a
    ``NAME=INT`` list (a recording's ``[4096, 4096]``, ``recorded``)."""
    shape: dict[str, int] = {}
    for item in label.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip().lstrip("-").isdigit():
            return None
        shape[name.strip()] = int(value)
    return shape


def config_label(config: Mapping[str, Value]) -> str:
    """``BLOCK=256,ITEMS=4``: a stable, readable key for a configuration."""
    return ",".join(f"{k}={_fmt(v)}" for k, v in config.items())


def parse_config_label(label: str) -> Config | None:
    """:func:`config_label` read back without a space to type it (integers and true/false
    typed, anything else kept as text); None for a label that is not a ``NAME=VALUE`` list."""
    config: Config = {}
    for item in label.split(","):
        name, sep, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not sep or not name or name in config:
            return None
        if text.lstrip("-").isdigit():
            config[name] = int(text)
        elif text in ("true", "false"):
            config[name] = text == "true"
        else:
            config[name] = text
    return config


def _same_value(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def _fmt(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
