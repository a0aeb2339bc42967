"""Safe expressions for tuning-space files, evaluated without ``eval``.

Space files hold small Python-like expressions: constraints (``BM % WM == 0``), launch
geometry (``cdiv(n, BLOCK * ITEMS)``), work models (``2 * M * N * K``). The text is parsed
with :func:`ast.parse`, checked against a strict whitelist, and turned once into a tree of
closures, so evaluating it again costs about a microsecond and never runs Python code that
the text names. Everything else (attributes other than ``device.X``/``shape.X``/``arch.X``,
subscripts, lambdas, comprehensions, keywords, unknown functions, names starting with ``_``) is
refused at parse time, and resource limits keep every evaluation small and quick.
"""

from __future__ import annotations

import ast
import math
import numbers
import operator
from collections.abc import Callable, Collection, Mapping
from types import MappingProxyType
from typing import Any

from workbench.errors import ExpressionError

NAMESPACES = frozenset({"arch", "device", "shape"})
"""Names whose attributes may be read: ``device.sm_count`` is the env key ``"device.sm_count"``.

``arch`` serves ``arch.cc``/``arch.sm``/``arch.specific`` (see :mod:`workbench.devices`)."""

MAX_TEXT = 2000  # characters of source text
MAX_DEPTH = 50  # nesting of expression nodes
MAX_EXPONENT = 64  # magnitude of an exponent in ``**`` and of a count in ``<<``/``>>``
MAX_INT = 2**256  # magnitude of any integer result
MAX_LEN = 256  # length of any string, tuple or list value

_Env = Mapping[str, object]
_Fn = Callable[[_Env], object]
_SEQ = (str, list, tuple)


class _Fail(ExpressionError):
    """An evaluation failure without the expression's text, which ``evaluate`` adds."""


def _need_int(fname: str, *values: object) -> None:
    for v in values:
        if not isinstance(v, numbers.Integral):
            raise _Fail(f"{fname}() needs integer arguments, got {v!r}")


def _cdiv(a: int, b: int) -> int:
    _need_int("cdiv", a, b)
    return -(-a // b)


def _round_up(a: int, m: int) -> int:
    _need_int("round_up", a, m)
    return -(-a // m) * m


def _log2(x: float) -> float:
    if isinstance(x, numbers.Integral) and x > 0 and not x & (x - 1):
        return int(x).bit_length() - 1
    if x <= 0:
        raise _Fail(f"log2() of a non-positive number {x!r}")
    return math.log2(x)


def _is_pow2(x: float) -> bool:
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return isinstance(x, numbers.Integral) and x > 0 and not x & (x - 1)


def _clamp(x: float, lo: float, hi: float) -> float:
    if lo > hi:
        raise _Fail(f"clamp() with lo {lo!r} greater than hi {hi!r}")
    return min(max(x, lo), hi)


def _round(x: float, ndigits: int | None = None) -> float:
    if ndigits is None:
        return round(x)
    if isinstance(ndigits, numbers.Integral) and abs(ndigits) > MAX_EXPONENT:
        raise _Fail(f"round() digits {ndigits} beyond the limit {MAX_EXPONENT}")
    return round(x, ndigits)


# fmt: off
_TABLE: dict[str, tuple[Callable[..., object], int, int | None]] = {  # name: (fn, min, max args)
    "min": (min, 1, None), "max": (max, 1, None), "abs": (abs, 1, 1),
    "ceil": (math.ceil, 1, 1), "floor": (math.floor, 1, 1), "cdiv": (_cdiv, 2, 2),
    "round_up": (_round_up, 2, 2), "log2": (_log2, 1, 1), "is_pow2": (_is_pow2, 1, 1),
    "int": (int, 1, 2), "float": (float, 1, 1), "bool": (bool, 1, 1), "round": (_round, 1, 2),
    "gcd": (math.gcd, 1, None), "lcm": (math.lcm, 1, None), "sqrt": (math.sqrt, 1, 1),
    "clamp": (_clamp, 3, 3),
}
# fmt: on
FUNCTIONS: Mapping[str, Callable[..., object]] = MappingProxyType(
    {name: fn for name, (fn, _, _) in _TABLE.items()}
)
"""The only functions an expression may call, by plain name with positional arguments.

Python's ``min max abs int float bool round gcd lcm sqrt ceil floor`` (``round`` refuses more
than 64 digits), plus ``cdiv(a, b)`` (ceil division of integers), ``round_up(a, m)`` (the
smallest multiple of ``m`` that is ``>= a``), ``log2(x)`` (an exact int for a positive power
of two, else a float), ``is_pow2(x)`` and ``clamp(x, lo, hi)``. The workbench helpers raise
:class:`~workbench.errors.ExpressionError` on bad arguments.
"""

# fmt: off
_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_REFUSED = {
    ast.Lambda: "lambda", ast.ListComp: "comprehensions", ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions", ast.GeneratorExp: "generator expressions",
    ast.Subscript: "subscripts", ast.Slice: "slices", ast.JoinedStr: "f-strings",
    ast.FormattedValue: "f-strings", ast.NamedExpr: "assignment expressions (:=)",
    ast.Starred: "starred arguments", ast.Dict: "dict literals", ast.Set: "set literals",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield",
}
# fmt: on


def _check_int(r: object, where: str) -> object:
    """Return ``r`` unless it is an int beyond :data:`MAX_INT` or a sequence beyond MAX_LEN."""
    if r.__class__ is int:
        if r > MAX_INT or r < -MAX_INT:
            raise _Fail(f"integer result of `{where}` is larger than the limit 2**256")
    elif isinstance(r, _SEQ) and len(r) > MAX_LEN:
        raise _Fail(f"result of `{where}` has length {len(r)}, over the limit {MAX_LEN}")
    return r


class _Compiler:
    """Validates an AST and builds its closure tree, collecting the names it reads."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.names: set[str] = set()

    def refuse(self, node: ast.AST, message: str) -> ExpressionError:
        seg = ast.get_source_segment(self.text, node)
        where = f" (in `{seg}`)" if seg and seg != self.text else ""
        return ExpressionError(f"`{self.text}`: {message}{where}")

    def seg(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or self.text

    def compile(self, node: ast.expr) -> _Fn:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            what = _REFUSED.get(type(node), f"{type(node).__name__} syntax")
            raise self.refuse(node, f"{what} not allowed in expressions")
        return method(node)

    def literal(self, node: ast.expr) -> object:
        """The value of a literal (optionally signed number); refuse anything else."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = self.literal(node.operand)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return -value if isinstance(node.op, ast.USub) else value
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, str):
                if len(value) > MAX_LEN:
                    raise self.refuse(node, f"string literal longer than {MAX_LEN} characters")
                return value
            if isinstance(value, (bool, float)):
                return value
            if isinstance(value, int):
                if abs(value) > MAX_INT:
                    raise self.refuse(node, "integer literal larger than the limit 2**256")
                return value
            raise self.refuse(node, f"{type(value).__name__} literals are not allowed")
        raise self.refuse(node, "tuple and list elements must be literals")

    def _Constant(self, node: ast.Constant) -> _Fn:
        value = self.literal(node)
        return lambda env: value

    def _Tuple(self, node: ast.Tuple) -> _Fn:
        value = tuple(self.literal(e) for e in node.elts)
        return lambda env: value

    def _List(self, node: ast.List) -> _Fn:
        value = tuple(self.literal(e) for e in node.elts)
        return lambda env: list(value)

    def _load(self, key: str) -> _Fn:
        self.names.add(key)

        def load(env: _Env) -> object:
            try:
                return env[key]
            except KeyError:
                raise _Fail(f"name '{key}' is not defined") from None

        return load

    def _Name(self, node: ast.Name) -> _Fn:
        if node.id.startswith("_"):
            raise self.refuse(node, f"names starting with '_' are not allowed: '{node.id}'")
        if node.id in NAMESPACES:
            raise self.refuse(node, f"'{node.id}' is a namespace; use {node.id}.<field>")
        return self._load(node.id)

    def _Attribute(self, node: ast.Attribute) -> _Fn:
        base = node.value
        if not (isinstance(base, ast.Name) and base.id in NAMESPACES):
            spaces = ", ".join(sorted(NAMESPACES))
            raise self.refuse(node, f"attribute access is only allowed on the namespaces {spaces}")
        if node.attr.startswith("_"):
            raise self.refuse(
                node, f"attribute names starting with '_' are not allowed: {node.attr!r}"
            )
        return self._load(f"{base.id}.{node.attr}")

    def _check_constant_count(self, node: ast.BinOp, right: _Fn, limit: int, what: str) -> None:
        """Refuse at parse time an exponent/shift that uses no names and is too large
        (``2 ** 10 ** 9``); one that uses names is checked at evaluate time."""
        if any(isinstance(n, ast.Name) for n in ast.walk(node.right)):
            return
        try:
            count = right({})
        except ExpressionError as exc:
            raise self.refuse(node, str(exc)) from None
        if isinstance(count, (int, float)) and abs(count) > limit:
            raise self.refuse(node, f"{what} {count} is larger than the limit {limit}")

    def _BinOp(self, node: ast.BinOp) -> _Fn:
        kind = type(node.op)
        if kind not in _BINOPS:
            raise self.refuse(node, f"operator {kind.__name__} is not allowed")
        left, right = self.compile(node.left), self.compile(node.right)
        op, where = _BINOPS[kind], self.seg(node)
        if kind in (ast.Div, ast.FloorDiv, ast.Mod):

            def divide(env: _Env) -> object:
                a, b = left(env), right(env)
                if kind is ast.Mod and isinstance(a, str):
                    raise _Fail(f"string formatting with % is not allowed in `{where}`")
                try:
                    return op(a, b)
                except ZeroDivisionError:
                    raise _Fail(f"division by zero in `{where}`") from None

            return divide
        if kind in (ast.Pow, ast.LShift, ast.RShift):
            what = "exponent" if kind is ast.Pow else "shift count"
            self._check_constant_count(node, right, MAX_EXPONENT, what)

            def bounded(env: _Env) -> object:
                a: Any = left(env)
                b: Any = right(env)
                # (typeshed types abs() of a numbers.Real loosely)
                if isinstance(b, numbers.Real) and abs(b) > MAX_EXPONENT:  # type: ignore[operator]
                    raise _Fail(f"{what} {b} in `{where}` is larger than the limit {MAX_EXPONENT}")
                r = op(a, b)
                if isinstance(r, complex):
                    raise _Fail(f"`{where}` has a complex result")
                return _check_int(r, where)

            return bounded
        if kind in (ast.Add, ast.Sub, ast.Mult):

            def grow(env: _Env) -> object:
                a: Any = left(env)
                b: Any = right(env)
                if a.__class__ is int and b.__class__ is int:  # the fast, common case
                    r = op(a, b)
                    if -MAX_INT <= r <= MAX_INT:
                        return r
                elif kind is ast.Mult and (isinstance(a, _SEQ) or isinstance(b, _SEQ)):
                    seq, n = (a, b) if isinstance(a, _SEQ) else (b, a)
                    if isinstance(n, numbers.Integral) and len(seq) * int(n) > MAX_LEN:
                        size = len(seq) * int(n)
                        raise _Fail(f"`{where}` would have length {size}, over the limit 256")
                return _check_int(op(a, b), where)

            return grow
        return lambda env: op(left(env), right(env))

    def _UnaryOp(self, node: ast.UnaryOp) -> _Fn:
        operand, op = self.compile(node.operand), _UNARY[type(node.op)]
        return lambda env: op(operand(env))

    def _BoolOp(self, node: ast.BoolOp) -> _Fn:
        fns = [self.compile(v) for v in node.values]
        if len(fns) == 2:
            a, b = fns
            if isinstance(node.op, ast.And):
                return lambda env: a(env) and b(env)
            return lambda env: a(env) or b(env)
        want = isinstance(node.op, ast.Or)

        def boolop(env: _Env) -> object:
            value: object = None
            for f in fns:
                value = f(env)
                if bool(value) is want:
                    return value
            return value

        return boolop

    def _Compare(self, node: ast.Compare) -> _Fn:
        for cmp in node.ops:
            if type(cmp) not in _COMPARE:
                raise self.refuse(node, "'is' and 'is not' are not allowed; use == and !=")
        first = self.compile(node.left)
        rest = [
            (_COMPARE[type(c)], self.compile(e))
            for c, e in zip(node.ops, node.comparators, strict=True)
        ]
        if len(rest) == 1:
            op, right = rest[0]
            if isinstance(node.comparators[0], ast.Constant):
                const = self.literal(node.comparators[0])
                return lambda env: op(first(env), const)
            return lambda env: op(first(env), right(env))

        def chain(env: _Env) -> object:
            a = first(env)
            result: object = True
            for op, f in rest:
                b = f(env)
                result = op(a, b)
                if not result:
                    return result
                a = b
            return result

        return chain

    def _IfExp(self, node: ast.IfExp) -> _Fn:
        test, body = self.compile(node.test), self.compile(node.body)
        orelse = self.compile(node.orelse)
        return lambda env: body(env) if test(env) else orelse(env)

    def _Call(self, node: ast.Call) -> _Fn:
        if not isinstance(node.func, ast.Name):
            raise self.refuse(node, "only whitelisted functions may be called, by plain name")
        name = node.func.id
        if name not in FUNCTIONS:
            raise self.refuse(node, f"unknown function '{name}'")
        if node.keywords:
            raise self.refuse(node, f"keyword arguments are not allowed in call of '{name}'")
        fn, lo, hi = _TABLE[name]
        n = len(node.args)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"{lo} or more" if hi is None else f"{lo} to {hi}"
            raise self.refuse(node, f"{name}() takes {want} arguments, got {n}")
        args, where = [self.compile(a) for a in node.args], self.seg(node)
        if n == 1:
            (a,) = args
            return lambda env: _check_int(fn(a(env)), where)
        if n == 2:
            a, b = args
            return lambda env: _check_int(fn(a(env), b(env)), where)
        return lambda env: _check_int(fn(*[a(env) for a in args]), where)


def _depth_ok(tree: ast.Expression) -> bool:
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        stack.extend((c, depth + 1) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
    return True


class Expression:
    """A parsed, validated expression, ready for fast repeated evaluation.

    Attributes:
        text: the source text (for a number given to :meth:`parse`, its ``repr``).
        names: every variable the expression reads; dotted names are kept whole
            (``"device.sm_count"``). Function names are not included.
    """

    __slots__ = ("_fn", "_source", "names", "text")

    def __init__(self, text: str, names: frozenset[str], fn: _Fn, source: object) -> None:
        self.text = text
        self.names = names
        self._fn = fn
        self._source = source

    @classmethod
    def parse(cls, text: str | int | float | bool) -> Expression:
        """Parse and validate an expression.

        Args:
            text: the expression source, or a literal number/bool taken as a constant.

        Returns:
            The compiled expression.

        Raises:
            ExpressionError: the text does not parse, uses syntax, names or functions
                outside the whitelist, exceeds a resource limit, or is not a string/number.
        """
        if isinstance(text, (bool, int, float)):
            if isinstance(text, int) and abs(text) > MAX_INT:
                raise ExpressionError("integer constant larger than the limit 2**256")
            value = text
            return cls(repr(text), frozenset(), lambda env: value, text)
        if not isinstance(text, str):
            kind = type(text).__name__
            raise ExpressionError(f"an expression must be a string or a number, got {kind}")
        if len(text) > MAX_TEXT:
            raise ExpressionError(
                f"`{text[:60]}...`: expression is {len(text)} characters long,"
                f" over the limit {MAX_TEXT}"
            )
        src = text.strip()
        if not src:
            raise ExpressionError("empty expression")
        try:
            tree = ast.parse(src, mode="eval")
        except SyntaxError as e:
            at = f" (column {e.offset})" if e.offset else ""
            raise ExpressionError(f"`{src}`: invalid syntax: {e.msg}{at}") from None
        except Exception as e:  # ValueError (NUL byte), RecursionError, MemoryError
            raise ExpressionError(f"`{src}`: cannot parse: {type(e).__name__}: {e}") from None
        if not _depth_ok(tree):
            raise ExpressionError(f"`{src}`: nested deeper than the limit of {MAX_DEPTH} levels")
        compiler = _Compiler(src)
        try:
            fn = compiler.compile(tree.body)
        except ExpressionError:
            raise
        except Exception as e:  # a bug, should one exist: still never leak another type
            raise ExpressionError(f"`{src}`: cannot compile: {type(e).__name__}: {e}") from None
        return cls(text, frozenset(compiler.names), fn, text)

    def evaluate(self, env: Mapping[str, object]) -> object:
        """Evaluate against ``env``.

        Args:
            env: values of the names, plain (``"BM"``) and dotted (``"device.sm_count"``).

        Returns:
            The value, as Python's own operators and the :data:`FUNCTIONS` compute it.

        Raises:
            ExpressionError: a name is missing, a division by zero, a type mismatch, or a
                result beyond the limits; the message quotes the expression.
        """
        try:
            return self._fn(env)
        except Exception as e:  # _Fail, TypeError, ValueError, RecursionError, MemoryError...
            quoted = f"`{self.text.strip()}`"
            if isinstance(e, ZeroDivisionError):
                msg = f"division by zero in {quoted} ({e})"
            elif isinstance(e, OverflowError):
                msg = f"numeric overflow ({e})"
            else:
                msg = str(e) or type(e).__name__
            raise ExpressionError(msg if quoted in msg else f"{quoted}: {msg}") from None

    def unknown_names(self, known: Collection[str]) -> list[str]:
        """The names this expression reads that are not in ``known``.

        Args:
            known: names that will be defined at evaluation time.

        Returns:
            The missing names, sorted.
        """
        return sorted(n for n in self.names if n not in known)

    def __reduce__(self) -> tuple[Callable[..., Expression], tuple[object]]:
        return (Expression.parse, (self._source,))

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)
