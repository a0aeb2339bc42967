"""The pages of a report: one per study, one per group of profiles that belong to no study,
a static page for a kernel nobody ran, and the index."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.compiler import CompileCache
from workbench.profile.storage import ProfileRecord
from workbench.report import counters
from workbench.report.accuracy import (
    add_problem_accuracy,
    draw_accuracy,
    gather_accuracy,
    gather_problem_accuracy,
)
from workbench.report.baselines import Baselines
from workbench.report.compiled import draw_compiled, gather_compiled, too_few_text
from workbench.report.data import StudyData
from workbench.report.energy import draw_time_energy, gather_time_energy
from workbench.report.history import draw_history, gather_history
from workbench.report.importance import draw_importance, gather_importance
from workbench.report.labels import short_labels
from workbench.report.overview import add_overview, best_throughput
from workbench.report.page import Page, PageSection, cell, esc, num, scrolling, table
from workbench.report.parallel import draw_parallel
from workbench.report.phases import (
    draw_phases,
    gather_phases,
    phases_note,
    phases_table,
    replayed_text,
)
from workbench.report.roofline import (
    Roofline,
    draw_roofline,
    from_profiles,
    from_timing,
    launch_labels,
)
from workbench.report.static import (
    RESOURCE_HEADER,
    StaticData,
    draw_opcodes,
    draw_static_resources,
    resource_rows,
)
from workbench.report.tuned_binary import add_tuned_binary, gather_tuned_binary
from workbench.roofline import Ceilings
from workbench.store import Store
from workbench.store.database import storage_option

NO_PROFILE = (
    "No Nsight Compute profile of this study's configs is in the store "
    "(workbench profile K --config best on a GPU, or workbench profile K --import FILE.ncu-rep)."
)


@dataclass(frozen=True)
class Link:
    """An index entry; ``kernels``: what the page is about (``report K`` replaces the pages
    about K and keeps the rest); ``headline``: a study's best and its speedup over the
    libraries where a comparison is stored."""

    file: str
    kind: str
    title: str
    details: str
    kernels: tuple[str, ...] = ()
    headline: str = ""


def study_page(
    store: Store,
    data: StudyData,
    profiles: list[ProfileRecord],
    baselines: Baselines,
    measured: Ceilings | None,
    cache: CompileCache | None,
    regress_file: str | None,
) -> Page:
    st = data.study
    page = Page(f"{st.kernel} [{st.shape_label}] on {st.device_key}", subtitle=st.name)
    also = [("comparison with the libraries", s) for s in baselines.replayed]
    also += [("Nsight Compute profile", s) for s in counters.replayed_sources(profiles)]
    add_overview(page, data, baselines, also)
    _history_section(page, data)
    _phases_section(page, data)
    _importance_section(page, data)
    _parallel_section(page, data)
    _compile_section(page, store, data, cache)
    add_tuned_binary(
        page.section("What tuning changed in the binary", "binary"),
        gather_tuned_binary(data, cache, storage_option(store.shown_url)),
    )
    roof = from_profiles(profiles, data, measured) if profiles else from_timing(data, measured)
    _roofline_section(
        page, roof, f"{st.kernel} [{st.shape_label}]", counters.replayed_note(profiles)
    )
    add_counter_sections(page, profiles, NO_PROFILE, measured)
    _energy_section(page, data)
    _accuracy_section(page, data)
    if regress_file:
        sec = page.section("Regression timeline", "regress")
        sec.html(f"<p><a href='{esc(regress_file)}'>Regression timeline of this kernel</a></p>")
    return page


def _history_section(page: Page, data: StudyData) -> None:
    """The best-so-far curve by trial, and by tuning time where the runs recorded it."""
    hist = page.section("Tuning history", "history")
    if not data.evaluations:
        hist.text("The study has no evaluation yet.", "missing")
        return
    h = gather_history(data)
    hist.figure(draw_history(h))
    if any(t is not None for t in h.tuning_s):
        hist.figure(draw_history(h, by_time=True))
    hist.note(f"{len(data.evaluations)} evaluations, {h.failed} failed (x markers).")
    if data.runs and all(r.kind == "import" for r in data.runs):
        hist.note(
            "Imported with workbench store import: there was no search, so the order "
            "is the recording's and the curve says nothing about a sampler."
        )


def _phases_section(page: Page, data: StudyData) -> None:
    """Where the runs' time went; a study that only replayed says so (no section without
    runs)."""
    runs = gather_phases(data)
    if not runs:
        return
    sec = page.section("Where the time went", "phases")
    live = [r for r in runs if r.live]
    if live:
        sec.figure(draw_phases(live))
        sec.html(phases_table(live))
        sec.note(phases_note(live))
    if (sentence := replayed_text(runs)) is not None:
        sec.text(sentence, "missing")


def _importance_section(page: Page, data: StudyData) -> None:
    imp = page.section("Parameter importance", "importance")
    importance = gather_importance(data)
    imp.note(f"Method: {importance.method}.")
    if importance.values:
        imp.figure(draw_importance(importance))
    else:
        imp.text(f"Not computed: {importance.reason}.", "missing")


def _parallel_section(page: Page, data: StudyData) -> None:
    par = page.section("Parallel coordinates", "parallel")
    fig = draw_parallel(data)
    if fig is not None:
        par.figure(fig)
    else:
        par.text("Fewer than two correct evaluations, or no parameter varies.", "missing")


def _compile_section(page: Page, store: Store, data: StudyData, cache: CompileCache | None) -> None:
    """Registers and shared memory against time, from the store or this machine's cache."""
    comp = page.section("Compile resources", "compile")
    series = gather_compiled(store, data, cache)
    if series is not None and (sentence := too_few_text(series)) is not None:
        comp.text(sentence, "missing")
    elif series is not None:
        comp.note(
            f"From {series.source}; {series.without} evaluated configs have no compile "
            "result there (not compiled on this machine) and are not drawn."
        )
        comp.figure(draw_compiled(series))
    else:
        comp.text(
            "No compile results of these configs: none in the store, and "
            + (
                "none in this machine's compile cache."
                if data.study.space_path
                else "a recorded space has no space file to compile."
            ),
            "missing",
        )


def _energy_section(page: Page, data: StudyData) -> None:
    """Time against energy per launch, where samples carry energy (no section otherwise)."""
    te = gather_time_energy(data)
    if te is None:
        return
    sec = page.section("Time and energy", "energy")
    sec.figure(draw_time_energy(te))
    sec.note(
        f"{len(te.front)} of {len(te.labels)} configs are on the Pareto front: none is both "
        "faster and leaner (energy per launch from the GPU's energy counter over the timed "
        "samples, L2 flushes included, or from the recording)."
    )


def _accuracy_section(page: Page, data: StudyData) -> None:
    """Each config's error next to its speed, and the problem's own accuracy, where stored."""
    acc = gather_accuracy(data)
    problem_acc = gather_problem_accuracy(data)
    if acc is None and problem_acc is None:
        return
    sec = page.section("Error next to speed", "accuracy")
    if acc is not None:
        sec.figure(draw_accuracy(acc, data.study.unit))
    if problem_acc is not None:
        add_problem_accuracy(sec, problem_acc, _speed_text(data))


def _speed_text(data: StudyData) -> str:
    """The study's best time and throughput in a sentence, or why it has none."""
    best = data.best
    if best is None or best.measurement.value is None:
        if data.study.compile_only:
            return "Speed: none; nothing of this study ran (it was compiled without a GPU)."
        return "Speed: none; no config of this study ran correctly."
    rate = best_throughput(data)
    source = " (replayed)" if best.measurement.replayed_from else ""
    return (
        f"Speed of this study's best config{source}: {num(best.measurement.value)} "
        f"{data.study.unit}{f', {rate}' if rate else ''}."
    )


#: The roofline table's columns, one row per point (a launch at one memory level).
ROOFLINE_COLUMNS = (
    "role",
    "launch",
    "source",
    "precision",
    "level",
    "op/B",
    "rate",
    "of attainable",
    "bound",
    "compute roof",
    "memory roof",
)


def _roofline_section(
    page: Page, roof: Roofline | None, what: str, replayed: str | None = None
) -> None:
    sec = page.section("Roofline", "roofline")
    if replayed:
        sec.note(replayed)
    if roof is None:
        sec.text(
            "No roofline: no profile in the store and no work model (a recorded space has "
            "no space file).",
            "missing",
        )
        return
    _roofline_notes(sec, roof)
    if not any(s.points for s in roof.sets) or not roof.ceilings:
        sec.text("Nothing to place: no point has both a compute and a memory roof.", "missing")
        return
    sec.figure(draw_roofline(roof, f"hierarchical roofline: {esc(what)}"))
    _roofline_table(sec, roof)


def _roofline_notes(sec: PageSection, roof: Roofline) -> None:
    """Where the points and each kind of ceiling come from, and the clock the rates are at."""
    sec.note(
        f"Points: {roof.source}. Ceilings are labelled with their source: measured "
        "(scripts/ceilings.py on the GPU, via --ceilings), ncu (the profile's own peaks at "
        "its clock), ncu report (derived from the profile's per-unit sector peaks, its unit "
        "count and clock, when it has no byte peak) or datasheet (the device preset's "
        "published peaks, not measured). Tensor roofs are the dense rates (Nsight Compute's "
        "tensor peak is the 2:4-sparse rate from sm_80 on: halved, and said so); a sparse roof "
        "is drawn only for a launch that ran sparse MMA."
    )
    if roof.clock:
        sec.note(f"Rates per second are {roof.clock}. {roof.per_cycle}".strip())
    for n in roof.notes:
        if n:
            sec.note(n)


def _roofline_table(sec: PageSection, roof: Roofline) -> None:
    """The drawn points as a table, then the roofs they were placed under, each named once."""
    labels, caption = launch_labels(roof)
    rows = [
        [
            s.role,
            label,
            s.source,
            pt.precision,
            pt.level,
            num(pt.intensity),
            pt.compute.rate_text(pt.achieved),
            f"{pt.fraction:.1%}",
            pt.bound,
            pt.compute.short,
            pt.memory.short,
        ]
        for s, label in zip(roof.sets, labels, strict=True)
        for pt in s.points
    ]
    sec.html(table(ROOFLINE_COLUMNS, rows, numeric=(5, 6, 7)))
    if caption:
        sec.note(caption)
    roofs = {pt.compute.label: None for s in roof.sets for pt in s.points}
    roofs.update({pt.memory.label: None for s in roof.sets for pt in s.points})
    sec.html("<ul class='note'>" + "".join(f"<li>{esc(r)}</li>" for r in roofs) + "</ul>")


def add_counter_sections(
    page: Page, profiles: list[ProfileRecord], absent: str, measured: Ceilings | None = None
) -> None:
    """Divergence, stall and memory-access sections from profiles with counters; the DRAM
    share against ``measured`` ceilings where given (else the profile's own peak)."""
    variants = counters.gather_variants(profiles, measured)
    caption = counters.shared_caption(profiles)
    replayed = counters.replayed_note(profiles)
    div = page.section("Warp divergence and stalls", "divergence")
    with_div = [v for v in variants if counters.has_divergence(v)]
    if with_div:
        for line in (replayed, caption):
            if line:
                div.note(line)
        div.figure(counters.draw_divergence(with_div))
        if any(v.divergence.branch_uniform_pct is not None for v in with_div):
            div.figure(counters.draw_uniformity(with_div))
        if any(v.divergence.stalls for v in with_div):
            div.figure(counters.draw_stalls(with_div))
        for line in counters.missing_lines(with_div):
            div.note(line)
        for v in with_div:
            for n in v.divergence.notes:
                div.note(f"{v.axis}: {n}")
    else:
        div.text(
            absent
            if not variants
            else "The stored profiles hold no divergence metrics "
            "(collect them with --set divergence or full).",
            "missing",
        )
    mem = page.section("Memory access", "memory")
    with_mem = [v for v in variants if counters.has_memory(v)]
    if with_mem:
        for line in (replayed, caption):
            if line:
                mem.note(line)
        with_dram = [v for v in with_mem if v.dram is not None]
        if with_dram:
            mem.figure(counters.draw_dram_share(with_dram))
        mem.figure(counters.draw_memory(with_mem))
        if any(
            v.memory.l1_hit_rate_pct is not None or v.memory.l2_hit_rate_pct is not None
            for v in with_mem
        ):
            mem.figure(counters.draw_hit_rates(with_mem))
    else:
        mem.text(
            absent
            if not variants
            else "The stored profiles hold no memory-access metrics "
            "(collect them with --set memory or full).",
            "missing",
        )


#: The launches table of a profiles page: one row per profiled launch.
LAUNCH_COLUMNS = (
    "#",
    "kernel",
    "config",
    "short name",
    "demangled (start)",
    "device",
    "chip",
    "source",
    "set",
    "missing metrics",
    "notes",
)


def profiles_page(title: str, profiles: list[ProfileRecord], measured: Ceilings | None) -> Page:
    """Profiles that belong to no study (e.g. reports imported from elsewhere)."""
    n = len(profiles)
    page = Page(f"Profiles: {title}", subtitle=f"{n} profiled launch{'es' * (n != 1)}")
    _imported_banner(page, profiles)
    sec: PageSection = page.section("Launches", "launches")
    configs = short_labels([p.config_key for p in profiles])
    rows = [
        [
            p.report_index,
            p.kernel,
            (config or None) if p.config_key else None,
            p.function_name,
            (p.demangled_name or "")[:120],
            p.device,
            p.chip,
            p.source,
            p.metric_set,
            len(p.missing),
            "; ".join(p.notes) or None,
        ]
        for p, config in zip(profiles, configs.labels, strict=True)
    ]
    sec.html(table(LAUNCH_COLUMNS, rows))
    if configs.shared:
        sec.note(f"Configs show the parameters that differ; all share {configs.shared_text}.")
    _roofline_section(page, from_profiles(profiles, None, measured), title)
    add_counter_sections(page, profiles, "No profile with hardware counters.", measured)
    return page


def _imported_banner(page: Page, profiles: list[ProfileRecord]) -> None:
    """Imported profiles were measured elsewhere: the first screen names their GPUs and files."""
    foreign = sorted(
        {
            (p.device or "unknown GPU", p.source_file or "-")
            for p in profiles
            if p.source == "import"
        }
    )
    if not foreign:
        return
    items = "".join(f"<li>{esc(d)}: {esc(f)}</li>" for d, f in foreign)
    page.banners.append(
        (
            "banner",
            "<b>IMPORTED, not measured here.</b> These counters were "
            "collected by Nsight Compute on the GPUs below and read from the "
            f"report files named; nothing ran on this machine.<ul>{items}</ul>",
        )
    )


def static_page(data: StaticData, nvrtc: str) -> Page:
    page = Page(
        f"{data.kernel}: static analysis (nothing was run)",
        subtitle=f"{data.arch}, limits of the {data.device} preset",
    )
    page.banners.append(
        (
            "static",
            "<b>STATIC: no measurement.</b> The store holds no study, profile or regression run "
            f"of <b>{esc(data.kernel)}</b>. This page was made by compiling the default config "
            f"and a seeded sample of its space for {esc(data.arch)} with {esc(nvrtc)} "
            f"({data.cached} of {len(data.records)} were already in the compile cache, the rest "
            "were compiled by the report). Resources, occupancy and SASS are facts of the "
            "binaries; nothing here was timed. To measure: workbench tune on a GPU, or "
            "workbench tune --replay FILE.",
        )
    )
    sec = page.section("Resources", "resources")
    sec.html(table(RESOURCE_HEADER, resource_rows(data.records), numeric=(3, 4, 5, 6, 8, 11)))
    fig = draw_static_resources(data)
    if fig is not None:
        sec.figure(fig)
    sass = page.section("SASS opcode histogram", "sass")
    fig = draw_opcodes(data)
    if fig is not None:
        sass.figure(fig)
    else:
        sass.text("No config compiled: no SASS to show.", "missing")
    return page


def index_page(links: Sequence[Link], store_url: str, messages: Sequence[str]) -> Page:
    page = Page("workbench report", subtitle=f"from {store_url}")
    sec = page.section("Pages", "pages")
    sec.html(
        scrolling(
            "<table class='index'><tr><th>page</th><th>kind</th><th>headline</th>"
            "<th>details</th></tr>"
            + "".join(
                f"<tr><td><a href='{esc(link.file)}'>{cell(link.title)}</a></td>"
                f"<td>{cell(link.kind)}</td><td class='headline'>{cell(link.headline or None)}"
                f"</td><td>{cell(link.details)}</td></tr>"
                for link in links
            )
            + "</table>"
        )
    )
    for m in messages:
        sec.note(m)
    return page
