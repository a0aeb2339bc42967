"""One HTML page: sections of text, tables and plotly figures, no network access needed to
view it. plotly.js (4.8 MB) is inlined once (the first figure carries it) in a page that stands
alone; the pages of a report folder share one :data:`PLOTLY_JS` beside them instead.

Every string that came from the store (kernel names, parameter values, study names, commands)
goes through :func:`esc` before it reaches the page, and through :func:`esc` again before it
reaches a figure's text: plotly renders a subset of HTML tags in titles, labels and hover
text, and decodes entities back to plain characters for display.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

#: Figures are drawn without the plotly logo and without any network-fetching mode bar button.
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}
#: The file name of the plotly.js that the pages of a report folder share.
PLOTLY_JS = "plotly.min.js"


def write_plotly_js(folder: Path) -> Path:
    """Write the installed plotly's plotly.js as :data:`PLOTLY_JS` into ``folder``."""
    path = folder / PLOTLY_JS
    path.write_text(get_plotlyjs(), encoding="utf-8")
    return path


_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0;font-size:.9em}
.scroll{overflow-x:auto;max-width:100%}
td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}
td,th{overflow-wrap:normal;word-break:keep-all}
th{background:#f4f4f4}
.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.banner{background:#fff3cd;border:2px solid #d9a400;padding:.6em 1em;margin:1em 0}
.static{background:#e8f1fb;border:2px solid #4a7fb5;padding:.6em 1em;margin:1em 0}
.note{color:#555;font-size:.9em;overflow-wrap:anywhere}.missing{color:#8a4b00}
nav a{margin-right:1em}code{background:#f4f4f4;padding:0 .2em}
"""


def esc(value: object) -> str:
    """HTML-escape anything for the page (None shows as a dash)."""
    return "-" if value is None else html.escape(str(value), quote=True)


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe fragment of ``text`` (letters, digits, ``._-``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:limit] or "x"


def num(value: float | None, digits: int = 4) -> str:
    """A number with ``digits`` significant digits, or a dash."""
    return "-" if value is None else f"{value:.{digits}g}"


#: Where a config label (``BM=128,BN=256``) may wrap: after a comma that starts a parameter.
_PARAMETER_COMMA = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_]*=)")


def cell(value: object) -> str:
    """A table cell's escaped text, which may wrap between the parameters of a config label
    and at spaces, never inside a word or a number (the page's CSS: ``word-break: keep-all``,
    numeric cells ``nowrap``)."""
    return _PARAMETER_COMMA.sub(",<wbr>", esc(value))


def scrolling(table_html: str) -> str:
    """A table in a box that scrolls sideways when the table is wider than the page (its
    cells do not break words to fit)."""
    return f"<div class='scroll'>{table_html}</div>"


def table(
    header: Sequence[str], rows: Iterable[Sequence[object]], numeric: Sequence[int] = ()
) -> str:
    """An HTML table (in a box that scrolls sideways); every cell is escaped; columns in
    ``numeric`` align right and never wrap."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = "".join(
            f"<td class='num'>{esc(c)}</td>" if i in numeric else f"<td>{cell(c)}</td>"
            for i, c in enumerate(row)
        )
        body.append(f"<tr>{cells}</tr>")
    head_row = f"<tr>{head}</tr>" if any(header) else ""  # key/value tables need no header
    return scrolling(f"<table>{head_row}{''.join(body)}</table>")


@dataclass
class PageSection:
    """A titled part of a page: escaped HTML fragments and figures, in order."""

    title: str
    anchor: str
    parts: list[str | go.Figure] = field(default_factory=list)

    def text(self, text: str, css: str = "") -> None:
        """A paragraph of plain text (escaped)."""
        cls = f" class='{css}'" if css else ""
        self.parts.append(f"<p{cls}>{esc(text)}</p>")

    def note(self, text: str) -> None:
        self.text(text, "note")

    def html(self, fragment: str) -> None:
        """Trusted markup built by this package from escaped pieces (tables, lists)."""
        self.parts.append(fragment)

    def figure(self, fig: go.Figure) -> None:
        self.parts.append(fig)


@dataclass
class Page:
    """A whole report page."""

    title: str
    subtitle: str = ""
    banners: list[tuple[str, str]] = field(default_factory=list)  #: (css class, escaped html)
    sections: list[PageSection] = field(default_factory=list)
    footer: str = ""

    def section(self, title: str, anchor: str) -> PageSection:
        s = PageSection(title, anchor)
        self.sections.append(s)
        return s

    @property
    def figures(self) -> list[go.Figure]:
        return [p for s in self.sections for p in s.parts if isinstance(p, go.Figure)]

    def render(self, plotlyjs: bool | str = True) -> str:
        """The complete document; ``plotlyjs``: True inlines plotly.js with the first figure, a
        path (``plotly.min.js``) refers to that file instead."""
        out = [
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
            f"<title>{esc(self.title)}</title><style>{_STYLE}</style></head><body>",
            f"<h1>{esc(self.title)}</h1>",
        ]
        if self.subtitle:
            out.append(f"<p class='note'>{esc(self.subtitle)}</p>")
        for css, fragment in self.banners:  # first screen: where the numbers come from
            out.append(f"<div class='{css}' id='{css}-banner'>{fragment}</div>")
        links = "".join(f"<a href='#{s.anchor}'>{esc(s.title)}</a>" for s in self.sections)
        out.append(f"<nav>{links}</nav>")
        first = True
        for s in self.sections:
            out.append(f"<section id='{s.anchor}'><h2>{esc(s.title)}</h2>")
            for part in s.parts:
                if isinstance(part, go.Figure):
                    out.append(
                        part.to_html(
                            full_html=False,
                            include_plotlyjs=plotlyjs if first else False,
                            config=PLOT_CONFIG,
                            default_width="100%",
                        )
                    )
                    first = False
                else:
                    out.append(part)
            out.append("</section>")
        if self.footer:
            out.append(f"<hr><p class='note'>{esc(self.footer)}</p>")
        out.append("</body></html>")
        return "\n".join(out)
