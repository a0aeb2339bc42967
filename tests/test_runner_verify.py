"""Output verification: exact and tolerant comparison, NaN/inf, untouched poison, narrow
formats, chunking, and tolerance expressions."""

from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from workbench.errors import ConfigError
from workbench.expressions import Expression
from workbench.runners.buffers import Fill, OutputBuffer, OutputRole, poison_pattern
from workbench.runners.verify import (
    Tolerance,
    compare_output,
    tolerance_for,
    verify_outputs,
)
from workbench.spaces.model import Reference
from workbench.spaces.schema import DType

EXACT = Tolerance(True)
LOOSE = Tolerance(False, rtol=1e-3, atol=1e-6)


def poisoned(dtype: DType, n: int) -> OutputBuffer:
    return OutputBuffer("y", dtype, (n,), OutputRole.POISONED, Fill(poison_pattern(dtype)))


def test_equal_outputs_pass() -> None:
    x = np.linspace(-1, 1, 100, dtype=np.float32)
    check = compare_output("y", x, x.astype(np.float64), EXACT)
    assert check.ok and check.wrong == 0 and check.first is None
    assert check.max_abs_error == 0 and check.describe().startswith("output y: ok")


def test_tolerance_is_atol_plus_rtol_times_expected() -> None:
    exp = np.array([1.0, 100.0, 0.0])
    within = np.array([1.0 + 1e-3, 100.0 + 0.1, 1e-6])  # each within its bound
    assert compare_output("y", within, exp, LOOSE).ok
    beyond = within + np.array([0, 0.001, 0])
    check = compare_output("y", beyond, exp, LOOSE)
    assert not check.ok and check.wrong == 1 and check.first is not None
    assert check.first.index == (1,)
    assert "differs at index 1: got 100.101, expected 100" in check.describe()
    assert check.max_abs_error == pytest.approx(0.101)
    assert check.max_rel_error == pytest.approx(1.01e-3)


def test_untouched_poison_is_named() -> None:
    buf = poisoned(DType.FLOAT32, 32)
    got = np.arange(32, dtype=np.float32)
    got[17:] = buf.initial()[17:]  # a kernel that stopped at 17
    exp = np.arange(32, dtype=np.float64)
    verdict = verify_outputs({"y": got}, {"y": exp}, (buf,), LOOSE)
    assert not verdict.ok
    assert "output y untouched at index 17 (still the poison 0xFFFFFFFF)" in verdict.reason
    assert "15 of 32 elements wrong, 15 untouched, 15 NaN/inf" in verdict.reason


def test_a_computed_nan_is_not_poison() -> None:
    buf = poisoned(DType.FLOAT32, 4)
    got = np.array([0.0, np.nan, 2.0, 3.0], dtype=np.float32)  # canonical NaN from arithmetic
    check = verify_outputs({"y": got}, {"y": np.arange(4.0)}, (buf,), LOOSE).checks[0]
    assert check.wrong == 1 and check.untouched == 0 and check.nonfinite == 1
    assert "differs at index 1: got nan, expected 1" in check.describe()


def test_nan_and_inf_match_only_themselves_where_the_output_allows_them() -> None:
    exp = np.array([np.nan, np.inf, -np.inf, 1.0])
    loose, exact = (replace(t, nonfinite=True) for t in (LOOSE, EXACT))
    assert compare_output("y", exp.copy(), exp, loose).ok
    assert compare_output("y", exp.copy(), exp, exact).ok
    for i, bad in enumerate([0.0, -np.inf, np.inf, np.inf]):
        got = exp.copy()
        got[i] = bad
        check = compare_output("y", got, exp, loose)
        assert check.wrong == 1 and check.first is not None and check.first.index == (i,)
    # not declared `nonfinite: allowed`: a NaN or inf is wrong wherever it is
    check = compare_output("y", exp.copy(), exp, LOOSE)
    assert (check.wrong, check.nonfinite) == (3, 3)
    assert (
        "differs at index 0: got nan, expected nan (NaN and inf match nothing: the output is "
        "not `nonfinite: allowed`)" in check.describe()
    )


FLOATS = [DType.FLOAT32, DType.FLOAT64, DType.FLOAT16, DType.BFLOAT16, DType.FLOAT8_E4M3]


@pytest.mark.parametrize("dtype", FLOATS, ids=[d.value for d in FLOATS])
@pytest.mark.parametrize("allowed", [False, True], ids=["finite", "nonfinite-allowed"])
def test_poison_is_untouched_even_where_the_reference_is_nan(dtype: DType, allowed: bool) -> None:
    """A kernel that writes nothing cannot pass where the reference is NaN: the poison is a
    NaN too, but its bits say nobody wrote it."""
    buf = poisoned(dtype, 16)
    if allowed:
        buf = replace(buf, nonfinite_allowed=True)
    exp = np.full(16, np.nan)
    verdict = verify_outputs({"y": buf.initial()}, {"y": exp}, (buf,), LOOSE)
    check = verdict.checks[0]
    assert not verdict.ok and (check.wrong, check.untouched) == (16, 16)
    assert "output y untouched at index 0 (still the poison 0x" in verdict.reason


def test_a_nan_the_kernel_wrote_matches_a_nan_reference_only_where_allowed() -> None:
    buf = poisoned(DType.FLOAT32, 4)
    got = buf.initial()
    got[:3] = [np.nan, 1.0, np.inf]  # written: a computed NaN (0x7FC00000), a value, an inf
    exp = np.array([np.nan, 1.0, np.inf, np.nan])
    allowed = replace(buf, nonfinite_allowed=True)
    check = verify_outputs({"y": got}, {"y": exp}, (allowed,), LOOSE).checks[0]
    assert (check.wrong, check.untouched) == (1, 1)  # only the element left as the poison
    assert check.first is not None and check.first.index == (3,) and check.first.untouched
    check = verify_outputs({"y": got}, {"y": exp}, (buf,), LOOSE).checks[0]
    assert (check.wrong, check.untouched, check.nonfinite) == (3, 1, 3)


def test_an_integer_poison_is_a_value_a_kernel_may_write() -> None:
    """0xA5 is a real int8 (-91): where the reference says -91, the element is right."""
    buf = poisoned(DType.INT8, 8)
    exp = np.full(8, -91, dtype=np.int64)
    exp[5] = 3
    check = verify_outputs({"y": buf.initial()}, {"y": exp}, (buf,), EXACT).checks[0]
    assert (check.wrong, check.untouched) == (1, 1)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64])
def test_integers_compare_exactly_even_with_a_tolerance(dtype: type) -> None:
    buf = OutputBuffer(
        "y", DType(np.dtype(dtype).name), (8,), OutputRole.POISONED, Fill(b"\xa5" * 8)
    )
    got = np.arange(8, dtype=dtype)
    exp = got.astype(np.int64)
    generous = Tolerance(False, rtol=0.5, atol=10)
    assert verify_outputs({"y": got}, {"y": exp}, (buf,), generous).ok
    got[3] += 1
    verdict = verify_outputs({"y": got}, {"y": exp}, (buf,), generous)
    assert not verdict.ok and "differs at index 3: got 4, expected 3 (exact)" in verdict.reason


def test_large_int64_values_are_not_rounded_through_float() -> None:
    exp = np.array([2**62, 2**62 + 1], dtype=np.int64)
    got = np.array([2**62, 2**62], dtype=np.int64)
    check = compare_output("y", got, exp, EXACT)
    assert check.wrong == 1 and check.first is not None and check.first.index == (1,)


@pytest.mark.parametrize(
    "dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float16]
)
def test_narrow_formats_compare_after_widening(dtype: type) -> None:
    exp64 = np.array([0.5, -1.25, 2.0, 3.5])
    got = exp64.astype(dtype)
    assert compare_output("y", got, exp64, EXACT).ok
    got[2] = np.array(4.0).astype(dtype)
    check = compare_output("y", got, exp64, EXACT)
    assert check.first is not None and (check.first.got, check.first.expected) == (4.0, 2.0)


def test_multidimensional_index() -> None:
    exp = np.zeros((3, 4))
    got = exp.copy()
    got[2, 1] = 1
    check = compare_output("C", got, exp, EXACT)
    assert check.first is not None and check.first.index == (2, 1)
    assert "output C differs at index (2, 1)" in check.describe()


def test_chunked_comparison_counts_everything() -> None:
    exp = np.arange(10_000, dtype=np.float64)
    got = exp.astype(np.float32)
    got[[5, 4_999, 9_998]] = -1
    check = compare_output("y", got, exp, EXACT, chunk=1000)
    assert check.wrong == 3 and check.first is not None and check.first.index == (5,)
    assert check.max_abs_error == 9_999


def test_scratch_outputs_are_not_compared_and_shapes_must_agree() -> None:
    scratch = OutputBuffer("ws", DType.FLOAT32, (4,), OutputRole.SCRATCH, Fill(bytes(4)))
    verdict = verify_outputs({"ws": np.full(4, 9.0)}, {}, (scratch,), EXACT)
    assert verdict.ok and verdict.checks == ()
    with pytest.raises(ValueError, match="shape"):
        compare_output("y", np.zeros(3), np.zeros(4), EXACT)


def test_tolerances_are_expressions_of_the_shape() -> None:
    ref = Reference(
        "workbench.references.reduce:sum_all",
        exact=False,
        rtol=Expression.parse("1e-5"),
        atol=Expression.parse("1e-6 * n"),
    )
    tol = tolerance_for(ref, {"n": 1_000_000})
    assert tol == Tolerance(False, 1e-5, 1.0)
    bad = Reference("m:f", False, Expression.parse("0 - n"), Expression.parse("0"))
    with pytest.raises(ConfigError, match="rtol"):
        tolerance_for(bad, {"n": 3})
    missing = Reference("m:f", False, Expression.parse("K * 1e-3"), Expression.parse("0"))
    with pytest.raises(ConfigError):
        tolerance_for(missing, {"n": 3})
