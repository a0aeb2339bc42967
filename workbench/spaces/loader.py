"""Read a tuning-space file into a :class:`SpaceSpec`, or say exactly what is wrong with it.

Three passes: YAML with line marks (:mod:`yamlmarks`), shape and types (:mod:`schema`, pydantic),
then meaning (this module): every name an expression uses exists, the source file exists inside
the project, defaults lie in their domains, roles fit the language. Every error is a
:class:`SpaceFileError` naming the file, line and key.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from workbench.devices import ARCH_NAMES, DEVICE_NAMES, device_for
from workbench.errors import ArchError, ExpressionError, SpaceFileError
from workbench.expressions import Expression
from workbench.spaces import schema
from workbench.spaces.model import (
    MAX_SOURCE_BYTES,
    PLACEHOLDER,
    AccuracyFigure,
    ArgSpec,
    Constraint,
    Draw,
    ExpectSass,
    Geometry,
    InputSpec,
    OutputSpec,
    Parameter,
    Reference,
    ScalarArg,
    SpaceSpec,
    TensorMapArg,
    ThenLaunch,
    UserBaseline,
    Value,
    VariantBaseline,
    WorkModel,
    source_too_large,
)
from workbench.spaces.option_knobs import OPTION_KNOBS, knob_value_problem
from workbench.spaces.space import Space
from workbench.spaces.variants import check_variant_defaults, read_variants
from workbench.spaces.yamlmarks import (
    MarkedDocument,
    format_key,
    load_marked_yaml,
    parse_marked_yaml,
)
from workbench.toolchain import Arch

#: Files whose presence marks a project root: sources must lie inside it.
PROJECT_MARKERS = (".git", "pyproject.toml", "workbench.toml")
#: dtypes compared exactly whatever the tolerance (a name, not an expression of the config)
_INTEGER_DTYPES = frozenset(d.value for d in schema.DType if d.value.startswith(("int", "uint")))
#: A cartesian domain this large is almost surely a typo in a range.
MAX_DOMAIN_VALUES = 10_000


def load_space(path: str | Path) -> SpaceSpec:
    """Load and check one space file.

    Raises:
        SpaceFileError: anything wrong with the file, located by line and key.
    """
    path = Path(path).absolute()
    doc = load_marked_yaml(path)
    return _Builder(doc, _validated(doc)).build()


def load_kept_space(path: str | Path, text: str, source: Path, source_bytes: bytes) -> SpaceSpec:
    """A space file as a store kept it with a study (``text``, once at ``path``; its kernel
    source ``source_bytes``, once at ``source``), checked as :func:`load_space` checks a file
    but without reading any file: the paths it names are where they were, and need not exist
    here (:attr:`SpaceSpec.kept`).

    Raises:
        SpaceFileError: the text is not a space file to this workbench.
    """
    path = Path(path)
    doc = parse_marked_yaml(path, text)
    model = _validated(doc)
    spec = _Builder(doc, model, kept=True).build()
    return replace(spec, source=source, kept_source=source_bytes)


def _validated(doc: MarkedDocument) -> schema.SpaceModel:
    if not isinstance(doc.data, dict):
        raise doc.error((), "expected a mapping of space keys (source, entry, parameters, ...)")
    try:
        return schema.SpaceModel.model_validate(doc.data)
    except ValidationError as exc:
        raise _schema_error(doc, exc) from None


def project_root(space_file: Path) -> Path:
    """The nearest ancestor holding a project marker; else the space file's parent's parent."""
    for parent in space_file.resolve().parents:
        if any((parent / marker).exists() for marker in PROJECT_MARKERS):
            return parent
    return space_file.resolve().parent.parent


def _schema_error(doc: MarkedDocument, exc: ValidationError) -> SpaceFileError:
    """The first pydantic error, translated to file/line/key and a plain sentence.

    For a union (``args``: a name or a mapping) pydantic reports one error per member; the
    one of the member that takes the input's kind is the one to show (a mapping's wrong
    ``dtype``, not "should be a valid string").
    """
    errors = exc.errors()
    err = errors[0]
    if isinstance(err.get("input"), dict):
        base = _without_tags(err["loc"])
        err = next(
            (
                e
                for e in errors
                if len(e["loc"]) > len(err["loc"])
                and _without_tags(e["loc"][: len(err["loc"])]) == base
                and any(isinstance(p, str) and p.endswith("Model") for p in e["loc"])
            ),
            err,
        )
    loc = _without_tags(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = loc[:-1]
        # a union member's keys where pydantic names the member (args: a tensor map's)
        member = next(
            (
                getattr(schema, p)
                for p in reversed(err["loc"][:-1])
                if isinstance(p, str) and p.endswith("Model") and hasattr(schema, p)
            ),
            None,
        )
        allowed = sorted(member.model_fields) if member else _allowed_keys(doc, parent)
        hint = f"; expected one of: {', '.join(allowed)}" if allowed else ""
        return doc.error(loc, f"unknown key {loc[-1]!r}{hint}")
    if kind == "missing":
        return doc.error(loc[:-1], f"missing required key {loc[-1]!r}")
    got = err.get("input")
    shown = repr(got) if not isinstance(got, dict | list) else type(got).__name__
    return doc.error(loc, f"{err['msg']} (got {shown[:80]})")


def _key_lines(doc: MarkedDocument) -> dict[str, int]:
    """The line of each top-level key and of each entry of a top-level list (``args[4]``):
    where an error found after loading points."""
    out: dict[str, int] = {}
    for path, line in doc.lines.items():
        if len(path) == 1:
            out[str(path[0])] = line
        elif len(path) == 2 and isinstance(path[1], int):
            out[f"{path[0]}[{path[1]}]"] = line
    return out


def _without_tags(loc: Sequence[object]) -> list[str | int]:
    return [p for p in loc if not _is_union_tag(p)]  # type: ignore[misc]


def _is_union_tag(part: object) -> bool:
    # pydantic puts the union member it tried into loc ("str", "ConstraintModel", "list[...]")
    return isinstance(part, str) and (
        part in {"str", "int", "float", "bool"}
        or part.endswith("Model")
        or "[" in part
        or part.startswith(("function-", "constrained-"))
    )


def _allowed_keys(doc: MarkedDocument, parent: Sequence[str | int]) -> list[str]:
    """Keys a mapping at ``parent`` may hold, found by walking the schema."""
    model: type = schema.SpaceModel
    in_user_dict = False  # the next part is a user's key (parameters.BLOCK), not a field
    for part in parent:
        if isinstance(part, int):
            continue
        if in_user_dict:
            in_user_dict = False
            continue
        field = model.model_fields.get(part)  # type: ignore[attr-defined]
        sub = None if field is None else _model_in(field.annotation)
        if sub is None:
            return []
        in_user_dict = "dict[" in str(field.annotation)
        model = sub
    return sorted(model.model_fields)  # type: ignore[attr-defined]


def _model_in(annotation: object) -> type | None:
    """The pydantic model inside an annotation such as ``dict[str, ParameterModel] | None``."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


class _Builder:
    """Semantic checks and conversion; one instance per file."""

    def __init__(
        self, doc: MarkedDocument, model: schema.SpaceModel, *, kept: bool = False
    ) -> None:
        self.doc = doc
        self.m = model
        self.path = doc.path
        #: a store's copy: the files it names are not read (they were checked when it was kept)
        self.kept = kept
        self.root = project_root(doc.path) if not kept else doc.path.parent
        #: the key under ``defaults:`` that gave each arch's entry, for located errors
        self._default_keys: dict[str, str] = {}

    def err(self, key: Sequence[str | int], message: str) -> SpaceFileError:
        return self.doc.error(key, message)

    # -- pieces --------------------------------------------------------------------------
    def build(self) -> SpaceSpec:
        m = self.m
        source = self._inside_project(("source",), m.source, must_be_file=True)
        by_suffix = {".ptx": "ptx", ".py": "numba"}  # (a Python source: a Numba CUDA kernel)
        language = m.language or by_suffix.get(source.suffix, "cuda")
        if m.entry.template is None and m.entry.kernel is None:
            raise self.err(("entry",), "give either entry.template or entry.kernel")
        if m.entry.template is not None and m.entry.kernel is not None:
            raise self.err(("entry",), "give entry.template or entry.kernel, not both")
        if language == "ptx" and m.entry.template is not None:
            raise self.err(("entry", "template"), "PTX kernels have no templates; use entry.kernel")
        if language == "numba" and m.entry.template is not None:
            raise self.err(
                ("entry", "template"), "a Numba kernel is a function: entry: {kernel: NAME}"
            )
        arches = tuple(self._arch(i, a) for i, a in enumerate(m.arches))
        includes = tuple(
            self._inside_project(("includes", i), inc, must_be_dir=True)
            for i, inc in enumerate(m.includes)
        )
        params = tuple(self._parameter(name, p, language) for name, p in m.parameters.items())
        param_names = [p.name for p in params]
        shape_names = list(m.shapes.default)
        clash = set(param_names) & set(shape_names)
        if clash:
            raise self.err(
                ("shapes", "default"), f"names used both as parameter and shape: {clash}"
            )
        base = set(param_names) | set(shape_names) | DEVICE_NAMES | ARCH_NAMES
        base |= {f"shape.{s}" for s in shape_names}
        derived: list[tuple[str, Expression]] = []
        for name, text in m.derived.items():
            if name in base:
                raise self.err(("derived", name), f"{name!r} is already a parameter or shape name")
            derived.append((name, self._expr(("derived", name), text, base)))
            base.add(name)
        self._check_template(m.entry.template, base)
        constraints = tuple(self._constraint(i, c, base) for i, c in enumerate(m.constraints))
        geometry = self._geometry(base)
        shape_sets = self._shape_sets(shape_names)
        self._params = {p.name: p for p in params}
        self._derived = dict(derived)
        buffers = self._buffers(base)
        inputs, outputs = buffers
        ranks = {b.name: len(b.shape) for b in inputs} | {b.name: len(b.shape) for b in outputs}
        args = self._args(base, ranks)
        work = WorkModel(
            flops=self._expr(("work", "flops"), m.work.flops, base),
            bytes=self._expr(("work", "bytes"), m.work.bytes, base),
            unit=m.work.unit,
        )
        expect = tuple(self._expect(i, e, base) for i, e in enumerate(m.expect_sass))
        spec = SpaceSpec(
            name=m.name or self.path.stem,
            path=self.path,
            description=m.description,
            source=source,
            language=language,
            entry_template=m.entry.template,
            entry_kernel=m.entry.kernel,
            arches=tuple(a.sm for a in arches),
            include_dirs=includes,
            parameters=params,
            derived=tuple(derived),
            constraints=constraints,
            geometry=geometry,
            default_shape=dict(m.shapes.default),
            shape_sets=shape_sets,
            inputs=inputs,
            outputs=outputs,
            args=args,
            reference=self._reference(base),
            work=work,
            baselines=self._baselines(),
            text=self.doc.text,
            expect_sass=expect,
            arch_defaults=self._arch_defaults(arches, params),
            variants=read_variants(self.doc, self.m.variants, arches, params),
            key_lines=_key_lines(self.doc),
            then=self._then(language, base, ranks),
            accuracy=self._accuracy(params),
        )
        self._check_arch_defaults_valid(spec)
        check_variant_defaults(self.doc, spec)
        return spec

    def _inside_project(
        self,
        key: tuple[str | int, ...],
        rel: str,
        *,
        must_be_file: bool = False,
        must_be_dir: bool = False,
        what: str = "source file",
    ) -> Path:
        if self.kept:  # where it was (nothing is read from it)
            return Path(os.path.normpath(self.path.parent / rel))
        target = (self.path.parent / rel).resolve()
        if not target.is_relative_to(self.root):
            # (kept: a shared space file cannot read ~/.ssh into a compile log or a report)
            raise self.err(
                key,
                f"{rel!r} lies outside the project root {self.root} (the nearest folder above "
                f"the space file holding {' or '.join(PROJECT_MARKERS)}, else its folder's "
                "parent): move the file inside, or put an empty workbench.toml in a folder "
                "that holds both",
            )
        if must_be_file and target.is_dir():
            raise self.err(key, f"{what} {rel!r} is a directory ({target})")
        if must_be_file and target.exists() and not target.is_file():
            # (a FIFO would block the read that follows for ever)
            raise self.err(key, f"{what} {rel!r} is not a regular file (a FIFO, socket or device)")
        if must_be_file and not target.is_file():
            raise self.err(key, f"{what} {rel!r} does not exist (looked for {target})")
        if must_be_file and target.stat().st_size > MAX_SOURCE_BYTES:
            raise self.err(key, f"{what} {rel!r} is {source_too_large()} ({target})")
        if must_be_dir and not target.is_dir():
            raise self.err(key, f"include directory {rel!r} does not exist (looked for {target})")
        return target

    def _arch(self, index: int, text: str) -> Arch:
        try:
            return Arch.parse(text)
        except ArchError as exc:
            raise self.err(("arches", index), str(exc)) from None

    def _parameter(self, name: str, p: schema.ParameterModel, language: str) -> Parameter:
        key = ("parameters", name)
        if (p.values is None) == (p.range is None):
            raise self.err(key, "give exactly one of 'values' or 'range'")
        values = tuple(p.values) if p.values is not None else self._range(key, p.range)
        if len(set(map(repr, values))) != len(values):
            raise self.err((*key, "values"), "values must be distinct")
        default = values[0] if p.default is None else p.default
        if not any(_same(default, v) for v in values):
            raise self.err((*key, "default"), f"default {default!r} is not one of the values")
        role = p.role or self._default_role(name, language)
        if role is schema.Role.OPTION:
            if p.option not in OPTION_KNOBS:
                known = ", ".join(OPTION_KNOBS)
                raise self.err((*key, "option"), f"role 'option' needs option: one of {known}")
            for value in values:
                if problem := knob_value_problem(p.option, value):
                    raise self.err((*key, "values"), f"option {p.option}: {problem}")
        elif p.option is not None:
            raise self.err((*key, "option"), "'option' is only meaningful with role: option")
        if role is schema.Role.TEXT and language != "ptx":
            raise self.err((*key, "role"), "role 'text' substitutes ${NAME} in PTX files only")
        if role in (schema.Role.DEFINE, schema.Role.TEMPLATE) and language == "ptx":
            raise self.err((*key, "role"), f"role {role.value!r} needs a CUDA C++ source")
        if role is schema.Role.TEMPLATE and language == "numba":
            raise self.err(
                (*key, "role"), "a Numba kernel reads its knobs as module globals (role: define)"
            )
        if p.before is not None and not any(_same(p.before, v) for v in values):
            raise self.err((*key, "before"), f"before {p.before!r} is not one of the values")
        line = self.doc.line_of(key)
        return Parameter(
            name, values, default, role, p.option, p.description, line, p.tunable, p.before
        )

    def _arch_defaults(
        self, arches: Sequence[Arch], params: Sequence[Parameter]
    ) -> dict[str, dict[str, Value]]:
        """``defaults:``, per declared arch (by its ``sm_XX`` name), values of parameters
        that lie in their domains."""
        declared = [a.sm for a in arches]
        domains = {p.name: p.values for p in params}
        out: dict[str, dict[str, Value]] = {}
        for text, values in self.m.defaults.items():
            key = ("defaults", text)
            try:
                arch = Arch.parse(text).sm
            except ArchError as exc:
                raise self.err(key, str(exc)) from None
            if arch not in declared:
                names = ", ".join(declared)
                raise self.err(key, f"{arch} is not among the space's arches ({names})")
            if arch in out:
                raise self.err(key, f"{arch} is given twice (as {self._default_keys[arch]!r})")
            for name, value in values.items():
                if name not in domains:
                    names = ", ".join(domains)
                    raise self.err((*key, name), f"unknown parameter {name!r}; parameters: {names}")
                if not any(_same(value, v) for v in domains[name]):
                    raise self.err(
                        (*key, name),
                        f"{value!r} is not one of {name}'s values {list(domains[name])}",
                    )
            out[arch] = dict(values)
            self._default_keys[arch] = text
        return out

    def _check_arch_defaults_valid(self, spec: SpaceSpec) -> None:
        """Each arch's default config is valid on that arch at the default shape (on the
        arch's device preset; an arch without one is not checked here)."""
        for arch in spec.arch_defaults:
            target = Arch.parse(arch)
            try:
                device = device_for(target)
            except ArchError:
                continue
            space = Space(spec, arch=target, device=device)
            if problems := space.explain(spec.default_config(arch)):
                raise self.err(
                    ("defaults", self._default_keys[arch]),
                    f"the {arch} default is invalid on {arch} ({device.name}) at the default "
                    f"shape: {problems[0].message}",
                )

    def _default_role(self, name: str, language: str) -> schema.Role:
        if language == "ptx":
            return schema.Role.TEXT
        template = self.m.entry.template or ""
        if name in PLACEHOLDER.findall(template):
            return schema.Role.TEMPLATE
        return schema.Role.DEFINE

    def _range(self, key: tuple[str, ...], r: schema.RangeDomain | None) -> tuple[Value, ...]:
        assert r is not None
        if r.pow2:
            if r.start <= 0 or r.stop < r.start:
                raise self.err((*key, "range"), "pow2 range needs 0 < start <= stop")
            values: list[Value] = []
            v = 1
            while v <= r.stop and len(values) <= MAX_DOMAIN_VALUES:
                if v >= r.start:
                    values.append(v)
                v *= 2
        else:
            if r.step == 0 or (r.stop - r.start) * r.step < 0:
                raise self.err((*key, "range"), "range step must move start towards stop")
            count = (r.stop - r.start) // r.step + 1
            if count > MAX_DOMAIN_VALUES:
                raise self.err((*key, "range"), f"range has {count} values; at most 10000")
            values = list(range(r.start, r.stop + (1 if r.step > 0 else -1), r.step))
        if not values:
            raise self.err((*key, "range"), "range is empty")
        return tuple(values)

    def _expr(self, key: Sequence[str | int], text: object, known: Iterable[str]) -> Expression:
        try:
            expr = Expression.parse(text)  # type: ignore[arg-type]
        except ExpressionError as exc:
            raise self.err(key, str(exc)) from None
        unknown = expr.unknown_names(set(known))
        if unknown:
            raise self.err(
                key,
                f"`{expr.text}` uses unknown name(s) {', '.join(unknown)}; known: "
                f"parameters, shape variables, derived names, device.* and arch.*",
            )
        return expr

    def _check_template(self, template: str | None, known: set[str]) -> None:
        if template is None:
            return
        for name in PLACEHOLDER.findall(template):
            if name not in known:
                raise self.err(("entry", "template"), f"placeholder {{{name}}} names no parameter")

    def _constraint(self, i: int, c: object, known: set[str]) -> Constraint:
        text, reason = (c.expr, c.reason) if isinstance(c, schema.ConstraintModel) else (c, "")
        key = ("constraints", i) + (("expr",) if isinstance(c, schema.ConstraintModel) else ())
        expr = self._expr(key, text, known)
        return Constraint(expr, reason, self.doc.line_of(("constraints", i)))

    def _dims(self, key: tuple[str, ...], value: object, known: set[str]) -> tuple[Expression, ...]:
        items = value if isinstance(value, list) else [value]
        if not 1 <= len(items) <= 3:
            raise self.err(key, "give one to three dimensions")
        return tuple(self._expr((*key, i), t, known) for i, t in enumerate(items))

    def _geometry(self, known: set[str]) -> Geometry:
        g = self.m.geometry
        return Geometry(
            grid=self._dims(("geometry", "grid"), g.grid, known),
            block=self._dims(("geometry", "block"), g.block, known),
            shared_bytes=self._expr(("geometry", "shared_bytes"), g.shared_bytes, known),
            cluster=None
            if g.cluster is None
            else self._dims(("geometry", "cluster"), g.cluster, known),
            cluster_line=None if g.cluster is None else self.doc.line_of(("geometry", "cluster")),
        )

    def _shape_sets(self, names: list[str]) -> dict[str, tuple[dict[str, int], ...]]:
        sets: dict[str, tuple[dict[str, int], ...]] = {}
        for set_name, shapes in self.m.shapes.sets.items():
            if set_name == "default":
                raise self.err(("shapes", "sets", set_name), "'default' is reserved")
            if not shapes:
                raise self.err(("shapes", "sets", set_name), "a shape set needs shapes")
            for i, shape in enumerate(shapes):
                if sorted(shape) != sorted(names):
                    raise self.err(
                        ("shapes", "sets", set_name, i),
                        f"shape has keys {sorted(shape)}; expected {sorted(names)} (as in default)",
                    )
                if any(v <= 0 for v in shape.values()):
                    raise self.err(("shapes", "sets", set_name, i), "shape sizes must be positive")
            sets[set_name] = tuple({k: s[k] for k in names} for s in shapes)
        if any(v <= 0 for v in self.m.shapes.default.values()):
            raise self.err(("shapes", "default"), "shape sizes must be positive")
        return sets

    def _buffers(self, known: set[str]) -> tuple[tuple[InputSpec, ...], tuple[OutputSpec, ...]]:
        inputs = []
        for name, b in self.m.inputs.items():
            key = ("inputs", name)
            bounds = self._bounds(key, b, known)
            if bounds is None:
                self._check_draw(key, b)
            shape = tuple(self._expr((*key, "shape", i), s, known) for i, s in enumerate(b.shape))
            dtype, dtypes = self._input_dtype(key, b.dtype, known)
            if b.per_dtype and isinstance(dtype, schema.DType):
                raise self.err(
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
                self._per_dtype(key, b, dtypes),
                bounds,
            )
            for d in spec.per_dtype:
                self._check_draw((*key, "per_dtype", d.value), spec.of_dtype(d))
            inputs.append(spec)
        outputs = []
        for name, o in self.m.outputs.items():
            if name in self.m.inputs:
                raise self.err(("outputs", name), f"{name!r} is already an input")
            shape = tuple(
                self._expr(("outputs", name, "shape", i), s, known) for i, s in enumerate(o.shape)
            )
            init = None if o.init is None else float(o.init)
            out_dtype: schema.DType | Expression
            try:
                out_dtype = schema.DType(o.dtype)
            except ValueError:  # an expression of the config naming one
                out_dtype = self._expr(("outputs", name, "dtype"), str(o.dtype), known)
            allowed = o.nonfinite == "allowed"
            if allowed and o.scratch:
                raise self.err(
                    ("outputs", name, "nonfinite"),
                    "a scratch output is never compared: nonfinite does not apply",
                )
            outputs.append(OutputSpec(name, out_dtype, shape, init, o.scratch, allowed))
        return tuple(inputs), tuple(outputs)

    def _bounds(
        self, key: tuple[str, ...], b: schema.InputModel, known: set[str]
    ) -> tuple[Expression, Expression] | None:
        """``low`` and ``high`` as expressions, where either is one (None: both numbers)."""
        if not isinstance(b.low, str) and not isinstance(b.high, str):
            return None
        if b.per_dtype:
            raise self.err(
                (*key, "per_dtype"),
                "bounds that are expressions apply to every dtype: no per_dtype",
            )
        if b.distribution is schema.Distribution.NORMAL:
            raise self.err(key, "a normal draw has no low and high (give mean and std)")
        return self._expr((*key, "low"), b.low, known), self._expr((*key, "high"), b.high, known)

    def _check_draw(self, key: tuple[str, ...], spec: schema.InputModel | InputSpec) -> None:
        """The draw of an input (or of one of its dtypes) gives values, not zeros alone."""
        if _all_zeros(spec):
            raise self.err(key, "inputs must not be all zeros: a zero input hides wrong kernels")
        if spec.distribution is schema.Distribution.UNIFORM and _num(spec.high) <= _num(spec.low):
            raise self.err(key, "uniform needs low < high")

    def _input_dtype(
        self, key: tuple[str, ...], text: object, known: set[str]
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
            raise self.err(
                key,
                f"{text!r} is not a dtype ({names}) nor names a problem variant (a "
                "`tunable: false` parameter whose values are dtypes)",
            )
        reads = self._variant_reads(key, expr)
        dtypes: list[schema.DType] = []
        for combo in itertools.product(*(self._params[n].values for n in reads)):
            env: dict[str, object] = dict(zip(reads, combo, strict=True))
            for name, derived in self._derived.items():
                with contextlib.suppress(ExpressionError):
                    env[name] = derived.evaluate(env)
            try:
                value = expr.evaluate(env)
                dtype = schema.DType(value)
            except (ExpressionError, ValueError):
                at = ", ".join(f"{k}={v}" for k, v in env.items() if k in reads)
                names = ", ".join(d.value for d in schema.DType)
                raise self.err(
                    key, f"`{expr.text}` names no dtype for {at}; expected one of {names}"
                ) from None
            if dtype not in dtypes:
                dtypes.append(dtype)
        return expr, tuple(dtypes)

    def _variant_reads(self, key: tuple[str, ...], expr: Expression) -> tuple[str, ...]:
        """The parameters an input's dtype reads, in declaration order; each must be a problem
        variant (``tunable: false``)."""
        found: set[str] = set()
        todo = list(expr.names)
        while todo:
            name = todo.pop()
            if name in self._derived:
                todo.extend(self._derived[name].names)
            elif name in self._params and not self._params[name].tunable:
                found.add(name)
            else:
                what = "a tunable parameter" if name in self._params else "not a parameter"
                raise self.err(
                    key,
                    f"`{expr.text}` reads {name}, {what}: an input's dtype is a dtype or names a "
                    "problem variant (a `tunable: false` parameter whose values are dtypes, or a "
                    "derived value of such parameters), so that a problem's inputs are fixed",
                )
        return tuple(n for n in self._params if n in found)

    def _per_dtype(
        self, key: tuple[str, ...], b: schema.InputModel, dtypes: Sequence[schema.DType]
    ) -> dict[schema.DType, Draw]:
        """``per_dtype``: the draw of each of the dtypes a variant's input can take."""
        draws = {}
        for dtype, d in b.per_dtype.items():
            where = (*key, "per_dtype", dtype.value)
            if dtype not in dtypes:
                can = ", ".join(x.value for x in dtypes)
                raise self.err(where, f"the input's dtype is never {dtype.value} (it is: {can})")
            distribution = b.distribution if d.distribution is None else d.distribution
            draws[dtype] = Draw(
                distribution,
                *(
                    float(getattr(b, f) if getattr(d, f) is None else getattr(d, f))
                    for f in ("low", "high", "mean", "std")
                ),
            )
        return draws

    def _args(self, known: set[str], ranks: dict[str, int]) -> tuple[ArgSpec, ...]:
        """``args`` checked: buffer names exist, expressions use known names, a tensor map's box
        has one dimension per dimension of its buffer."""
        args = self._arg_list(("args",), self.m.args, known, ranks)
        passed = {a for a in args if isinstance(a, str)}
        passed |= {a.buffer for a in args if isinstance(a, TensorMapArg)}
        missing = [o for o in self.m.outputs if o not in passed]
        if missing:
            raise self.err(
                ("args",), f"output(s) {', '.join(missing)} are not passed to the kernel"
            )
        return tuple(args)

    def _arg_list(
        self,
        key: tuple[str, ...],
        entries: Sequence[object],
        known: set[str],
        ranks: dict[str, int],
    ) -> list[ArgSpec]:
        """One ``args`` list (the entry's, or ``then``'s) checked entry by entry."""
        args: list[ArgSpec] = []
        for i, a in enumerate(entries):
            if isinstance(a, str):
                if a not in ranks:
                    raise self.err((*key, i), f"{a!r} is not an input or output buffer")
                args.append(a)
            elif isinstance(a, schema.TensorMapArgModel):
                args.append(self._tensor_map(i, a, known, ranks, key))
            else:
                assert isinstance(a, schema.ScalarArgModel)
                value = self._expr((*key, i, "value"), a.value, known)
                args.append(ScalarArg(value, a.dtype, a.name))
        return args

    def _then(self, language: str, known: set[str], ranks: dict[str, int]) -> ThenLaunch | None:
        """``then``: the second kernel, its geometry and arguments."""
        t = self.m.then
        if t is None:
            return None
        key = ("then",)
        if language == "numba":
            raise self.err(key, "a Numba kernel is one function: it has no second kernel")
        if t.kernel == self.m.entry.kernel:
            raise self.err((*key, "kernel"), "the second kernel is the entry itself")
        geometry = Geometry(
            grid=self._dims((*key, "grid"), t.grid, known),
            block=self._dims((*key, "block"), t.block, known),
            shared_bytes=self._expr((*key, "shared_bytes"), t.shared_bytes, known),
        )
        args = tuple(self._arg_list((*key, "args"), t.args, known, ranks))
        return ThenLaunch(t.kernel, self._expr((*key, "when"), t.when, known), geometry, args)

    def _tensor_map(
        self,
        i: int,
        a: schema.TensorMapArgModel,
        known: set[str],
        ranks: dict[str, int],
        where: tuple[str, ...] = ("args",),
    ) -> TensorMapArg:
        key: tuple[str | int, ...] = (*where, i)
        rank = ranks.get(a.tensor_map)
        if rank is None:
            raise self.err(
                (*key, "tensor_map"), f"{a.tensor_map!r} is not an input or output buffer"
            )
        if len(a.box) != rank:
            raise self.err(
                (*key, "box"),
                f"box has {len(a.box)} dimension{'s'[: len(a.box) != 1]} but buffer "
                f"{a.tensor_map!r} has {rank} (one box extent per dimension of its shape, "
                "outermost first)",
            )
        box = tuple(self._expr((*key, "box", d), t, known) for d, t in enumerate(a.box))
        return TensorMapArg(
            buffer=a.tensor_map,
            box=box,
            swizzle=self._expr((*key, "swizzle"), a.swizzle, known),
            when=self._expr((*key, "when"), a.when, known),
            l2_promotion=a.l2_promotion,
            name=a.name,
        )

    def _reference(self, known: set[str]) -> Reference | None:
        r = self.m.reference
        if r is None:
            return None
        key = ("reference",)
        if isinstance(r, str):  # the short form: just where the function is
            r = schema.ReferenceModel(python=r)
            if not self._integer_outputs():
                raise self.err(
                    key,
                    "outputs that are not integers compare within a tolerance: write "
                    f"reference: {{python: {self.m.reference}, rtol: ..., atol: ...}} "
                    "(or exact: true)",
                )
        if (r.python is None) == (r.file is None):
            raise self.err(key, "give exactly one of reference.python or reference.file")
        if r.file is not None:
            if not r.function:
                raise self.err(key, "reference.file needs reference.function")
            target = self._reference_file((*key, "file"), r.file, r.function)
        else:
            if r.function is not None:
                raise self.err((*key, "function"), "reference.python already names the function")
            assert r.python is not None
            key_py = (
                (*key, "python") if isinstance(self.m.reference, schema.ReferenceModel) else key
            )
            target = self._python_target(key_py, r.python, "reference file")
        exact = r.exact or (r.rtol in (0, "0") and r.atol in (0, "0") and self._integer_outputs())
        if not exact and r.rtol in (0, "0") and r.atol in (0, "0"):
            raise self.err(key, "say how outputs compare: exact: true, or rtol/atol > 0")
        rtol = self._expr((*key, "rtol"), r.rtol, known)
        atol = self._expr((*key, "atol"), r.atol, known)
        return Reference(target, exact, rtol, atol)

    def _accuracy(self, params: tuple[Parameter, ...]) -> AccuracyFigure | None:
        a = self.m.accuracy
        if a is None:
            return None
        key = ("accuracy",)
        target = self._python_target((*key, "python"), a.python, "accuracy file")
        domains = {p.name: p.values for p in params}
        for name, value in a.draw.items():
            if name not in domains:
                known = ", ".join(domains)
                raise self.err((*key, "draw", name), f"no parameter {name!r} (known: {known})")
            if not any(_same(value, v) for v in domains[name]):
                shown = ", ".join(map(str, domains[name]))
                raise self.err(
                    (*key, "draw", name), f"{value!r} is not one of {name}'s values ({shown})"
                )
        for name, value in a.shape.items():
            if name not in self.m.shapes.default:
                known = ", ".join(self.m.shapes.default)
                raise self.err((*key, "shape", name), f"no shape dimension {name!r} ({known})")
            if value < 1:
                raise self.err((*key, "shape", name), f"{value} is not a positive size")
        return AccuracyFigure(target, a.title, dict(a.draw), dict(a.shape))

    def _baselines(self) -> tuple[schema.BaselineKind | UserBaseline | VariantBaseline, ...]:
        out: list[schema.BaselineKind | UserBaseline | VariantBaseline] = []
        for i, b in enumerate(self.m.baselines):
            if isinstance(b, schema.BaselineKind):
                out.append(b)
                continue
            if isinstance(b, schema.VariantBaselineModel):
                if b.variant not in self.m.variants:
                    known = ", ".join(self.m.variants) or "none"
                    raise self.err(
                        ("baselines", i, "variant"),
                        f"no variant {b.variant!r} in this file's variants ({known})",
                    )
                inputs = (
                    None
                    if b.inputs is None
                    else self._python_target(("baselines", i, "inputs"), b.inputs, "inputs file")
                )
                out.append(VariantBaseline(f"variant:{b.variant}", b.variant, inputs))
                continue
            target = self._python_target(("baselines", i, "python"), b.python, "baseline file")
            out.append(UserBaseline(f"python:{b.python.rpartition(':')[2]}", target))
        names = [b.name for b in out if isinstance(b, UserBaseline)]
        if len(set(names)) != len(names):
            raise self.err(("baselines",), "two of your baselines have the same function name")
        return tuple(out)

    def _python_target(self, key: tuple[str | int, ...], text: str, what: str) -> str:
        """``file.py:function`` as the absolute path's target, or ``module:function`` as it is."""
        where, _, function = text.rpartition(":")
        # a path (file.py, ./x.py, dir/x.py) is a file beside the space; else a module
        if where.endswith(".py") or "/" in where:
            return self._reference_file(key, where, function, what)
        return text

    def _reference_file(
        self, key: tuple[str | int, ...], rel: str, function: str, what: str = "reference file"
    ) -> str:
        path = self._inside_project(key, rel, must_be_file=True, what=what)
        if path.suffix != ".py":
            raise self.err(key, f"{what} {rel!r} is not a .py file")
        return f"{path}:{function}"

    def _integer_outputs(self) -> bool:
        """Every compared output has a fixed integer dtype (compared exactly anyway)."""
        compared = [o for o in self.m.outputs.values() if not o.scratch]
        return bool(compared) and all(
            str(getattr(o.dtype, "value", o.dtype)) in _INTEGER_DTYPES for o in compared
        )

    def _expect(self, i: int, e: object, known: set[str]) -> ExpectSass:
        if isinstance(e, str):
            return ExpectSass((e,), Expression.parse(True))
        assert isinstance(e, schema.ExpectSassModel)
        when = self._expr(("expect_sass", i, "when"), e.when, known)
        return ExpectSass(tuple(e.opcodes), when)


def _same(a: Value, b: Value) -> bool:
    return type(a) is type(b) and a == b


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


__all__ = ["format_key", "load_space", "project_root"]
