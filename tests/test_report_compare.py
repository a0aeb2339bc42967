"""The study page's comparison with the vendor libraries and the index's headline per study, on
the first H200 lease's store (its studies and the comparison it stored) and its recorded
compare stored again under roofs raised to the fastest measured: the layout in Chromium at a
1280 px viewport, the data without a browser."""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import pytest
from dataset_paths import DEVICE_RUNS
from h200_compare import recorded_doc, recorded_int8_compare

from workbench.compare.storage import save_comparisons
from workbench.compare.table import fit_ceilings
from workbench.report import ReportOptions, build_reports
from workbench.report.baselines import gather_baselines
from workbench.report.data import gather_studies
from workbench.store import Store

LEASE_STORE = DEVICE_RUNS / "h200-2026-12-04/run1/store.sqlite.gz"
CHROMIUM = Path("/usr/bin/chromium")
#: A typical laptop viewport; the page's body is 1,200 px at most.
VIEWPORT = {"width": 1280, "height": 900}
#: No row of the comparison table may be taller than this (a long reason made rows ~390 px).
MAX_ROW_PX = 80

pytestmark = pytest.mark.skipif(not LEASE_STORE.is_file(), reason=f"missing {LEASE_STORE}")


def _lease_store(tmp: Path) -> Store:
    path = tmp / "store.sqlite"
    with gzip.open(LEASE_STORE) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return Store(f"sqlite:///{path}")


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    """The lease's store with its compare stored again as a newer batch, under roofs raised to
    the fastest contender; the report of gemm_int8 written from it."""
    tmp = tmp_path_factory.mktemp("h200-report")
    store = _lease_store(tmp)
    save_comparisons(store, fit_ceilings(recorded_int8_compare()), device="NVIDIA H200")
    build_reports(store, "gemm_int8", ReportOptions(out_dir=tmp / "reports"))
    return store, tmp / "reports"


def _study_page(out: Path, shape: str) -> Path:
    (page,) = [
        p for p in out.glob("study-*-gemm_int8.html") if f"[{shape}]" in p.read_text()[:2000]
    ]
    return page


def test_one_row_per_shape_and_contender_and_each_reason_once(compared) -> None:
    store, _ = compared
    doc = recorded_doc()
    b = gather_baselines(store, "gemm_int8")
    results = [(s["label"], r) for s in doc["shapes"] for r in s["results"]]
    assert [(r.shape, r.status) for r in b.rows] == [(s, r["status"]) for s, r in results]
    reasons = list(dict.fromkeys(r["reason"] for _, r in results if r["status"] != "ok"))
    assert list(b.footnotes) == reasons  # the CUTLASS reason once, for its five rows
    for row, (_, r) in zip(b.rows, results, strict=True):
        assert (row.footnote is None) == (r["status"] == "ok")
        if row.footnote is not None:
            assert b.footnotes[row.footnote - 1] == r["reason"]
    assert all(r.share is None or r.share <= 1.0 for r in b.rows) and not b.refused
    assert {name for name, _ in b.legend} == {"tuned", "cuBLAS", "cuBLASLt", "CUTLASS"}


def test_the_lease_stored_shares_above_100_percent_and_they_are_refused(tmp_path: Path) -> None:
    """The lease's own batch holds 161 % of bound (its int8 roof was cuBLASLt's 940 TOPS): the
    page shows no share of it and says why, rather than print one."""
    b = gather_baselines(_lease_store(tmp_path), "gemm_int8")
    assert b.rows and all(r.share is None for r in b.rows)
    (why,) = b.refused
    assert "above 100 %" in why and "workbench compare again" in why


@pytest.mark.slow
def test_the_comparison_fits_the_page_in_chromium(compared) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    _, out = compared
    doc = recorded_doc()
    cutlass = next(
        r["reason"] for s in doc["shapes"] for r in s["results"] if r["name"] == "cutlass"
    )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(_study_page(out, "M=8192,N=8192,K=8192").as_uri())
            page.wait_for_load_state("load")
            layout = page.evaluate(
                """() => {
                  const t = Array.from(document.querySelectorAll('#overview table'))
                    .find(t => t.rows[0].innerText.includes('% of roofline bound'));
                  const chart = document.querySelector('#overview .plotly-graph-div');
                  return {
                    page: document.documentElement.clientWidth,
                    scroll: t.scrollWidth,
                    right: t.getBoundingClientRect().right,
                    rows: Array.from(t.rows).map(r => r.getBoundingClientRect().height),
                    chartFirst: !!(chart.compareDocumentPosition(t)
                                   & Node.DOCUMENT_POSITION_FOLLOWING),
                  };
                }"""
            )
            text = page.inner_text("body")
        finally:
            browser.close()
    assert layout["scroll"] <= layout["page"] and layout["right"] <= layout["page"], layout
    assert max(layout["rows"]) <= MAX_ROW_PX, layout["rows"]
    assert len(layout["rows"]) == 1 + sum(len(s["results"]) for s in doc["shapes"])
    assert layout["chartFirst"]  # the speedup chart leads
    assert text.count(cutlass) == 1  # a footnote, not a cell per row


@pytest.mark.slow
def test_the_index_gives_each_study_its_best_and_its_speedup_over_cublas(compared) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    store, out = compared
    doc = recorded_doc()
    speedups = {(s["label"], r["name"]): r["speedup"] for s in doc["shapes"] for r in s["results"]}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto((out / "index.html").as_uri())
            rows = page.evaluate(
                "Array.from(document.querySelectorAll('#pages table tr')).slice(1)"
                ".map(r => Array.from(r.cells).map(c => c.innerText))"
            )
        finally:
            browser.close()
    by_title = {cells[0]: cells for cells in rows}
    studies = gather_studies(store, "gemm_int8")
    assert len(studies) == 4
    for data in studies:
        cells = by_title[data.study.name]
        best = data.best
        assert best is not None and best.measurement.value is not None
        headline = cells[2]
        assert headline.startswith(f"best {best.measurement.value:.4g} ms")
        shape = data.study.shape_label
        assert re.search(rf"{speedups[(shape, 'cublas')]:.2f}x vs cuBLAS\b", headline)
        lt = speedups[(shape, "cublaslt")]  # None where torch._int_mm refused (M = 16)
        assert ("vs cuBLASLt" in headline) == (lt is not None)
        assert lt is None or f"{lt:.2f}x vs cuBLASLt" in headline
