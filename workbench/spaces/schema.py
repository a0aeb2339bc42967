"""The tuning-space file format, as pydantic models (``extra="forbid"``: unknown keys are errors).

This module checks shape and types only; :mod:`workbench.spaces.loader` checks meaning (names
in expressions, the source file, defaults in domains) and builds the frozen model.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    Tag,
)

Scalar = StrictBool | StrictInt | StrictFloat | StrictStr
ExprText = StrictStr | StrictInt | StrictFloat | StrictBool
Identifier = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*$", max_length=64)]
#: where a Python function is: ``path/file.py:function`` or ``package.module:function``
PythonTarget = Annotated[StrictStr, Field(pattern=r"^\S.*:\w+$")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Role(str, Enum):
    """How a parameter reaches the kernel."""

    DEFINE = "define"  #: ``-DNAME=value`` (CUDA C++)
    TEMPLATE = "template"  #: only through the entry's name expression (``gemm<{BM}, ...>``)
    OPTION = "option"  #: a compiler flag (see ``workbench.spaces.option_knobs.OPTION_KNOBS``)
    TEXT = "text"  #: ``${NAME}`` substituted in a PTX file
    LAUNCH = "launch"  #: used only by launch geometry / arguments: no recompile


class RangeDomain(_Strict):
    """``range: {start: 1, stop: 9, step: 1}`` (``stop`` inclusive) or powers of two."""

    start: StrictInt
    stop: StrictInt
    step: StrictInt = 1
    pow2: StrictBool = False


class ParameterModel(_Strict):
    values: list[Scalar] | None = Field(default=None, min_length=1, max_length=10_000)
    range: RangeDomain | None = None
    default: Scalar | None = None
    role: Role | None = None
    option: StrictStr | None = None
    #: false for a problem variant (the reduction's operator, an output type): a search keeps
    #: it at its default (or at the value given with ``tune --set``) instead of tuning it
    tunable: StrictBool = True
    #: the value every config had before the parameter existed (one of ``values``): a recording
    #: made then replays as configs with this value (see ``Recording.for_space``)
    before: Scalar | None = None
    description: StrictStr = ""


class ConstraintModel(_Strict):
    expr: ExprText
    reason: StrictStr = ""


class GeometryModel(_Strict):
    grid: ExprText | list[ExprText] = Field(...)
    block: ExprText | list[ExprText] = Field(...)
    shared_bytes: ExprText = 0
    cluster: ExprText | list[ExprText] | None = None


class ShapesModel(_Strict):
    default: dict[Identifier, StrictInt] = Field(..., min_length=1)
    sets: dict[Identifier, list[dict[Identifier, StrictInt]]] = Field(default_factory=dict)


class DType(str, Enum):
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    FLOAT8_E4M3 = "float8_e4m3"
    FLOAT8_E5M2 = "float8_e5m2"


class Distribution(str, Enum):
    UNIFORM = "uniform"
    NORMAL = "normal"
    RANDINT = "randint"
    #: each integer of [low, low + n) once, in random order (n: the input's element count):
    #: a page table that maps every page of a pool exactly once
    PERMUTATION = "permutation"


class DrawModel(_Strict):
    """How an input of one dtype is drawn, over the input's own ``distribution`` and bounds."""

    distribution: Distribution | None = None
    low: StrictInt | StrictFloat | None = None
    high: StrictInt | StrictFloat | None = None
    mean: StrictInt | StrictFloat | None = None
    std: StrictInt | StrictFloat | None = None


class InputModel(_Strict):
    #: a dtype name, or a problem variant's: the name of a ``tunable: false`` parameter whose
    #: values are dtypes (``dtype: DTYPE``), or an expression of such parameters
    dtype: DType | StrictStr
    shape: list[ExprText] = Field(..., min_length=1, max_length=8)
    distribution: Distribution = Distribution.UNIFORM
    #: a number, or an expression of the shape and config (``low: S_MIN, high: S + 1``: sequence
    #: lengths within the shape's range), evaluated per problem
    low: StrictInt | StrictFloat | StrictStr = -1
    high: StrictInt | StrictFloat | StrictStr = 1
    mean: StrictInt | StrictFloat = 0
    std: StrictInt | StrictFloat = 1
    #: for a variant's dtype, a draw of its own (int8 codes: randint; E4M3 codes: uniform)
    per_dtype: dict[DType, DrawModel] = Field(default_factory=dict)
    description: StrictStr = ""


class OutputModel(_Strict):
    #: a dtype name, or an expression giving one per config (``"'int32' if EPI == 'raw' else
    #: 'float16'"``)
    dtype: DType | StrictStr
    shape: list[ExprText] = Field(..., min_length=1, max_length=8)
    #: ``init: 0`` for outputs that accumulate (atomics); otherwise the buffer is poisoned.
    init: StrictInt | StrictFloat | None = None
    #: scratch buffers (split-K workspaces, semaphores) are zeroed before every launch and
    #: never compared with the reference
    scratch: StrictBool = False
    #: ``allowed``: the reference may hold NaN or inf in this output, and the kernel's NaN/inf
    #: must match them; otherwise a non-finite reference output is an error
    nonfinite: Literal["allowed"] | None = None
    description: StrictStr = ""


class ScalarArgModel(_Strict):
    #: the name the reference function sees this value under
    name: Identifier | None = None
    value: ExprText
    dtype: Literal["int32", "int64", "uint32", "float32", "float64"] = "int32"


class TensorMapArgModel(_Strict):
    """A Hopper TMA descriptor (``CUtensorMap``, 128 bytes) of a buffer, passed by value: the
    runner encodes it per shape and config with ``cuTensorMapEncodeTiled``."""

    #: the input or output buffer the map describes (its dtype, shape and device address)
    tensor_map: Identifier
    #: the box a copy moves, in elements, one expression per dimension of the buffer's shape
    #: (outermost first, like the shape)
    box: list[ExprText] = Field(..., min_length=1, max_length=5)
    #: shared-memory swizzle span in bytes: 0 (none), 32, 64 or 128 (an expression)
    swizzle: ExprText = 0
    #: L2 promotion in bytes: 0 (none), 64, 128 or 256
    l2_promotion: Literal[0, 64, 128, 256] = 256
    #: the configs that use the map; elsewhere the kernel gets 128 zero bytes, unchecked
    when: ExprText = True
    #: a label for messages (the buffer's name otherwise)
    name: Identifier | None = None


def _arg_kind(value: Any) -> str:
    """Which kind of ``args`` entry ``value`` is: a buffer name, a scalar or a tensor map."""
    if isinstance(value, dict | BaseModel):
        keys = value if isinstance(value, dict) else value.model_fields_set
        return "TensorMapArgModel" if "tensor_map" in keys else "ScalarArgModel"
    return "str"


ArgEntry = Annotated[
    Annotated[Identifier, Tag("str")]
    | Annotated[ScalarArgModel, Tag("ScalarArgModel")]
    | Annotated[TensorMapArgModel, Tag("TensorMapArgModel")],
    Discriminator(_arg_kind),
]


class ReferenceModel(_Strict):
    #: ``package.module:function`` importable from the environment, or
    #: ``path/to/file.py:function`` relative to the space file...
    python: PythonTarget | None = None
    #: ...or a Python file relative to the space file, with the function's name.
    file: StrictStr | None = None
    function: StrictStr | None = None
    exact: StrictBool = False
    #: tolerances may be expressions of the shape (``atol: 1e-6 * n`` for a long sum)
    rtol: ExprText = 0
    atol: ExprText = 0


class WorkSectionModel(_Strict):
    flops: ExprText = 0
    bytes: ExprText
    #: what the headline throughput is: TOPS for integer math, TFLOP/s, or GB/s (memory-bound)
    unit: Literal["TOPS", "TFLOP/s", "GB/s"] = "GB/s"


class BaselineKind(str, Enum):
    """A library a space is compared with: a kind (every member that fits the problem) or one
    member by name (``cublaslt_fp8``: cuBLASLt's FP8 GEMM only)."""

    PYTHON = "python"  #: the kind of the user's own baselines (``{python: file.py:function}``)
    CUBLAS = "cublas"
    CUBLASLT = "cublaslt"
    CUBLASLT_FP8 = "cublaslt_fp8"
    CUTLASS = "cutlass"
    CUB = "cub"
    COPY = "copy"
    TORCH = "torch"  #: PyTorch routines (the W4A16 GEMM: dense matmul, _weight_int4pack_mm)
    #: the kind of another variant of the same space (``{variant: NAME}``)
    VARIANT = "variant"


class UserBaselineModel(_Strict):
    #: your own baseline: ``file.py:function`` beside the space file, or ``module:function``;
    #: called with the inputs (CuPy arrays on the GPU) by name, like a plain reference
    python: PythonTarget


class AccuracyModel(_Strict):
    """A figure of the problem's own accuracy that the CPU computes (the error a storage
    format adds, against the unquantized problem on the same data), shown by the report beside
    the speed: ``f(call: ReferenceCall)`` (or by name, like a plain reference) returning a list
    of rows, each a mapping of column name to a number or a word."""

    #: ``package.module:function`` or ``file.py:function`` beside the space file
    python: PythonTarget
    #: what the figure is, for the report's table
    title: StrictStr = ""
    #: parameter values the inputs are drawn with instead of the study's (``{KV: fp16}``: the
    #: unquantized data the function quantizes itself); the function still gets the study's
    #: config
    draw: dict[Identifier, Scalar] = Field(default_factory=dict)
    #: the largest shape it is computed at: each named dimension at most this (memory and time
    #: on the CPU); the report says the shape it used
    shape: dict[Identifier, StrictInt] = Field(default_factory=dict)


class VariantBaselineModel(_Strict):
    #: another named variant of this space file (``attention_decode_fp16``), timed with its best
    #: config in the store at the shape (else its default) on the same problem's inputs...
    variant: Identifier
    #: ...as this function makes them from the problem's (``module:function`` or
    #: ``file.py:function``, called like a reference, returning a dict of input arrays by name:
    #: the int8 cache dequantized to fp16); none: the same arrays
    inputs: PythonTarget | None = None


class EntryModel(_Strict):
    #: a C++ name expression with ``{PARAM}`` placeholders (templates) ...
    template: StrictStr | None = None
    #: ... or a plain kernel symbol (``extern "C"`` or PTX ``.entry``)
    kernel: Identifier | None = None


class ExpectSassModel(_Strict):
    #: SASS opcode prefixes that must appear (``IMMA``, ``HGMMA``, ``SHFL``) ...
    opcodes: list[StrictStr] = Field(..., min_length=1)
    #: ... for the configs (and ``arch_cc``) where this expression is true
    when: ExprText = True


class ThenModel(_Strict):
    """A second kernel of the same binary (a combine pass), launched right after the entry on
    the same stream, for the configs where ``when`` holds; it is verified and timed with it."""

    #: its plain symbol (``extern "C"``, or a PTX ``.entry``) in the entry's binary
    kernel: Identifier
    when: ExprText = True
    grid: ExprText | list[ExprText]
    block: ExprText | list[ExprText]
    shared_bytes: ExprText = 0
    args: list[ArgEntry] = Field(..., min_length=1)


class VariantModel(_Strict):
    """A named problem variant: ``workbench tune NAME`` is ``tune FILE --set`` its ``set``."""

    #: the values of ``tunable: false`` parameters that make the variant (its name stands for
    #: them in a study's kernel label)
    set: dict[Identifier, Scalar] = Field(..., min_length=1)
    #: the variant's defaults of other parameters (``ITEMS: 16``), and per arch (``sm_90a:
    #: {PATH: wgmma}``), over the file's
    defaults: dict[Identifier, Scalar | dict[Identifier, Scalar]] = Field(default_factory=dict)
    description: StrictStr = ""


class SpaceModel(_Strict):
    name: Identifier | None = None
    description: StrictStr = ""
    source: StrictStr
    language: Literal["cuda", "ptx", "numba"] | None = None
    entry: EntryModel
    arches: list[StrictStr] = Field(..., min_length=1)
    includes: list[StrictStr] = Field(default_factory=list)
    parameters: dict[Identifier, ParameterModel] = Field(..., min_length=1)
    #: per arch, parameter values that replace the parameters' defaults there
    #: (``sm_90a: {PATH: wgmma, BN: 256}``): the default config where another one is faster
    defaults: dict[StrictStr, dict[Identifier, Scalar]] = Field(default_factory=dict)
    #: named problem variants: old kernel names kept as views of this file (see VariantModel)
    variants: dict[Identifier, VariantModel] = Field(default_factory=dict)
    derived: dict[Identifier, ExprText] = Field(default_factory=dict)
    constraints: list[ExprText | ConstraintModel] = Field(default_factory=list)
    geometry: GeometryModel
    shapes: ShapesModel
    inputs: dict[Identifier, InputModel] = Field(default_factory=dict)
    outputs: dict[Identifier, OutputModel] = Field(..., min_length=1)
    args: list[ArgEntry] = Field(..., min_length=1)
    #: a mapping, or just ``file.py:function`` / ``module:function`` (integer outputs only:
    #: floats need a tolerance)
    reference: ReferenceModel | PythonTarget | None = None
    work: WorkSectionModel
    baselines: list[BaselineKind | UserBaselineModel | VariantBaselineModel] = Field(
        default_factory=list
    )
    expect_sass: list[StrictStr | ExpectSassModel] = Field(default_factory=list)
    #: a second kernel launched after the entry (see ThenModel)
    then: ThenModel | None = None
    #: the problem's own accuracy, computed on the CPU for the report (see AccuracyModel)
    accuracy: AccuracyModel | None = None
