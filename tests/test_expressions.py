"""Tests for workbench.expressions: semantics, whitelist, limits and error hygiene."""

from __future__ import annotations

import contextlib
import math
import pickle
import time
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from workbench.errors import ExpressionError
from workbench.expressions import FUNCTIONS, Expression


def ev(text: str | int | float | bool, **env: object) -> object:
    return Expression.parse(text).evaluate(env)


# --- semantics --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("2 * M * N * K", {"M": 3, "N": 5, "K": 7}, 210),
        ("1 + 2 * 3 ** 2", {}, 19),
        ("-2 ** 2", {}, -4),
        ("(1 + 2) * 3 - 4 // 3 % 2", {}, 8),
        ("7 / 2", {}, 3.5),
        ("-7 // 2", {}, -4),
        ("-7 % 3", {}, 2),
        ("x & 12 | 1 ^ 3 << 1 >> 1", {"x": 13}, 13 & 12 | 1 ^ 3 << 1 >> 1),
        ("~x", {"x": 5}, -6),
        ("not x", {"x": 0}, True),
        ("1 < x <= 10", {"x": 10}, True),
        ("1 < x <= 10", {"x": 11}, False),
        ("a == b != c", {"a": 1, "b": 1, "c": 2}, True),
        ("hint == 'cg'", {"hint": "cg"}, True),
        ("hint in ('ca', 'cg')", {"hint": "cs"}, False),
        ("BLOCK in [64, 128, -1]", {"BLOCK": 128}, True),
        ("BLOCK not in (64, 128)", {"BLOCK": 256}, True),
        ("a if c else b", {"a": 1, "b": 2, "c": False}, 2),
        ("x or 5", {"x": 0}, 5),
        ("x and 5", {"x": 0}, 0),
        ("a and b and c", {"a": 1, "b": 2, "c": 3}, 3),
        ("a or b or c", {"a": 0, "b": 0, "c": 0}, 0),
        ("'ab' + hint", {"hint": "cg"}, "abcg"),
        ("True + 1", {}, 2),
        ("2 ** -1", {}, 0.5),
        ("1.5e3 * 2", {}, 3000.0),
        ("  BM  ", {"BM": 4}, 4),
    ],
)
def test_evaluates_like_python(text: str, env: dict[str, object], expected: object) -> None:
    result = Expression.parse(text).evaluate(env)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("min(3, 1, 2)", 1),
        ("max(3, 9)", 9),
        ("abs(-4)", 4),
        ("ceil(2.1)", 3),
        ("floor(-2.1)", -3),
        ("cdiv(10, 4)", 3),
        ("cdiv(8, 4)", 2),
        ("cdiv(0, 4)", 0),
        ("round_up(100, 32)", 128),
        ("round_up(128, 32)", 128),
        ("log2(64)", 6),
        ("log2(1)", 0),
        ("is_pow2(64)", True),
        ("is_pow2(48)", False),
        ("is_pow2(0)", False),
        ("is_pow2(8.0)", True),
        ("int(7.9)", 7),
        ("int('12')", 12),
        ("float(3)", 3.0),
        ("bool(0)", False),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("gcd(12, 18)", 6),
        ("lcm(4, 6)", 12),
        ("sqrt(16)", 4.0),
        ("clamp(5, 1, 3)", 3),
        ("clamp(-5, 1, 3)", 1),
        ("clamp(2, 1, 3)", 2),
    ],
)
def test_functions(text: str, expected: object) -> None:
    result = ev(text)
    assert result == expected
    assert type(result) is type(expected)


def test_log2_of_non_power_is_float() -> None:
    result = ev("log2(48)")
    assert isinstance(result, float)
    assert result == pytest.approx(math.log2(48))


def test_functions_table_is_public_and_read_only() -> None:
    assert {"min", "cdiv", "round_up", "log2", "is_pow2", "clamp", "gcd"} <= set(FUNCTIONS)
    assert FUNCTIONS["cdiv"](7, 2) == 4
    with pytest.raises(TypeError):
        FUNCTIONS["open"] = open  # type: ignore[index]
    with pytest.raises(ExpressionError, match="integer arguments"):
        FUNCTIONS["cdiv"](7.5, 2)


def test_dotted_names_are_single_env_keys() -> None:
    assert ev("arch.sm >= 90 and arch.specific", **{"arch.sm": 90, "arch.specific": True})
    e = Expression.parse("BM * BK * 4 <= device.max_smem_per_block and shape.M % BM == 0")
    assert e.names == frozenset({"BM", "BK", "device.max_smem_per_block", "shape.M"})
    env = {"BM": 128, "BK": 32, "device.max_smem_per_block": 49152, "shape.M": 1024}
    assert e.evaluate(env) is True
    assert e.evaluate({**env, "device.max_smem_per_block": 1024}) is False
    grid = Expression.parse("min(cdiv(n, BLOCK * ITEMS), device.sm_count * 4)")
    assert grid.evaluate({"n": 10**6, "BLOCK": 128, "ITEMS": 4, "device.sm_count": 132}) == 528
    assert grid.evaluate({"n": 1000, "BLOCK": 128, "ITEMS": 4, "device.sm_count": 132}) == 2


def test_names_and_unknown_names() -> None:
    e = Expression.parse("cdiv(n, BLOCK * ITEMS) <= device.sm_count * 4 and hint == 'cg'")
    assert e.names == frozenset({"n", "BLOCK", "ITEMS", "device.sm_count", "hint"})
    assert "cdiv" not in e.names
    assert e.unknown_names({"n", "BLOCK", "device.sm_count"}) == ["ITEMS", "hint"]
    assert e.unknown_names(e.names) == []
    assert e.text == "cdiv(n, BLOCK * ITEMS) <= device.sm_count * 4 and hint == 'cg'"


@pytest.mark.parametrize("value", [0, 7, -3, 2.5, True, False])
def test_literal_numbers_are_constant_expressions(value: object) -> None:
    e = Expression.parse(value)  # type: ignore[arg-type]
    assert e.names == frozenset()
    result = e.evaluate({})
    assert result == value
    assert type(result) is type(value)


def test_pickle_round_trip_and_identity() -> None:
    e = Expression.parse("BM % WM == 0")
    again = pickle.loads(pickle.dumps(e))
    assert again == e
    assert hash(again) == hash(e)
    assert again.evaluate({"BM": 128, "WM": 32}) is True
    inf = pickle.loads(pickle.dumps(Expression.parse(float("inf"))))
    assert inf.evaluate({}) == float("inf")
    assert repr(e) == "Expression('BM % WM == 0')"


# --- short-circuit and evaluate-time errors -----------------------------------------------------


def test_and_short_circuits() -> None:
    assert ev("WM > 0 and BM % WM == 0", WM=0, BM=128) is False
    assert ev("WM > 0 and BM % WM == 0", WM=32, BM=128) is True
    assert ev("WM == 0 or BM % WM == 0", WM=0, BM=128) is True
    assert ev("BM // WM if WM else 0", WM=0, BM=128) == 0
    assert ev("0 < WM < BM // WM", WM=0, BM=128) is False
    assert ev("WM > 0 and undefined_name", WM=0) is False


def test_division_by_zero() -> None:
    with pytest.raises(ExpressionError, match=r"division by zero in `BM // WM`"):
        ev("BM // WM", BM=128, WM=0)
    with pytest.raises(ExpressionError, match=r"`BM % WM == 0`: division by zero in `BM % WM`"):
        ev("BM % WM == 0", BM=128, WM=0)
    with pytest.raises(ExpressionError, match="division by zero"):
        ev("1 / x", x=0.0)
    with pytest.raises(ExpressionError, match="division by zero"):
        ev("cdiv(n, x)", n=1, x=0)


def test_missing_name() -> None:
    with pytest.raises(ExpressionError, match=r"`BM % BK == 0`: name 'BK' is not defined"):
        ev("BM % BK == 0", BM=128)
    with pytest.raises(ExpressionError, match=r"name 'device.sm_count' is not defined"):
        ev("device.sm_count * 2")


@pytest.mark.parametrize(
    ("text", "env", "fragment"),
    [
        ("'a' + 1", {}, "concatenate"),
        ("x < 'a'", {"x": 1}, "not supported"),
        ("int(s)", {"s": "abc"}, "invalid literal"),
        ("sqrt(-1)", {}, "domain"),
        ("log2(0)", {}, "non-positive"),
        ("cdiv(7.5, 2)", {}, "integer arguments"),
        ("clamp(1, 3, 2)", {}, "greater than"),
        ("1 << x", {"x": -1}, "negative shift"),
        ("1e300 ** 2", {}, "overflow"),
        ("int(x)", {"x": float("inf")}, "infinity"),
        ("(-8) ** 0.5", {}, "complex"),
        ("'%s' % x", {"x": 1}, "string formatting"),
        ("x * y", {"x": 2**200, "y": 2**100}, "2**256"),
        ("x + x", {"x": 2**256}, "2**256"),
        ("int(1e300)", {}, "2**256"),
        ("x ** 64", {"x": 2**200}, "2**256"),
        ("x << 64", {"x": 2**200}, "2**256"),
        ("s + s", {"s": "a" * 200}, "length 400"),
        ("round(5, x)", {"x": -(10**9)}, "limit"),
        ("min(x)", {"x": 3}, "not iterable"),
    ],
)
def test_evaluate_errors(text: str, env: dict[str, object], fragment: str) -> None:
    with pytest.raises(ExpressionError) as info:
        Expression.parse(text).evaluate(env)
    assert fragment in str(info.value)
    assert f"`{text}`" in str(info.value)


# --- refused at parse time ----------------------------------------------------------------------

HOSTILE = [
    ("x.__class__", "attribute access is only allowed on the namespaces arch, device, shape"),
    ("().__class__.__bases__[0].__subclasses__()", "plain name"),
    ("device.__class__", "starting with '_'"),
    ("device.sm_count.real", "attribute access is only allowed"),
    ("max(1, 2).real", "attribute access is only allowed"),
    ("open('/etc/passwd')", "unknown function 'open'"),
    ("exec('1')", "unknown function 'exec'"),
    ("eval('1')", "unknown function 'eval'"),
    ("compile('1', 'f', 'eval')", "unknown function 'compile'"),
    ("getattr(x, 'y')", "unknown function 'getattr'"),
    ("globals()", "unknown function 'globals'"),
    ("smem_bytes(BM, BK)", "unknown function 'smem_bytes'"),
    ("__import__('os')", "unknown function '__import__'"),
    ("__builtins__", "starting with '_'"),
    ("_x + 1", "starting with '_'"),
    ("lambda: 1", "lambda"),
    ("(lambda: 1)()", "plain name"),
    ("[x for x in y]", "comprehensions"),
    ("{x for x in y}", "comprehensions"),
    ("(x for x in y)", "generator"),
    ("{1: 2}", "dict"),
    ("{1, 2}", "set"),
    ("a[0]", "subscripts"),
    ("a[1:2]", "subscripts"),
    ("f'{a}'", "f-strings"),
    ("(y := 1)", ":="),
    ("min(*xs)", "starred"),
    ("max(a, key=abs)", "keyword"),
    ("min(**kw)", "keyword"),
    ("a is None", "'is'"),
    ("a is not b", "'is'"),
    ("None", "NoneType literals"),
    ("1j", "complex literals"),
    ("b'x'", "bytes literals"),
    ("...", "ellipsis literals"),
    ("(a, 1)", "must be literals"),
    ("[min(1, 2)]", "must be literals"),
    ("device", "namespace"),
    ("cdiv(1)", "cdiv() takes 2 arguments, got 1"),
    ("clamp(1, 2)", "clamp() takes 3 arguments"),
    ("2 ** 100000", "`2 ** 100000`: exponent 100000 is larger than the limit 64"),
    ("x ** -65", "exponent -65 is larger than the limit 64"),
    ("1 << 100", "shift count 100 is larger than the limit 64"),
    ("1 + 10**400", "exponent 400"),
    ("1 + " + "9" * 100, "integer literal larger than the limit 2**256"),
    ("'" + "a" * 300 + "'", "string literal longer than 256"),
    ("1 + " * 600 + "1", "over the limit 2000"),
    ("-" * 60 + "1", "nested deeper than the limit of 50"),
    ("(" * 300 + "1" + ")" * 300, "invalid syntax"),
    ("1 +", "invalid syntax"),
    ("x = 1", "invalid syntax"),
    ("import os", "invalid syntax"),
    ("1\x00", "null"),
    ("", "empty"),
    ("   ", "empty"),
]


@pytest.mark.parametrize(("text", "fragment"), HOSTILE)
def test_hostile_refused_at_parse(text: str, fragment: str) -> None:
    with pytest.raises(ExpressionError) as info:
        Expression.parse(text)
    assert fragment in str(info.value)
    assert type(info.value) is ExpressionError


@pytest.mark.parametrize("value", [None, [1], {"a": 1}, b"1", 2**300])
def test_parse_refuses_non_expressions(value: object) -> None:
    with pytest.raises(ExpressionError):
        Expression.parse(value)  # type: ignore[arg-type]


def test_hostile_import_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    for text in [
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w')",
        f"[__import__('os').system('touch {marker}') for _ in (1,)]",
        f"(lambda: __import__('os').system('touch {marker}'))()",
        f"x if __import__('os').system('touch {marker}') else y",
    ]:
        with pytest.raises(ExpressionError):
            Expression.parse(text).evaluate({"x": 1, "y": 2})
    assert not marker.exists()


@pytest.mark.parametrize(
    ("text", "env"),
    [
        ("2 ** x", {"x": 10**6}),
        ("x ** x ** x", {"x": 9}),
        ("9 ** 9 ** 9", {}),
        ("'a' * 10**9", {}),
        ("10**9 * 'a'", {}),
        ("[0] * n", {"n": 10**12}),
        ("1 << 10**6", {}),
        ("1 << n", {"n": 10**18}),
        ("x * x * x * x", {"x": 2**200}),
        ("round(1, -n)", {"n": 10**9}),
    ],
)
def test_huge_results_fail_fast(text: str, env: dict[str, object]) -> None:
    start = time.perf_counter()
    with pytest.raises(ExpressionError, match="limit"):
        Expression.parse(text).evaluate(env)
    assert time.perf_counter() - start < 0.5


def test_evaluation_is_fast() -> None:
    e = Expression.parse("BM % WM == 0")
    env = {"BM": 128, "WM": 32}
    n = 20_000
    start = time.perf_counter()
    for _ in range(n):
        e.evaluate(env)
    assert (time.perf_counter() - start) / n < 20e-6  # ~1 us in practice; generous for CI


# --- property tests ----------------------------------------------------------------------------

INT_ENV = {"a": 3, "b": -7, "c": 0}
_leaf = st.one_of(st.integers(-9, 9).map(str), st.sampled_from(sorted(INT_ENV)))
_BIN = ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<", "<=", "==", "!=", ">", ">="]
_BIN += ["and", "or"]


def _paren(text: str, wrap: bool) -> str:
    return f"({text})" if wrap else text


def _extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(
            lambda x, op, y, wrap: _paren(f"{x} {op} {y}", wrap),
            children,
            st.sampled_from(_BIN),
            children,
            st.booleans(),
        ),
        st.builds(lambda op, x: f"{op}{x}", st.sampled_from(["-", "+", "~"]), children),
        st.builds(lambda x: f"(not {x})", children),
        # exponents and shift counts are small literals, so no intermediate can hit a limit
        st.builds(lambda x, k: f"({x} ** {k})", children, st.integers(0, 2)),
        st.builds(
            lambda x, op, k: f"({x} {op} {k})",
            children,
            st.sampled_from(["<<", ">>"]),
            st.integers(0, 3),
        ),
        st.builds(lambda x, y, z: f"({x} if {y} else {z})", children, children, children),
        st.builds(lambda x, y, z: f"({x} < {y} <= {z})", children, children, children),
        st.builds(
            lambda x, op, vals: f"({x} {op} ({', '.join(map(str, vals))},))",
            children,
            st.sampled_from(["in", "not in"]),
            st.lists(st.integers(-9, 9), min_size=1, max_size=4),
        ),
    )


int_expressions = st.recursive(_leaf, _extend, max_leaves=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(int_expressions)
def test_matches_python_on_random_expressions(text: str) -> None:
    assume(text.count("**") + text.count("<<") + text.count(">>") <= 3)
    try:
        expected = eval(text, {"__builtins__": {}}, dict(INT_ENV))  # test oracle only
    except (ArithmeticError, TypeError, ValueError):
        with pytest.raises(ExpressionError):
            Expression.parse(text).evaluate(INT_ENV)
        return
    e = Expression.parse(text)
    result = e.evaluate(INT_ENV)
    assert type(result) is type(expected), text
    assert result == expected, text
    assert e.names <= set(INT_ENV)


_TOKENS = [
    "1", "0", "-", "+", "*", "**", "/", "//", "%", "<<", ">>", "&", "|", "^", "~", "(", ")",
    "[", "]", ",", ".", ":", "=", "==", "<", ">", "and", "or", "not", "if", "else", "in", "is",
    "lambda", "for", "x", "y", "_x", "__class__", "__import__", "device", "shape", "open", "min",
    "cdiv", "log2", "int", "'a'", "'%s'", "10", "64", "1e308", "None", "{", "}", "*", "\\", "#",
]  # fmt: skip


class _AnyEnv(defaultdict):
    def __init__(self) -> None:
        super().__init__(lambda: 3)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(st.text(max_size=80), st.lists(st.sampled_from(_TOKENS), max_size=14).map(" ".join))
)
def test_garbage_only_raises_expression_error(text: str) -> None:
    try:
        e = Expression.parse(text)
    except ExpressionError:
        return
    for env in ({}, _AnyEnv(), {n: "cg" for n in e.names}, {n: 0 for n in e.names}):
        with contextlib.suppress(ExpressionError):
            e.evaluate(env)
