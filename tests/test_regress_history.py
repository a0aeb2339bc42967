"""Change points in a kernel's history, and the HTML timeline, on real GPU timing noise."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from workbench.regress.history import candidate_breaks, gather_history
from workbench.regress.noise import SampleSet, draw_run, series_points
from workbench.regress.records import MeasurementRecord, RegressError, save_run
from workbench.regress.timeline import draw_timeline, timeline_html, write_timeline
from workbench.runners.base import DeviceInfo, TrialOutcome
from workbench.store import Store

H200 = DeviceInfo(name="NVIDIA H200", cc=90, driver="550.54.15", cuda="12.4", toolkit="nvrtc 13.0")
NEW_DRIVER = DeviceInfo(
    name="NVIDIA H200", cc=90, driver="560.35.03", cuda="12.6", toolkit="nvrtc 13.0"
)


def record_series(
    store: Store, runs: list[np.ndarray], env_ids: list[int], config: str = "BLOCK=128"
) -> None:
    for samples, env in zip(runs, env_ids, strict=True):
        m = MeasurementRecord(
            shape_label="n=1024",
            config_key=config,
            params={"BLOCK": 128},
            origin="best",
            outcome=TrialOutcome.OK,
            median=float(np.median(samples)),
            samples=tuple(float(x) for x in samples),
        )
        save_run(store, kernel="conv", environment_id=env, measurements=[m])


def test_one_step_is_found_at_the_right_run_with_what_changed(
    store: Store, one_percent_noise: list[SampleSet]
) -> None:
    rng = np.random.default_rng(0)
    old = store.environment(H200, git_commit="a" * 40, git_dirty=False)
    new = store.environment(NEW_DRIVER, git_commit="a" * 40, git_dirty=False)
    s = one_percent_noise[3].samples
    runs = [draw_run(s, rng, factor=1.06 if i >= 12 else 1.0) for i in range(20)]
    record_series(store, runs, [old] * 12 + [new] * 8)
    (series,) = gather_history(store, "conv")
    assert [c.index for c in series.change_points] == [12]
    cp = series.change_points[0]
    assert cp.ratio == pytest.approx(1.06, abs=0.01)
    changed = {c.field: (c.before, c.after) for c in cp.changes}
    assert changed["driver"] == ("550.54.15", "560.35.03")
    assert changed["cuda"] == ("12.4", "12.6")
    assert "commit" not in {c.name for c in cp.changes}
    assert "slower" in cp.describe() and "driver 550.54.15 -> 560.35.03" in cp.describe()


def test_steps_are_found_across_many_real_configs(one_percent_noise: list[SampleSet]) -> None:
    """A 5 % step after run 12 of 25, on 40 configs with ~1 % noise: found at run 12 (PELT),
    and nothing else is found."""
    from workbench.regress.history import change_points

    rng = np.random.default_rng(1)
    hits = 0
    trials = 40
    for _ in range(trials):
        s = one_percent_noise[int(rng.integers(len(one_percent_noise)))].samples
        runs = [draw_run(s, rng, factor=1.05 if i >= 12 else 1.0) for i in range(25)]
        found = [c.index for c in change_points(series_points(runs))]
        hits += found == [12]
    assert hits / trials >= 0.9, hits


def test_flat_noisy_histories_have_no_change_point(one_percent_noise: list[SampleSet]) -> None:
    from workbench.regress.history import change_points

    rng = np.random.default_rng(2)
    found = 0
    for _ in range(40):
        s = one_percent_noise[int(rng.integers(len(one_percent_noise)))].samples
        runs = [draw_run(s, rng) for _ in range(25)]
        found += bool(change_points(series_points(runs)))
    assert found == 0


def test_a_bimodal_kernel_jumping_between_modes_is_not_a_change() -> None:
    """The median of a kernel with two clock states flips from run to run; the pooled samples
    do not change, so PELT's candidates are not confirmed."""
    from workbench.regress.history import change_points

    rng = np.random.default_rng(3)
    modes = np.concatenate([rng.normal(0.95, 0.003, 15), rng.normal(1.0, 0.003, 17)])
    runs = [draw_run(modes, rng) for _ in range(30)]
    medians = [float(np.median(r)) for r in runs]
    assert max(medians) / min(medians) > 1.03  # the medians do jump
    assert change_points(series_points(runs)) == []


def test_medians_without_samples_use_the_floor() -> None:
    from workbench.regress.history import change_points

    runs = [np.array([1.0])] * 6 + [np.array([1.01])] * 6
    assert change_points(series_points(runs, keep_samples=False)) == []
    runs = [np.array([1.0])] * 6 + [np.array([1.10])] * 6
    assert [c.index for c in change_points(series_points(runs, keep_samples=False))] == [6]


def test_a_zero_time_sample_does_not_crash_the_history() -> None:
    """A sample of 0 ms (a timer's resolution) is stored; the comparison rule refuses it, and
    the change-point search falls back on the medians' shift instead of raising."""
    from workbench.regress.history import change_points

    runs = [np.array([0.0, 1.0, 1.0])] * 6 + [np.array([0.0, 1.2, 1.2])] * 6
    assert [c.index for c in change_points(series_points(runs))] == [6]


def test_short_histories_have_no_candidates() -> None:
    assert candidate_breaks([1.0, 2.0, 1.0]) == []


def test_history_of_an_unknown_kernel_is_an_error(store: Store) -> None:
    with pytest.raises(RegressError, match="no regression run of nothing"):
        gather_history(store, "nothing")


def test_timeline_marks_change_points_and_links_environments(
    store: Store, one_percent_noise: list[SampleSet], tmp_path: Path
) -> None:
    rng = np.random.default_rng(4)
    old = store.environment(H200, git_commit="b" * 40, git_dirty=False)
    new = store.environment(NEW_DRIVER, git_commit="b" * 40, git_dirty=True)
    s = one_percent_noise[0].samples
    runs = [draw_run(s, rng, factor=1.08 if i >= 8 else 1.0) for i in range(14)]
    record_series(store, runs, [old] * 8 + [new] * 6)
    record_series(store, [draw_run(s, rng) for _ in range(14)], [old] * 14, config="BLOCK=256")
    series = gather_history(store, "conv")
    assert [len(s.change_points) for s in series] == [1, 0]

    fig = draw_timeline(series, "conv")
    assert len(fig.layout.shapes) == 1  # one dashed line
    stars = [t for t in fig.data if t.marker.symbol == "star"]
    assert len(stars) == 1 and "driver 550.54.15 -&gt; 560.35.03" in stars[0].hovertext[0]
    assert fig.layout.annotations[0].name == f"env-{new}"
    assert f"environment {new}" in fig.layout.annotations[0].text

    page = timeline_html(series, kernel="conv", store_url=store.url)
    assert page.count("plotly.js v") == 1  # plotly.js inlined once
    assert f"id='env-{new}'" in page and f"id='env-{old}'" in page
    assert "(dirty)" in page and "REPLAY" not in page
    path = write_timeline(tmp_path / "out" / "t.html", series, kernel="conv", store_url="x")
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_broken_runs_stay_in_the_history_and_on_the_timeline(
    store: Store, one_percent_noise: list[SampleSet]
) -> None:
    """A run where a config crashed is neither a point nor a change point, but the series
    keeps it: a cross on its line, a row of the broken-runs table; a config that broke on its
    first run is a series with no points."""
    rng = np.random.default_rng(7)
    env = store.environment(H200)
    s = one_percent_noise[1].samples
    crash = MeasurementRecord(
        shape_label="n=1024",
        config_key="BLOCK=128",
        params={"BLOCK": 128},
        origin="best",
        outcome=TrialOutcome.LAUNCH_FAILED,
        reason="an illegal memory access was encountered",
    )
    never = dataclasses.replace(
        crash, config_key="BLOCK=512", outcome=TrialOutcome.COMPILE_FAILED, reason="ptxas"
    )
    record_series(store, [draw_run(s, rng) for _ in range(4)], [env] * 4)
    save_run(store, kernel="conv", environment_id=env, measurements=[crash, never])
    record_series(store, [draw_run(s, rng) for _ in range(3)], [env] * 3)
    ran, broke = gather_history(store, "conv")
    assert (ran.config_key, len(ran.points), ran.change_points) == ("BLOCK=128", 7, ())
    assert [b.run.id for b in ran.broken] == [5] and [p.run.id for p in ran.points][4] == 6
    assert ran.broken[0].describe() == ("launch_failed: an illegal memory access was encountered")
    assert (broke.config_key, broke.points, broke.change_points) == ("BLOCK=512", (), ())
    assert broke.broken[0].describe() == "compile_failed: ptxas" and broke.environments

    fig = draw_timeline([ran, broke], "conv")
    (cross,) = [t for t in fig.data if t.marker.symbol == "x"]
    assert cross.y == (ran.points[3].median,)  # on the line, at its last time before
    assert "illegal memory access" in cross.hovertext[0]
    page = timeline_html([ran, broke], kernel="conv", store_url=store.url)
    assert "<h2>Broken runs</h2>" in page and page.count("compile_failed: ptxas") == 1


def test_the_timeline_fragment_leaves_plotly_js_to_the_page(
    store: Store, one_percent_noise: list[SampleSet]
) -> None:
    """What ``workbench report`` embeds: figures and tables, no document, no plotly.js."""
    from workbench.regress.timeline import timeline_figures, timeline_fragment

    rng = np.random.default_rng(5)
    env = store.environment(H200)
    s = one_percent_noise[1].samples
    record_series(store, [draw_run(s, rng) for _ in range(6)], [env] * 6)
    record_series(store, [draw_run(s, rng) for _ in range(6)], [env] * 6, config="BLOCK=256")
    series = gather_history(store, "conv")
    assert [f.layout.title.text for f in timeline_figures(series)] == [
        "conv [n=1024] on NVIDIA H200"  # one figure per (kernel, GPU, shape), a trace per config
    ]
    fragment = timeline_fragment(series)
    assert "<html" not in fragment and "plotly.js v" not in fragment
    assert "Plotly.newPlot" in fragment and "plotly_clickannotation" in fragment
    assert f"id='env-{env}'" in fragment and "None found" in fragment
    assert timeline_fragment(series, include_plotlyjs=True).count("plotly.js v") == 1
    shared = timeline_fragment(series, include_plotlyjs="plotly.min.js")  # a report folder's
    assert shared.count('src="plotly.min.js"') == 1 and "plotly.js v" not in shared


@pytest.mark.slow
def test_the_timeline_page_renders_offline_in_chromium(
    store: Store, one_percent_noise: list[SampleSet], tmp_path: Path
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():
        pytest.skip("no /usr/bin/chromium")
    rng = np.random.default_rng(6)
    old = store.environment(H200, git_commit="c" * 40, git_dirty=False)
    new = store.environment(H200, git_commit="d" * 40, git_dirty=False)
    s = one_percent_noise[2].samples
    runs = [draw_run(s, rng, factor=1.1 if i >= 6 else 1.0) for i in range(12)]
    record_series(store, runs, [old] * 6 + [new] * 6)
    page_path = write_timeline(
        tmp_path / "t.html", gather_history(store, "conv"), kernel="conv", store_url=store.url
    )
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            # offline: anything but the file itself is refused
            page.route(
                "**/*",
                lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort(),
            )
            page.goto(page_path.as_uri())
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
            assert page.locator(".js-plotly-plot").count() == 1
            # the change point's note says what changed and leads to that environment's row
            note = page.locator(".annotation")
            assert "commit cccccccccc -> dddddddddd" in (note.text_content() or "")
            note.locator(".cursor-pointer").click()
            assert page.evaluate("location.hash") == f"#env-{new}"
            assert "d" * 10 in page.locator(f"#env-{new}").inner_text()
        finally:
            browser.close()
    assert errors == []
