"""A space file's buffers: the inputs (dtype, shape and how they are drawn, never all zeros)
and the outputs (dtype, shape, fill, whether they are compared)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping, Sequence

from workbench.errors import ExpressionError
from workbench.expressions import Expression
from workbench.spaces import schema
from workbench.spaces.loader.checks import FileChecks
from workbench.spaces.model import Draw, InputSpec, OutputSpec, Parameter


def read_buffers(
    file: FileChecks,
    known: set[str],
    params: Mapping[str, Parameter],
    derived: Mapping[str, Expression],
) -> tuple[tuple[InputSpec, ...], tuple[OutputSpec, ...]]:
    """``inputs`` and ``outputs``, checked (``known``: the names expressions may use;
    ``params`` and ``derived``: the space's, for an input dtype that a problem variant names).
    """
    inputs = tuple(
        _input(file, name, b, known, params, derived) for name, b in file.m.inputs.items()
    )
    outputs = tuple(_output(file, name, o, known) for name, o in file.m.outputs.items())
    return inputs, outputs


def _input(
    file: FileChecks,
    name: str,
    b: schema.InputModel,
    known: set[str],
    params: Mapping[str, Parameter],
    derived: Mapping[str, Expression],
) -> InputSpec:
    """Input ``name``: its dtype (fixed or chosen by a problem variant), shape and draw."""
    key = ("inputs", name)
    bounds = _bounds(file, key, b, known)
    if bounds is None:
        _check_draw(file, key, b)
    shape = tuple(file.expr((*key, "shape", i), s, known) for i, s in enumerate(b.shape))
    dtype, dtypes = _input_dtype(file, key, b.dtype, known, params, derived)
    if b.per_dtype and isinstance(dtype, schema.DType):
        raise file.err(
            (*key, "per_dtype"),
            f"the input's dtype is always {dtype.value}: per_dtype is for a dtype that "
            "a problem variant chooses",
        )
    spec = InputSpec(
        name,
        dtype,
        shape,
        b.distribution,
        0.0 if bounds else float(b.low),
        0.0 if bounds else float(b.high),
        float(b.mean),
        float(b.std),
        _per_dtype(file, key, b, dtypes),
        bounds,
    )
    for d in spec.per_dtype:
        _check_draw(file, (*key, "per_dtype", d.value), spec.of_dtype(d))
    return spec


def _output(file: FileChecks, name: str, o: schema.OutputModel, known: set[str]) -> OutputSpec:
    """Output ``name``: its dtype (fixed or an expression), shape, fill and comparison."""
    if name in file.m.inputs:
        raise file.err(("outputs", name), f"{name!r} is already an input")
    shape = tuple(file.expr(("outputs", name, "shape", i), s, known) for i, s in enumerate(o.shape))
    init = None if o.init is None else float(o.init)
    out_dtype: schema.DType | Expression
    try:
        out_dtype = schema.DType(o.dtype)
    except ValueError:  # an expression of the config naming one
        out_dtype = file.expr(("outputs", name, "dtype"), str(o.dtype), known)
    allowed = o.nonfinite == "allowed"
    if allowed and o.scratch:
        raise file.err(
            ("outputs", name, "nonfinite"),
            "a scratch output is never compared: nonfinite does not apply",
        )
    return OutputSpec(name, out_dtype, shape, init, o.scratch, allowed)


def _bounds(
    file: FileChecks, key: tuple[str, ...], b: schema.InputModel, known: set[str]
) -> tuple[Expression, Expression] | None:
    """``low`` and ``high`` as expressions, where either is one (None: both numbers)."""
    if not isinstance(b.low, str) and not isinstance(b.high, str):
        return None
    if b.per_dtype:
        raise file.err(
            (*key, "per_dtype"),
            "bounds that are expressions apply to every dtype: no per_dtype",
        )
    if b.distribution is schema.Distribution.NORMAL:
        raise file.err(key, "a normal draw has no low and high (give mean and std)")
    return file.expr((*key, "low"), b.low, known), file.expr((*key, "high"), b.high, known)


def _check_draw(
    file: FileChecks, key: tuple[str, ...], spec: schema.InputModel | InputSpec
) -> None:
    """The draw of an input (or of one of its dtypes) gives values, not zeros alone."""
    if _all_zeros(spec):
        raise file.err(key, "inputs must not be all zeros: a zero input hides wrong kernels")
    if spec.distribution is schema.Distribution.UNIFORM and _num(spec.high) <= _num(spec.low):
        raise file.err(key, "uniform needs low < high")


def _input_dtype(
    file: FileChecks,
    key: tuple[str, ...],
    text: object,
    known: set[str],
    params: Mapping[str, Parameter],
    derived: Mapping[str, Expression],
) -> tuple[schema.DType | Expression, tuple[schema.DType, ...]]:
    """An input's dtype: a dtype, or an expression of problem variants (``tunable: false``
    parameters, directly or through derived values: the inputs are drawn once per
    problem), with the dtypes it can give."""
    if isinstance(text, schema.DType):
        return text, (text,)
    try:
        fixed = schema.DType(text)
    except ValueError:
        pass
    else:
        return fixed, (fixed,)
    key = (*key, "dtype")
    try:
        expr = Expression.parse(text)  # type: ignore[arg-type]
        unknown = expr.unknown_names(known)
    except ExpressionError:
        expr, unknown = None, [str(text)]
    if expr is None or unknown:
        names = ", ".join(d.value for d in schema.DType)
        raise file.err(
            key,
            f"{text!r} is not a dtype ({names}) nor names a problem variant (a "
            "`tunable: false` parameter whose values are dtypes)",
        )
    reads = _variant_reads(file, key, expr, params, derived)
    dtypes: list[schema.DType] = []
    for combo in itertools.product(*(params[n].values for n in reads)):
        env: dict[str, object] = dict(zip(reads, combo, strict=True))
        for name, value_of in derived.items():
            with contextlib.suppress(ExpressionError):
                env[name] = value_of.evaluate(env)
        try:
            value = expr.evaluate(env)
            dtype = schema.DType(value)
        except (ExpressionError, ValueError):
            at = ", ".join(f"{k}={v}" for k, v in env.items() if k in reads)
            names = ", ".join(d.value for d in schema.DType)
            raise file.err(
                key, f"`{expr.text}` names no dtype for {at}; expected one of {names}"
            ) from None
        if dtype not in dtypes:
            dtypes.append(dtype)
    return expr, tuple(dtypes)


def _variant_reads(
    file: FileChecks,
    key: tuple[str, ...],
    expr: Expression,
    params: Mapping[str, Parameter],
    derived: Mapping[str, Expression],
) -> tuple[str, ...]:
    """The parameters an input's dtype reads, in declaration order; each must be a problem
    variant (``tunable: false``)."""
    found: set[str] = set()
    todo = list(expr.names)
    while todo:
        name = todo.pop()
        if name in derived:
            todo.extend(derived[name].names)
        elif name in params and not params[name].tunable:
            found.add(name)
        else:
            what = "a tunable parameter" if name in params else "not a parameter"
            raise file.err(
                key,
                f"`{expr.text}` reads {name}, {what}: an input's dtype is a dtype or names a "
                "problem variant (a `tunable: false` parameter whose values are dtypes, or a "
                "derived value of such parameters), so that a problem's inputs are fixed",
            )
    return tuple(n for n in params if n in found)


def _per_dtype(
    file: FileChecks, key: tuple[str, ...], b: schema.InputModel, dtypes: Sequence[schema.DType]
) -> dict[schema.DType, Draw]:
    """``per_dtype``: the draw of each of the dtypes a variant's input can take."""
    draws = {}
    for dtype, d in b.per_dtype.items():
        where = (*key, "per_dtype", dtype.value)
        if dtype not in dtypes:
            can = ", ".join(x.value for x in dtypes)
            raise file.err(where, f"the input's dtype is never {dtype.value} (it is: {can})")
        distribution = b.distribution if d.distribution is None else d.distribution
        draws[dtype] = Draw(
            distribution,
            *(
                float(getattr(b, f) if getattr(d, f) is None else getattr(d, f))
                for f in ("low", "high", "mean", "std")
            ),
        )
    return draws


def _all_zeros(b: schema.InputModel | InputSpec) -> bool:
    if b.distribution is schema.Distribution.PERMUTATION:
        return False  # (all zeros only when it has one element and low is 0: seen at the draw)
    if b.distribution is schema.Distribution.UNIFORM:
        return b.low == 0 and b.high == 0
    if b.distribution is schema.Distribution.NORMAL:
        return b.mean == 0 and b.std == 0
    return b.low == 0 and _num(b.high) <= 1  # randint's high is exclusive


def _num(bound: float | str) -> float:
    """A bound as a number (NaN for an expression, which compares false: checked per problem)."""
    return float("nan") if isinstance(bound, str) else float(bound)
