"""Compile results in the store: written by the no-GPU compile stage of ``workbench tune`` and
``workbench compile --storage``, read back by ``workbench report``'s compile-resources figure."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import invoke

from workbench.gpu import probe_gpu
from workbench.report.compiled import gather_compiled
from workbench.report.data import gather_studies
from workbench.store import Store
from workbench.store.compiles import load_compiles

pytestmark = pytest.mark.usefixtures("private_dirs")


@pytest.mark.skipif(probe_gpu().available, reason="a GPU tunes instead of compiling")
def test_no_gpu_tune_stores_compile_rows_and_the_report_draws_them(
    project: Path, tmp_path: Path
) -> None:
    db = tmp_path / "store.sqlite"
    spaces = str(project / "spaces")
    code, out, err = invoke(
        "tune", "tiny", "--spaces", spaces, "--sample", "3", "--arch", "sm_80", "--storage", str(db)
    )
    assert code == 3, err  # (no GPU: compiled, nothing tuned)
    assert "compile stage" in out and "4 configs, 4 compiled" in out
    store = Store(f"sqlite:///{db}")
    (study,) = store.studies()
    assert study.name == "tiny | n=1000 | compile only (sm_80)" and study.arch == "sm_80"
    rows = load_compiles(store, study.id)
    assert len(rows) == 4 and all(r.ok and r.arch == "sm_80" for r in rows)
    assert rows[0].config_key == "BLOCK=128,SCALE=2,WAVES=1"  # the default comes first
    for r in rows:
        # a one-line axpy: a handful of registers, no shared memory, no spills
        assert r.registers is not None and 4 <= r.registers <= 32
        assert (r.static_smem, r.spill_stores, r.spill_loads) == (0, 0, 0)
        assert r.occupancy is not None and 0 < r.occupancy <= 1
        assert r.cache_key and r.seconds is not None
    # the same command again (cache hits) replaces the rows: still four
    again = ("tune", "tiny", "--spaces", spaces, "--sample", "3", "--arch", "sm_80")
    assert invoke(*again, "--storage", str(db))[0] == 3
    assert len(load_compiles(store, study.id)) == 4
    code, out, err = invoke("store", "list", "--storage", str(db))
    assert code == 0 and "compiled only" in out and "measured" not in out, out + err
    (data,) = gather_studies(store, "tiny")
    series = gather_compiled(store, data)
    assert series is not None and series.axis == "compiled config" and series.without == 0
    assert [p.label for p in series.points] == [r.config_key for r in rows]
    assert [p.registers for p in series.points] == [r.registers for r in rows]
    store.close()
    out_dir = tmp_path / "site"
    code, out, err = invoke("report", "tiny", "--storage", str(db), "--out", str(out_dir))
    assert code == 0, err
    (page,) = out_dir.glob("study-*-tiny.html")
    html = page.read_text()
    assert "compile resources of each compiled config" in html
    assert "nothing ran: compile results only (no GPU)" in html and "measured on" not in html
    assert "compiled only (no GPU)" in (out_dir / "index.html").read_text()
    assert "registers per thread" in html and "No compile results" not in html
    assert "No diff: a compile-only study: nothing was timed, so no best config." in html


def test_compile_with_storage_keeps_one_row_per_config_and_arch(
    project: Path, tmp_path: Path, private_dirs: Path
) -> None:
    db = tmp_path / "explicit.sqlite"
    space = str(project / "spaces" / "tiny.yaml")
    args = ["compile", space, "-c", "BLOCK=64", "-c", "BLOCK=256,SCALE=1", "--arch", "all"]
    code, out, err = invoke(*args, "--storage", str(db))
    assert code == 0, err
    assert "compile results kept in study" in out
    assert invoke(*args, "--storage", str(db))[0] == 0  # again: rows are replaced, not added
    store = Store(f"sqlite:///{db}")
    studies = {s.name: s for s in store.studies()}
    assert set(studies) == {
        "tiny | n=1000 | compile only (sm_80)",
        "tiny | n=1000 | compile only (sm_90)",
    }
    for study in studies.values():
        rows = load_compiles(store, study.id)
        assert [r.config_key for r in rows] == [
            "BLOCK=64,SCALE=2,WAVES=1",
            "BLOCK=256,SCALE=1,WAVES=1",
        ]
        assert {r.arch for r in rows} == {study.arch}
        assert all(r.ok and r.registers and r.spill_stores == 0 for r in rows)
    store.close()
    # without --storage nothing is written anywhere
    code, _, err = invoke("compile", space, "-c", "BLOCK=64")
    assert code == 0, err
    assert not private_dirs.exists()  # (the default store)
