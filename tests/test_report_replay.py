"""The report of ``workbench tune gemm_int8`` without a GPU, which replays the H200 run kept in
``tuning_spaces/recordings/gemm_int8/``: what that run kept beside its recordings (its
comparison with cuBLAS and cuBLASLt, its Nsight Compute profile) is stored by the replay as
the GPU run stored it, marked as read from its file, and the report shows it. Expected figures
are read from the kept files, not retyped. Data-level: no browser."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest
from cli_helpers import invoke

from workbench.compare.storage import load_comparisons
from workbench.compiler import CompileCache, compile_job, make_job
from workbench.gpu import probe_gpu
from workbench.profile.storage import load_profiles
from workbench.report.baselines import Baselines, ContenderRow, gather_baselines, retimed_best
from workbench.report.compiled import gather_compiled
from workbench.report.counters import gather_variants, has_divergence, has_memory, replayed_sources
from workbench.report.data import StudyData, gather_studies
from workbench.report.overview import retimed_note
from workbench.report.page import cell
from workbench.report.pages import study_page
from workbench.report.roofline import from_profiles
from workbench.runners.recordings import load_recording
from workbench.spaces import load_kernel
from workbench.spaces.registry import builtin_spaces_dir
from workbench.store import Store

KEPT = builtin_spaces_dir() / "recordings" / "gemm_int8"
RECORDING = KEPT / "gemm_int8-nvidia-h200-M4096_N4096_K4096.json.gz"
COMPARE = KEPT / "compare" / "gemm_int8-nvidia-h200-2026-12-04.json"
PROFILES = KEPT / "profiles" / "gemm_int8-nvidia-h200-2026-12-04.json"
SHAPE = "M=4096,N=4096,K=4096"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The store of ``workbench tune gemm_int8`` run twice without a GPU."""
    if probe_gpu().available:
        pytest.skip("a GPU is present: tune measures instead of replaying")
    tmp = tmp_path_factory.mktemp("replay")
    env = {"WORKBENCH_STORE": str(tmp / "store.sqlite"), "WORKBENCH_CACHE_DIR": str(tmp / "c")}
    for _ in range(2):  # a second replay resumes the study and stores nothing twice
        code, _, err = invoke("tune", "gemm_int8", env=env)
        assert code == 0, err
    return Store(f"sqlite:///{tmp / 'store.sqlite'}")


def _kept_compare() -> dict[str, Any]:
    return json.loads(COMPARE.read_text())


def _study(store: Store) -> StudyData:
    (data,) = gather_studies(store, "gemm_int8")
    return data


def test_the_replay_stores_the_runs_comparison_once_and_says_where_from(replayed) -> None:
    doc = _kept_compare()
    stored = load_comparisons(replayed, kernel="gemm_int8")
    expected = [(s["label"], r["name"]) for s in doc["shapes"] for r in s["results"]]
    assert [(r.shape_label, r.contender) for r in stored] == expected
    assert len({r.batch for r in stored}) == 1
    source = f"NVIDIA H200 ({COMPARE.name})"
    assert all(r.command == f"replayed from {source}" for r in stored)
    b = gather_baselines(replayed, "gemm_int8")
    assert b.replayed == (source,) and b.devices == ("NVIDIA H200",)
    results = [r for s in doc["shapes"] for r in s["results"]]
    assert [(r.median_ms, r.throughput, r.speedup) for r in b.rows] == [
        (r["median_ms"], r["throughput"], r["speedup"]) for r in results
    ]
    # the study of the shape the replay tuned is the one its rows were compared at
    data = _study(replayed)
    assert {r.study_id for r in stored if r.shape_label == SHAPE} == {data.study.id}


def test_the_page_says_which_median_each_tuned_figure_is(replayed) -> None:
    """compare's timing of the best config (the README's 1,076 TOPS) against the tune's median
    of it (the page's 1,083.5): two medians of different samples, each named."""
    data = _study(replayed)
    (at_shape,) = [s for s in _kept_compare()["shapes"] if s["label"] == SHAPE]
    tuned = next(r for r in at_shape["results"] if r["name"] == "tuned")
    # (as the replay sees it: the knobs added since, SCHED and RASTER, at their `before:` values)
    best = load_recording(RECORDING).for_space(load_kernel("gemm_int8")).optimum()
    assert best is not None and data.best is not None
    assert data.best.measurement.value == best.value
    again = retimed_best(gather_baselines(replayed, "gemm_int8"), SHAPE, data.devices, best.config)
    assert again is not None and again.median_ms == tuned["median_ms"]
    note = retimed_note(data, gather_baselines(replayed, "gemm_int8"))
    assert note is not None
    ops = at_shape["work"]["ops"]
    assert f"{tuned['throughput']:,.1f} TOPS" in note and "compare's timing" in note
    assert f"{ops / (best.value * 1e-3) / 1e12:,.1f} TOPS" in note and "tune's median" in note
    assert f"{len(best.samples)} samples" in note and COMPARE.name in note


def test_a_row_timed_before_a_knob_existed_matches_the_best_at_its_before_value() -> None:
    """A comparison stored before gemm_int8 had SCHED, RASTER and EPILOGUE (by compare on a
    GPU, or by an earlier replay) lacks them: with the space, its tuned row is the study's best
    config where that holds their ``before:`` values (static, m, direct), and no other."""
    spec = load_kernel("gemm_int8")
    best = load_recording(RECORDING).for_space(spec).optimum()
    assert best is not None
    old = {k: v for k, v in best.config.items() if k not in ("SCHED", "RASTER", "EPILOGUE")}
    assert len(old) == len(best.config) - 3
    row = ContenderRow(
        SHAPE, "NVIDIA H200", "tuned", "gemm_int8", "ok", None, 1.25, None, None, None, None,
        None, None, config=old,
    )  # fmt: skip
    b = Baselines(rows=(row,), devices=("NVIDIA H200",))
    again = retimed_best(b, SHAPE, ["NVIDIA H200"], best.config, spec)
    assert again is not None and again.median_ms == 1.25
    assert retimed_best(b, SHAPE, ["NVIDIA H200"], best.config) is None  # (without the space)
    for knob, other in (("EPILOGUE", "tma"), ("RASTER", "n"), ("SCHED", "streamk")):
        assert retimed_best(b, SHAPE, ["NVIDIA H200"], {**best.config, knob: other}, spec) is None


def test_the_replay_imports_the_runs_profile_of_the_shape_it_replays(replayed) -> None:
    """The run's Nsight Compute report of the best config at 4096^3, listed by its ``workbench
    profile --json`` output: imported once, at that shape, linked to the replayed study, its
    divergence and memory figures those the run printed."""
    (listed,) = json.loads(PROFILES.read_text())["profiles"]
    data = _study(replayed)
    (p,) = load_profiles(replayed)
    report = KEPT / "ncu" / Path(listed["source_file"]).name
    assert (p.kernel, p.config_key, p.shape_label) == (
        listed["kernel"],
        listed["config"],
        listed["shape"],
    )
    assert p.study_id == data.study.id and p.source == "import"
    assert p.source_file == str(report.resolve())
    assert p.command == f"replayed from NVIDIA H200 ({report.name})"
    assert any(n.startswith("replayed:") for n in p.notes)
    (v,) = gather_variants([p])
    assert has_divergence(v) and has_memory(v)
    assert v.divergence.threads_per_inst == listed["divergence"]["threads_per_inst"]
    assert v.memory.l2_hit_rate_pct == listed["memory"]["l2_hit_rate_pct"]
    assert replayed_sources([p]) == [f"NVIDIA H200 ({report.name})"]


def test_the_page_names_every_file_its_replayed_figures_come_from(replayed) -> None:
    data = _study(replayed)
    b = gather_baselines(replayed, "gemm_int8")
    page = study_page(replayed, data, load_profiles(replayed), b, None, None, None)
    html = page.render(plotlyjs=False)
    banner = next(text for css, text in page.banners if css == "banner")
    for name in (RECORDING.name, COMPARE.name, Path(_listed_report()).name):
        assert name in banner
    sections = {s.anchor: s for s in page.sections}
    for anchor in ("divergence", "memory", "roofline"):
        assert any(isinstance(part, go.Figure) for part in sections[anchor].parts), anchor
    assert "No baseline timings" not in html and "No Nsight Compute profile" not in html


def _listed_report() -> str:
    (listed,) = json.loads(PROFILES.read_text())["profiles"]
    return str(listed["source_file"])


def test_charts_with_nothing_to_say_are_one_sentence(replayed, tmp_path: Path) -> None:
    """Compile resources of one config (its best, compiled here) and where a replay's time
    went (lookups, no GPU): each a sentence with its figures, not a chart of one point or of
    tens of thousands of evaluations a minute."""
    data = _study(replayed)
    space, _ = data.space
    assert space is not None and data.best is not None
    cache = CompileCache(tmp_path / "cache")
    compiled = compile_job(make_job(space, data.best.config), cache)
    assert compiled.ok
    series = gather_compiled(replayed, data, cache)
    assert series is not None and len(series.points) == 1
    (point,) = series.points
    b = gather_baselines(replayed, "gemm_int8")
    page = study_page(replayed, data, load_profiles(replayed), b, None, cache, None)
    sections = {s.anchor: s for s in page.sections}
    for anchor in ("compile", "phases"):
        assert not any(isinstance(part, go.Figure) for part in sections[anchor].parts), anchor
        assert len(sections[anchor].parts) == 1, anchor
    (compile_text,) = sections["compile"].parts
    assert f"{point.registers} registers per thread" in str(compile_text)
    assert f"the other {len(data.evaluations) - 1} have none there" in str(compile_text)
    (phases_text,) = sections["phases"].parts
    assert f"{len(data.evaluations)} evaluations" in str(phases_text)
    assert "no GPU busy" in str(phases_text)


def _rules(html: str, selector: str) -> list[str]:
    """The declarations of every rule of the page's stylesheet whose selectors include
    ``selector``."""
    style = html.split("<style>", 1)[1].split("</style>", 1)[0]
    found = re.findall(r"([^{}]+)\{([^}]*)\}", style)
    return [body for sels, body in found if selector in (s.strip() for s in sels.split(","))]


def test_table_cells_never_break_inside_a_word_or_number_and_rates_have_units(replayed) -> None:
    """Cells wrap at spaces and between a config's parameters only (numeric ones never), and a
    table wider than the page scrolls sideways; the roofline's rates read as the compare
    table writes them (1,070 TOPS), not 1.07e+15."""
    data = _study(replayed)
    profiles = load_profiles(replayed)
    page = study_page(replayed, data, profiles, gather_baselines(replayed, "gemm_int8"), None,
                      None, None)  # fmt: skip
    html = page.render(plotlyjs=False)
    td = " ".join(_rules(html, "td"))
    assert "word-break:keep-all" in td and "overflow-wrap:normal" in td
    assert "anywhere" not in td and "break-all" not in td
    assert "white-space:nowrap" in " ".join(_rules(html, ".num"))
    assert html.count("<table") == html.count("<div class='scroll'><table") > 5
    assert cell("PATH=wgmma,BM=128") == "PATH=wgmma,<wbr>BM=128"
    assert cell("1,083.5 TOPS") == "1,083.5 TOPS"  # a number's comma is no place to wrap
    numeric = re.findall(r"<td class='num'>([^<]*)</td>", html)
    assert numeric and not [c for c in numeric if re.search(r"\de[+-]\d", c)]
    roof = from_profiles(profiles, data, None)
    rates = [pt.compute.rate_text(pt.achieved) for s in roof.sets for pt in s.points]
    roofline = next(s for s in page.sections if s.anchor == "roofline")
    shown = "".join(p for p in roofline.parts if isinstance(p, str))
    assert rates and all(f"<td class='num'>{r}</td>" in shown for r in rates)
    assert all(r.endswith(" TOPS") for r in rates)


def test_reduce_replays_its_comparison_and_profile_into_its_variants_study(
    private_dirs: Path,
) -> None:
    """reduce's recording is of a problem variant (``reduce[OP=sum]``), its kept comparison
    and profile of the kernel: both reach the variant's study, and its page (CUB and a copy;
    the profile's counters) names their files."""
    if probe_gpu().available:
        pytest.skip("a GPU is present: tune measures instead of replaying")
    code, _, err = invoke("tune", "reduce")
    assert code == 0, err
    store = Store(f"sqlite:///{private_dirs}")
    (data,) = gather_studies(store, "reduce")
    assert data.study.kernel == "reduce[OP=sum]"
    kept = builtin_spaces_dir() / "recordings" / "reduce"
    (compare,) = (kept / "compare").glob("*.json")
    doc = json.loads(compare.read_text())
    b = gather_baselines(store, "reduce")
    assert [(r.shape, r.median_ms) for r in b.rows] == [
        (s["label"], r["median_ms"]) for s in doc["shapes"] for r in s["results"]
    ]
    assert b.replayed == (f"NVIDIA H200 ({compare.name})",)
    (p,) = load_profiles(store)
    assert p.study_id == data.study.id and p.shape_label == data.study.shape_label
    page = study_page(store, data, [p], b, None, None, None)
    banner = next(text for css, text in page.banners if css == "banner")
    assert compare.name in banner and Path(p.source_file or "").name in banner
