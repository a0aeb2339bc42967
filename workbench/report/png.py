"""PNG export of a report's figures (for papers and pull requests) through kaleido, which
drives a Chromium: Debian's ``/usr/bin/chromium`` unless ``$BROWSER_PATH`` names another."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

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
    try:
        pio.write_images(
            list(figures), [str(p) for p in paths], width=WIDTH, height=HEIGHT, scale=SCALE
        )
    except Exception as exc:  # kaleido raises several unrelated types for a browser failure
        raise PngUnavailable(f"PNG export with {chromium} failed: {exc}") from exc
    return list(paths)
