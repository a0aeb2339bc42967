"""A report directory written more than once: pages of other kernels are kept and linked, stale
pages of the run's scope are deleted, files the report did not write are never touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.cli.main import app
from workbench.report import ReportOptions, build_reports
from workbench.report.manifest import MANIFEST
from workbench.report.png import PngUnavailable, check_png
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.store import Store


def _store(path: Path, kernels: dict[str, int]) -> Store:
    """A store with one study per kernel, each with that many evaluations (none: no run)."""
    store = Store(f"sqlite:///{path}")
    env = store.environment(DeviceInfo("H200", cc=90))
    for kernel, n in kernels.items():
        study = store.study(
            kernel=kernel, shape_label="n=8", device_key="H200", parameters=[("A", range(9))]
        )
        run = store.start_run(study, env, sampler="tpe") if n else 0
        for a in range(n):
            m = Measurement(TrialOutcome.OK, value=1.0 + a)
            store.record(study, run, env, {"A": a}, m, elapsed_s=0.1 * a)
    return store


def _index(out: Path) -> str:
    return (out / "index.html").read_text(encoding="utf-8")


def test_rewriting_a_report_directory_keeps_what_is_current_and_only_that(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path / "s.sqlite", {"alpha": 3, "beta": 2, "gone": 0})
    out = tmp_path / "reports"
    opts = ReportOptions(out_dir=out)
    first = build_reports(store, None, opts)
    names = sorted(p.name for p in first.pages)
    assert names == ["study-1-alpha.html", "study-2-beta.html", "study-3-gone.html"]
    doc = json.loads((out / MANIFEST).read_text())
    assert [p["link"]["kernels"] for p in doc["pages"]] == [["alpha"], ["beta"], ["gone"]]
    (out / "notes.html").write_text("mine")  # the user's, never the report's

    (gone,) = [s for s in store.studies() if s.kernel == "gone"]
    assert store.discard_if_unused(gone)
    again = build_reports(store, "alpha", opts)
    assert [p.name for p in again.pages] == ["study-1-alpha.html"]
    index = _index(out)  # the other kernels' pages stay linked, saying when they were made
    assert "study-2-beta.html" in index and "study-3-gone.html" in index and "(made 20" in index
    assert "2 page(s) of other kernels come from earlier reports" in index

    result = CliRunner().invoke(app, ["report", "--storage", store.url, "--out", str(out)])
    assert result.exit_code == 0, result.output  # every kernel: the gone study's page goes
    assert "Removed 1 page(s) of an earlier report" in result.stderr  # said, not only in HTML
    assert not (out / "study-3-gone.html").exists()
    assert "Removed 1 page(s) of an earlier report" in _index(out)
    assert "no longer has: study-3-gone.html." in _index(out)  # named, not linked
    assert "href='study-3-gone.html'" not in _index(out)
    assert (out / "notes.html").read_text() == "mine"

    other = _store(tmp_path / "other.sqlite", {"zeta": 1})
    build_reports(other, "zeta", opts)  # another store: none of the first store's pages stay
    assert sorted(p.name for p in out.glob("*.html")) == [
        "index.html",
        "notes.html",
        "study-1-zeta.html",
    ]


def test_a_damaged_or_hostile_manifest_deletes_nothing_it_should_not(tmp_path: Path) -> None:
    store = _store(tmp_path / "s.sqlite", {"alpha": 2})
    out = tmp_path / "reports"
    out.mkdir()
    outside = tmp_path / "outside.html"
    outside.write_text("not the report's")
    (out / "kept.html").write_text("also not")
    link = {"file": "../outside.html", "kind": "study", "title": "t", "details": "d"}
    hostile = {"format": 1, "store": "elsewhere", "pages": [{"link": {**link, "kernels": []}}]}
    (out / MANIFEST).write_text(json.dumps(hostile))
    result = build_reports(store, None, ReportOptions(out_dir=out))
    assert outside.read_text() == "not the report's"  # a name leading out is not followed
    assert "is damaged (KeyError" in " ".join(result.messages)  # no "made": read as nothing
    escaping = {"link": {**link, "kernels": []}, "made": "x", "pngs": []}
    (out / MANIFEST).write_text(json.dumps({**hostile, "pages": [escaping]}))
    build_reports(store, None, ReportOptions(out_dir=out))
    assert outside.read_text() == "not the report's" and (out / "kept.html").exists()
    (out / MANIFEST).write_text("{not json")
    result = build_reports(store, None, ReportOptions(out_dir=out))
    assert any("Earlier pages of this directory are not linked" in m for m in result.messages)
    assert json.loads((out / MANIFEST).read_text())["pages"][0]["link"]["kernels"] == ["alpha"]


@pytest.mark.slow
def test_pngs_belong_to_the_run_that_drew_them(tmp_path: Path) -> None:
    """PNGs of a page are listed with it; a later run that rewrites the page without --png
    removes them (they showed the old data), and files beside them stay."""
    try:
        check_png()
    except PngUnavailable as exc:
        pytest.skip(str(exc))
    store = _store(tmp_path / "s.sqlite", {"alpha": 3})
    out = tmp_path / "reports"
    result = build_reports(store, None, ReportOptions(out_dir=out, png=True))
    assert result.pngs and all(p.read_bytes()[:4] == b"\x89PNG" for p in result.pngs)
    (page,) = json.loads((out / MANIFEST).read_text())["pages"]
    assert sorted(page["pngs"]) == sorted(f"png/{p.name}" for p in result.pngs)
    (out / "png" / "mine.png").write_bytes(b"kept")
    build_reports(store, None, ReportOptions(out_dir=out))
    assert [p.name for p in (out / "png").iterdir()] == ["mine.png"]


@pytest.mark.slow
@pytest.mark.parametrize("drops", [1, 2])
def test_a_figure_kaleido_left_unwritten_is_drawn_again_or_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, drops: int
) -> None:
    """kaleido returned once with a PNG unwritten (two Chromiums on two cores), and the run
    listed it: a figure missing after the export is drawn once more, and one missing twice is
    an error naming it, not a link to nothing."""
    import plotly.io as pio

    from workbench.report.png import write_pngs

    try:
        check_png()
    except PngUnavailable as exc:
        pytest.skip(str(exc))
    real, calls = pio.write_images, []

    def first_figure_lost(figures, paths, **kw) -> None:  # (kaleido, as it failed once)
        calls.append(len(paths))
        real(figures, paths, **kw)
        if len(calls) <= drops:
            Path(paths[0]).unlink()

    monkeypatch.setattr(pio, "write_images", first_figure_lost)
    import plotly.graph_objects as go

    figures = [go.Figure(go.Scatter(y=[1, 3, 2])), go.Figure(go.Bar(y=[2, 1]))]
    paths = [tmp_path / "png" / "a.png", tmp_path / "png" / "b.png"]
    if drops == 1:
        assert write_pngs(figures, paths) == paths and calls == [2, 1]
        assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
    else:
        with pytest.raises(PngUnavailable, match=r"wrote 1 of 2 figures, twice without .*a\.png"):
            write_pngs(figures, paths)
