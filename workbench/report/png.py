"""PNG export of a report's figures (for papers and pull requests) through kaleido, which
drives a Chromium: Debian's ``/usr/bin/chromium`` unless ``$BROWSER_PATH`` names another."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from workbench.errors import WorkbenchError

#: Debian's package (``apt-get install chromium``), what CI installs.
DEBIAN_CHROMIUM = "/usr/bin/chromium"
#: Pixels of an exported figure (scale 2 for print).
WIDTH, HEIGHT, SCALE = 1100, 600, 2


class PngUnavailable(WorkbenchError):
    """kaleido or a Chromium is missing: PNG export cannot run (the HTML is unaffected)."""


def find_chromium() -> str | None:
    """``$BROWSER_PATH``, Debian's chromium, or a ``chromium`` on the PATH."""
    for candidate in (os.environ.get("BROWSER_PATH"), DEBIAN_CHROMIUM):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium")


def check_png() -> str:
    """The Chromium kaleido will use.

    Raises:
        PngUnavailable: kaleido is not installed, or no Chromium is found.
    """
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise PngUnavailable(
            "PNG export needs kaleido, which is not installed: pip install 'kaleido>=1,<2'"
        ) from None
    chromium = find_chromium()
    if chromium is None:
        raise PngUnavailable(
            f"PNG export needs Chromium: none at {DEBIAN_CHROMIUM} or on the PATH "
            "(apt-get install chromium, or set BROWSER_PATH)"
        )
    return chromium


def write_pngs(figures: Sequence[go.Figure], paths: Sequence[Path]) -> list[Path]:
    """Write each figure to its path with one Chromium for all of them.

    Raises:
        PngUnavailable: kaleido or Chromium is missing, or Chromium failed.
    """
    chromium = check_png()
    import plotly.io as pio

    os.environ["BROWSER_PATH"] = chromium  # kaleido's browser finder reads it
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
    if not figures:
        return []
    _export(pio, list(figures), list(paths), chromium)
    # kaleido can return with a figure unwritten (seen with two Chromiums on two cores): the
    # missing ones are drawn once more, and what is still missing is an error, not a link
    missing = [i for i, p in enumerate(paths) if not _is_png(p)]
    if missing:
        _export(pio, [figures[i] for i in missing], [paths[i] for i in missing], chromium)
    if still := [paths[i] for i in missing if not _is_png(paths[i])]:
        raise PngUnavailable(
            f"PNG export with {chromium} wrote {len(paths) - len(still)} of {len(paths)} "
            f"figures, twice without {still[0]}"
        )
    return list(paths)


def _export(pio: Any, figures: list[go.Figure], paths: list[Path], chromium: str) -> None:
    """One kaleido call for ``figures``.

    Raises:
        PngUnavailable: Chromium failed.
    """
    try:
        pio.write_images(figures, [str(p) for p in paths], width=WIDTH, height=HEIGHT, scale=SCALE)
    except Exception as exc:  # kaleido raises several unrelated types for a browser failure
        raise PngUnavailable(f"PNG export with {chromium} failed: {exc}") from exc


def _is_png(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x89PNG"
    except OSError:
        return False
