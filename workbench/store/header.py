"""The tuned configs of a kernel as a C++ header: what a build needs to ship them.

A tuning result is only useful once the user's build compiles the kernel the way the fastest
config was compiled. ``workbench store header K`` writes, for each study of ``K`` in the store
(one per problem variant, shape and GPU), the fastest correct config as

* a compile-time target: ``#define WORKBENCH_<STUDY>`` before including the header (and the
  kernel's source after it) defines the kernel's macros exactly as the workbench passed them
  to NVRTC (``-D``), text values' ``NAME_value`` companions included;
* a run-time table, ``workbench_tuned::<kernel>::entries[]``: every entry's parameters (typed),
  shape, measured value, the compiler and its flags, the entry (template instantiation or
  symbol) and the launch geometry, for a host that picks a config by GPU and shape.

Compiler-option parameters (``role: option``: fast math, register caps, cache defaults),
launch parameters and a PTX kernel's text parameters cannot be set from a header: the
target's comment names them and the table holds them (the flags, the geometry). A recorded
space (a Kernel Tuner cache, no space file) has no macros of its own: its parameters are
written as Kernel Tuner passes them to a kernel, ``#define NAME VALUE``, and the table has no
flags or geometry.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workbench.errors import CompileError, ConfigError
from workbench.printable import printable
from workbench.spaces.launch import Launch, launch_geometry
from workbench.spaces.model import Config, Value, base_kernel, parse_shape_label
from workbench.spaces.schema import Role
from workbench.store import Store, StudyInfo
from workbench.store.best import StudySelection, Variants, select_studies, study_best
from workbench.store.kept_space import kept_space
from workbench.store.study_space import space_changed, space_file, study_space

if TYPE_CHECKING:
    from workbench.spaces.space import Space

_NOT_IDENT = re.compile(r"[^A-Za-z0-9]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: C++ keywords a parameter could be named after (a field cannot carry them)
_KEYWORD_TEXT = (
    "alignas alignof and asm auto bool break case catch char class const constexpr continue "
    "decltype default delete do double else enum explicit export extern false float for "
    "friend goto if inline int long mutable namespace new noexcept not nullptr operator or "
    "private protected public register return short signed sizeof static struct switch "
    "template this throw true try typedef typeid typename union unsigned using virtual void "
    "volatile while"
)
_KEYWORDS = frozenset(_KEYWORD_TEXT.split())
#: What a ``#define`` may hold: a number (C literal spelling) or one identifier (a text value,
#: ``PATH=mma``, as the kernel reads it). The header is compiled into users' builds and its
#: names and values come from a store that may hold recordings imported from anywhere: a value
#: with a newline would add a line (``#include``) of its own.
_MACRO_VALUE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?[A-Za-z]*|[A-Za-z_][A-Za-z0-9_]*")
#: What an entry (template instantiation) may hold: names, numbers and template punctuation;
#: no ``/`` (a comment), ``#``, quote or backslash
_ENTRY = re.compile(r"[A-Za-z0-9_:<>,.+\-*() ]+")
#: parameters a header cannot set, and what they are
_UNSET = {
    Role.OPTION: "compiler option",
    Role.LAUNCH: "launch",
    Role.TEXT: "substituted in the PTX",
}


@dataclass(frozen=True)
class TunedEntry:
    """The fastest correct config of one study, and how it was built and launched."""

    study: StudyInfo
    config: Config
    value: float
    target: str  #: the compile-time macro that selects it
    #: the ``-D`` macros, in the compiler's order (for a recorded space: its parameters)
    defines: tuple[tuple[str, str], ...]
    flags: tuple[str, ...]  #: the compiler's flags that made the binary (none if recorded)
    entry: str | None  #: template instantiation or kernel symbol
    launch: Launch | None
    #: option, launch and PTX text parameters (a header cannot set them)
    unset: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    language: str = ""  #: "cuda" or "ptx" ("" for a recorded space)


@dataclass(frozen=True)
class TunedHeader:
    kernel: str
    entries: tuple[TunedEntry, ...]
    skipped: tuple[tuple[str, str], ...]  #: (study, why) of studies without an entry


def collect(store: Store, kernel: str, studies: Sequence[str] = ()) -> TunedHeader:
    """The entries of ``kernel``'s studies (or of the named ``studies`` only).

    A kernel name with a pinned variant (``reduce[OP=max]``) takes that variant's studies
    only; a plain name takes every variant's. Compile-only studies measured nothing and are
    left out.

    Raises:
        ConfigError: no such study, studies of other kernels named, nothing tuned, or studies
            whose parameters differ (one table holds one parameter list).
        StoreError: the store is damaged.
    """
    if studies:
        chosen = [store.find_study(name) for name in studies]
        others = [s.name for s in chosen if base_kernel(s.kernel) != base_kernel(kernel)]
        if others:
            raise ConfigError(f"`study` {others[0]!r} is not a study of {kernel}")
    else:
        chosen = select_studies(store, StudySelection(kernel, Variants.AS_NAMED))
    if not chosen:
        raise ConfigError(
            f"the store {store.shown_url} has no measured study of {kernel}: tune it first "
            "(workbench store list shows what is there)"
        )
    names = {tuple(n for n, _ in s.parameters) for s in chosen}
    if len(names) > 1:
        raise ConfigError(
            f"the studies of {kernel} have different parameters "
            f"({' / '.join(', '.join(n) for n in sorted(names))}): one header holds one "
            "parameter list; choose studies with `study`"
        )
    entries: list[TunedEntry] = []
    skipped: list[tuple[str, str]] = []
    taken: set[str] = set()
    for study in chosen:
        best = study_best(store, study)
        if best is None or best.measurement.value is None:
            skipped.append((study.name, "no correct evaluation"))
            continue
        target = _target(study, taken)
        rebuilt = study_space(study, kept_space(store, study))
        try:
            entries.append(
                tuned_entry(
                    study, dict(best.config), best.measurement.value, target, rebuilt=rebuilt
                )
            )
        except (ConfigError, CompileError) as exc:
            skipped.append((study.name, str(exc)))
            continue
        taken.add(target)
    if not entries:
        why = "; ".join(f"{name}: {reason}" for name, reason in skipped)
        raise ConfigError(f"no study of {kernel} has a config to write ({why})")
    return TunedHeader(base_kernel(kernel), tuple(entries), tuple(skipped))


def _target(study: StudyInfo, taken: set[str]) -> str:
    name = "WORKBENCH_" + _NOT_IDENT.sub("_", study.name).strip("_").upper()
    return name if name not in taken else f"{name}_{study.id}"


def tuned_entry(
    study: StudyInfo,
    config: Config,
    value: float,
    target: str | None = None,
    *,
    rebuilt: tuple[Space | None, str | None] | None = None,
) -> TunedEntry:
    """How ``config`` of ``study`` was built and launched (``target``: its macro, by default
    named after the study; ``rebuilt``: ``study_space(study, kept)`` where the caller has it,
    else the space file's). Notes say where the space file on this machine now differs.

    Raises:
        ConfigError: the study's space file is gone or no longer fits the config, or a macro
            name, value or entry is not one a header can write (a hostile recording's).
        CompileError: the kernel source cannot be read.
    """
    target = target or _target(study, set())
    from workbench.compiler.jobs import make_job

    space, why = rebuilt or study_space(study)
    if space is None:
        if study.space_path:  # a space study whose file is gone: its macros are unknown
            raise ConfigError(why or "its space file cannot be loaded")
        return _recorded_entry(study, config, value, target)
    if sorted(config) != sorted(space.names):
        raise ConfigError(
            f"its best config ({', '.join(config)}) does not fit the space file now "
            f"({', '.join(space.names)}): tune it again"
        )
    notes = _file_notes(study, config, space)
    job = make_job(space, config)
    _check_defines(job.options.defines)
    entry = job.name_expression or job.entry_kernel
    if entry is not None and not _ENTRY.fullmatch(entry):
        raise ConfigError(f"its entry {entry!r} is not a C++ name a header can define")
    launch: Launch | None = None
    try:
        launch = launch_geometry(space, config)
    except ConfigError as exc:
        notes.append(f"launch geometry: {exc}")
    return TunedEntry(
        study,
        config,
        value,
        target,
        job.options.defines,
        tuple(job.options.portable_flags(job.language)),
        entry,
        launch,
        _unset_parameters(space, config),
        tuple(notes),
        job.language,
    )


def _recorded_entry(study: StudyInfo, config: Config, value: float, target: str) -> TunedEntry:
    """A recorded space's entry: its parameters as Kernel Tuner passes them (``-DNAME=VALUE``),
    no flags, entry or geometry (it has no space file to say them).

    Raises:
        ConfigError: a name or value a header cannot write.
    """
    from workbench.compiler.options import macro_value

    defines = tuple((name, macro_value(v)) for name, v in config.items())
    _check_defines(defines)
    return TunedEntry(study, config, value, target, defines, (), None, None)


def _unset_parameters(space: Space, config: Config) -> tuple[str, ...]:
    """The parameters a header cannot set (compiler options, launch, PTX text), each with its
    value and what it is, for the target's comment."""
    return tuple(
        f"{p.name}={_text(config[p.name])} ({_UNSET[p.role]})"
        for p in space.spec.parameters
        if p.role in _UNSET
    )


def _file_notes(study: StudyInfo, config: Config, space: Space) -> list[str]:
    """What the space file on this machine now says against the entry made from ``space``:
    changed since the study was tuned, the config no longer valid in it. A space rebuilt from
    the store's copy is what was tuned, and the file is looked at apart (none there: nothing
    to say)."""
    now = space_file(study)[0] if space.spec.kept else space
    if now is None:
        return []
    notes = []
    if space_changed(study, now):
        made = (
            "those it was tuned with (the store's copy)"
            if space.spec.kept
            else "what the current files give"
        )
        notes.append(
            f"{now.spec.path} or its kernel changed since this was tuned: the macros are {made}"
        )
    if problems := now.explain(config):
        notes.append("not valid in the space file now: " + "; ".join(p.message for p in problems))
    return notes


def _check_defines(defines: Sequence[tuple[str, str]]) -> None:
    """Refuse a macro a header cannot write as it is (the study is then left out, and said).

    Raises:
        ConfigError: a name that is not a C identifier (or is a keyword), or a value that is
            not a number or an identifier.
    """
    for name, value in defines:
        if not _IDENT.fullmatch(name):
            raise ConfigError(
                f"parameter name {name!r} is not a C identifier: a header cannot #define it"
            )
        if name in _KEYWORDS:
            raise ConfigError(
                f"parameter name {name!r} is a C++ keyword: a header cannot #define it"
            )
        if not _MACRO_VALUE.fullmatch(value):
            raise ConfigError(
                f"{name}={value!r} is not a number or an identifier: a header cannot #define it"
            )


@dataclass(frozen=True)
class _HeaderMacros:
    """The header's own macros, named after the kernel (``WORKBENCH_GEMM_ENTRY``...)."""

    entry: str  #: the kernel to launch, defined by a target
    chosen: str  #: the target's name, defined by a target
    undef: str  #: defined by a user before including again: take the kernel's macros back
    guard: str  #: the include guard

    @classmethod
    def of(cls, ns: str) -> _HeaderMacros:
        prefix = f"WORKBENCH_{ns.upper()}"
        return cls(
            f"{prefix}_ENTRY", f"{prefix}_TARGET", f"{prefix}_UNDEF", f"{prefix}_TUNED_HEADER"
        )


def render(header: TunedHeader, *, store_url: str) -> str:
    """The header's text (C++17: ``inline constexpr`` tables). The same store gives the same
    text (no time of writing in it): a header kept in a repository changes only when a
    tuning result does.

    Raises:
        ConfigError: a parameter value C++ cannot spell (an infinite or NaN float).
    """
    ns = _identifier(header.kernel)
    macros = _HeaderMacros.of(ns)
    out = _targets_comment(header, store_url)
    out += _usage_and_undef(header, ns, macros)
    out += _target_blocks(header, macros)
    out += ["#endif", "", f"#ifndef {macros.chosen}"]
    out += _table(header, ns)
    out.append(f"#endif  // {macros.chosen}")
    out.append(f"#endif  // {macros.undef}, {macros.guard}")
    return "\n".join(out) + "\n"


def _targets_comment(header: TunedHeader, store_url: str) -> list[str]:
    """The opening comment: where the header comes from, its targets and their values, and
    the studies left out with why."""
    from workbench import __version__

    out = [
        f"// Tuned configurations of {_line(header.kernel)}: the fastest correct config of each",
        f"// study in {_line(store_url)}, written by workbench {__version__}.",
        "// Do not edit: write it again (workbench store header) after tuning.",
        "//",
        "// Compile time: define one target before including this header (and the kernel's",
        "// source after it); the header then defines the kernel's macros as the workbench",
        "// passed them to NVRTC. Targets:",
    ]
    for e in header.entries:
        out.append(f"//   {e.target}")
        out.append(f"//     {_line(e.study.name)}: {e.value:.6g} {_line(e.study.unit)}")
    for name, why in header.skipped:
        out.append(f"// Not here: {_line(name)}: {_line(why)}")
    return out


def _usage_and_undef(header: TunedHeader, ns: str, macros: _HeaderMacros) -> list[str]:
    """How to use the header, then its second inclusion (``#undef`` of every kernel macro)
    and the start of its first (the guard)."""
    return [
        f"// A target also defines {macros.entry}, the kernel to launch (a template",
        f"// instantiation carries the template parameters), and {macros.chosen}, its name.",
        "// The kernel's macros are unprefixed (BLOCK, not GEMM_BLOCK), as its source reads them:",
        f"// to keep them out of the rest of the file, define {macros.undef} after the kernel's",
        "// source and include this header again; it then takes back every macro a target",
        f"// defines but {macros.entry} and {macros.chosen}.",
        f"// Run time (no target defined): workbench_tuned::{ns}::entries[] holds every entry",
        "// (parameters, shape, value, compiler flags, entry, launch geometry); its fields carry",
        "// the parameters' names, so include it where no macro of those names is defined.",
        f"#if defined({macros.undef})  // included again after the kernel: take its macros back",
        *(f"#undef {name}" for name in _defined_names(header)),
        f"#undef {macros.undef}",
        f"#elif !defined({macros.guard})",
        f"#define {macros.guard}",
        "",
    ]


def _target_blocks(header: TunedHeader, macros: _HeaderMacros) -> list[str]:
    """One ``#if defined(TARGET)`` block per entry (an ``#error`` if several are defined)."""
    out = []
    if len(header.entries) > 1:
        out += [
            "#if " + " + ".join(f"defined({e.target})" for e in header.entries) + " > 1",
            f'#error "define at most one {_line(header.kernel)} target of this header"',
            "#endif",
        ]
    for i, e in enumerate(header.entries):
        out.append(f"{'#if' if i == 0 else '#elif'} defined({e.target})")
        out += target_lines(e)
        if e.entry:
            out.append(f"#define {macros.entry} {e.entry}")
        out.append(f"#define {macros.chosen} {_cstr(e.target)}")
    return out


def _defined_names(header: TunedHeader) -> list[str]:
    """Every macro a target of ``header`` defines for the kernel, each once, sorted."""
    return sorted({name for e in header.entries for name, _ in e.defines})


def target_lines(e: TunedEntry) -> list[str]:
    """A target's comments and ``#define`` lines, as the header writes them."""
    lines = [f"// {_line(e.study.name)}: {e.value:.6g} {_line(e.study.unit)}"]
    if e.study.replay_source:
        lines.append(f"// replayed from {_line(e.study.replay_source)}")
    if e.entry:
        lines.append(f"// entry: {_line(e.entry)}")
    if e.flags:
        tool = "ptxas" if e.language == "ptx" else "NVRTC"
        lines.append(f"// {tool} flags: {_line(' '.join(e.flags))}")
    else:
        lines.append("// a recorded space: its parameters as Kernel Tuner passes them")
    if e.unset:
        lines.append(f"// not set by this header: {_line(', '.join(e.unset))}")
    if e.launch is not None:
        lines.append(
            f"// launch: grid {e.launch.grid}, block {e.launch.block}, "
            f"{e.launch.shared_bytes} bytes of dynamic shared memory"
        )
    lines += [f"// note: {_line(n)}" for n in e.notes]
    lines += [f"#define {name} {value}" for name, value in e.defines]
    return lines


def _table(header: TunedHeader, ns: str) -> list[str]:
    """The run-time table: ``Params``, ``Shape`` (where every study has the same shape names)
    and ``Entry`` structs, and one ``entries[]`` row per entry."""
    params = [name for name, _ in header.entries[0].study.parameters]
    ctypes = {name: _ctype([e.config[name] for e in header.entries]) for name in params}
    fields = _fields(params)
    shapes = [parse_shape_label(e.study.shape_label) for e in header.entries]
    shape_keys = _shared_shape_keys(shapes)
    shape_fields = _fields(shape_keys or ())
    # a macro named like a field (-DBLOCK=256 on the command line) would rewrite the field's
    # name into nonsense: said plainly instead (NVRTC has no push_macro to save and restore it)
    out = [
        f'#ifdef {m}\n#error "macro {m} is defined here and would rename a field of the '
        f'workbench_tuned::{ns} table: include this header before it is defined"\n#endif'
        for m in sorted({*fields.values(), *shape_fields.values()})
    ]
    out += [
        "namespace workbench_tuned {",
        f"namespace {ns} {{",
        "",
        "struct Params {",
        *(f"  {ctypes[n]} {fields[n]};" for n in params),
        "};",
    ]
    if shape_keys is not None:
        out += ["struct Shape {", *(f"  long long {shape_fields[k]};" for k in shape_keys), "};"]
    out += _entry_struct(with_shape=shape_keys is not None)
    out.append("inline constexpr Entry entries[] = {")
    for e, shape in zip(header.entries, shapes, strict=True):
        shape_values = (
            [shape[k] for k in shape_keys] if shape is not None and shape_keys is not None else None
        )
        out.append("  {" + ", ".join(_entry_row(e, shape_values, params, ctypes)) + "},")
    out += [
        "};",
        f"inline constexpr int entry_count = {len(header.entries)};",
        "",
        f"}}  // namespace {ns}",
        "}  // namespace workbench_tuned",
    ]
    return out


def _shared_shape_keys(shapes: Sequence[dict[str, int] | None]) -> list[str] | None:
    """The shape's names where every study's shape has the same ones, in order; else None (a
    ``Shape`` struct needs one list)."""
    keys = list(shapes[0]) if shapes[0] is not None else None
    if keys is not None and any(s is None or list(s) != keys for s in shapes):
        return None
    return keys


def _entry_struct(*, with_shape: bool) -> list[str]:
    """The ``Entry`` struct: one table row's fields."""
    return [
        "struct Entry {",
        "  const char *target;  // the compile-time target macro",
        "  const char *study;",
        "  const char *device;  // the GPU that measured",
        "  const char *arch;",
        "  const char *shape_label;",
        *(["  Shape shape;"] if with_shape else []),
        "  Params params;",
        "  double value;  // the best value, in unit (lower is better)",
        "  const char *unit;",
        '  const char *compiler;  // "nvrtc", "ptxas" (a PTX kernel) or "" (a recorded space)',
        "  const char *flags;  // the compiler's",
        '  const char *entry;  // template instantiation or kernel symbol ("" if unknown)',
        "  bool launch_known;",
        "  unsigned grid[3];",
        "  unsigned block[3];",
        "  unsigned dynamic_shared_bytes;",
        "};",
        "",
    ]


def _entry_row(
    e: TunedEntry, shape: list[int] | None, params: list[str], ctypes: dict[str, str]
) -> list[str]:
    """One entry's initialisers, in the ``Entry`` struct's order (``shape``: its values where
    the table has a ``Shape``)."""
    launch = e.launch
    return [
        _cstr(e.target),
        _cstr(e.study.name),
        _cstr(e.study.device_key),
        _cstr(e.study.arch or ""),
        _cstr(e.study.shape_label),
        *(["{" + ", ".join(str(v) for v in shape) + "}"] if shape is not None else []),
        "{" + ", ".join(_literal(e.config[n], ctypes[n]) for n in params) + "}",
        _literal(e.value, "double"),
        _cstr(e.study.unit),
        _cstr({"cuda": "nvrtc", "ptx": "ptxas"}.get(e.language, "")),
        _cstr(" ".join(e.flags)),
        _cstr(e.entry or ""),
        "true" if launch else "false",
        "{" + ", ".join(str(v) for v in (launch.grid if launch else (0, 0, 0))) + "}",
        "{" + ", ".join(str(v) for v in (launch.block if launch else (0, 0, 0))) + "}",
        str(launch.shared_bytes if launch else 0),
    ]


def _ctype(values: Sequence[Value]) -> str:
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if any(isinstance(v, (str, bool)) for v in values):
        return "const char *"
    if all(isinstance(v, int) for v in values):
        return "long long"
    return "double"


def _literal(value: Value, ctype: str) -> str:
    if ctype == "bool":
        return "true" if value else "false"
    if ctype == "const char *":
        return _cstr(_text(value))
    if ctype == "long long":
        return str(value)
    number = float(value)
    if not math.isfinite(number):
        raise ConfigError(f"the value {value!r} cannot be written as a C++ literal")
    text = repr(number)
    return text if any(c in text for c in ".en") else text + ".0"


def _text(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _cstr(text: str) -> str:
    # JSON's escapes (\" \\ \n \uXXXX) are C++ string-literal escapes too
    return json.dumps(text)


def _fields(names: Sequence[str]) -> dict[str, str]:
    """Each name as a C++ member name: kept when it is one, else made one (and numbered when
    two names make the same)."""
    fields: dict[str, str] = {}
    for name in names:
        field = name
        if not _IDENT.fullmatch(name) or name in _KEYWORDS:
            text = _NOT_IDENT.sub("_", name).strip("_") or "param"
            field = f"{text}_" if text[0].isalpha() else f"p_{text}"
        while field in fields.values():
            field += "_"
        fields[name] = field
    return fields


def _identifier(kernel: str) -> str:
    text = _NOT_IDENT.sub("_", kernel).strip("_") or "kernel"
    return text if text[0].isalpha() and text not in _KEYWORDS else f"k_{text}"


def _line(text: str) -> str:
    """Text for a one-line comment: a newline would end it, a control character would reach
    the terminal of whoever prints the header, and a final backslash would continue the
    comment over the next line (a #define)."""
    line = printable(" ".join(text.split()))
    return f"{line} (sic)" if line.endswith("\\") else line
