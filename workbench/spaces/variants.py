"""Named problem variants: one space file, several kernel names.

A space file's ``variants:`` name values of its ``tunable: false`` parameters (``reduce_f16:
{set: {DTYPE: float16}}``). The name is then a kernel of its own to every command (a view of the
file with those parameters at those values, :func:`variant_spec`), and the label of a study of
those values (:func:`problem_label`): ``reduce --set DTYPE=float16`` and ``reduce_f16`` are one
problem, stored and replayed as ``reduce_f16[OP=sum]``, as before the two files were one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from workbench.errors import ExpressionError
from workbench.expressions import Expression
from workbench.spaces.model import Config, SpaceSpec, Value, Variant


def variant_named(spec: SpaceSpec, name: str) -> Variant | None:
    return next((v for v in spec.variants if v.name == name), None)


def variant_spec(spec: SpaceSpec, name: str) -> SpaceSpec:
    """The space of variant ``name`` of ``spec``: its parameters at the variant's values (one
    value each), the other problem variants without the values the file's constraints rule out
    with those (gemm_w8a8's OUT: no int32), its defaults over the file's, under its name.

    Raises:
        KeyError: ``spec`` has no variant ``name``.
    """
    variant = variant_named(spec, name)
    if variant is None:
        raise KeyError(name)
    params = []
    for p in spec.parameters:
        if p.name in variant.values:
            value = variant.values[p.name]
            p = replace(p, values=(value,), default=value)
        elif not p.tunable:
            p = replace(p, values=_possible(spec, variant, p.name, p.values))
        if p.name in variant.defaults:
            p = replace(p, default=variant.defaults[p.name])
        params.append(p)
    arch_defaults: dict[str, dict[str, Value]] = {}
    for arch in (*spec.arch_defaults, *variant.arch_defaults):
        merged = {**spec.arch_defaults.get(arch, {}), **variant.arch_defaults.get(arch, {})}
        arch_defaults[arch] = {k: v for k, v in merged.items() if k not in variant.values}
    about = f"{variant.description.strip()}\n" if variant.description.strip() else ""
    return replace(
        spec,
        name=variant.name,
        description=about + spec.description,
        parameters=tuple(params),
        arch_defaults=arch_defaults,
    )


def _possible(
    spec: SpaceSpec, variant: Variant, name: str, values: tuple[Value, ...]
) -> tuple[Value, ...]:
    """The values of problem variant ``name`` that the constraints reading only it and the
    variant's parameters allow with the variant's values (all of them, when none would)."""
    rules = [
        c.expr
        for c in spec.constraints
        if name in c.expr.names and set(c.expr.names) <= {name, *variant.values}
    ]
    kept = tuple(v for v in values if all(_holds(e, {**variant.values, name: v}) for e in rules))
    return kept or values


def _holds(expr: Expression, env: Mapping[str, Value]) -> bool:
    try:
        return bool(expr.evaluate(env))
    except ExpressionError:
        return True  # (decided with the other names, config by config)


def variant_command(spec: SpaceSpec, variant: Variant) -> str:
    """``reduce --set DTYPE=float16``: what a variant's name stands for, as a command's words."""
    sets = " ".join(f"--set {k}={_text(v)}" for k, v in variant.values.items())
    return f"{spec.name} {sets}"


def problem_label(spec: SpaceSpec, pinned: Mapping[str, Value]) -> str:
    """A study's kernel label: the name of the variant the pinned values make (else the
    space's name), then the pinned values the name does not say (``reduce_f16[OP=sum]``)."""
    variant = spec.variant_of(pinned)
    name = spec.name if variant is None else variant.name
    said = {} if variant is None else variant.values
    shown = ",".join(f"{k}={v}" for k, v in pinned.items() if k not in said)
    return name + (f"[{shown}]" if shown else "")


def label_values(spec: SpaceSpec, label: str) -> Config:
    """The parameter values a kernel label (``quantize_fp8[GRANULARITY=token,G=128]``) names:
    its variant's values, and the bracketed ones (typed by their domains; a name or value the
    space does not know is left out)."""
    name, _, rest = label.partition("[")
    variant = variant_named(spec, name)
    values: Config = dict(variant.values) if variant is not None else {}
    domains = {p.name: p.values for p in spec.parameters}
    for item in filter(None, rest.rstrip("]").split(",")):
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        for v in domains.get(key, ()) if sep else ():
            if _text(v) == text or str(v) == text:
                values[key] = v
                break
    return values


def _text(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
