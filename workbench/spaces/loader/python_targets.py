"""The Python functions a space file names: its reference (and how outputs compare with it),
its accuracy figure and its own baselines, each a module's function or a file's inside the
project."""

from __future__ import annotations

from workbench.spaces import schema
from workbench.spaces.loader.checks import FileChecks
from workbench.spaces.loader.parameters import in_domain
from workbench.spaces.model import (
    AccuracyFigure,
    Parameter,
    Reference,
    UserBaseline,
    VariantBaseline,
)

#: dtypes compared exactly whatever the tolerance (a name, not an expression of the config)
_INTEGER_DTYPES = frozenset(d.value for d in schema.DType if d.value.startswith(("int", "uint")))


def read_reference(file: FileChecks, known: set[str]) -> Reference | None:
    """``reference``: the function, and how outputs compare with it (exact, or rtol/atol
    expressions of ``known`` names); None without one."""
    r = file.m.reference
    if r is None:
        return None
    key = ("reference",)
    if isinstance(r, str):  # the short form: just where the function is
        r = schema.ReferenceModel(python=r)
        if not _integer_outputs(file):
            raise file.err(
                key,
                "outputs that are not integers compare within a tolerance: write "
                f"reference: {{python: {file.m.reference}, rtol: ..., atol: ...}} "
                "(or exact: true)",
            )
    if (r.python is None) == (r.file is None):
        raise file.err(key, "give exactly one of reference.python or reference.file")
    if r.file is not None:
        if not r.function:
            raise file.err(key, "reference.file needs reference.function")
        target = file.reference_file((*key, "file"), r.file, r.function)
    else:
        if r.function is not None:
            raise file.err((*key, "function"), "reference.python already names the function")
        assert r.python is not None
        key_py = (*key, "python") if isinstance(file.m.reference, schema.ReferenceModel) else key
        target = file.python_target(key_py, r.python, "reference file")
    exact = r.exact or (r.rtol in (0, "0") and r.atol in (0, "0") and _integer_outputs(file))
    if not exact and r.rtol in (0, "0") and r.atol in (0, "0"):
        raise file.err(key, "say how outputs compare: exact: true, or rtol/atol > 0")
    rtol = file.expr((*key, "rtol"), r.rtol, known)
    atol = file.expr((*key, "atol"), r.atol, known)
    return Reference(target, exact, rtol, atol)


def read_accuracy(file: FileChecks, params: tuple[Parameter, ...]) -> AccuracyFigure | None:
    """``accuracy``: the figure's function, and the parameter values and shape it draws at."""
    a = file.m.accuracy
    if a is None:
        return None
    key = ("accuracy",)
    target = file.python_target((*key, "python"), a.python, "accuracy file")
    domains = {p.name: p.values for p in params}
    for name, value in a.draw.items():
        if name not in domains:
            known = ", ".join(domains)
            raise file.err((*key, "draw", name), f"no parameter {name!r} (known: {known})")
        if not in_domain(value, domains[name]):
            shown = ", ".join(map(str, domains[name]))
            raise file.err(
                (*key, "draw", name), f"{value!r} is not one of {name}'s values ({shown})"
            )
    for name, value in a.shape.items():
        if name not in file.m.shapes.default:
            known = ", ".join(file.m.shapes.default)
            raise file.err((*key, "shape", name), f"no shape dimension {name!r} ({known})")
        if value < 1:
            raise file.err((*key, "shape", name), f"{value} is not a positive size")
    return AccuracyFigure(target, a.title, dict(a.draw), dict(a.shape))


def read_baselines(
    file: FileChecks,
) -> tuple[schema.BaselineKind | UserBaseline | VariantBaseline, ...]:
    """``baselines``: library kinds, a variant of this space, or a Python function of the
    user's (function names distinct)."""
    out: list[schema.BaselineKind | UserBaseline | VariantBaseline] = []
    for i, b in enumerate(file.m.baselines):
        if isinstance(b, schema.BaselineKind):
            out.append(b)
            continue
        if isinstance(b, schema.VariantBaselineModel):
            if b.variant not in file.m.variants:
                known = ", ".join(file.m.variants) or "none"
                raise file.err(
                    ("baselines", i, "variant"),
                    f"no variant {b.variant!r} in this file's variants ({known})",
                )
            inputs = (
                None
                if b.inputs is None
                else file.python_target(("baselines", i, "inputs"), b.inputs, "inputs file")
            )
            out.append(VariantBaseline(f"variant:{b.variant}", b.variant, inputs))
            continue
        target = file.python_target(("baselines", i, "python"), b.python, "baseline file")
        out.append(UserBaseline(f"python:{b.python.rpartition(':')[2]}", target))
    names = [b.name for b in out if isinstance(b, UserBaseline)]
    if len(set(names)) != len(names):
        raise file.err(("baselines",), "two of your baselines have the same function name")
    return tuple(out)


def _integer_outputs(file: FileChecks) -> bool:
    """Every compared output has a fixed integer dtype (compared exactly anyway)."""
    compared = [o for o in file.m.outputs.values() if not o.scratch]
    return bool(compared) and all(
        str(getattr(o.dtype, "value", o.dtype)) in _INTEGER_DTYPES for o in compared
    )
