"""Tables that fit the terminal: a cell wraps between its tokens, never inside one (a
``NAME=VALUE`` or an opcode stays whole), and columns that do not fit side by side are printed
in groups that repeat the key column, as pandas and R print a wide frame."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from workbench.printable import printable

#: Beyond this many differing parameters the table shows them in one ``config`` column.
MAX_PARAM_COLUMNS = 6
#: Columns a table cell takes besides its text: one space of padding each side and its left
#: border (rich's default box); the table adds one for its right edge.
CELL_FRAME = 3


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "left"  #: "left" or "right" (numbers)


@dataclass(frozen=True)
class ConfigCells:
    """Configs as table columns: the parameters that differ between rows (one column each, or
    one ``config`` column of ``NAME=VALUE`` tokens when they are many) and a caption naming
    those equal in every row."""

    columns: list[Column]
    rows: list[list[str]]  #: escaped cells, one list per config
    caption: str | None  #: escaped


def config_cells(configs: Sequence[Mapping[str, object]]) -> ConfigCells:
    names = list(dict.fromkeys(k for c in configs for k in c))
    # names and values from a store or a recording: one line each (a newline as \n)
    label = {n: printable(n) for n in names}
    shown = {n: [_show(c.get(n, "")) for c in configs] for n in names}
    varying = [n for n in names if len(set(shown[n])) > 1] if len(configs) > 1 else names
    same = [f"{label[n]}={shown[n][0]}" for n in names if n not in varying]
    caption = escape("in every row: " + " ".join(same)) if same else None
    if len(varying) > MAX_PARAM_COLUMNS:
        tokens = [
            " ".join(f"{label[n]}={shown[n][i]}" for n in varying) for i in range(len(configs))
        ]
        return ConfigCells([Column("config")], [[escape(t)] for t in tokens], caption)
    rows = [[escape(shown[n][i]) for n in varying] for i in range(len(configs))]
    return ConfigCells([Column(escape(label[n]), "right") for n in varying], rows, caption)


def print_table(
    out: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    caption: str | None = None,
    key: int = 1,
) -> None:
    """Print ``rows`` (rich markup cells) under ``columns`` within ``out``'s width. When the
    columns' narrowest widths (a whole header, the longest token of a cell) do not fit side by
    side, they go in as few groups as fit, of even widths, each led by the first ``key``
    columns. The title heads the first group; the caption is a line after the last."""
    plain = [[Text.from_markup(cell).plain for cell in row] for row in rows]
    least = [_least_width(c.header, [r[i] for r in plain]) for i, c in enumerate(columns)]
    most = [_natural_width(c.header, [r[i] for r in plain]) for i, c in enumerate(columns)]
    # a token wider than a column can ever be (a path in an error) is folded in its cell
    # rather than give every other column a table of its own
    widest = out.width - _span(least, list(range(key))) - CELL_FRAME
    least = [w if i < key else max(1, min(w, widest)) for i, w in enumerate(least)]
    for n, group in enumerate(_groups(least, out.width, key)):
        widths = _widths([least[i] for i in group], [most[i] for i in group], out.width)
        table = Table(title=title if n == 0 else None)
        for i, width in zip(group, widths, strict=True):
            table.add_column(
                columns[i].header,
                justify=columns[i].justify,  # type: ignore[arg-type]
                width=width,
                overflow="fold",  # (only a token wider than the whole terminal is cut)
            )
        for row in rows:
            table.add_row(*(row[i] for i in group))
        out.print(table)
    if caption:
        out.print(caption)


def _groups(least: list[int], width: int, key: int) -> list[list[int]]:
    """Column indices per printed table: the key columns, then the others in order, cut into
    as few groups as fit ``width`` and, among those cuts, the one whose widest group is the
    narrowest (a group of one column may still be too wide: rich folds it)."""
    keys = list(range(min(key, len(least))))
    rest = list(range(len(keys), len(least)))
    for count in range(1, len(rest) + 1):
        cuts = [
            [[*keys, *rest[a:b]] for a, b in itertools.pairwise((0, *inner, len(rest)))]
            for inner in itertools.combinations(range(1, len(rest)), count - 1)
        ]
        fitting = [c for c in cuts if all(_span(least, g) <= width for g in c)]
        if fitting:
            return min(fitting, key=lambda c: max(_span(least, g) for g in c))
    return [[*keys, i] for i in rest]


def _span(widths: list[int], group: list[int]) -> int:
    return sum(widths[i] for i in group) + CELL_FRAME * len(group) + 1


def _widths(least: list[int], most: list[int], width: int) -> list[int] | list[None]:
    """Text widths for one group: each column's natural width if they all fit, else its least
    width plus a share of the room left in proportion to what it would use more; None (rich
    decides, folding tokens) when even the least widths do not fit."""
    room = width - CELL_FRAME * len(least) - 1
    if sum(most) <= room:
        return most
    if sum(least) > room:
        return [None] * len(least)
    spare, wants = room - sum(least), [m - n for m, n in zip(most, least, strict=True)]
    given = [spare * w // sum(wants) for w in wants]
    for i in sorted(range(len(wants)), key=lambda i: wants[i] - given[i], reverse=True):
        if sum(given) == spare:
            break
        given[i] += 1
    return [n + g for n, g in zip(least, given, strict=True)]


def _least_width(header: str, cells: list[str]) -> int:
    """A whole header, and the longest token of any cell."""
    return max([len(header), *(len(t) for cell in cells for t in cell.split())])


def _natural_width(header: str, cells: list[str]) -> int:
    return max([len(header), *(len(line) for cell in cells for line in cell.splitlines())])


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return printable(value)
