"""The first H200 run's data, kept in the repo, as the CPU-only paths use it: the recordings
that ``workbench tune K`` replays without a GPU (``tuning_spaces/recordings/``), and the
Nsight Compute reports and measured ceilings of that run (``tests/data/``), read by the profile
import and the report pages. Expected figures are read from those files, not retyped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import invoke

from workbench.gpu import probe_gpu
from workbench.profile.importing import import_report
from workbench.profile.storage import load_profiles, save_profile
from workbench.report import ReportOptions, build_reports
from workbench.report.counters import gather_variants
from workbench.roofline import Ceilings, measured_ceilings
from workbench.runners.recordings import load_recording
from workbench.search.kept_recordings import recording_for_shape, shipped_recordings
from workbench.search.problem import SpaceProblem
from workbench.search.start import plan_space_replay
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import base_kernel, parse_config_label
from workbench.spaces.registry import builtin_spaces_dir
from workbench.store import Store

DATA = Path(__file__).parent / "data"
#: the run's reports: those a replayed tune imports are kept with its kernel's recordings
NCU_REPORTS = sorted(
    [*(DATA / "ncu").glob("*.ncu-rep"), *builtin_spaces_dir().glob("recordings/*/ncu/*.ncu-rep")]
)
CEILINGS = DATA / "h200" / "ceilings.json"
RECORDINGS = sorted((builtin_spaces_dir() / "recordings").glob("*/*.json.gz"))
VALIDATION = Path(__file__).parents[1] / "benchmarks/results/nvidia-h200-validation-2026-12-04.json"
CHROMIUM = Path("/usr/bin/chromium")


def test_the_library_keeps_the_h200_recordings() -> None:
    kernels = {base_kernel(load_recording(p).kernel) for p in RECORDINGS}
    assert {"gemm_int8", "reduce", "cache_hints", "quantize_int8", "quantize_fp8"} <= kernels
    assert all(load_recording(p).device.name == "NVIDIA H200" for p in RECORDINGS)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.name)
def test_each_recording_is_what_the_no_gpu_tune_of_its_kernel_replays(
    path: Path, tmp_path: Path
) -> None:
    """Found in its kernel's folder at its shape and problem variant (``reduce[OP=sum]``), and
    it plans a replay of the space file as it is today."""
    recording = load_recording(path)
    spec = load_kernel(base_kernel(recording.kernel))
    assert path in [r.path for r in shipped_recordings(spec)]
    space = Space(spec, shape=dict(recording.shape))
    pins = recording.kernel[len(spec.name) :].strip("[]")
    pinned = space.parse_pins(pins.split(",") if pins else None)
    variant = SpaceProblem(space, pinned).kernel
    assert variant == recording.kernel
    assert recording_for_shape(shipped_recordings(spec), space.shape, variant).path == path
    plan = plan_space_replay(Store(f"sqlite:///{tmp_path / 's.sqlite'}"), space, recording, pinned)
    assert plan.problem.valid_configs() and "NVIDIA H200" in (plan.banner or "")


def test_tune_gemm_int8_without_a_gpu_replays_the_h200_recording(private_dirs: Path) -> None:
    if probe_gpu().available:
        pytest.skip("a GPU is present: tune measures")
    (at_4096,) = [p for p in RECORDINGS if "gemm_int8-nvidia-h200-M4096_N4096_K4096" in p.name]
    optimum = load_recording(at_4096).optimum()
    assert optimum is not None
    code, out, err = invoke("tune", "gemm_int8", "--json")
    assert code == 0, err
    assert "REPLAY" in err and "NVIDIA H200" in err and "No recording" not in err
    doc = json.loads(out)
    assert doc["best_value"] == pytest.approx(optimum.value)
    assert doc["best_config"]["PATH"] == "wgmma"


@pytest.fixture(scope="module")
def h200_profiles(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    tmp = tmp_path_factory.mktemp("h200")
    store = Store(f"sqlite:///{tmp / 'store.sqlite'}")
    assert len(NCU_REPORTS) == 6
    for path in NCU_REPORTS:
        for record in import_report(path)[1]:
            save_profile(store, record)
    return store, tmp


def test_imported_reports_name_the_kernel_and_config_their_nvtx_range_gives(
    h200_profiles,
) -> None:
    store, _ = h200_profiles
    configs = {p.config_key: p.kernel for p in load_profiles(store)}
    assert configs["VARIANT=branchy,BLOCK=256,ITEMS=4"] == "divergence"
    assert configs["VARIANT=masked,BLOCK=256,ITEMS=4"] == "divergence"
    assert {k for k, v in configs.items() if v == "aos_soa"} == {
        "LAYOUT=aos,TILE=8,VEC=1,ITEMS=2,BLOCK=256",
        "LAYOUT=soa,TILE=8,VEC=1,ITEMS=2,BLOCK=256",
    }
    assert parse_config_label("A=1,B=x,C=true") == {"A": 1, "B": "x", "C": True}
    assert parse_config_label("no label") is None


def _by_config(store: Store, measured: Ceilings | None) -> dict[str, object]:
    variants = gather_variants(load_profiles(store), measured)
    return {v.label.split(" [")[0]: v for v in variants}


def test_divergence_and_dram_shares_of_the_h200_reports(h200_profiles) -> None:
    """branchy 8.6 against masked 32 threads per warp instruction; AoS 37% against SoA 86% of
    the DRAM bandwidth measured in the same run (the copy ceiling of ceilings.json)."""
    store, _ = h200_profiles
    v = _by_config(store, Ceilings(measured_ceilings(CEILINGS)))
    branchy = v["VARIANT=branchy,BLOCK=256,ITEMS=4"].divergence.threads_per_inst
    masked = v["VARIANT=masked,BLOCK=256,ITEMS=4"].divergence.threads_per_inst
    assert (round(branchy, 1), round(masked, 1)) == (8.6, 32.0)
    aos = v["LAYOUT=aos,TILE=8,VEC=1,ITEMS=2,BLOCK=256"].dram
    soa = v["LAYOUT=soa,TILE=8,VEC=1,ITEMS=2,BLOCK=256"].dram
    assert (round(aos.fraction, 2), round(soa.fraction, 2)) == (0.37, 0.86)
    assert "measured" in aos.roof and "4.27 TB/s" in aos.roof
    # without measured ceilings (and no DRAM peak in these memory-set reports): the datasheet's
    own = _by_config(store, None)["LAYOUT=aos,TILE=8,VEC=1,ITEMS=2,BLOCK=256"].dram
    assert own.fraction < aos.fraction and "datasheet" in own.roof


@pytest.mark.slow
def test_the_report_pages_show_those_figures_in_chromium(h200_profiles) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"Debian's chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    store, tmp = h200_profiles
    options = ReportOptions(out_dir=tmp / "site", ceilings=Ceilings(measured_ceilings(CEILINGS)))
    pages = {p.name: p for p in build_reports(store, None, options).pages}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            bars = _bar_texts(page, pages["profiles-divergence.html"], "divergence")
            assert sorted(bars) == ["32.0", "8.6"]
            shares = _bar_texts(page, pages["profiles-aos_soa.html"], "memory")
            assert sorted(s.split(" ")[0] for s in shares) == ["37%", "86%"]
        finally:
            browser.close()


def _bar_texts(page: object, path: Path, section: str) -> list[str]:
    """The labels drawn on the bars of the section's first figure, as Chromium rendered them."""
    page.goto(path.as_uri())  # type: ignore[attr-defined]
    first = f"#{section} .plotly-graph-div"
    page.wait_for_selector(f"{first} .bartext", state="attached")  # type: ignore[attr-defined]
    script = f"Array.from(document.querySelector('{first}').querySelectorAll('.bartext'))"
    return page.evaluate(f"{script}.map(e => e.textContent)")  # type: ignore[attr-defined]


def test_the_readme_table_is_the_committed_comparison() -> None:
    """Each row of the README's "Measured on an H200" table, against the validation JSON."""
    doc = json.loads(VALIDATION.read_text())
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    table = readme.split("## Measured on an H200", 1)[1].split("\n\n")[2]
    rows = [line.strip("|").split("|") for line in table.splitlines()[2:]]
    gemm = [c for c in doc["compare"] if c["kernel"] == "gemm_int8"]
    assert len(rows) == len(gemm)
    for row, shape in zip(rows, gemm, strict=True):
        got = {r["name"]: r for r in shape["results"]}
        assert row[0].split("(")[0].strip() == shape["shape"].replace("M=", "").replace(
            "N=", ""
        ).replace("K=", "")
        for cell, name in zip(row[1:4], ("tuned", "cublas", "cublaslt"), strict=True):
            r = got[name]
            assert cell.strip() == (f"{r['throughput']:,.0f}" if r["status"] == "ok" else "—")
        assert float(row[4]) == round(got["cublas"]["speedup"], 2)
