"""The report of the first H200 lease's store as a kernel engineer reads it: the int8 GEMM at
58 % of a dense int8 roof labelled as such (not 29 % of the 2:4-sparse one), one plotly.js for
the folder (under 10 MB, not 4.8 MB a page), and no label cut off at a 1,400 px viewport, in
Chromium. Also the short labels themselves, without a browser."""

from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import pytest
from dataset_paths import DEVICE_RUNS

from workbench.profile.storage import load_profiles
from workbench.report import ReportOptions, build_reports
from workbench.report.data import gather_studies
from workbench.report.labels import short_labels
from workbench.report.page import PLOTLY_JS
from workbench.report.roofline import from_profiles, launch_labels, timed_clock_mhz
from workbench.store import Store

LEASE_STORE = DEVICE_RUNS / "h200-2026-12-04/run1/store.sqlite.gz"
CHROMIUM = Path("/usr/bin/chromium")
VIEWPORT = {"width": 1400, "height": 900}
#: The int8 GEMM's share of the dense int8 roof: 4,784 of 8,192 ops per SM and cycle.
DENSE_SHARE = "58.4%"

needs_store = pytest.mark.skipif(not LEASE_STORE.is_file(), reason=f"missing {LEASE_STORE}")


@pytest.fixture(scope="module")
def lease(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path, list[Path]]:
    """The lease's store and the report of everything in it (no --ceilings)."""
    if not LEASE_STORE.is_file():
        pytest.skip(f"missing {LEASE_STORE}")
    tmp = tmp_path_factory.mktemp("h200-lease")
    path = tmp / "store.sqlite"
    with gzip.open(LEASE_STORE) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    store = Store(f"sqlite:///{path}")
    result = build_reports(store, None, ReportOptions(out_dir=tmp / "reports"))
    return store, tmp / "reports", result.pages


def _gemm_profiles(store: Store) -> list:  # type: ignore[type-arg]
    return [p for p in load_profiles(store) if p.kernel == "gemm_int8"]


@needs_store
def test_the_int8_gemm_sits_at_58_percent_of_the_dense_int8_roof(lease) -> None:
    store, _, _ = lease
    roof = from_profiles(_gemm_profiles(store), None, None)
    (launch,) = roof.sets
    assert {f"{pt.fraction:.1%}" for pt in launch.points} == {DENSE_SHARE}
    (compute,) = [c for c in roof.ceilings if c.name.startswith("tensor_")]
    assert compute.name == "tensor_int8" and "dense int8, ncu peak / 2" in compute.legend
    assert "1.69 GHz" in roof.clock  # the profile's clock, said once for the chart
    labels, caption = launch_labels(roof)
    assert labels == ["gemm_int8"] and caption and "PATH=wgmma" in caption


@needs_store
def test_the_report_folder_shares_one_plotly_js_and_weighs_under_10_mb(lease) -> None:
    _, out, pages = lease
    total = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    assert total < 10_000_000, f"{total:,} bytes"
    assert (out / PLOTLY_JS).stat().st_size > 3_000_000
    for page in pages:
        html = page.read_text()
        assert re.findall(r"<script[^>]*\bsrc=\"([^\"]*)\"", html) == [PLOTLY_JS], page.name


#: Every element of a page whose text overflows: wider than the viewport, wider than its box
#: (a table cell that does not wrap), or a plotly text outside its figure.
_CUT = r"""
() => {
  const W = window.innerWidth, cut = [], wide = document.documentElement.scrollWidth;
  if (wide > W) cut.push(['page', wide]);
  for (const el of document.querySelectorAll('td,th,li,p,pre,h1,h2,h3,nav')) {
    const r = el.getBoundingClientRect();
    if (r.right > W + 1 || el.scrollWidth > el.clientWidth + 1)
      cut.push([el.tagName, el.textContent.slice(0, 80)]);
  }
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    const box = plot.getBoundingClientRect();
    for (const t of plot.querySelectorAll(
        '.xtick text, .ytick text, .legendtext, .gtitle, .g-xtitle text, .g-ytitle text,'
        + ' .annotation-text, .bartext')) {
      const r = t.getBoundingClientRect();
      if (r.width > 0 && (r.left < box.left - 1 || r.right > box.right + 1
                          || r.top < box.top - 1 || r.bottom > box.bottom + 1))
        cut.push(['plot', t.textContent.slice(0, 80)]);
    }
  }
  return cut;
}
"""


def _browser(pw):  # type: ignore[no-untyped-def]
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM}")
    return pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])


@needs_store
@pytest.mark.slow
def test_no_label_is_cut_off_at_1400_px_and_the_roofline_says_dense(lease) -> None:
    from playwright.sync_api import sync_playwright

    _, out, pages = lease
    roofline_texts = []
    with sync_playwright() as pw:
        browser = _browser(pw)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            for path in [*pages, out / "index.html"]:
                page.goto(path.as_uri())
                page.wait_for_load_state("load")
                page.wait_for_timeout(300)  # plotly lays out its text after load
                assert page.evaluate(_CUT) == [], path.name
                if page.locator("#roofline table").count():
                    roofline_texts.append(page.inner_text("#roofline"))
        finally:
            browser.close()
    (gemm,) = [t for t in roofline_texts if "tensor_int8" in t]
    assert DENSE_SHARE in gemm and "tensor_int8 1.83 POP/s (ncu)" in gemm
    assert "dense int8, ncu peak / 2, at 1.69 GHz" in gemm  # the chart's legend
    assert "tensor_int8_sparse" not in gemm  # a dense kernel: no sparse roof drawn


@needs_store
def test_the_timed_clock_is_the_median_of_the_samples_clocks(lease) -> None:
    """The lease's tune recorded each sample's SM clock (NVML): 1,980 MHz; the event-timing
    roofline scales the datasheet's tensor peak (quoted at 1,830 MHz) to it."""
    store, _, _ = lease
    for data in gather_studies(store, "gemm_int8"):
        assert timed_clock_mhz(data.ok[:5]) == 1980.0
    assert timed_clock_mhz([]) is None


def test_short_labels_keep_what_differs_and_say_the_rest_once() -> None:
    short = short_labels(["A=1,B=x,C=3", "A=2,B=x,C=3", "A=2,B=x", None, "not a config"])
    assert short.labels == ("A=1,C=3", "A=2,C=3", "A=2", "", "not a config")
    assert short.shared == "B=x" and short.shared_text == "B=x"
    one = short_labels(["PATH=wgmma,BM=128,BN=256"])
    assert one.labels == ("",) and one.shared_text == "PATH=wgmma, BM=128, BN=256"
    assert short_labels([]).labels == () and short_labels([None]).shared == ""
