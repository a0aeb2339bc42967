"""Names and messages from files and stores reach the terminal with their control characters
written as escapes, and the commands the CLI suggests are quoted for a shell.

A recording imported from anywhere names its kernel and device: the real pnpoly cache below
is given names that would recolour, retitle and hide the terminal (and run a command if the
suggested command line were pasted), and the CLI is run on it.
"""

from __future__ import annotations

import gzip
import json
import shlex
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, missing

from workbench.printable import printable

pytestmark = pytest.mark.usefixtures("private_dirs")

PNPOLY = CACHES / "pnpoly_RTX_3090.json.gz"
#: recolour, set the window title, hide what follows, a one-byte CSI (clear the screen)
HOSTILE_KERNEL = "pn\x1b[31mRED\x1b]0;TITLE\x07\x1b[8mHIDDEN\x9b2J"
HOSTILE_DEVICE = "GPU\x1b[5m\nsecond line\x7f"
SHELL_KERNEL = "pn$(touch x)"


def _control_chars(text: str) -> list[str]:
    """The characters of ``text`` a terminal takes as controls (newlines aside)."""
    return [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]


def _recording(tmp_path: Path, kernel: str, device: str) -> Path:
    """A slice of the real pnpoly cache (its measured times kept) under other names."""
    with gzip.open(PNPOLY) as f:
        doc = json.loads(f.read())
    doc["cache"] = dict(list(doc["cache"].items())[:200])
    doc["kernel_name"] = kernel
    doc["device_name"] = device
    path = tmp_path / f"rec-{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.skipif(not PNPOLY.is_file(), reason=missing(PNPOLY))
def test_recorded_names_reach_the_terminal_escaped(tmp_path: Path) -> None:
    rec = _recording(tmp_path, HOSTILE_KERNEL, HOSTILE_DEVICE)
    code, out, err = invoke("tune", "--replay", str(rec), "--budget", "5")
    assert code == 0, err
    assert not _control_chars(out + err)
    # the progress bar and the table title name the kernel, escaped, on one line
    assert out.count(printable(HOSTILE_KERNEL)) >= 2
    assert printable(HOSTILE_DEVICE) in out  # (its newline shown as \n)
    code, out, err = invoke("store", "list")
    assert code == 0, err
    assert not _control_chars(out + err)
    assert "\\x1b[8mHIDDEN\\x9b2J" in out and "GPU\\x1b[5m\\nsecond line\\x7f" in out


@pytest.mark.skipif(not PNPOLY.is_file(), reason=missing(PNPOLY))
def test_the_suggested_header_command_is_quoted_for_a_shell(tmp_path: Path) -> None:
    rec = _recording(tmp_path, SHELL_KERNEL, "NVIDIA GeForce RTX 3090")
    code, out, err = invoke("tune", "--replay", str(rec), "--budget", "5")
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if x.startswith("For your build: ")]
    command = shlex.split(line.removeprefix("For your build: "))
    assert command == [
        "workbench",
        "store",
        "header",
        SHELL_KERNEL,
        "-o",
        f"{SHELL_KERNEL}_tuned.h",
    ]


def test_a_damaged_store_is_named_on_one_line_without_its_control_bytes(tmp_path: Path) -> None:
    """A database that is not a store names its tables: one named to attack the terminal."""
    path = tmp_path / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute('CREATE TABLE "t\x1b]0;TITLE\x07\x1b[8m\nline 2\x9b" (a)')
    code, out, err = invoke("store", "list", "--storage", str(path))
    assert code == 2
    assert not _control_chars(out + err)
    assert len(err.strip().splitlines()) == 1
    assert "not a workbench store (tables: t\\x1b]0;TITLE\\x07\\x1b[8m\\nline 2\\x9b)" in err


def test_printable_escapes_every_control_character() -> None:
    text = "".join(map(chr, range(0x20))) + "ok\x7f\x85\x9b\u202e"
    shown = printable(text)
    assert not _control_chars(shown) and "\n" not in shown and "\u202e" not in shown
    assert shown.startswith("\\x00\\x01") and "\\n" in shown and "\\t" in shown
    assert shown.endswith("ok\\x7f\\x85\\x9b\\u202e")
    assert printable("a\nb", newlines=True) == "a\nb"
