"""The compile and tune tables at a terminal's width (``COLUMNS``): no line is longer, every
column header is there whole, a NAME=VALUE token or an opcode is never split across lines, and
the parameters equal in every row are on a caption line."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, needs_caches

from workbench.runners.base import TrialOutcome
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("private_dirs")

WIDTHS = (100, 80)
BORDERS = re.compile(r"[│┃┏┓┗┛┡┩└┘├┤┼━─┳┻╇╈╋]")
CAPTION = "in every row:"


def split_configs(configs: Sequence[Mapping[str, object]]) -> tuple[list[str], list[str]]:
    """(the parameters that differ between the configs, NAME=VALUE of those equal in all)"""
    names = list(configs[0])
    varying = [n for n in names if len({str(c[n]) for c in configs}) > 1]
    return varying, [f"{n}={configs[0][n]}" for n in names if n not in varying]


def check_table(out: str, width: int, headers: list[str], tokens: Counter, same: list[str]) -> None:
    """``out`` fits ``width``; each header is whole in a header row; each expected token is
    found whole as often as expected; ``same`` is on the caption line."""
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, "\n".join(lines)
    heads = [line for line in lines if "┃" in line]
    for header in headers:
        assert any(re.search(rf"┃ *{re.escape(header)} *┃", line) for line in heads), header
    table = [line for line in lines if BORDERS.search(line)]
    words = Counter(BORDERS.sub(" ", "\n".join(table)).split())
    assert {t: words[t] for t in tokens} == dict(tokens), "\n".join(table)
    (start,) = [i for i, line in enumerate(lines) if line.startswith(CAPTION)]
    words = []  # (a caption wider than the table goes on in the lines below it)
    for line in lines[start:]:
        if len(words) >= 3 + len(same) or not line.strip():
            break
        words += line.split()
    assert words[3:] == same


@pytest.mark.slow
def test_the_compile_table_fits_100_and_80_columns(tmp_path: Path) -> None:
    args = ["compile", "gemm_int8", "--sample", "4", "--arch", "sm_90a"]
    code, _, err = invoke(*args, "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    records = json.loads((tmp_path / "r.json").read_text())
    assert all(r["ok"] for r in records)
    varying, same = split_configs([r["config"] for r in records])
    assert len(varying) > 6 and same  # one config column of tokens, and a caption
    tokens: Counter = Counter()
    for r in records:
        tokens.update(f"{n}={r['config'][n]}" for n in varying)
        tokens.update(r["global_memory_ops"])
        tokens.update(f"{k}:{v}" for k, v in list(r["opcodes"].items())[:4])
    headers = ["config", "regs", "smem", "stack", "spill st/ld", "occupancy", "SASS"]
    headers += ["top opcodes", "global memory ops", "compile", "lints", "#"]
    for width in WIDTHS:  # (compiled once: the rest is answered from the compile cache)
        code, out, err = invoke(*args, env={"COLUMNS": str(width)})
        assert code == 0, err
        check_table(out, width, headers, tokens, same)


@pytest.mark.slow
@needs_caches
def test_the_tune_table_fits_100_and_80_columns() -> None:
    args = ["tune", "--replay", str(CACHES / "gemm_RTX_3090.json.gz"), "--budget", "30"]
    code, out, err = invoke(*args, "--json")
    assert code == 0, err
    doc = json.loads(out)
    store = Store(doc["store"])
    ok = [
        e
        for e in store.evaluations(store.find_study(doc["study"]))
        if e.measurement.outcome is TrialOutcome.OK
    ]
    top = sorted(ok, key=lambda e: e.measurement.value)[:10]
    varying, same = split_configs([e.config for e in top])
    assert len(varying) > 6 and same
    tokens = Counter(f"{n}={e.config[n]}" for e in top for n in varying)
    for width in WIDTHS:  # (the study is resumed: the same top 10)
        code, out, err = invoke(*args, env={"COLUMNS": str(width)})
        assert code == 0, err
        check_table(out, width, ["#", "config", "time (ms)"], tokens, same)


def test_a_token_wider_than_the_terminal_is_folded_in_its_cell_alone() -> None:
    """One cell's long path folds there; the other columns still share a table, not one each."""
    from rich.console import Console

    from workbench.cli.tables import Column, print_table

    out = Console(width=60, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    columns = [Column("#"), Column("regs"), Column("smem"), Column("stack"), Column("error")]
    path = "/very/long/path/to/a/kernel/source/that/failed/to/compile.cu:12:3:"
    print_table(out, columns, [["1", "40", "1024", "0", f"error at {path} here"]])
    lines = out.export_text().splitlines()
    assert max(len(line) for line in lines) <= 60
    assert sum("┃ #" in line for line in lines) == 2  # the error's table, and the others'
    assert any(re.search(r"┃ regs ┃ smem ┃ stack ┃", line) for line in lines)
    assert "".join(BORDERS.sub("", line).strip() for line in lines).count(path) == 1


def test_a_parameter_name_with_a_newline_is_one_header_line() -> None:
    """Names and values from a store or a recording may hold control characters: shown as
    escapes, never as a header broken over lines."""
    from rich.console import Console

    from workbench.cli.tables import Column, config_cells, print_table

    out = Console(width=100, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    cells = config_cells([{"WA\nVES": 1, "B": "x\ty"}, {"WA\nVES": 2, "B": "x\ty"}])
    rows = [[str(i), *row] for i, row in enumerate(cells.rows, 1)]
    print_table(out, [Column("#"), *cells.columns], rows, caption=cells.caption)
    text = out.export_text()
    header = next(line for line in text.splitlines() if "WA" in line)
    assert "WA\\nVES" in header and "VES" not in header.replace("WA\\nVES", "")
    assert "in every row: B=x\\ty" in text


def kernel_lines(out: str) -> list[list[str]]:
    """The cells of each body row of the ``kernels`` table."""
    rows = [line for line in out.splitlines() if line.startswith("│")]
    return [[c.strip() for c in line.strip("│").split("│")] for line in rows]


def cut_at_a_word(shown: str, text: str) -> bool:
    """``shown`` is ``text`` whole, or its first words and an ellipsis (the last word's
    trailing comma or colon may go), never a word cut inside."""
    words, kept = text.split(), shown.removesuffix("…").split()
    if not shown.endswith("…"):
        return kept == words
    last = len(kept) - 1
    return bool(kept) and kept[:last] == words[:last] and words[last].rstrip(",;:(") == kept[last]


@pytest.mark.parametrize("width", [*WIDTHS, 200])
def test_kernels_is_one_line_per_kernel_at_any_width(width: int) -> None:
    code, out, err = invoke("kernels", "--json")
    assert code == 0, err
    kernels = json.loads(out)
    code, out, err = invoke("kernels", env={"COLUMNS": str(width)})
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= width, out
    rows = kernel_lines(out)
    assert [r[0] for r in rows] == [k["name"] for k in kernels], out
    for row, kernel in zip(rows, kernels, strict=True):
        assert cut_at_a_word(row[-1], kernel["description"]), (row[-1], kernel["description"])
    header = next(line for line in out.splitlines() if "┃ name" in line)
    assert len(header.split("┃")[-2]) >= 32, out  # the description has room (30 + padding)
    if width >= 140:  # (all of it, as it was)
        assert "sm_80 sm_89 sm_90 sm_90a" in out and "268,738,560,000" in out  # gemm_int8


def test_kernels_says_errors_and_warnings_whole_below_the_table(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spaces = project / "spaces"
    text = (spaces / "tiny.yaml").read_text()
    (spaces / "other.yaml").write_text(text.replace("name: tiny", "name: elsewhere"))
    (spaces / "new.yaml").write_text(text.replace("[sm_80, sm_90]", "[sm_80, sm_120]"))
    monkeypatch.chdir(project)
    code, out, err = invoke("kernels", "--spaces", "spaces", env={"COLUMNS": "80"})
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= 80, out
    rows = {r[0]: r for r in kernel_lines(out)}
    assert {"tiny", "other", "new", "reduce"} <= set(rows)
    # where each comes from (a path under the current directory: relative)
    assert rows["tiny"][-2] == "spaces/tiny.yaml" and rows["reduce"][-2] == "library"
    said = " ".join(out.split())  # (the messages wrap at the console's width)
    assert "other: found as 'other' (its file's name), but its name: is 'elsewhere'" in said
    assert "new: " in said and "sm_120" in said


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_space_wraps_a_config_between_its_tokens(width: int) -> None:
    """gemm_int8's 21 parameters as NAME=VALUE,...: each line of a sample (or of --why) ends
    after a comma, never inside a token (the line broke at SWIZZLE=12 / 8)."""
    from workbench.spaces import config_label, load_kernel

    spec = load_kernel("gemm_int8", [])
    tokens = {config_label({p.name: v}) for p in spec.parameters for v in p.values}
    args = ["space", "gemm_int8", "--sample", "3", "--why", "PATH=mma", "--no-count"]
    code, out, err = invoke(*args, env={"COLUMNS": str(width)})
    assert code in (0, 1), err  # (1: the config of --why is invalid)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, out
    start = next(i for i, line in enumerate(lines) if line.startswith("  sample: "))
    end = next((i for i, line in enumerate(lines) if line.startswith("  - ")), len(lines))
    lead = re.compile(r"^\s*(sample|valid|invalid):")
    pieces = [p for line in lines[start:end] for p in lead.sub("", line).strip().split(",") if p]
    assert [p for p in pieces if p not in tokens] == [], out
    assert len(pieces) == 4 * len(spec.parameters), out
