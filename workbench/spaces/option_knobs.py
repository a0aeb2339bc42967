"""The compiler knobs a space parameter can drive (``role: option``) and their legal values:
checked when a space file loads; :mod:`workbench.compiler.options` turns them into flags."""

from __future__ import annotations

#: Tunable compiler knobs a space parameter can drive (``role: option``), with what they mean.
OPTION_KNOBS = {
    "fast_math": "--use_fast_math (implies ftz, fast div/sqrt, fmad)",
    "ftz": "--ftz: flush fp32 denormals to zero",
    "prec_div": "--prec-div: IEEE-rounded fp32 division (false: approximate)",
    "prec_sqrt": "--prec-sqrt: IEEE-rounded fp32 sqrt (false: approximate)",
    "fmad": "--fmad: contract multiply-add into FMA",
    "maxrregcount": "--maxrregcount=N: cap registers per thread (0: no cap)",
    "dlcm": "-Xptxas -dlcm=ca|cg: default L1 caching of global loads",
    "dscm": "-Xptxas -dscm=cs|cg|cv|wb|wt: default caching of global stores",
    "opt_level": "-Xptxas -O0..3: ptxas optimisation level",
}


BOOL_KNOBS = ("fast_math", "ftz", "prec_div", "prec_sqrt", "fmad")
_CHOICES = {"dlcm": ("ca", "cg"), "dscm": ("cs", "cg", "cv", "wb", "wt")}
_INT_RANGES = {"maxrregcount": (0, 255), "opt_level": (0, 3)}


def knob_value_problem(knob: str, value: object) -> str | None:
    """Why ``value`` cannot drive option ``knob`` (None: it can; None as a value leaves the
    compiler's default). A space file's values are checked with it when it is loaded, so a
    quoted "false" never turns fast math on."""
    if value is None:
        return None
    if knob in BOOL_KNOBS:
        return None if isinstance(value, bool) else f"{value!r} is not true or false (unquoted)"
    if knob in _CHOICES:
        allowed = _CHOICES[knob]
        return None if value in allowed else f"{value!r} is not one of {', '.join(allowed)}"
    if knob in _INT_RANGES:
        lo, hi = _INT_RANGES[knob]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            return f"{value!r} is not an integer from {lo} to {hi}"
    return None
