"""``workbench report``: pages built from a store filled by a real replay tune (a public Kernel
Tuner cache of an RTX 3090 GEMM, used in place) and imported public ``.ncu-rep`` files, checked
as data and opened in headless Chromium (Debian's, through Playwright for Python)."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest
from dataset_paths import DATASETS, missing
from plotly.offline import get_plotlyjs
from typer.testing import CliRunner

from workbench.compiler import CompileCache
from workbench.profile.importing import import_report
from workbench.profile.storage import load_profiles, save_profile
from workbench.report import NothingToReport, ReportOptions, build_reports
from workbench.report import png as report_png
from workbench.report.compiled import _from_cache
from workbench.report.counters import gather_variants
from workbench.report.data import gather_studies
from workbench.report.history import draw_history, gather_history
from workbench.report.importance import gather_importance
from workbench.report.overview import replay_banner
from workbench.report.page import PLOTLY_JS
from workbench.report.roofline import from_profiles
from workbench.search.start import plan_replay_file
from workbench.search.tuner import Budget, SearchSettings, Tuner
from workbench.spaces import Space, load_space
from workbench.store import Store

GEMM_CACHE = DATASETS / "tuning-caches" / "gemm_RTX_3090.json.gz"
NCU = DATASETS / "ncu-reports"
REPORTS = ("bwd29_profileMSDKT23.out", "flyinglandlord_profile")
CHROMIUM = Path("/usr/bin/chromium")
#: A kernel name and a parameter value that would run script if pasted into a page unescaped.
HOSTILE_KERNEL = "<script>window.__pwned='kernel'</script>gemm"
HOSTILE_VALUE = "<img src=x onerror=window.__pwned='value'>"

pytestmark = pytest.mark.skipif(
    not GEMM_CACHE.is_file() or not NCU.is_dir(), reason=missing(DATASETS)
)


def _tune(store: Store, path: Path, budget: int) -> None:
    plan = plan_replay_file(store, path)
    Tuner(
        plan.problem,
        plan.runner,
        store,
        plan.study,
        SearchSettings(seed=1),
        environment_id=plan.environment_id,
    ).run(Budget(evaluations=budget))


def _hostile_recording(tmp: Path) -> Path:
    """A slice of the real RTX 3090 cache with an HTML kernel name and parameter value (the
    measured times are kept as recorded)."""
    with gzip.open(GEMM_CACHE) as f:
        doc = json.loads(f.read())
    keys = doc["tune_params_keys"]
    sa = keys.index("SA")
    cache = {}
    for entry in list(doc["cache"].values())[:300]:
        entry = dict(entry)
        if entry["SA"] == 0:
            entry["SA"] = HOSTILE_VALUE
        cache[",".join(str(entry[k]) for k in keys)] = entry
    doc["cache"] = cache
    doc["kernel_name"] = HOSTILE_KERNEL
    doc["tune_params"]["SA"] = [HOSTILE_VALUE, 1]
    assert keys[sa] == "SA"
    path = tmp / "hostile.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    tmp = tmp_path_factory.mktemp("report")
    store = Store(f"sqlite:///{tmp / 'store.sqlite'}")
    _tune(store, GEMM_CACHE, 40)
    _tune(store, _hostile_recording(tmp), 30)
    for name in REPORTS:
        _, records = import_report(NCU / f"{name}.ncu-rep")
        for r in records:
            save_profile(store, r)
    return store, tmp


@pytest.fixture(scope="module")
def built(filled: tuple[Store, Path]) -> tuple[Store, Path, list[Path]]:
    store, tmp = filled
    result = build_reports(store, None, ReportOptions(out_dir=tmp / "reports"))
    return store, tmp, result.pages


def test_history_importance_and_banner_from_the_replayed_study(filled) -> None:
    store, _ = filled
    (data,) = gather_studies(store, "Xgemm")
    h = gather_history(data)
    values = [v for v in h.value if v is not None]
    assert len(h.trial) == 40 and h.replayed
    assert h.best_so_far[-1] == min(values)
    running = [b for b in h.best_so_far if b is not None]
    assert running == sorted(running, reverse=True)  # never gets worse
    imp = gather_importance(data)
    assert "PedAnova" in imp.method and imp.values
    assert math.isclose(sum(v for _, v in imp.values), 1.0, rel_tol=1e-6)
    assert {n for n, _ in imp.values} <= set(data.varying_parameters)
    assert "KWG" not in dict(imp.values)  # one recorded value: no importance to speak of
    banner = replay_banner(data)
    assert banner and "NVIDIA GeForce RTX 3090" in banner and "gemm_RTX_3090.json.gz" in banner


def test_profile_figures_come_from_the_imported_reports(filled) -> None:
    store, _ = filled
    bwd = [p for p in load_profiles(store) if "bwd29" in (p.source_file or "")]
    variants = gather_variants(bwd)
    threads = [round(v.divergence.threads_per_inst or 0, 2) for v in variants]
    assert threads == [18.34, 14.77, 11.32, 10.65]  # SOURCES.md of the reports
    assert all(v.divergence.flagged for v in variants)
    roof = from_profiles(bwd, None, None)
    assert roof.sets and all(s.points for s in roof.sets)
    sources = {"ncu", "ncu report", "datasheet", "measured"}
    assert {c.source.value for c in roof.ceilings} <= sources
    assert all(f"({c.source.value}: " in c.label for c in roof.ceilings)  # labelled by source
    # these older reports carry no lts__t_bytes peak: the L2 roof is derived from sector peaks
    by_name = {c.name: c for c in roof.ceilings}
    assert "dram" in by_name and by_name["l2"].source.value == "ncu report"
    assert all(any(pt.level == "l2" for pt in s.points) for s in roof.sets)
    h800 = [p for p in load_profiles(store) if "flyinglandlord" in (p.source_file or "")]
    flash = [v for v in gather_variants(h800) if "flash_fwd" in v.label]
    assert flash and flash[0].divergence.threads_per_inst is None  # NaN in the report


@pytest.mark.slow
def test_pages_render_in_chromium(built) -> None:
    _, tmp, pages = built
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    names = {p.name for p in pages}
    assert any(n.startswith("study-") for n in names) and len(names) >= 4
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            for path in [*pages, tmp / "reports" / "index.html"]:
                _check_page(browser, path)
        finally:
            browser.close()


def _check_page(browser: object, path: Path) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url) if not r.url.startswith("file:") else None)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    svgs = page.evaluate(
        "Array.from(document.querySelectorAll('.plotly-graph-div'))"
        ".map(d => d.querySelectorAll('svg.main-svg').length)"
    )
    assert errors == [], f"{path.name}: {errors}"
    assert requests == [], f"{path.name} reached the network: {requests}"
    assert all(n > 0 for n in svgs), f"{path.name}: a figure did not render ({svgs})"
    assert page.evaluate("window.__pwned") is None, f"{path.name} ran injected script"
    assert page.locator("img[src='x']").count() == 0
    text = page.inner_text("body")
    if path.name.startswith("study-"):
        assert len(svgs) >= 4
        banner = page.inner_text("#banner-banner")
        assert "REPLAY" in banner and "NVIDIA GeForce RTX 3090" in banner
    if path.name.startswith("study-") and "script" in path.name:
        assert HOSTILE_KERNEL in text and HOSTILE_VALUE in text  # shown as text, not markup
    if path.name.startswith("profiles-"):
        assert "IMPORTED" in page.inner_text("#banner-banner")
    page.close()


def test_hostile_names_are_escaped_in_the_html(built) -> None:
    _, _, pages = built
    (hostile,) = [p for p in pages if "script" in p.name]
    html = hostile.read_text()
    assert "<script>window.__pwned" not in html and "<img src=x" not in html
    assert "&lt;script&gt;window.__pwned" in html


def test_the_pages_share_one_plotly_js_beside_them(built) -> None:
    """plotly.js (4.8 MB) once in the folder, not in every page: each page loads the file
    beside it and nothing else (the Chromium test opens them offline)."""
    _, tmp, pages = built
    assert (tmp / "reports" / PLOTLY_JS).read_text(encoding="utf-8") == get_plotlyjs()
    for path in pages:
        html = path.read_text()
        assert html.count("window.PlotlyConfig = ") == 1, path.name
        assert re.findall(r"<script[^>]*\bsrc=\"([^\"]*)\"", html) == [PLOTLY_JS], path.name
        assert "plotly.js v" not in html


def test_a_report_of_one_page_inlines_plotly_js(filled, tmp_path: Path) -> None:
    store, _ = filled
    result = build_reports(store, "Xgemm", ReportOptions(out_dir=tmp_path / "one"))
    (page,) = result.pages
    html = page.read_text()
    assert html.count("plotly.js v") == 1
    assert re.findall(r"<script[^>]*\bsrc=", html) == []
    assert not (tmp_path / "one" / PLOTLY_JS).exists()


def test_a_kernel_without_results_is_a_clear_message(filled) -> None:
    from workbench.cli.main import app

    store, tmp = filled
    with pytest.raises(NothingToReport, match="no study, profile or regression run of 'nosuch'"):
        build_reports(store, "nosuch", ReportOptions(out_dir=tmp / "none"))
    result = CliRunner().invoke(
        app, ["report", "nosuch", "--storage", store.url, "--out", str(tmp / "none")]
    )
    assert result.exit_code == 1 and "nothing to report" in result.output
    assert result.output.count("nothing to report") == 1  # said once
    empty = Store(f"sqlite:///{tmp / 'empty.sqlite'}")
    with pytest.raises(NothingToReport, match="holds no study"):
        build_reports(empty, None, ReportOptions(out_dir=tmp / "none"))


def test_static_page_of_a_kernel_nobody_ran(project: Path, cache_dir: Path, tmp_path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    space_file = project / "spaces" / "tiny.yaml"
    cache = CompileCache(cache_dir)
    result = build_reports(
        store, str(space_file), ReportOptions(out_dir=tmp_path / "out", cache=cache)
    )
    (page,) = result.pages
    html = page.read_text()
    assert page.name == "static-tiny.html" and "STATIC: no measurement" in html
    assert "nothing here was timed" in html and result.figures == 2
    # the compile-cache path of the compile-resources page reads the same binary back
    space = Space(load_space(space_file))
    default = space.spec.default_config()
    point = _from_cache(space, cache, 1, default, None)
    assert point is not None and point.registers is not None and 0 < point.registers <= 255
    assert f"<td class='num'>{point.registers}</td>" in html


@pytest.mark.slow
def test_png_export_needs_chromium(monkeypatch, tmp_path: Path) -> None:
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[1, 2], y=[1, 4]))
    if CHROMIUM.exists():
        (out,) = report_png.write_pngs([fig], [tmp_path / "a.png"])
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setattr(report_png, "DEBIAN_CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(report_png.PngUnavailable, match="needs Chromium"):
        report_png.write_pngs([fig], [tmp_path / "b.png"])


def test_an_output_path_that_cannot_be_written_is_a_clear_error(filled) -> None:
    from workbench.cli.main import app
    from workbench.report.build import ReportNotWritten

    store, tmp = filled
    (tmp / "a-file").write_text("not a directory")
    out = tmp / "a-file" / "reports"
    with pytest.raises(ReportNotWritten, match=r"cannot write the report to .*: Not a directory"):
        build_reports(store, None, ReportOptions(out_dir=out))
    result = CliRunner().invoke(app, ["report", "--storage", store.url, "--out", str(out)])
    assert result.exit_code == 2 and "cannot write the report" in result.output
    assert "Traceback" not in result.output


def test_a_study_whose_every_evaluation_failed_draws_its_failures() -> None:
    """Failed evaluations are drawn at the floor of the log axis; with no correct value the
    floor was 0, which a log axis cannot show: the plot was empty."""
    from workbench.report.history import History, draw_history

    h = History(
        trial=(0, 1, 2),
        value=(None, None, None),
        best_so_far=(None, None, None),
        tuning_s=(0.1, 0.2, 0.3),
        outcome=("launch_failed",) * 3,
        label=("A=1", "A=2", "A=3"),
        unit="ms",
        replayed=True,
    )
    failed = [t for t in draw_history(h).data if t.name == "failed (drawn at the floor)"]
    assert len(failed) == 1 and list(failed[0].y) == [1.0, 1.0, 1.0]


def test_throughput_in_the_unit_tune_shows() -> None:
    from workbench.report.overview import _throughput
    from workbench.spaces import Space, load_kernel

    space = Space(load_kernel("gemm_int8", []))
    config = space.spec.default_config()
    shown = _throughput(space, config, 1.0)
    assert shown is not None and shown.endswith(f" {space.spec.work.unit}")
    assert "op/s" not in shown and "(" not in shown


def test_importance_is_not_drawn_when_every_value_is_the_same(tmp_path: Path) -> None:
    """18 configs of one time: PED-ANOVA gave each parameter an equal share, as if both
    mattered; nothing is explained, and the page says why."""
    cache = {f"{a},{b}": {"a": a, "b": b, "time": 1.0} for a in range(1, 7) for b in range(1, 4)}
    path = tmp_path / "const.json"
    path.write_text(
        json.dumps(
            {
                "kernel_name": "constk",
                "tune_params_keys": ["a", "b"],
                "tune_params": {"a": list(range(1, 7)), "b": [1, 2, 3]},
                "cache": cache,
            }
        )
    )
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    _tune(store, path, 18)
    (data,) = gather_studies(store, "constk")
    imp = gather_importance(data)
    assert imp.values == () and imp.reason == "every correct evaluation has the same value"


def test_two_imported_reports_of_one_file_name_get_a_page_each(tmp_path: Path) -> None:
    """Profiles imported from d1/profile.ncu-rep and d2/profile.ncu-rep (two GPUs, one file
    name) were one group on one page, and ``my report``/``my-report`` wrote the same file:
    one page each now, every launch on one of them."""
    import shutil

    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    for folder, report in zip(("d1", "d2"), REPORTS, strict=True):
        (tmp_path / folder).mkdir()
        copy = tmp_path / folder / "profile.ncu-rep"
        shutil.copy(NCU / f"{report}.ncu-rep", copy)
        for r in import_report(copy)[1]:
            save_profile(store, r)
    result = build_reports(store, None, ReportOptions(out_dir=tmp_path / "out"))
    pages = sorted(p.name for p in result.pages if p.name.startswith("profiles-"))
    assert len(pages) == 2, pages
    texts = [(tmp_path / "out" / name).read_text() for name in pages]
    # each page is named by its report's path, the file name being the same
    assert sorted(("d1/profile" in t, "d2/profile" in t) for t in texts) == [
        (False, True),
        (True, False),
    ]


def test_a_resumed_study_goes_on_in_time_and_concurrent_workers_share_the_clock(
    tmp_path: Path,
) -> None:
    """The time plot's axis is tuning time: the day between a run and its resumption is left
    out (each run's elapsed time used to restart at 0, drawing the second run over the first);
    workers that ran at once are not laid end to end."""
    import datetime as dt
    import sqlite3

    from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome

    path = tmp_path / "s.sqlite"
    store = Store(f"sqlite:///{path}")
    env = store.environment(DeviceInfo("H200", cc=90))
    t0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
    for kernel, offsets in (("resumed", (0.0, 86400.0)), ("workers", (0.0, 0.5))):
        study = store.study(
            kernel=kernel, shape_label="n=8", device_key="H200", parameters=[("A", range(9))]
        )
        configs = iter(range(9))
        for offset in offsets:
            run = store.start_run(study, env, sampler="tpe")
            for elapsed in (1.0, 2.0, 3.0):
                m = Measurement(TrialOutcome.OK, value=10.0 - elapsed - offset / 86400)
                store.record(study, run, env, {"A": next(configs)}, m, elapsed_s=elapsed)
            with sqlite3.connect(path) as db:
                started = (t0 + dt.timedelta(seconds=offset)).isoformat(" ")
                db.execute("UPDATE runs SET started_at = ? WHERE id = ?", (started, run))
    by_kernel = {d.study.kernel: gather_history(d) for d in gather_studies(store)}
    resumed = by_kernel["resumed"]
    assert resumed.tuning_s == pytest.approx((1, 2, 3, 4, 5, 6)) and resumed.resumed_s == (3,)
    fig = draw_history(resumed, by_time=True)
    assert list(fig.data[1].x) == pytest.approx([1, 2, 3, 4, 5, 6])
    assert [s.x0 for s in fig.layout.shapes] == [3] and "end to end" in fig.layout.xaxis.title.text
    workers = by_kernel["workers"]
    assert workers.tuning_s == pytest.approx((1, 2, 3, 1.5, 2.5, 3.5))
    assert workers.resumed_s == () and not draw_history(workers, by_time=True).layout.shapes


def test_the_banner_says_why_a_replay_is_tuned_on_time(tmp_path: Path) -> None:
    """A Kernel Tuner cache tuned on GFLOP/s is searched on its recorded times; tune's banner
    said so, and the report, which reads the store only, says it too."""
    cache = {
        str(a): {"a": a, "time": float(a), "GFLOP/s": 10.0 / a, "compile_time": 1.0}
        for a in (1, 2, 3)
    }
    header = {"tune_params_keys": ["a"], "tune_params": {"a": [1, 2, 3]}, "objective": "GFLOP/s"}
    path = tmp_path / "gflops.json"
    path.write_text(json.dumps({**header, "cache": cache}))
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    _tune(store, path, 2)
    (data,) = gather_studies(store)
    banner = replay_banner(data)
    assert banner is not None and "GFLOP/s (higher is better)" in banner
    assert "tunes on the time recorded" in banner


def test_the_profile_roofline_draws_the_highest_launch_peak_and_says_how_far_apart(
    tmp_path: Path,
) -> None:
    """Nsight Compute's peaks follow each launch's clock: in this public report (clocks not
    locked) the five launches' DRAM peaks differ by about 40 %. The roof used to be the first
    launch's, drawn below faster-clocked launches' points; it is the highest now, with a note."""
    from workbench.roofline.ceilings import ncu_ceilings

    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    _, records = import_report(NCU / "eschnett_profile.ncu-rep")
    for r in records:
        save_profile(store, r)
    profiles = load_profiles(store)
    dram = [c.value for p in profiles for c in ncu_ceilings(p.metrics) if c.name == "dram"]
    assert len(dram) == 5 and max(dram) / min(dram) > 1.3
    roof = from_profiles(profiles, None, None)
    (drawn,) = [c for c in roof.ceilings if c.name == "dram"]
    assert drawn.value == max(dram)
    assert any("dram peak differs between the launches by 4" in n for n in roof.notes)


def test_a_recorded_space_says_why_it_has_no_binary_diff(built) -> None:
    _, _, pages = built
    (page,) = [p for p in pages if p.name.startswith("study-") and "Xgemm" in p.name]
    section = page.read_text().split("What tuning changed in the binary</h2>")[1].split("<h2")[0]
    assert "No diff: nothing to compile: a recorded space without a space file" in section


def test_the_page_count_says_how_many_html_files_were_written(filled) -> None:
    """`1 page` for an index and a study page was one short: every file is counted."""
    from workbench.cli.main import app

    store, tmp = filled
    out = tmp / "counted"
    result = CliRunner().invoke(app, ["report", "--storage", store.url, "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = len(list(out.rglob("*.html")))
    assert f"{written} pages, the index and {written - 1} study or profile page" in result.output
