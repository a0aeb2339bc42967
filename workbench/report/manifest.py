"""What a report directory holds: the pages that ``workbench report`` runs wrote there.

``workbench report K`` rewrites the pages about K and keeps the others (still linked from the
index, marked with when they were made). A page of an earlier run that this run would have
written but did not (a study gone from the store, a kernel with no regression run left, the
static page of a kernel that has a study now) is deleted with its PNGs, so that nothing stale
stays linked or lies beside the fresh pages. Pages of another store are all replaced. Only
files listed in the manifest, which a report wrote, are ever deleted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from workbench.jsontext import strict_dumps
from workbench.report.data import kernel_matches
from workbench.report.pages import Link

#: The manifest's file name in the report directory.
MANIFEST = ".workbench-report.json"
FORMAT = 1


@dataclass(frozen=True)
class ManifestEntry:
    """One page of the directory: its index entry, when it was made, its PNG files."""

    link: Link
    made: str
    pngs: tuple[str, ...] = ()

    def concerns(self, kernel: str | None) -> bool:
        """Whether ``workbench report kernel`` (every kernel: None) writes this page."""
        if kernel is None:
            return True
        wanted = (kernel, Path(kernel).stem)
        return any(kernel_matches(k, w) for k in self.link.kernels for w in wanted)


@dataclass(frozen=True)
class Earlier:
    """What the manifest says earlier runs wrote: the store they read and their pages."""

    store: str | None
    entries: tuple[ManifestEntry, ...]
    problem: str | None = None  #: why the manifest could not be read (then nothing is known)


def read_manifest(out: Path) -> Earlier:
    """The manifest of ``out``; none, or one that cannot be read, knows no page."""
    path = out / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Earlier(None, ())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return Earlier(None, (), f"{path} cannot be read ({exc})")
    try:
        if doc["format"] != FORMAT:
            return Earlier(None, (), f"{path} is of format {doc['format']!r}, not {FORMAT}")
        entries = tuple(
            ManifestEntry(
                Link(**{**e["link"], "kernels": tuple(e["link"]["kernels"])}),
                str(e["made"]),
                tuple(str(p) for p in e["pngs"]),
            )
            for e in doc["pages"]
        )
    except (KeyError, TypeError, AttributeError) as exc:
        return Earlier(None, (), f"{path} is damaged ({type(exc).__name__}: {exc})")
    return Earlier(str(doc["store"]), entries)


def write_manifest(out: Path, store: str, entries: Sequence[ManifestEntry]) -> Path:
    """Write the manifest of ``out`` (every page it holds now)."""
    path = out / MANIFEST
    doc = {"format": FORMAT, "store": store, "pages": [asdict(e) for e in entries]}
    path.write_text(strict_dumps(doc, indent=1) + "\n", encoding="utf-8")
    return path


def tidy(
    earlier: Earlier,
    out: Path,
    store: str,
    kernel: str | None,
    written: set[str],
) -> tuple[list[ManifestEntry], list[str]]:
    """Keep the earlier pages about other kernels (of the same store, still there), delete
    the stale pages of this run's scope and every PNG of a page not kept. Returns the entries
    kept and what to tell the user about it."""
    kept, stale = [], []
    for e in earlier.entries:
        if e.link.file in written:
            continue
        if earlier.store == store and not e.concerns(kernel):
            if (out / e.link.file).is_file():
                kept.append(e)
        else:
            stale.append(e)
    removed = remove_files(out, [e.link.file for e in stale])
    remove_files(out, [p for e in earlier.entries if e not in kept for p in e.pngs])
    messages = []
    if earlier.problem:
        messages.append(f"Earlier pages of this directory are not linked: {earlier.problem}.")
    if removed:
        messages.append(
            f"Removed {len(removed)} page(s) of an earlier report that this one replaces "
            f"and no longer has: {', '.join(removed)}."
        )
    if kept:
        messages.append(
            f"{len(kept)} page(s) of other kernels come from earlier reports (made when their "
            "row says)."
        )
    return kept, messages


def remove_files(out: Path, names: Sequence[str]) -> list[str]:
    """Delete these files of ``out`` (those already gone are skipped); the names deleted.

    A name that leads outside ``out`` (a hand-edited manifest) is never followed."""
    root = out.resolve()
    removed = []
    for name in names:
        path = (out / name).resolve()
        if root not in path.parents or not path.is_file():
            continue
        path.unlink()
        removed.append(name)
    return removed
