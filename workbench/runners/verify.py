"""Compare a kernel's outputs with the reference's, and say exactly where they differ.

Integer outputs (and any output when the space says ``exact: true``) must be equal; others
must satisfy ``|out - exp| <= atol + rtol * |exp|``. NaN and inf match nothing unless the output
is declared ``nonfinite: allowed``; then NaN matches NaN and inf the same inf. Narrow formats
(fp16, bf16, fp8) are widened to float64 first, which is exact. An element still holding the
poison written before the launch is reported as untouched, so a kernel that skips a tail says
so instead of "wrong value"; a float poison is a NaN no kernel computes, so such an element is
wrong even where the reference is NaN. Large outputs are compared in chunks to keep the float64
temporaries small.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from workbench.errors import ConfigError, ExpressionError
from workbench.runners.buffers import OutputBuffer, OutputRole
from workbench.spaces.model import Reference

#: Elements compared per step: 4 Mi float64 temporaries are 32 MiB each.
CHUNK = 1 << 22
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass(frozen=True)
class Tolerance:
    """How outputs compare: exactly, or within ``atol + rtol * |expected|``; ``nonfinite``: NaN
    matches NaN and inf the same inf (else a non-finite value on either side is wrong)."""

    exact: bool
    rtol: float = 0.0
    atol: float = 0.0
    nonfinite: bool = False


def tolerance_for(reference: Reference, env: Mapping[str, object]) -> Tolerance:
    """Evaluate the reference's tolerance expressions for one config and shape.

    Raises:
        ConfigError: an expression fails or gives a negative or non-numeric value.
    """
    values = []
    for what, expr in (("rtol", reference.rtol), ("atol", reference.atol)):
        try:
            value = expr.evaluate(env)
        except ExpressionError as exc:
            raise ConfigError(f"reference.{what}: {exc}") from exc
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ConfigError(f"reference.{what} `{expr.text}` gave {value!r}; expected >= 0")
        values.append(float(value))
    return Tolerance(reference.exact, values[0], values[1])


def output_tolerance(buf: OutputBuffer, tolerance: Tolerance) -> Tolerance:
    """How ``buf`` compares: integers always exactly; floats by ``tolerance``, matching NaN and
    inf only where the space declares the output ``nonfinite: allowed``."""
    if buf.np_dtype.kind in "iu":
        return Tolerance(True)
    return replace(tolerance, nonfinite=buf.nonfinite_allowed)


@dataclass(frozen=True)
class Mismatch:
    """The first wrong element of an output."""

    index: tuple[int, ...]
    got: float
    expected: float
    untouched: bool

    def where(self) -> str:
        return str(self.index[0]) if len(self.index) == 1 else str(self.index)


@dataclass(frozen=True)
class OutputCheck:
    """The comparison of one output."""

    name: str
    size: int
    wrong: int
    untouched: int
    nonfinite: int  #: wrong elements where the output or the reference is NaN or inf
    first: Mismatch | None
    max_abs_error: float
    max_rel_error: float
    tolerance: Tolerance
    poison: bytes | None = None

    @property
    def ok(self) -> bool:
        return self.wrong == 0

    def describe(self) -> str:
        """One line: where it first differs, how much is wrong, and the largest errors."""
        errors = f"max abs error {self.max_abs_error:.3g}, max rel error {self.max_rel_error:.3g}"
        if self.first is None:
            return f"output {self.name}: ok ({errors})"
        f = self.first
        if f.untouched:
            head = f"output {self.name} untouched at index {f.where()}"
            if self.poison is not None:
                head += f" (still the poison 0x{self.poison[::-1].hex().upper()})"
        else:
            rule = (
                "exact"
                if self.tolerance.exact
                else f"tolerance {self.tolerance.atol:.3g} + {self.tolerance.rtol:.3g}*|expected|"
            )
            if not self.tolerance.nonfinite and not all(map(math.isfinite, (f.got, f.expected))):
                rule = "NaN and inf match nothing: the output is not `nonfinite: allowed`"
            head = (
                f"output {self.name} differs at index {f.where()}: got {_num(f.got)}, "
                f"expected {_num(f.expected)} ({rule})"
            )
        detail = [f"{self.wrong} of {self.size} elements wrong"]
        if self.untouched:
            detail.append(f"{self.untouched} untouched")
        if self.nonfinite:
            detail.append(f"{self.nonfinite} NaN/inf")
        return f"{head}; {', '.join(detail)}; {errors}"


@dataclass(frozen=True)
class Verification:
    """Every compared output of one launch."""

    checks: tuple[OutputCheck, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def reason(self) -> str:
        """Why the launch is wrong ("" when it is right)."""
        return "; ".join(c.describe() for c in self.checks if not c.ok)

    @property
    def max_abs_error(self) -> float:
        return max((c.max_abs_error for c in self.checks), default=0.0)

    @property
    def max_rel_error(self) -> float:
        return max((c.max_rel_error for c in self.checks), default=0.0)


def verify_outputs(
    got: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    buffers: tuple[OutputBuffer, ...],
    tolerance: Tolerance,
) -> Verification:
    """Compare every compared output, each by :func:`output_tolerance`.

    Raises:
        ValueError: an output or expected array is missing or has another shape.
    """
    checks = []
    for buf in buffers:
        if not buf.compared:
            continue
        poison = buf.fill.pattern if buf.role is OutputRole.POISONED else None
        tol = output_tolerance(buf, tolerance)
        checks.append(compare_output(buf.name, got[buf.name], expected[buf.name], tol, poison))
    return Verification(tuple(checks))


def compare_output(
    name: str,
    got: np.ndarray,
    expected: np.ndarray,
    tolerance: Tolerance,
    poison: bytes | None = None,
    chunk: int = CHUNK,
) -> OutputCheck:
    """Compare one output array with its expected value.

    Args:
        name: the output's name (for messages).
        got: what the kernel wrote.
        expected: what the reference computed (any numeric dtype; widened to float64).
        tolerance: exact, or ``atol``/``rtol``; whether NaN and inf may match.
        poison: one element of the pre-launch fill: elements still equal to it bitwise are
            reported as untouched (a NaN poison: whatever the reference holds there).
        chunk: elements compared per step.

    Raises:
        ValueError: the shapes differ.
    """
    if got.shape != expected.shape:
        raise ValueError(f"output {name}: shape {got.shape}, expected {expected.shape}")
    flat_got, flat_exp = got.reshape(-1), expected.reshape(-1)
    size = flat_got.size
    integer = got.dtype.kind in "iu" and expected.dtype.kind in "iub"
    poison_word = _poison_word(poison, got.dtype.itemsize)
    unwritten = poison_is_nan(poison, got.dtype)
    wrong = untouched = nonfinite = 0
    max_abs = max_rel = 0.0
    first: Mismatch | None = None
    for start in range(0, size, chunk):
        g_raw, e_raw = flat_got[start : start + chunk], flat_exp[start : start + chunk]
        g, e, bad, diff, finite = _compare_chunk(g_raw, e_raw, integer, tolerance)
        is_poison = _poison_mask(g_raw, poison_word)
        if unwritten:  # NaN == NaN must not let an element nobody wrote pass
            bad |= is_poison
        chunk_abs, chunk_rel = _largest_errors(diff, finite, e)
        max_abs, max_rel = max(max_abs, chunk_abs), max(max_rel, chunk_rel)
        n_bad = int(np.count_nonzero(bad))
        if not n_bad:
            continue
        wrong += n_bad
        untouched += int(np.count_nonzero(bad & is_poison))
        nonfinite += int(np.count_nonzero(bad & ~finite))
        if first is None:
            i = int(np.argmax(bad))
            index = tuple(int(x) for x in np.unravel_index(start + i, got.shape))
            first = Mismatch(index, _scalar(g[i]), _scalar(e[i]), bool(is_poison[i]))
    return OutputCheck(
        name, size, wrong, untouched, nonfinite, first, max_abs, max_rel, tolerance, poison
    )


def _compare_chunk(
    g_raw: np.ndarray, e_raw: np.ndarray, integer: bool, tolerance: Tolerance
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One chunk widened (to int64 for integers, else float64), and (wrong, |g - e|, both
    finite) for it: integers must be equal, floats are compared by ``tolerance``."""
    if not integer:
        g, e = g_raw.astype(np.float64), e_raw.astype(np.float64)
        return g, e, *_float_mismatch(g, e, tolerance)
    g, e = g_raw.astype(np.int64), e_raw.astype(np.int64)
    diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
    return g, e, g != e, diff, np.ones(g.shape, dtype=bool)


def _largest_errors(diff: np.ndarray, finite: np.ndarray, e: np.ndarray) -> tuple[float, float]:
    """The largest absolute error among finite elements, and the largest relative one where
    the expected value is not 0 (0.0 where there is none)."""
    if not finite.any():
        return 0.0, 0.0
    rel_ok = finite & (e != 0)
    max_rel = float((diff[rel_ok] / np.abs(e[rel_ok])).max()) if rel_ok.any() else 0.0
    return float(diff[finite].max()), max_rel


def _float_mismatch(
    g: np.ndarray, e: np.ndarray, tol: Tolerance
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(wrong, |g - e|, both finite) for float64 arrays."""
    finite = np.isfinite(g) & np.isfinite(e)
    # declared `nonfinite: allowed`: inf == inf, NaN matches NaN; else only finite values match
    both_nan = np.isnan(g) & np.isnan(e)
    same = (g == e) | both_nan if tol.nonfinite else finite & (g == e)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - e)
        close = finite & (diff <= tol.atol + tol.rtol * np.abs(e))
        bad = ~same if tol.exact else ~(same | close)
    return bad, diff, finite


def poison_is_nan(poison: bytes | None, dtype: np.dtype) -> bool:
    """Whether ``poison`` is a NaN in ``dtype`` (every float output's is: buffers.py): then an
    element holding its bits was never written, whatever the reference says. An integer poison
    is a value a kernel may rightly write, untouched only where it is also wrong."""
    if poison is None or len(poison) != dtype.itemsize or dtype.kind in "biu":
        return False
    return bool(np.isnan(np.frombuffer(poison, dtype=dtype).astype(np.float64)[0]))


def _poison_mask(raw: np.ndarray, word: int | None) -> np.ndarray:
    """Which elements of ``raw`` hold the poison's bits (compared as unsigned integers)."""
    if word is None:
        return np.zeros(raw.shape, dtype=bool)
    return raw.view(_UINT[raw.dtype.itemsize]) == word


def _poison_word(poison: bytes | None, itemsize: int) -> int | None:
    if poison is None or len(poison) != itemsize or itemsize not in _UINT:
        return None
    return int.from_bytes(poison, "little")


def _scalar(x: np.generic) -> float:
    value = x.item()
    return value if isinstance(value, int) else float(value)


def _num(x: float) -> str:
    if isinstance(x, int):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.9g}"
