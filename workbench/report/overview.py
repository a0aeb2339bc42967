"""The first screen of a study's page: where the numbers come from (a banner for replayed
ones), device and toolchain, the budget of each run, the best config, the top configs, and the
speedup against stored baselines."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.report.baselines import (
    Baselines,
    ContenderRow,
    VariantRow,
    draw_speedups,
    retimed_best,
)
from workbench.report.data import StudyData
from workbench.report.page import Page, PageSection, cell, esc, num, scrolling, table
from workbench.spaces.model import config_label

TOP = 10


def replay_banner(data: StudyData, also: Sequence[tuple[str, str]] = ()) -> str | None:
    """Escaped HTML naming every recording and recorded device, and ``also`` the other kept
    files the page's replayed figures were read from ((what, device and file) pairs: the
    comparison with the libraries, profiles), or None when all measured."""
    sources = data.replay_sources
    if not sources:
        return None
    total = len(data.evaluations)
    devices = sorted(
        {r.environment.gpu_name for r in data.runs if r.environment and r.environment.replay_source}
    ) or list(data.devices)
    items = "".join(f"<li>{esc(s)}</li>" for s in sources)
    items += "".join(f"<li>{esc(what)}: {esc(s)}</li>" for what, s in also)
    others = (
        f", as were the {esc(' and the '.join(dict.fromkeys(w for w, _ in also)))} from the "
        "files named after them"
        if also
        else ""
    )
    note = f" Note: {esc(data.study.replay_note)}." if data.study.replay_note else ""
    return (
        f"<b>REPLAY, not measured here.</b> {data.replayed_count} of {total} evaluations on "
        f"this page were measured on <b>{esc(', '.join(devices))}</b> and read from the "
        f"recording(s) below{others}; no kernel ran on the machine that made this report."
        f"{note}<ul>{items}</ul>"
    )


def add_overview(
    page: Page, data: StudyData, baselines: Baselines, also: Sequence[tuple[str, str]] = ()
) -> PageSection:
    banner = replay_banner(data, also)
    if banner:
        page.banners.append(("banner", banner))
    sec = page.section("Overview", "overview")
    space, why = data.space
    sec.html(table(("", ""), _study_facts(data)))
    _runs_environment(sec, data)
    _runs_budget(sec, data)
    _drift(sec, data)
    _best(sec, data, space, why)
    if baselines:
        _baselines(sec, baselines)
        if note := retimed_note(data, baselines):
            sec.note(note)
    else:
        sec.note(
            "No baseline timings in the store for this kernel (workbench compare K stores "
            "cuBLAS/cuBLASLt/CUTLASS/CUB timings on a GPU)."
        )
    return sec


def _study_facts(data: StudyData) -> list[tuple[str, str | None]]:
    """What the study is and where its numbers come from, as (name, value) rows."""
    st = data.study
    return [
        ("study", st.name),
        ("kernel", st.kernel),
        ("shape", st.shape_label),
        ("device", ", ".join(data.devices)),
        ("arch", st.arch),
        ("objective", f"{st.objective} ({st.unit}), lower is better"),
        ("space file", _space_file(data)),
        ("evaluations", f"{len(data.evaluations)} ({len(data.ok)} correct)"),
        (
            "numbers from",
            "nothing ran: compile results only (no GPU)"
            if st.compile_only
            else "; ".join(data.replay_sources) or "measured on the device above",
        ),
    ]


#: The columns of the device-and-toolchain table, one row per run.
ENVIRONMENT_COLUMNS = (
    "run",
    "kind",
    "started",
    "GPU",
    "driver",
    "CUDA",
    "toolkit",
    "max SM MHz",
    "commit",
    "replayed from",
)


def _runs_environment(sec: PageSection, data: StudyData) -> None:
    """Each run's device, driver, toolchain, clock and commit (unknown for recordings that do
    not say)."""
    sec.html("<h3>Device and toolchain per run</h3>")
    rows = []
    for r in data.runs:
        env = r.environment
        rows.append(
            [
                r.id,
                r.kind,
                r.started_at.strftime("%Y-%m-%d %H:%M") if r.started_at else None,
                env.gpu_name if env else None,
                env.driver if env else None,
                env.cuda if env else None,
                env.toolkit if env else None,
                env.sm_clock_max_mhz if env else None,
                (env.git_commit or "")[:12] + (" (dirty)" if env and env.git_dirty else "")
                if env and env.git_commit
                else None,
                env.replay_source if env else None,
            ]
        )
    sec.html(table(ENVIRONMENT_COLUMNS, rows))
    sec.note(
        "Driver, CUDA and clocks are unknown (-) for runs replayed from recordings that do "
        "not record them."
    )


def _runs_budget(sec: PageSection, data: StudyData) -> None:
    """Each run's sampler, budget and how it ended."""
    sec.html("<h3>Budget</h3>")
    sec.html(
        table(
            ("run", "sampler", "seed", "budget", "status", "evaluations", "command"),
            [
                [r.id, r.sampler, r.seed, _budget(r.budget), r.status, r.evaluations, r.command]
                for r in data.runs
            ],
        )
    )
    if any(r.status == "abandoned" for r in data.runs):
        sec.note(
            "abandoned: the process of the run ended without saying how (killed, or its machine "
            "lost); found when the study was next opened."
        )


def _space_file(data: StudyData) -> str:
    """The space file's path, and whether the pages read the store's copy of it."""
    path = data.study.space_path
    if not path:
        return "none (a recorded space)"
    space, _ = data.space
    if space is not None and space.spec.kept:
        return f"{path} (this page reads the copy of it and of its kernel source kept in the store)"
    return path


def _budget(budget: object) -> str | None:
    if not isinstance(budget, dict):
        return None
    return ", ".join(f"{k}={v}" for k, v in budget.items() if v is not None) or None


def _best(sec: PageSection, data: StudyData, space: object, why: str | None) -> None:
    st = data.study
    best = data.best
    sec.html("<h3>Best config</h3>")
    if best is None:
        why = (
            "Nothing of this study ran (it was compiled without a GPU): no time, no best config."
            if data.study.compile_only
            else "No config of this study ran correctly: there is no best config."
        )
        sec.text(why, "missing")
        return
    m = best.measurement
    throughput = _throughput(space, best.config, m.value)
    ci = f" (95% CI {num(m.ci_low)} to {num(m.ci_high)})" if m.ci_low is not None else ""
    facts = [(name, value) for name, value in best.config.items()]
    facts.append((st.objective, f"{num(m.value)} {st.unit}{ci}, {len(m.samples)} samples"))
    if throughput:
        facts.append(("throughput", throughput))
    if st.recorded_optimum:
        gap = (m.value or 0.0) / st.recorded_optimum
        facts.append(
            (
                "recorded optimum",
                f"{num(st.recorded_optimum)} {st.unit} (best found is {gap:.3f}x of it)",
            )
        )
    sec.html(table(("parameter", "value"), facts))
    if not throughput:
        sec.note(f"No throughput: {why or 'the work model does not evaluate for this config'}.")
    _for_your_build(sec, data)
    sec.html(f"<h3>Top {TOP} configs</h3>")
    sec.note(
        "Configs show the parameters that vary among the evaluations; the others are as "
        "in the best config above."
    )
    varying = data.varying_parameters
    rows = [
        [
            i,
            config_label({n: e.config[n] for n in varying if n in e.config} or e.config),
            num(e.measurement.value),
            num(e.measurement.ci_low),
            num(e.measurement.ci_high),
            len(e.measurement.samples),
            _throughput(space, e.config, e.measurement.value),
        ]
        for i, e in enumerate(data.ok[:TOP], 1)
    ]
    sec.html(
        table(
            ("#", "config", f"median ({st.unit})", "CI low", "CI high", "samples", "throughput"),
            rows,
            numeric=(0, 2, 3, 4, 5, 6),
        )
    )


def _for_your_build(sec: PageSection, data: StudyData) -> None:
    """The best config as ``workbench store header`` writes it: the macros to define."""
    from workbench.errors import CompileError, ConfigError
    from workbench.spaces.model import base_kernel
    from workbench.store.header import target_lines, tuned_entry

    best = data.best
    assert best is not None and best.measurement.value is not None
    sec.html("<h3>For your build</h3>")
    try:
        entry = tuned_entry(
            data.study, dict(best.config), best.measurement.value, rebuilt=data.space
        )
    except (ConfigError, CompileError) as exc:
        sec.text(f"Not available: {exc}", "missing")
        return
    kernel = base_kernel(data.study.kernel)
    sec.note(
        f"What workbench store header {kernel} writes for this study: define {entry.target} "
        "before including the header (and the kernel's source after it)."
    )
    sec.html(f"<pre>{esc(chr(10).join(target_lines(entry)))}</pre>")


def best_throughput(data: StudyData) -> str | None:
    """The best config's throughput (``1,275.6 TOPS``), None without a best or a work model."""
    best = data.best
    space, _ = data.space
    return _throughput(space, best.config, best.measurement.value) if best else None


def _throughput(space: object, config: dict, ms: float | None) -> str | None:
    """Operations (or bytes, for GB/s spaces) per second from the space's work model, in the
    unit tune shows."""
    if space is None or not ms:
        return None
    from workbench.search.tune_plan import throughput_of

    unit, per_second = throughput_of(space)  # type: ignore[arg-type]
    rate = per_second(config, ms)
    return None if rate is None else f"{rate:,.1f} {unit}"


def _baselines(sec: PageSection, b: Baselines) -> None:
    """The speedup chart first, then one short row per (shape, contender): each reason a
    contender did not run is a numbered footnote, each library is named once below."""
    where = f" on {', '.join(b.devices)}" if len(b.devices) == 1 else ""
    sec.html(f"<h3>Against the vendor libraries (workbench compare){esc(where)}</h3>")
    if b.replayed:
        sec.note(
            "Replayed, not measured here: workbench compare timed these rows on the GPU named "
            f"and they were read from {'; '.join(b.replayed)}, kept beside the recordings of "
            "the same run; nothing ran on this machine."
        )
    fig = draw_speedups(b)
    if fig is not None:
        sec.figure(fig)
    header = ["shape", "contender", "status", "median (ms)", "throughput", "% of roofline bound",
              "speedup of tuned", "max error"]  # fmt: skip
    several = len(b.devices) > 1
    if several:
        header.insert(1, "device")
    body = "".join(_baseline_row(r, several) for r in b.rows)
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    sec.html(scrolling(f"<table class='compare'><tr>{head}</tr>{body}</table>"))
    if b.footnotes:
        items = "".join(f"<li>{esc(n)}</li>" for n in b.footnotes)
        sec.html(f"<ol class='note footnotes'>{items}</ol>")
    items = "".join(f"<li><b>{esc(name)}</b>: {esc(what)}</li>" for name, what in b.legend)
    sec.html(f"<ul class='note'>{items}</ul>")
    for n in b.refused:
        sec.note(n)
    for contender in dict.fromkeys(v.contender for v in b.variants):
        _variant_table(sec, [v for v in b.variants if v.contender == contender])


def retimed_note(data: StudyData, b: Baselines) -> str | None:
    """Where compare timed the study's best config again at its shape on its GPU: which
    measurement each figure on the page is (compare's timing in the table, the tune's median
    in the best config), as they differ; None where compare timed no such row."""
    best = data.best
    if best is None or best.measurement.value is None:
        return None
    space, _ = data.space
    spec = space.spec if space is not None else None  # (a row may predate some parameters)
    again = retimed_best(b, data.study.shape_label, data.devices, best.config, spec)
    if again is None:
        return None
    m = best.measurement
    tune_rate = _throughput(space, best.config, m.value)
    rate = f", {again.throughput:,.1f} {again.unit}" if again.throughput is not None else ""
    who = f"read from {again.replayed_from}" if again.replayed_from else "by workbench compare"
    differ = f"differ by {abs(again.median_ms / m.value - 1):.1%}"  # type: ignore[operator]
    tune = f"{num(m.value)} ms{', ' + tune_rate if tune_rate else ''}"
    return (
        f"Two medians of the best config at {again.shape}, of different samples: its tuned "
        f"row above is compare's timing ({num(again.median_ms)} ms{rate}; {who}); the best "
        f"config's time above is the tune's median ({tune}; {len(m.samples)} samples). They "
        f"{differ}."
    )


def _variant_table(sec: PageSection, variants: list[VariantRow]) -> None:
    """Every configuration a baseline timed (one row each) at every shape (one column each):
    its median, or its status (the reason on hover); the one its row reports marked."""
    several = len({v.device for v in variants}) > 1
    columns = list(dict.fromkeys((v.shape, v.device) for v in variants))
    labels = list(dict.fromkeys(v.label for v in variants))
    timed = {(v.label, v.shape, v.device): v for v in variants}
    name = variants[0].contender
    sec.html(f"<h4>{esc(name)}: every configuration timed (median, ms)</h4>")
    head = ["configuration"] + [f"{s} ({d})" if several else s for s, d in columns]
    head.append("compile (s)")
    body = []
    for label in labels:
        tds = [f"<td>{cell(label)}</td>"]
        for shape, device in columns:
            v = timed.get((label, shape, device))
            tds.append(_variant_cell(v))
        mine = [v for v in variants if v.label == label and v.compile_s]
        spent = max(mine, key=lambda v: v.compile_s or 0.0) if mine else None
        text = f"{spent.compile_s:.2f} ({spent.compile_note})" if spent else ""
        tds.append(f"<td class='num'>{esc(text)}</td>")
        body.append(f"<tr>{''.join(tds)}</tr>")
    heads = "".join(f"<th>{esc(h)}</th>" for h in head)
    sec.html(scrolling(f"<table class='compare variants'><tr>{heads}</tr>{''.join(body)}</table>"))
    ok = sum(v.status == "ok" for v in variants)
    sec.note(
        f"{name} at each shape is the fastest correct configuration (marked *): {ok} of "
        f"{len(variants)} timings correct. Compile: the longest it took a configuration (JIT "
        "at the first shape it ran; later shapes reuse the code, and later runs load it from "
        "the compile cache)."
    )


def _variant_cell(v: VariantRow | None) -> str:
    if v is None:
        return "<td></td>"
    if v.status != "ok" or v.median_ms is None:
        return f"<td title='{esc(v.reason)}'>{esc(v.status)}</td>"
    text = num(v.median_ms) + (" *" if v.chosen else "")
    bold = " style='font-weight:bold'" if v.chosen else ""
    return f"<td class='num'{bold}>{esc(text)}</td>"


def _baseline_row(r: ContenderRow, with_device: bool) -> str:
    status = r.status + (f" [{r.footnote}]" if r.footnote is not None else "")
    share = f"{100 * r.share:.1f} ({r.bound})" if r.share is not None else None
    cells: list[tuple[object, bool]] = [
        (r.shape, False),
        (status, False),
        (num(r.median_ms), True),
        (f"{r.throughput:,.1f} {r.unit or ''}" if r.throughput is not None else None, True),
        (share, True),
        (f"{r.speedup:.2f}x" if r.speedup is not None else None, True),
        (num(r.max_error), True),
    ]
    if with_device:
        cells.insert(1, (r.device, False))
    tds = [
        f"<td class='num'>{esc(c)}</td>" if right else f"<td>{cell(c)}</td>" for c, right in cells
    ]
    name = f"<td title='{esc(r.title)}'>{esc(r.contender)}</td>"  # the full title on hover
    tds.insert(2 if with_device else 1, name)
    return f"<tr>{''.join(tds)}</tr>"


def _drift(sec: PageSection, data: StudyData) -> None:
    """The re-timings of each run's reference config, when the run made any."""
    checks = [(r.id, c) for r in data.runs for c in r.drift]
    if not checks:
        return
    sec.html("<h3>Drift</h3>")
    rows = [[run, c.after, c.config, c.verdict.value, num(c.ratio), c.note] for run, c in checks]
    sec.html(table(("run", "after", "reference config", "verdict", "ratio", "note"), rows))
    drifted = sum(1 for _, c in checks if c.drifted)
    sec.note(
        f"Each run timed its first correct config again every few evaluations: {drifted} of "
        f"{len(checks)} re-timings differ from the first (U test and 2% floor, on time: a "
        "clock that fell is drift too). Configs timed far apart in a drifting run compare off "
        "by that much."
    )
