"""Named problem variants: one space file, several kernel names.

A space file's ``variants:`` name values of its ``tunable: false`` parameters (``reduce_f16:
{set: {DTYPE: float16}}``). The name is then a kernel of its own to every command (a view of the
file with those parameters at those values, :func:`variant_spec`), and the label of a study of
those values (:func:`problem_label`): ``reduce --set DTYPE=float16`` and ``reduce_f16`` are one
problem, stored and replayed as ``reduce_f16[OP=sum]``, as before the two files were one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from workbench.devices import device_for
from workbench.errors import ArchError, ExpressionError
from workbench.expressions import Expression
from workbench.spaces import schema
from workbench.spaces.model import Config, Parameter, SpaceSpec, SpaceVariant, Value
from workbench.spaces.space import Space
from workbench.spaces.yamlmarks import MarkedDocument
from workbench.toolchain import Arch


def variant_named(spec: SpaceSpec, name: str) -> SpaceVariant | None:
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
    spec: SpaceSpec, variant: SpaceVariant, name: str, values: tuple[Value, ...]
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


def variant_command(spec: SpaceSpec, variant: SpaceVariant) -> str:
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


# ---- reading ``variants:`` (the loader's) ------------------------------------------------------


def read_variants(
    doc: MarkedDocument,
    variants: Mapping[str, schema.VariantModel],
    arches: Sequence[Arch],
    params: Sequence[Parameter],
) -> tuple[SpaceVariant, ...]:
    """``variants:`` checked: each sets problem variants to values of their domains, no two can
    hold for one config, and their defaults lie in the domains.

    Raises:
        SpaceFileError: located at the key that is wrong.
    """
    declared = {a.sm for a in arches}
    by_name = {p.name: p for p in params}
    out: list[SpaceVariant] = []
    for name, v in variants.items():
        key = ("variants", name)
        for param, value in v.set.items():
            _check_value(doc, (*key, "set", param), by_name, param, value)
            if by_name[param].tunable:
                raise doc.error(
                    (*key, "set", param),
                    f"{param} is tunable: a variant sets problem variants, the parameters marked "
                    "`tunable: false`",
                )
        plain: dict[str, Value] = {}
        per_arch: dict[str, dict[str, Value]] = {}
        for item, given in v.defaults.items():
            where = (*key, "defaults", item)
            if item in by_name:
                if isinstance(given, dict):
                    raise doc.error(where, f"a default of {item} is one value, not a mapping")
                if item in v.set:
                    raise doc.error(where, f"{item} is set by the variant; its default is that")
                _check_value(doc, where, by_name, item, given)
                plain[item] = given
                continue
            arch = _variant_arch(doc, where, item, declared, by_name)
            if not isinstance(given, dict):
                raise doc.error(where, f"{item} is an arch: give a mapping of its defaults")
            for param, x in given.items():
                _check_value(doc, (*where, param), by_name, param, x)
            per_arch[arch] = dict(given)
        variant = SpaceVariant(name, dict(v.set), plain, per_arch, v.description)
        for other in out:
            shared = set(other.values) & set(variant.values)
            if all(_same(other.values[k], variant.values[k]) for k in shared):
                raise doc.error(
                    key,
                    f"variants {other.name} and {name} can both hold for one config: set a "
                    "parameter they share to different values",
                )
        out.append(variant)
    return tuple(out)


def check_variant_defaults(doc: MarkedDocument, spec: SpaceSpec) -> None:
    """A variant's default config is valid at the default shape on the arch commands take by
    default (the last) and on each arch it gives defaults for (on the arch's device preset; an
    arch without one is not checked).

    Raises:
        SpaceFileError: located at the variant.
    """
    for variant in spec.variants:
        for arch in dict.fromkeys((spec.arches[-1], *variant.arch_defaults)):
            target = Arch.parse(arch)
            try:
                device = device_for(target)
            except ArchError:
                continue
            config = spec.default_config(arch, variant.values)
            if problems := Space(spec, arch=target, device=device).explain(config):
                raise doc.error(
                    ("variants", variant.name),
                    f"the default of {variant.name} is invalid on {arch} ({device.name}) at the "
                    f"default shape: {problems[0].message}",
                )


def _variant_arch(
    doc: MarkedDocument,
    key: tuple[str, ...],
    text: str,
    declared: set[str],
    by_name: Mapping[str, Parameter],
) -> str:
    try:
        arch = Arch.parse(text).sm
    except ArchError:
        names = ", ".join(by_name)
        raise doc.error(key, f"{text!r} is neither a parameter ({names}) nor an arch") from None
    if arch not in declared:
        raise doc.error(key, f"{arch} is not among the space's arches ({', '.join(declared)})")
    return arch


def _check_value(
    doc: MarkedDocument,
    key: tuple[str, ...],
    by_name: Mapping[str, Parameter],
    name: str,
    value: object,
) -> None:
    if name not in by_name:
        raise doc.error(key, f"unknown parameter {name!r}; parameters: {', '.join(by_name)}")
    domain = by_name[name].values
    if not any(_same(value, x) for x in domain):
        raise doc.error(key, f"{value!r} is not one of {name}'s values {list(domain)}")


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


__all__ = [
    "check_variant_defaults",
    "label_values",
    "problem_label",
    "read_variants",
    "variant_command",
    "variant_named",
    "variant_spec",
]
