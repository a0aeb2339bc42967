"""``workbench kernels`` and ``workbench space``: what is in the library, and what a space holds."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from workbench.cli.common import (
    ArchOpt,
    DeviceOpt,
    KernelNameArg,
    ShapeOpt,
    SpacesOpt,
    check_user_code,
    cli_errors,
    console,
    flag_wording,
)
from workbench.cli.tables import CELL_FRAME
from workbench.devices import device_for
from workbench.errors import ArchError, SpaceFileError, SparseSampleError
from workbench.jsontext import strict_dumps
from workbench.printable import printable
from workbench.spaces import Space, config_label, list_spaces, load_kernel, load_space
from workbench.spaces.model import ArgSpec, Config, SpaceSpec, SpaceVariant, TensorMapArg
from workbench.spaces.registry import SpaceEntry, variant_names
from workbench.spaces.space import WALK_SECONDS, WalkTimeout
from workbench.spaces.targets import one_arch, parse_shape
from workbench.spaces.variants import variant_command, variant_spec
from workbench.units import si

if TYPE_CHECKING:
    from workbench.search.problem import SpaceProblem
    from workbench.toolchain import Arch

#: Counting walks the pruned tree; above this many cartesian points, `space` asks for --count.
AUTO_COUNT_LIMIT = 2_000_000
#: `kernels` prints one line per kernel, whose description gets at least this many characters
#: (to make room, the other columns are written shorter, then the arches left out) ...
MIN_DESCRIPTION = 30
#: ... and at most this many (`workbench space NAME` prints the whole of it)
MAX_DESCRIPTION = 90


def clip_words(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters at a word boundary, with an ellipsis if cut."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    if text[width - 1] != " ":  # the last word is cut: drop it
        cut = cut.rsplit(" ", 1)[0]
    cut = cut.rstrip(" ,;:(")
    return cut + "…"


def kernels(
    spaces: SpacesOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the kernels: the built-in library and your --spaces directories."""
    with cli_errors(json_errors=as_json):
        rows: list[dict[str, Any]] = []
        entries = list_spaces(spaces or [])
        named = variant_names(entries)  # (those a file of their own name does not shadow)
        for entry in entries:
            try:
                spec = load_space(entry.path)
                space = Space(spec)  # (an arch without a device preset fails here)
            except (SpaceFileError, ArchError) as exc:  # one broken file: its row, not the list
                rows.append(
                    {
                        "name": entry.name,
                        "builtin": entry.builtin,
                        "path": str(entry.path),
                        "error": flag_wording(str(exc)),
                    }
                )
                continue
            # what a command finds is the file's name; a different `name:` inside is said
            mismatch = (
                f"found as {entry.name!r} (its file's name), but its name: is {spec.name!r}; "
                if spec.name != entry.name
                else ""
            )
            rows.append(
                {
                    "name": entry.name,
                    "name_in_file": spec.name,
                    "language": spec.language,
                    "arches": list(spec.arches),
                    "parameters": len(spec.parameters),
                    "points": space.cartesian_size,
                    "builtin": entry.builtin,
                    "path": str(entry.path),
                    "description": spec.description.strip(),
                    "warning": mismatch.rstrip("; ") or None,
                }
            )
            rows += [_variant_row(spec, v, entry) for v in spec.variants if v.name in named]
        if as_json:
            console.print_json(strict_dumps(rows))
            return
        _print_kernels(rows)


@dataclass(frozen=True)
class _Layout:
    """How the `kernels` table writes the columns beside the description."""

    arches: Callable[[Sequence[str]], str] | None  #: None: no arches column
    points: Callable[[int], str]
    language: bool = True  #: False: no lang column (the narrowest layout)


def _short_arches(arches: Sequence[str]) -> str:
    """``sm_80,89,90a``: the arches without repeating ``sm_``."""
    return ",".join(a if i == 0 else a.removeprefix("sm_") for i, a in enumerate(arches))


def _short_count(n: int) -> str:
    """``8.4G``, ``560k``, ``900``: three significant digits."""
    return si(n, "").replace(" ", "")


#: The layouts of `kernels`, widest first: the first to leave MIN_DESCRIPTION is used.
_LAYOUTS = (
    _Layout(" ".join, "{:,}".format),
    _Layout(_short_arches, "{:,}".format),
    _Layout(_short_arches, _short_count),
    _Layout(None, _short_count),
    _Layout(None, _short_count, language=False),
)


def _print_kernels(rows: list[dict[str, Any]]) -> None:
    """The kernels as a table of one line each at the console's width: the description cut at
    a word, no token split; an error or a warning is said in full below the table."""
    with_from = not all(r["builtin"] for r in rows)
    for layout in _LAYOUTS:
        headers, cells = _kernel_cells(rows, layout, with_from)
        fixed = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]
        room = console.width - sum(fixed) - CELL_FRAME * (len(headers) + 1) - 1
        if room >= MIN_DESCRIPTION:
            break
    caption = None if with_from else "all from the library (your own: --spaces DIR)"
    table = Table(title="kernels", caption=caption)
    for header in [*headers, "description"]:  # (ellipsis: only where the terminal is too narrow)
        right = header in ("params", "points")
        table.add_column(
            header, justify="right" if right else "left", no_wrap=True, overflow="ellipsis"
        )
    width = max(1, min(room, MAX_DESCRIPTION))
    for r, row in zip(rows, cells, strict=True):
        note = r.get("error") or r.get("warning")
        style = "red" if "error" in r else "yellow"
        text = f"[{style}]{escape(_clip(note, width))}[/]" if note else None
        table.add_row(*map(escape, row), text or escape(_clip(r["description"], width)))
    console.print(table)
    for r in rows:
        if note := r.get("error") or r.get("warning"):
            console.print(f"{escape(r['name'])}: {escape(note)}")


def _kernel_cells(
    rows: list[dict[str, Any]], layout: _Layout, with_from: bool
) -> tuple[list[str], list[list[str]]]:
    """The headers and plain cells of the columns beside the description, in ``layout``."""
    headers = ["name", "lang", "arches", "params", "points", "from"]
    cells = []
    for r in rows:
        where = "library" if r["builtin"] else _near_path(r["path"])
        if "error" in r:
            cells.append([r["name"], "", "", "", "", where])
            continue
        arches = layout.arches(r["arches"]) if layout.arches else ""
        points = layout.points(r["points"])
        cells.append([r["name"], r["language"], arches, str(r["parameters"]), points, where])
    left_out = {"arches"} if layout.arches is None else set()
    if not layout.language:
        left_out.add("lang")
    if not with_from:  # (every kernel is from the library: the caption says so)
        left_out.add("from")
    keep = [i for i, h in enumerate(headers) if h not in left_out]
    return [headers[i] for i in keep], [[printable(c[i]) for i in keep] for c in cells]


def _clip(text: str, width: int) -> str:
    """A description on one line of ``width`` (a control character as its escape)."""
    return clip_words(printable(" ".join(text.split())), width)


def _near_path(path: str) -> str:
    """A space file's path, relative to the current directory when it is under it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def space(
    kernel: KernelNameArg,
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    shape: ShapeOpt = None,
    sample: Annotated[int, typer.Option(min=0, help="How many valid configs to show.")] = 5,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    why: Annotated[
        list[str] | None,
        typer.Option(
            "--why",
            help="Explain whether a config is valid: NAME=VALUE[,NAME=VALUE...] (repeatable; "
            "unnamed parameters take their defaults).",
            show_default=False,
        ),
    ] = None,
    check_reference: Annotated[
        bool,
        typer.Option(
            "--check-reference",
            help="Run the reference once on the CPU (on --shape, else the space's smallest "
            "shape; the default config) and show what it returns: a wrong reference shows "
            "without a GPU.",
        ),
    ] = False,
    count: Annotated[
        bool | None,
        typer.Option(
            "--count/--no-count",
            help="Count valid configs (default: when the space has at most "
            f"{AUTO_COUNT_LIMIT:,} points; the count of a larger one is kept, and shown by later "
            "runs).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show a space: parameters, constraints, size, valid count, a sample, why-invalid."""
    with cli_errors():
        spec = load_kernel(kernel, spaces or [])
        missing = check_user_code(spec)
        target = one_arch(spec, arch)
        sp = Space(
            spec,
            shape=parse_shape(shape, spec.default_shape),
            arch=target,
            device=device_for(target, device),
        )
        _print_summary(sp, missing)
        if spec.reference is not None and check_reference:
            _show_reference_run(spec, sp, shape, target, device)
        _print_parameters(sp)
        console.print(f"cartesian size: {sp.cartesian_size:,}")
        if count is not False:
            _print_valid_count(sp, walk=count or sp.cartesian_size <= AUTO_COUNT_LIMIT)
        if sample > 0:
            _print_sample(sp, sample, seed)
        if why is not None:
            _explain(sp, why)


def _print_summary(sp: Space, missing: Mapping[str, Sequence[str]]) -> None:
    """What a space is: its name and file, description, source, arch, device, shape, args,
    the baselines whose packages are ``missing`` here, and its reference."""
    spec = sp.spec
    console.print(f"[bold]{escape(spec.name)}[/]  {escape(str(spec.path))}")
    if spec.description:
        console.print(escape(spec.description.strip()))
    console.print(
        f"source {escape(str(spec.source))}  ({spec.language}); arch {sp.arch.sm}; "
        f"device {sp.device.name}; shape {sp.shape}"
    )
    args = [_arg_label(a) for a in spec.args]
    console.print(f"args ({', '.join(escape(a) for a in args)})")
    for name, packages in missing.items():
        if packages:
            console.print(
                f"baseline {escape(name)}: needs {escape(', '.join(packages))}, not installed "
                "here (compare skips it on this machine)"
            )
    if spec.reference is not None:
        console.print(f"reference {escape(spec.reference.target)}")


def _print_parameters(sp: Space) -> None:
    """The parameters' table (the default: the arch's, where the space gives one), then the
    constraints."""
    params = Table(title="parameters")
    for col in ("name", "role", "values", "default", "description"):
        params.add_column(col, overflow="fold")
    default = sp.default_config()
    for p in sp.spec.parameters:
        shown = str(default[p.name])
        if default[p.name] != p.default:
            shown += f" ({sp.arch.sm}; else {p.default})"
        params.add_row(
            p.name,
            p.role.value + (f":{p.option}" if p.option else ""),
            escape(", ".join(map(str, p.values))),
            escape(shown),
            escape(p.description),
        )
    console.print(params)
    for c in sp.spec.constraints:
        console.print(f"  constraint: {escape(c.describe())}")
    console.print(
        "  and the launch limits: grid and block dimensions, threads per block, dynamic "
        "shared memory (the device's)"
    )


def _print_sample(sp: Space, n: int, seed: int) -> None:
    """``n`` valid configs drawn with ``seed`` (none, and why, when the draw fails)."""
    try:
        drawn = sp.sample(n, seed=seed)
    except SparseSampleError as exc:  # the summary above stands; only the draw failed
        console.print(f"  [yellow]sample: none[/]: {escape(str(exc))}")
        drawn = []
    for cfg in drawn:
        _print_config("  sample: ", cfg)


def _explain(sp: Space, why: Sequence[str]) -> None:
    """``--why``: whether the config the items name is valid, and if not, why.

    Raises:
        typer.Exit: with status 1 when it is invalid.
    """
    cfg = sp.parse_config([item for w in why for item in w.split(",")])
    problems = sp.explain(cfg)
    if not problems:
        _print_config("[green]valid[/]: ", cfg)
        return
    _print_config("[red]invalid[/]: ", cfg)
    for v in problems:
        console.print(f"  - {escape(v.message)}")
    raise typer.Exit(1)


def _print_valid_count(sp: Space, walk: bool) -> None:
    """The count of valid configs: the one an earlier ``--count`` kept for a large space, else
    walked when ``walk`` (``--count``, or a space of at most AUTO_COUNT_LIMIT points; the count
    of a larger one is kept), else how to get it, with the count of the tune's problem where a
    tune listed it."""
    from workbench.search.problem import SpaceProblem  # (Optuna: imported when it runs)
    from workbench.search.valid_sets import ValidSetCache

    cache, large = ValidSetCache(), sp.cartesian_size > AUTO_COUNT_LIMIT
    kept = cache.count(sp) if large else None
    if kept is not None:
        console.print(f"valid configs:  {kept:,} (counted by an earlier `space --count`)")
    elif walk:
        try:
            kept = sp.count_valid()
        except WalkTimeout as exc:  # (a huge or sparse space: how far the count got)
            console.print(
                f"valid configs:  {exc.found:,} or more (not counted to the end: the count "
                f"stopped after {exc.seconds:.0f} s, having checked {exc.visited:,} "
                "partial configs)"
            )
            return
        console.print(f"valid configs:  {kept:,}")
        if large:  # (a walk of seconds to minutes: the next `space` shows it at once)
            cache.put_count(sp, kept)
    else:
        console.print(
            f"valid configs:  not counted (over {AUTO_COUNT_LIMIT:,} points: --count walks "
            f"them, for up to {WALK_SECONDS:.0f} s, and keeps the count for later runs)"
        )
        _print_listed_count(SpaceProblem(sp))
    if kept == 0:  # bad input for every other command: said, with the reasons
        SpaceProblem(sp).check_not_empty()


def _print_listed_count(problem: SpaceProblem) -> None:
    """The valid count of the problem a tune searches (its variants pinned), where an earlier
    tune listed it (the valid-set cache keeps it)."""
    listed = problem.kept_total()
    if listed is not None:
        pins = " ".join(f"{name}={value}" for name, value in problem.pinned.items())
        what = f"with {pins}, as tune searches it" if pins else "as tune searches it"
        console.print(f"  {what}: {listed:,} (listed by an earlier tune)")


def _print_config(lead: str, config: Config) -> None:
    """Print ``lead`` (console markup) and the config's NAME=VALUE tokens joined by commas, on
    as many lines as the console's width needs: a line ends after a comma, never inside a
    token, and the lines after the first are indented under the first token."""
    indent = Text.from_markup(lead).cell_len
    tokens = [config_label({name: value}) for name, value in config.items()]
    lines: list[str] = [""]
    for i, token in enumerate(tokens):
        piece = token + ("," if i + 1 < len(tokens) else "")
        if lines[-1] and indent + len(lines[-1]) + len(piece) > console.width:
            lines.append("")
        lines[-1] += piece
    for n, line in enumerate(lines):  # (soft_wrap: rich never breaks the line again)
        console.print((lead if n == 0 else " " * indent) + escape(line), soft_wrap=True)


def _variant_row(spec: SpaceSpec, variant: SpaceVariant, entry: SpaceEntry) -> dict[str, object]:
    """A named variant's row: its space, and what its name stands for (``= reduce --set
    DTYPE=float16``)."""
    view = variant_spec(spec, variant.name)
    return {
        "name": variant.name,
        "name_in_file": spec.name,
        "variant_of": entry.name,
        "set": dict(variant.values),
        "language": spec.language,
        "arches": list(spec.arches),
        "parameters": len(view.parameters),
        "points": Space(view).cartesian_size,
        "builtin": entry.builtin,
        "path": str(entry.path),
        "description": f"= {variant_command(spec, variant)}"
        + (f": {variant.description.strip()}" if variant.description.strip() else ""),
        "warning": None,
    }


def _arg_label(arg: ArgSpec) -> str:
    """``A``, ``M:int32``, or ``tensor_map(A)``: one ``args`` entry as ``space show`` lists it."""
    if isinstance(arg, str):
        return arg
    if isinstance(arg, TensorMapArg):
        return f"tensor_map({arg.label})"
    return f"{arg.name or arg.value.text}:{arg.dtype}"


def _show_reference_run(
    spec: SpaceSpec, sp: Space, shape: list[str] | None, target: Arch, device: str | None
) -> None:
    """Run the reference on the CPU (the smallest shape unless one is given) and say what came
    back against the outputs the space declares."""
    import numpy as np

    from workbench.runners.reference import BadReferenceError, try_reference
    from workbench.runners.tensor_maps import TensorMapError

    small = sp
    if shape is None:
        shapes = [s for name in spec.shape_sets for s in spec.shapes(name)] or [spec.default_shape]
        smallest = min(shapes, key=lambda s: math.prod(s.values()))
        small = Space(spec, shape=smallest, arch=target, device=device_for(target, device))
    config = small.default_config()
    try:
        got = try_reference(small, config)
    except BadReferenceError as exc:
        raise spec.error("reference", f"on shape {small.shape}: {exc}") from None
    except TensorMapError as exc:  # (the kernel's arguments are built to call the reference)
        raise spec.error(exc.key or "args", f"on shape {small.shape}: {exc}") from None
    for name, arr in got.items():  # (NaN or inf is refused by try_reference where not allowed)
        count = int(np.count_nonzero(~np.isfinite(arr.astype(np.float64))))
        console.print(
            f"  reference ok on shape {small.shape}: {escape(name)} {arr.dtype} "
            f"{tuple(arr.shape)}" + (f", {count} NaN/inf (nonfinite: allowed)" if count else ""),
            soft_wrap=True,  # (one line whatever the width: a script may read it)
        )
