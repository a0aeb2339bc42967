"""A study keeps the space file and kernel source it was made from (``study_spaces``, schema
7): its report shows throughput and the build header after the files are gone (a store taken
to another machine), ``store upgrade`` keeps them for older studies whose files still load,
and nothing kept is compiled or run where a file of this machine should be."""

from __future__ import annotations

import dataclasses
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import invoke
from conftest import TINY_SPACE
from recording_helpers import record_space

from workbench.compiler.jobs import make_job
from workbench.errors import CompileError
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.model import space_sha256
from workbench.spaces.registry import resolve_space
from workbench.store import Store
from workbench.store.models import SCHEMA_VERSION

pytestmark = pytest.mark.usefixtures("private_dirs")


def tune_replay(space_file: Path, tmp_path: Path) -> None:
    """Tune ``space_file`` from a recording of every valid config (made-up times: the fastest
    at 0.001 ms, so that its throughput shows in GB/s)."""
    space = Space(load_space(space_file))
    configs = list(space.iter_valid())
    rec = tmp_path / f"{space.spec.name}.json"
    record_space(space, rec, [(c, 0.001 * (1 + i)) for i, c in enumerate(configs)])
    code, _, err = invoke("tune", str(space_file), "--replay", str(rec), "--budget", "50")
    assert code == 0, err


def study_page(site: Path, kernel: str) -> str:
    (page,) = site.glob(f"study-*-{kernel}.html")
    return page.read_text()


def report(site: Path) -> None:
    code, _, err = invoke("report", "--out", str(site))
    assert code == 0, err


def test_a_study_reports_in_full_after_its_space_files_are_gone(
    project: Path, tmp_path: Path
) -> None:
    tune_replay(project / "spaces" / "tiny.yaml", tmp_path)
    shutil.rmtree(project / "spaces")
    shutil.rmtree(project / "kernels")
    report(tmp_path / "site")
    page = study_page(tmp_path / "site", "tiny")
    assert "cannot be loaded now: " not in page.split("What tuning changed")[0]
    # the fastest config: BLOCK=32, SCALE=1 (the first valid one) at 0.001 ms, 12 * 1000 bytes
    assert "<td>throughput</td><td>12.0 GB/s</td>" in page
    build = page.split("For your build</h3>", 1)[1].split("</pre>", 1)[0]
    assert "#define BLOCK 32\n#define SCALE 1" in build and "launch: grid (32, 1, 1)" in build
    assert "reads the copy of it and of its kernel source kept in the store" in page
    # the header writes the same from the store alone; nothing is compiled from the copy
    code, out, err = invoke("store", "header", "tiny")
    assert code == 0, err
    assert "#define BLOCK 32\n#define SCALE 1\n" in out and "NVRTC flags: -arch=sm_90" in out
    assert "No diff: nothing to compile: its space file cannot be loaded now" in page


def _as_version_6(path: Path) -> None:
    """Turn a store back into schema version 6 (no ``study_spaces``)."""
    with sqlite3.connect(path) as con:
        con.execute("DROP TABLE study_spaces")
        con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")


def _kept_studies(path: Path) -> list[str]:
    with sqlite3.connect(path) as con:
        rows = con.execute(
            "SELECT kernel FROM studies JOIN study_spaces ON study_spaces.study_id = studies.id"
        ).fetchall()
    return sorted(k for (k,) in rows)


def test_upgrade_keeps_the_spaces_of_older_studies_whose_files_still_load(
    project: Path, tmp_path: Path, private_dirs: Path
) -> None:
    """Three studies of schema 6: one whose files are as tuned (kept at upgrade), one whose
    space file is gone and one whose file changed since (neither kept: the page says what it
    said before)."""
    spaces = project / "spaces"
    for name in ("same", "gone", "edited"):
        (spaces / f"{name}.yaml").write_text(TINY_SPACE.replace("name: tiny", f"name: {name}"))
        tune_replay(spaces / f"{name}.yaml", tmp_path)
    assert _kept_studies(private_dirs) == ["edited", "gone", "same"]
    _as_version_6(private_dirs)
    (spaces / "gone.yaml").unlink()
    edited = spaces / "edited.yaml"
    edited.write_text(edited.read_text() + "# edited after tuning\n")
    code, out, err = invoke("store", "upgrade")
    assert code == 0, err
    said = " ".join(out.split())
    assert f"from schema version 6 to {SCHEMA_VERSION}" in said
    assert "3 studies, 66 evaluations; 1 of 3 keep their space files" in said
    assert _kept_studies(private_dirs) == ["same"]
    (spaces / "same.yaml").unlink()  # from now on, the store's copy is all there is of it
    report(tmp_path / "site")
    assert "<td>throughput</td><td>12.0 GB/s</td>" in study_page(tmp_path / "site", "same")
    gone = study_page(tmp_path / "site", "gone")
    assert "No throughput: its space file cannot be loaded now" in gone
    assert re.search(r"For your build</h3>\s*<p class='missing'>Not available: its space", gone)
    # the edited file is what the page reads: as before schema 7, with the header's note
    assert "edited.yaml or its kernel changed since this was tuned" in study_page(
        tmp_path / "site", "edited"
    )


def test_a_kept_space_is_the_space_its_files_give_without_reading_them(tmp_path: Path) -> None:
    from workbench.spaces.loader import load_kept_space

    path = resolve_space("gemm_int8")
    spec = load_space(path)
    source = spec.source.read_bytes()
    moved = tmp_path / "elsewhere" / path.name  # (a path that does not exist here)
    kept = load_kept_space(moved, spec.text, tmp_path / "src" / spec.source.name, source)
    assert kept.kept and not spec.kept
    assert kept.source == tmp_path / "src" / spec.source.name and kept.path == moved
    assert space_sha256(kept) == space_sha256(spec)
    assert kept.parameters == spec.parameters and kept.work == spec.work
    assert kept.geometry == spec.geometry and kept.derived == spec.derived
    a, b = Space(spec), Space(kept)
    config = a.default_config()
    job, kept_job = make_job(a, config), make_job(b, config)
    assert (kept_job.source, kept_job.options.defines) == (job.source, job.options.defines)
    assert kept_job.name_expression == job.name_expression


def test_a_kept_numba_kernel_is_compiled_only_from_its_own_unchanged_file(
    tmp_path: Path,
) -> None:
    """A Numba kernel is Python run to compile it: a store's copy that the file here does not
    hold (a store from anywhere) is refused, never run."""
    spec = load_kernel("aos_soa_numba")
    assert spec.language == "numba"
    kept = dataclasses.replace(spec, kept_source=b"import os  # not the file's text\n")
    with pytest.raises(CompileError, match="never from the store's copy"):
        make_job(Space(kept), Space(kept).default_config())
    gone = dataclasses.replace(kept, source=tmp_path / "gone.py", kept_source=spec.source_bytes())
    with pytest.raises(CompileError, match="is gone or changed since the study was tuned"):
        make_job(Space(gone), Space(gone).default_config())


def test_a_refused_study_takes_its_kept_space_with_it(tmp_path: Path, project: Path) -> None:
    """A study nothing used is deleted (``discard_if_unused``) with the space kept for it."""
    from workbench.search.tune_plan import space_study

    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = space_study(store, Space(load_space(project / "spaces" / "tiny.yaml")), "tiny", "G",
                        None, None)  # fmt: skip
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        assert con.execute("SELECT count(*) FROM study_spaces").fetchone() == (1,)
    assert store.discard_if_unused(study)
    with sqlite3.connect(tmp_path / "s.sqlite") as con:
        assert con.execute("SELECT count(*) FROM study_spaces").fetchone() == (0,)
    store.close()


def test_a_kept_space_travels_by_store_copy_to_postgresql(
    project: Path, tmp_path: Path, private_dirs: Path, pg_cluster
) -> None:
    """The kept source is bytes (PostgreSQL's bytea): copied to a shared database, the study
    still writes its header with its files gone."""
    tune_replay(project / "spaces" / "tiny.yaml", tmp_path)
    url = pg_cluster.database()
    code, out, err = invoke("store", "copy", str(private_dirs), url)
    assert code == 0 and "study_spaces: 1 copied" in out, err
    shutil.rmtree(project / "kernels")
    code, out, err = invoke("store", "header", "tiny", "--storage", url)
    assert code == 0, err
    assert "#define BLOCK 32\n#define SCALE 1\n" in out
