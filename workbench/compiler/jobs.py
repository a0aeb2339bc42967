"""Turn (space, config, arch) into a compile job: source text, flags, entry, and a cache key.

This is the one place where parameter roles become compiler input: ``define`` parameters become
``-D`` macros, ``template`` parameters fill the entry's name expression, ``option`` parameters
become flags, ``text`` parameters are substituted into PTX, ``launch`` parameters do nothing
here (so configs that differ only in launch knobs share one binary).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.compiler.options import CompileOptions
from workbench.errors import CompileError, ExpressionError
from workbench.spaces.model import PLACEHOLDER, Value, read_source
from workbench.spaces.schema import Role
from workbench.spaces.space import Space
from workbench.toolchain import Arch, nvrtc_version, tool_version

#: Bump when the key's ingredients or the cached layout change.
KEY_SCHEMA_VERSION = 1
PTX_PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: ``#include "name"`` or ``#include <name>``: the bracket, then the name
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.MULTILINE)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class CompileJob:
    """Everything needed to compile one configuration, and nothing else."""

    language: str  #: "cuda" or "ptx"
    source: str  #: full text (PTX after substitution)
    filename: str
    options: CompileOptions
    name_expression: str | None  #: C++ template instantiation to emit, if any
    entry_kernel: str | None  #: plain symbol (extern "C" / PTX .entry), if no template
    header_digests: tuple[tuple[str, str], ...] = ()  #: (include as written, sha256)

    @property
    def arch(self) -> Arch:
        return self.options.arch

    def toolchain(self) -> str:
        if self.language == "ptx":
            return f"ptxas {tool_version('ptxas')}"
        return f"nvrtc {nvrtc_version()}"

    def key(self) -> str:
        """Content hash: same source, headers, flags, entry and toolchain give the same key."""
        payload = {
            "schema": KEY_SCHEMA_VERSION,
            "toolchain": self.toolchain(),
            "language": self.language,
            "flags": self.options.to_nvrtc_flags()
            if self.language == "cuda"
            else self.options.to_ptxas_flags(),
            "name_expression": self.name_expression,
            "entry": self.entry_kernel,
            "source": hashlib.sha256(self.source.encode()).hexdigest(),
            "headers": list(self.header_digests),
        }
        blob = json.dumps(payload, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()


def make_job(space: Space, config: Mapping[str, Value]) -> CompileJob:
    """The compile job for one config of ``space`` (its arch is the space's arch).

    Raises:
        CompileError: the source cannot be read, a placeholder has no value, or a derived
            value used in the entry fails to evaluate.
    """
    spec = space.spec
    try:
        text = spec.source_bytes().decode()
    except (OSError, UnicodeDecodeError) as exc:
        raise CompileError(f"cannot read {spec.source}: {exc}") from exc
    if spec.kept and spec.language == "numba":
        _check_numba_file(spec.source, text)
    defines: dict[str, Value] = {}
    knobs: dict[str, Value] = {}
    text_values: dict[str, Value] = {}
    for p in spec.parameters:
        value = config[p.name]
        if p.role is Role.DEFINE:
            defines[p.name] = value
            if isinstance(value, str) and IDENTIFIER.fullmatch(value):
                # `#if PATH_wgmma` works where `#if PATH == wgmma` cannot: text values also
                # define NAME_value=1
                defines[f"{p.name}_{value}"] = 1
        elif p.role is Role.OPTION:
            assert p.option is not None
            knobs[p.option] = value
        elif p.role is Role.TEXT:
            text_values[p.name] = value
    include_dirs = (str(spec.source.parent), *(str(d) for d in spec.include_dirs))
    options = CompileOptions.build(
        space.arch, defines, knobs, include_dirs=include_dirs if spec.language == "cuda" else ()
    )
    if spec.language == "numba":
        return _numba_job(space, config, text, options)
    if spec.language == "ptx":
        return CompileJob(
            "ptx",
            substitute_ptx(text, text_values, spec.source.name),
            spec.source.name,
            options,
            None,
            spec.entry_kernel,
        )
    name_expr = None
    if spec.entry_template is not None:
        name_expr = _fill_template(spec.entry_template, space, config)
    digests = header_digests(text, spec.source.parent, [Path(d) for d in include_dirs])
    return CompileJob(
        "cuda", text, spec.source.name, options, name_expr, spec.entry_kernel, digests
    )


def _check_numba_file(source: Path, kept: str) -> None:
    """A Numba kernel is Python, run to compile it: a space kept by a store (which may come
    from anywhere) compiles it only where its file on this machine holds the same text.

    Raises:
        CompileError: the file is gone or differs from the store's copy.
    """
    try:
        same = read_source(source).decode(errors="replace") == kept
    except OSError:
        same = False
    if not same:
        raise CompileError(
            f"{source} is gone or changed since the study was tuned: a Numba kernel is compiled "
            "from its file, never from the store's copy"
        )


def _numba_job(
    space: Space, config: Mapping[str, Value], text: str, options: CompileOptions
) -> CompileJob:
    """A Numba kernel's job: Numba's PTX for this config, assembled like hand-written PTX."""
    from workbench.compiler.numba_kernels import arg_types, numba_ptx

    spec = space.spec
    try:
        env = space.env(config)
    except ExpressionError as exc:
        raise CompileError(f"{spec.source.name}: {exc}") from exc
    knobs = {p.name: config[p.name] for p in spec.parameters if p.role is Role.DEFINE}
    cc = (space.arch.major, space.arch.minor)
    ptx = numba_ptx(spec, text, knobs, arg_types(spec, env), cc)
    name = f"{spec.source.stem}.ptx"
    return CompileJob("ptx", ptx.text, name, options, None, ptx.entry)


def _fill_template(template: str, space: Space, config: Mapping[str, Value]) -> str:
    try:
        env = space.env(config)
    except ExpressionError as exc:
        raise CompileError(f"entry template {template!r}: {exc}") from exc

    def value(match: re.Match[str]) -> str:
        v = env[match.group(1)]
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    return PLACEHOLDER.sub(value, template)


def substitute_ptx(text: str, values: Mapping[str, Value], filename: str) -> str:
    """Replace ``${NAME}`` in PTX (``$L__BB0_1``-style labels are left alone).

    Raises:
        CompileError: a placeholder has no parameter.
    """
    missing = sorted({m for m in PTX_PLACEHOLDER.findall(text) if m not in values})
    if missing:
        raise CompileError(f"{filename}: placeholder(s) {', '.join(missing)} have no parameter")

    def value(match: re.Match[str]) -> str:
        v = values[match.group(1)]
        if isinstance(v, bool):
            return "1" if v else "0"
        return str(v)

    return PTX_PLACEHOLDER.sub(value, text)


def header_digests(
    text: str, source_dir: Path, include_dirs: list[Path]
) -> tuple[tuple[str, str], ...]:
    """sha256 of every project header reachable from ``text`` (:func:`project_headers`), each
    with its include as written (``<name>`` for an angle-bracket include)."""
    return tuple(
        (name, hashlib.sha256(body).hexdigest())
        for name, _, body in project_headers(text, source_dir, include_dirs)
    )


def project_headers(
    text: str, source_dir: Path, include_dirs: list[Path], _seen: set[Path] | None = None
) -> list[tuple[str, Path, bytes]]:
    """Every project header reachable from ``text``, as (include as written, path, bytes): a
    quoted ``#include`` found beside the including file or in an include directory, an
    ``#include <...>`` found in an include directory (the source's own directory and the space's
    ``include_dirs``, which NVRTC searches before the toolkit's). Headers found in none of them
    are the toolkit's, covered by the toolchain version in the key. Every include is followed,
    even under ``#if``: a header that is hashed but not compiled only costs a recompile when it
    changes."""
    seen = _seen if _seen is not None else set()
    out: list[tuple[str, Path, bytes]] = []
    for bracket, name in INCLUDE.findall(text):
        quoted = bracket == '"'
        for d in (source_dir, *include_dirs) if quoted else include_dirs:
            candidate = (d / name).resolve()
            if candidate.is_file():
                break
        else:
            continue  # a toolkit header, or a missing one NVRTC will report
        if candidate in seen:
            continue
        seen.add(candidate)
        body = read_source(candidate)
        out.append((name if quoted else f"<{name}>", candidate, body))
        out += project_headers(body.decode(errors="replace"), candidate.parent, include_dirs, seen)
    return out


def defining_line(job: CompileJob, name: str) -> tuple[Path, int] | None:
    """Where a CUDA job's source, or a project header it includes, defines the variable
    ``name`` (the first line with ``name =``): for errors that point at the kernel's code.
    None for PTX jobs and for names it does not find."""
    if job.language != "cuda" or not job.options.include_dirs:
        return None
    source_dir, *include_dirs = (Path(d) for d in job.options.include_dirs)  # (make_job's order)
    pattern = re.compile(rf"\b{re.escape(name)}\s*=(?!=)")
    files = [(source_dir / job.filename, job.source)]
    for _, path, body in project_headers(job.source, source_dir, include_dirs):
        files.append((path, body.decode(errors="replace")))
    for path, text in files:
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                return path, number
    return None
