"""A space file read into a :class:`SpaceSpec`: its parts checked in the order their names
become known (parameters, shape, derived values, then what uses them), then the spec as a
whole (the per-arch and variant defaults valid)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pydantic import ValidationError

from workbench.devices import ARCH_NAMES, DEVICE_NAMES
from workbench.errors import ArchError
from workbench.expressions import Expression
from workbench.spaces import schema
from workbench.spaces.loader.arguments import read_args, read_then
from workbench.spaces.loader.buffers import read_buffers
from workbench.spaces.loader.checks import FileChecks
from workbench.spaces.loader.parameters import (
    check_arch_defaults_valid,
    read_arch_defaults,
    read_parameter,
)
from workbench.spaces.loader.python_targets import read_accuracy, read_baselines, read_reference
from workbench.spaces.loader.schema_errors import schema_error
from workbench.spaces.model import (
    PLACEHOLDER,
    Constraint,
    ExpectSass,
    Geometry,
    Parameter,
    SpaceSpec,
    WorkModel,
)
from workbench.spaces.variants import check_variant_defaults, read_variants
from workbench.spaces.yamlmarks import MarkedDocument, load_marked_yaml, parse_marked_yaml
from workbench.toolchain import Arch


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
        raise schema_error(doc, exc) from None


class _Builder(FileChecks):
    """Semantic checks and conversion; one instance per file."""

    def build(self) -> SpaceSpec:
        m = self.m
        source = self.inside_project(("source",), m.source, must_be_file=True)
        language = self._language(source)
        arches = tuple(self._arch(i, a) for i, a in enumerate(m.arches))
        includes = tuple(
            self.inside_project(("includes", i), inc, must_be_dir=True)
            for i, inc in enumerate(m.includes)
        )
        params = tuple(read_parameter(self, name, p, language) for name, p in m.parameters.items())
        base, derived = self._names(params)
        constraints = tuple(self._constraint(i, c, base) for i, c in enumerate(m.constraints))
        geometry = self._geometry(base)
        shape_sets = self._shape_sets(list(m.shapes.default))
        by_name = {p.name: p for p in params}
        inputs, outputs = read_buffers(self, base, by_name, dict(derived))
        ranks = {b.name: len(b.shape) for b in inputs} | {b.name: len(b.shape) for b in outputs}
        args = read_args(self, base, ranks)
        work = self._work(base)
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
            derived=derived,
            constraints=constraints,
            geometry=geometry,
            default_shape=dict(m.shapes.default),
            shape_sets=shape_sets,
            inputs=inputs,
            outputs=outputs,
            args=args,
            reference=read_reference(self, base),
            work=work,
            baselines=read_baselines(self),
            text=self.doc.text,
            expect_sass=expect,
            arch_defaults=read_arch_defaults(self, arches, params),
            variants=read_variants(self.doc, self.m.variants, arches, params),
            key_lines=_key_lines(self.doc),
            then=read_then(self, language, base, ranks),
            accuracy=read_accuracy(self, params),
        )
        check_arch_defaults_valid(self, spec)
        check_variant_defaults(self.doc, spec)
        return spec

    def _language(self, source: Path) -> str:
        """The kernel's language (given, else by the source's suffix), with an entry that fits
        it: a template or a kernel name, not both; no template for PTX or Numba."""
        m = self.m
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
        return language

    def _names(
        self, params: tuple[Parameter, ...]
    ) -> tuple[set[str], tuple[tuple[str, Expression], ...]]:
        """The names expressions may use (parameters, shape, device and arch names, derived
        values), and the derived values, each over the names before it; the entry template's
        placeholders checked against them."""
        m = self.m
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
            derived.append((name, self.expr(("derived", name), text, base)))
            base.add(name)
        self._check_template(m.entry.template, base)
        return base, tuple(derived)

    def _work(self, known: set[str]) -> WorkModel:
        w = self.m.work
        return WorkModel(
            flops=self.expr(("work", "flops"), w.flops, known),
            bytes=self.expr(("work", "bytes"), w.bytes, known),
            unit=w.unit,
        )

    def _arch(self, index: int, text: str) -> Arch:
        try:
            return Arch.parse(text)
        except ArchError as exc:
            raise self.err(("arches", index), str(exc)) from None

    def _check_template(self, template: str | None, known: set[str]) -> None:
        if template is None:
            return
        for name in PLACEHOLDER.findall(template):
            if name not in known:
                raise self.err(("entry", "template"), f"placeholder {{{name}}} names no parameter")

    def _constraint(self, i: int, c: object, known: set[str]) -> Constraint:
        text, reason = (c.expr, c.reason) if isinstance(c, schema.ConstraintModel) else (c, "")
        key = ("constraints", i) + (("expr",) if isinstance(c, schema.ConstraintModel) else ())
        expr = self.expr(key, text, known)
        return Constraint(expr, reason, self.doc.line_of(("constraints", i)))

    def _geometry(self, known: set[str]) -> Geometry:
        g = self.m.geometry
        return Geometry(
            grid=self.dims(("geometry", "grid"), g.grid, known),
            block=self.dims(("geometry", "block"), g.block, known),
            shared_bytes=self.expr(("geometry", "shared_bytes"), g.shared_bytes, known),
            cluster=None
            if g.cluster is None
            else self.dims(("geometry", "cluster"), g.cluster, known),
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

    def _expect(self, i: int, e: object, known: set[str]) -> ExpectSass:
        if isinstance(e, str):
            return ExpectSass((e,), Expression.parse(True))
        assert isinstance(e, schema.ExpectSassModel)
        when = self.expr(("expect_sass", i, "when"), e.when, known)
        return ExpectSass(tuple(e.opcodes), when)


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
