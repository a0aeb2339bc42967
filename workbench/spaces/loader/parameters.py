"""A space file's parameters: each one's domain (values or a range), default, role and option,
and the per-arch defaults (``defaults:``), which must lie in those domains and be valid."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.devices import device_for
from workbench.errors import ArchError
from workbench.spaces import schema
from workbench.spaces.loader.checks import FileChecks
from workbench.spaces.model import PLACEHOLDER, Parameter, SpaceSpec, Value
from workbench.spaces.option_knobs import OPTION_KNOBS, knob_value_problem
from workbench.spaces.space import Space
from workbench.toolchain import Arch

#: A cartesian domain this large is almost surely a typo in a range.
MAX_DOMAIN_VALUES = 10_000


def in_domain(value: Value, values: Sequence[Value]) -> bool:
    """Whether ``value`` is one of ``values``, of the same type (``1`` is not ``True``)."""
    return any(type(value) is type(v) and value == v for v in values)


def read_parameter(
    file: FileChecks, name: str, p: schema.ParameterModel, language: str
) -> Parameter:
    """Parameter ``name``: its domain, default, role (fitting ``language``) and option."""
    key = ("parameters", name)
    if (p.values is None) == (p.range is None):
        raise file.err(key, "give exactly one of 'values' or 'range'")
    values = tuple(p.values) if p.values is not None else _range(file, key, p.range)
    if len(set(map(repr, values))) != len(values):
        raise file.err((*key, "values"), "values must be distinct")
    default = values[0] if p.default is None else p.default
    if not in_domain(default, values):
        raise file.err((*key, "default"), f"default {default!r} is not one of the values")
    role = p.role or _default_role(file, name, language)
    if role is schema.Role.OPTION:
        if p.option not in OPTION_KNOBS:
            known = ", ".join(OPTION_KNOBS)
            raise file.err((*key, "option"), f"role 'option' needs option: one of {known}")
        for value in values:
            if problem := knob_value_problem(p.option, value):
                raise file.err((*key, "values"), f"option {p.option}: {problem}")
    elif p.option is not None:
        raise file.err((*key, "option"), "'option' is only meaningful with role: option")
    if role is schema.Role.TEXT and language != "ptx":
        raise file.err((*key, "role"), "role 'text' substitutes ${NAME} in PTX files only")
    if role in (schema.Role.DEFINE, schema.Role.TEMPLATE) and language == "ptx":
        raise file.err((*key, "role"), f"role {role.value!r} needs a CUDA C++ source")
    if role is schema.Role.TEMPLATE and language == "numba":
        raise file.err(
            (*key, "role"), "a Numba kernel reads its knobs as module globals (role: define)"
        )
    if p.before is not None and not in_domain(p.before, values):
        raise file.err((*key, "before"), f"before {p.before!r} is not one of the values")
    line = file.doc.line_of(key)
    return Parameter(
        name, values, default, role, p.option, p.description, line, p.tunable, p.before
    )


def read_arch_defaults(
    file: FileChecks, arches: Sequence[Arch], params: Sequence[Parameter]
) -> dict[str, dict[str, Value]]:
    """``defaults:``, per declared arch (by its ``sm_XX`` name), values of parameters
    that lie in their domains."""
    declared = [a.sm for a in arches]
    domains = {p.name: p.values for p in params}
    out: dict[str, dict[str, Value]] = {}
    keys: dict[str, str] = {}  # the key under defaults: that gave each arch's entry
    for text, values in file.m.defaults.items():
        key = ("defaults", text)
        try:
            arch = Arch.parse(text).sm
        except ArchError as exc:
            raise file.err(key, str(exc)) from None
        if arch not in declared:
            names = ", ".join(declared)
            raise file.err(key, f"{arch} is not among the space's arches ({names})")
        if arch in out:
            raise file.err(key, f"{arch} is given twice (as {keys[arch]!r})")
        for name, value in values.items():
            if name not in domains:
                names = ", ".join(domains)
                raise file.err((*key, name), f"unknown parameter {name!r}; parameters: {names}")
            if not in_domain(value, domains[name]):
                raise file.err(
                    (*key, name),
                    f"{value!r} is not one of {name}'s values {list(domains[name])}",
                )
        out[arch] = dict(values)
        keys[arch] = text
    return out


def check_arch_defaults_valid(file: FileChecks, spec: SpaceSpec) -> None:
    """Each arch's default config is valid on that arch at the default shape (on the
    arch's device preset; an arch without one is not checked here)."""
    keys = {Arch.parse(text).sm: text for text in file.m.defaults}  # (read_arch_defaults: valid)
    for arch in spec.arch_defaults:
        target = Arch.parse(arch)
        try:
            device = device_for(target)
        except ArchError:
            continue
        space = Space(spec, arch=target, device=device)
        if problems := space.explain(spec.default_config(arch)):
            raise file.err(
                ("defaults", keys[arch]),
                f"the {arch} default is invalid on {arch} ({device.name}) at the default "
                f"shape: {problems[0].message}",
            )


def _default_role(file: FileChecks, name: str, language: str) -> schema.Role:
    if language == "ptx":
        return schema.Role.TEXT
    template = file.m.entry.template or ""
    if name in PLACEHOLDER.findall(template):
        return schema.Role.TEMPLATE
    return schema.Role.DEFINE


def _range(
    file: FileChecks, key: tuple[str, ...], r: schema.RangeDomain | None
) -> tuple[Value, ...]:
    assert r is not None
    if r.pow2:
        if r.start <= 0 or r.stop < r.start:
            raise file.err((*key, "range"), "pow2 range needs 0 < start <= stop")
        values: list[Value] = []
        v = 1
        while v <= r.stop and len(values) <= MAX_DOMAIN_VALUES:
            if v >= r.start:
                values.append(v)
            v *= 2
    else:
        if r.step == 0 or (r.stop - r.start) * r.step < 0:
            raise file.err((*key, "range"), "range step must move start towards stop")
        count = (r.stop - r.start) // r.step + 1
        if count > MAX_DOMAIN_VALUES:
            raise file.err((*key, "range"), f"range has {count} values; at most 10000")
        values = list(range(r.start, r.stop + (1 if r.step > 0 else -1), r.step))
    if not values:
        raise file.err((*key, "range"), "range is empty")
    return tuple(values)
