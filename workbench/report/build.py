"""``workbench report``: which pages a store yields, and writing them.

Pages: one per study (of ``kernel``, or every study when none is named), one per group of
profiles that belong to no study (reports imported from elsewhere), the regression timeline of
each kernel with regression runs, and an index. A library kernel with nothing in the store gets
a static page instead (compiled by the report, said on the page). Nothing at all: an error
that says what the store holds.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from pathlib import Path

from workbench.compiler import CompileCache
from workbench.errors import WorkbenchError
from workbench.profile.storage import ProfileRecord, load_profiles
from workbench.report import DEFAULT_OUT
from workbench.report.baselines import Baselines, gather_baselines
from workbench.report.data import StudyData, gather_studies, kernel_matches
from workbench.report.manifest import ManifestEntry, read_manifest, tidy, write_manifest
from workbench.report.overview import best_throughput
from workbench.report.page import PLOTLY_JS, Page, slug, write_plotly_js
from workbench.report.pages import Link, index_page, profiles_page, static_page, study_page
from workbench.report.png import write_pngs
from workbench.report.static import gather_static
from workbench.roofline import Ceilings
from workbench.spaces.model import base_kernel, config_label
from workbench.store import Store, StoreError
from workbench.supervisor import Progress


class NothingToReport(WorkbenchError):
    """The store holds nothing of the kernel (and it is not a library kernel)."""


class ReportNotWritten(WorkbenchError):
    """The output directory cannot be created or written."""


@dataclass(frozen=True)
class ReportOptions:
    out_dir: Path = DEFAULT_OUT
    png: bool = False
    ceilings: Ceilings | None = None  #: measured ceilings (scripts/ceilings.py output)
    spaces: tuple[Path, ...] = ()
    cache: CompileCache | None = None


@dataclass
class ReportResult:
    index: Path
    pages: list[Path] = field(default_factory=list)
    pngs: list[Path] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    figures: int = 0
    #: what happened to the pages earlier reports left in the directory (kept, deleted)
    housekeeping: list[str] = field(default_factory=list)


def build_reports(
    store: Store,
    kernel: str | None,
    options: ReportOptions,
    progress: Progress | None = None,
) -> ReportResult:
    """Write the report pages of ``kernel`` (or of the whole store) under ``options.out_dir``.

    Raises:
        NothingToReport: no study, profile or regression run of ``kernel``, and it is no
            kernel of the library (or the store is empty).
        ReportNotWritten: the output directory cannot be created or written.
        StoreError: the database failed.
        PngUnavailable: ``png`` was asked for and kaleido or Chromium is missing (the HTML
            pages are written first).
    """
    say = progress or (lambda _m: None)
    studies = gather_studies(store, kernel)
    profiles = [p for p in load_profiles(store) if kernel is None or _profile_of(p, kernel)]
    regress = _regress_kernels(store, kernel)
    messages: list[str] = []
    regress_files = {k: f"regress-{slug(k)}.html" for k in regress}
    pages, used = _study_pages(store, studies, profiles, options, regress_files, say)
    leftover = [p for p in profiles if id(p) not in used]
    pages += _profile_pages(leftover, {name for name, _, _ in pages}, options, say)
    if not pages and not regress:
        if kernel is None:
            raise NothingToReport(
                f"the store {store.shown_url} holds no study, profile or regression run: nothing "
                "to report (tune a kernel, import a profile or record a regression run first)"
            )
        pages.append(_static(kernel, options, say))
    out = options.out_dir
    try:
        return _write(store, kernel, pages, regress_files, messages, options, say)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(out) else ""
        raise ReportNotWritten(f"cannot write the report to {out}: {reason}{where}") from None


def _study_pages(
    store: Store,
    studies: list[StudyData],
    profiles: list[ProfileRecord],
    options: ReportOptions,
    regress_files: dict[str, str],
    say: Progress,
) -> tuple[list[tuple[str, Page, Link]], set[int]]:
    """A page per study, with the profiles of its configs; and which profiles they took (by
    ``id``), so that only the others get pages of their own."""
    pages: list[tuple[str, Page, Link]] = []
    used: set[int] = set()
    for data in studies:
        say(f"study {data.study.name}")
        mine = _attached(data, profiles)
        used |= {id(p) for p in mine}
        base = base_kernel(data.study.kernel)
        compared = gather_baselines(store, base)
        page = study_page(
            store, data, mine, compared, options.ceilings, options.cache, regress_files.get(base)
        )
        name = f"study-{data.study.id}-{slug(data.study.kernel)}.html"
        pages.append((name, page, _study_link(name, data, compared)))
    return pages, used


def _profile_pages(
    profiles: list[ProfileRecord], taken: set[str], options: ReportOptions, say: Progress
) -> list[tuple[str, Page, Link]]:
    """A page per group of profiles that belong to no study, named after its report file."""
    pages = []
    groups = _groups(profiles)
    names = [Path(g).name for g in groups]
    for group, members in groups.items():
        # a report file's name, unless another imported report has the same one: its path
        if names.count(Path(group).name) == 1:
            group = Path(group).name
        say(f"profiles {group}")
        name = _unique(f"profiles-{slug(group)}", taken)
        n = len(members)
        about = tuple(sorted({p.kernel for p in members}))
        link = Link(name, "profiles", group, f"{n} launch{'es' * (n != 1)}", about)
        pages.append((name, profiles_page(group, members, options.ceilings), link))
    return pages


def _write(
    store: Store,
    kernel: str | None,
    pages: list[tuple[str, Page, Link]],
    regress_files: dict[str, str],
    messages: list[str],
    options: ReportOptions,
    say: Progress,
) -> ReportResult:
    """Write the pages, the regression timelines, the index, the manifest and the PNGs under
    ``options.out_dir``; keep the pages of other kernels that earlier runs wrote there, delete
    the stale ones of this run's scope (:mod:`workbench.report.manifest`)."""
    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    earlier = read_manifest(out)
    result = ReportResult(index=out / "index.html", messages=messages)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    plotlyjs = _plotly_js(out, sum(1 for _, p, _ in pages if p.figures) + len(regress_files))
    figures, pngs = [], {}
    for name, page, _ in pages:
        path = out / name
        path.write_text(page.render(plotlyjs), encoding="utf-8")
        result.pages.append(path)
        pngs[name] = [f"png/{path.stem}-{i:02d}.png" for i in range(1, len(page.figures) + 1)]
        figures += page.figures
    links = [link for _, _, link in pages]
    for k, name in regress_files.items():
        say(f"regression timeline {k}")
        timeline = _write_timeline(store, k, out / name, plotlyjs)
        if timeline is not None:
            result.pages.append(timeline)
            links.append(
                Link(name, "regression timeline", k, "runs of workbench regress record", (k,))
            )
    kept, said = tidy(earlier, out, store.shown_url, kernel, {link.file for link in links})
    result.housekeeping = said
    messages += said
    messages.append(f"Made {stamp} from the store only: no kernel was run for this report.")
    shown = links + [replace(e.link, details=f"{e.link.details} (made {e.made})") for e in kept]
    result.index.write_text(index_page(shown, store.shown_url, messages).render(), encoding="utf-8")
    entries = [ManifestEntry(link, stamp) for link in links] + kept
    write_manifest(out, store.shown_url, entries)
    result.figures = len(figures)
    if options.png:
        say(f"PNG export of {len(figures)} figures")
        paths = [out / p for name in pngs for p in pngs[name]]
        result.pngs = write_pngs(figures, paths)
        entries = [
            ManifestEntry(link, stamp, tuple(pngs.get(link.file, ()))) for link in links
        ] + kept
        write_manifest(out, store.shown_url, entries)
    return result


def _plotly_js(out: Path, pages: int) -> bool | str:
    """How the pages get plotly.js (4.8 MB): inlined in a report of one page with figures,
    else one :data:`PLOTLY_JS` beside them (written here), which they refer to."""
    if pages <= 1:
        return True
    write_plotly_js(out)
    return PLOTLY_JS


def _profile_of(p: ProfileRecord, kernel: str) -> bool:
    return kernel_matches(p.kernel, kernel) or kernel_matches(p.kernel, Path(kernel).stem)


def _attached(data: StudyData, profiles: list[ProfileRecord]) -> list[ProfileRecord]:
    """Profiles of this study: linked by id, or of its kernel, shape and an evaluated config."""
    keys = {config_label(e.config) for e in data.evaluations}
    base = base_kernel(data.study.kernel)
    return [
        p
        for p in profiles
        if p.study_id == data.study.id
        or (
            p.study_id is None
            and kernel_matches(p.kernel, base)
            and p.config_key in keys
            and p.shape_label in (None, data.study.shape_label)
        )
    ]


def _groups(profiles: list[ProfileRecord]) -> dict[str, list[ProfileRecord]]:
    """Workbench kernels by name; launches imported without a kernel by report file (its
    path: two reports of one file name are two groups)."""
    out: dict[str, list[ProfileRecord]] = {}
    for p in profiles:
        key = p.kernel if p.config_key else (p.source_file or p.kernel)
        out.setdefault(key, []).append(p)
    return out


def _unique(stem: str, taken: set[str]) -> str:
    """``stem.html``, or ``stem-2.html``... when a page of that name is already written (slugs
    of different names can be equal: they keep 60 characters of letters and digits)."""
    name, i = f"{stem}.html", 1
    while name in taken:
        i += 1
        name = f"{stem}-{i}.html"
    taken.add(name)
    return name


def _study_link(name: str, data: StudyData, compared: Baselines) -> Link:
    if data.study.compile_only:
        where = "compiled only (no GPU)"
    elif data.replay_sources:
        where = "replayed: " + "; ".join(data.replay_sources)
    else:
        where = "measured"
    return Link(
        name,
        "study",
        data.study.name,
        f"{len(data.evaluations)} evaluations, {where}",
        (data.study.kernel,),
        _headline(data, compared),
    )


def _headline(data: StudyData, compared: Baselines) -> str:
    """``best 0.862 ms (1,275.6 TOPS); speedup 0.84x vs cuBLAS, ...``: the study's best and,
    where ``workbench compare`` stored one at its shape and GPU, the speedup over each
    library timed."""
    best = data.best
    if data.study.compile_only:
        return "nothing timed"
    if best is None or best.measurement.value is None:
        return "no correct config"
    text = f"best {best.measurement.value:.4g} {data.study.unit}"
    rate = best_throughput(data)
    text += f" ({rate})" if rate else ""
    devices = data.devices or (None,)
    ratios = [h for d in devices if (h := compared.headline(data.study.shape_label, d))]
    return "; ".join([text, *ratios])


def _regress_kernels(store: Store, kernel: str | None) -> list[str]:
    from workbench.regress.records import list_runs

    try:
        runs = list_runs(store, kernel)
    except StoreError:  # a damaged store is said, not a report without its timeline
        raise
    except WorkbenchError:
        return []
    return sorted({base_kernel(r.kernel) for r in runs})


def _write_timeline(store: Store, kernel: str, path: Path, plotlyjs: bool | str) -> Path | None:
    from workbench.regress.history import gather_history
    from workbench.regress.timeline import write_timeline

    try:
        series = gather_history(store, kernel)
    except StoreError:
        raise
    except WorkbenchError:
        return None
    return write_timeline(path, series, kernel=kernel, store_url=store.shown_url, plotlyjs=plotlyjs)


def _static(kernel: str, options: ReportOptions, say: Progress) -> tuple[str, Page, Link]:
    from workbench.spaces import load_kernel
    from workbench.toolchain import nvrtc_version

    try:
        spec = load_kernel(kernel, options.spaces)
    except WorkbenchError as exc:
        raise NothingToReport(
            f"the store holds no study, profile or regression run of {kernel!r}, and it is not "
            f"a kernel of the library ({exc})"
        ) from None
    say(f"nothing of {spec.name} in the store: compiling for the static page")
    data = gather_static(spec, options.cache)
    name = f"static-{slug(spec.name)}.html"
    link = Link(
        name,
        "static",
        spec.name,
        f"{len(data.records)} configs compiled for {data.arch}; nothing measured",
        (spec.name,),
    )
    return name, static_page(data, f"NVRTC {nvrtc_version()}"), link
