"""``workbench store upgrade``: a store written by an earlier workbench (the H200 lease's of
2026-12-04, schema 3) is backed up, migrated, then listed and reported; read commands name the
command; ``store copy`` reads an older store as it is, leaving it unchanged."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import DEVICE_RUNS, missing

from workbench.store import Store
from workbench.store.models import SCHEMA_VERSION

H200_STORE = DEVICE_RUNS / "h200-2026-12-04" / "run2" / "store.sqlite.gz"
#: what the lease stored: 8 studies (4 int8 GEMM shapes, reduce, cache hints, 2 quantizers)
H200_STUDIES, H200_EVALUATIONS = 8, 247

needs_h200_store = pytest.mark.skipif(not H200_STORE.is_file(), reason=missing(H200_STORE))


def one_line(text: str) -> str:
    return " ".join(text.split())


def version_of(path: Path) -> int:
    with sqlite3.connect(path) as con:
        (value,) = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(value)


def count(path: Path, table: str) -> int:
    with sqlite3.connect(path) as con:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


@pytest.fixture
def h200_store(tmp_path: Path) -> Path:
    """A copy of the lease's store (schema 3), gunzipped into the test's folder."""
    if not H200_STORE.is_file():
        pytest.skip(missing(H200_STORE))
    path = tmp_path / "lease" / "store.sqlite"
    path.parent.mkdir()
    with gzip.open(H200_STORE) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    assert version_of(path) == 3
    return path


@needs_h200_store
def test_the_h200_store_is_upgraded_then_listed_and_reported(
    h200_store: Path, tmp_path: Path
) -> None:
    before = h200_store.read_bytes()
    for command in (["store", "list"], ["report", "--out", str(tmp_path / "none")]):
        code, _, err = invoke(*command, "--storage", str(h200_store))
        said = one_line(err)
        assert code == 2 and "is schema version 3; reading it needs version" in said, said
        assert f"run workbench store upgrade --storage sqlite:///{h200_store}" in said
    assert h200_store.read_bytes() == before  # reading migrates nothing

    code, out, err = invoke("store", "upgrade", "--storage", str(h200_store))
    assert code == 0, err
    said = one_line(out)
    (backup,) = h200_store.parent.glob("store.schema3-*.sqlite")
    assert said == (
        f"upgraded sqlite:///{h200_store} from schema version 3 to {SCHEMA_VERSION}; backup "
        f"{backup}; {H200_STUDIES} studies, {H200_EVALUATIONS} evaluations; 0 of 8 keep their "
        "space files"  # (tuned from files of the leased machine, not here)
    )
    # the backup is the store as it was: its version, every evaluation
    assert version_of(backup) == 3 and count(backup, "evaluations") == H200_EVALUATIONS
    assert version_of(h200_store) == SCHEMA_VERSION

    code, out, err = invoke("store", "list", "--storage", str(h200_store), "--json")
    assert code == 0, err
    studies = json.loads(out)["studies"]
    assert len(studies) == H200_STUDIES
    assert sum(s["evaluations"] for s in studies) == H200_EVALUATIONS
    site = tmp_path / "site"
    code, out, err = invoke("report", "--storage", str(h200_store), "--out", str(site))
    assert code == 0, err
    pages = sorted(p.name for p in site.glob("study-*.html"))
    assert len(pages) == H200_STUDIES and "study-1-gemm_int8.html" in pages
    assert "NVIDIA H200" in (site / "study-1-gemm_int8.html").read_text()

    code, out, _ = invoke("store", "upgrade", "--storage", str(h200_store))  # nothing to do
    assert code == 0 and f"is at schema version {SCHEMA_VERSION} already" in one_line(out)
    assert len(list(h200_store.parent.glob("store.schema*.sqlite"))) == 1  # no second backup


@needs_h200_store
def test_store_copy_reads_an_older_store_and_leaves_it_as_it_was(
    h200_store: Path, tmp_path: Path
) -> None:
    before = h200_store.read_bytes()
    copy = tmp_path / "copy.sqlite"
    code, out, err = invoke("store", "copy", str(h200_store), str(copy))
    assert code == 0, err
    assert "studies: 8 copied" in out and f"evaluations: {H200_EVALUATIONS} copied" in out
    assert h200_store.read_bytes() == before and version_of(h200_store) == 3
    assert list(h200_store.parent.glob("*.sqlite")) == [h200_store]  # no backup, no copy left
    reader = Store(f"sqlite:///{copy}", read_only=True)
    assert len(reader.studies()) == H200_STUDIES
    reader.close()
    code, _, err = invoke("store", "copy", str(h200_store), str(h200_store))
    assert code == 2 and "source and destination are the same" in err
    assert version_of(h200_store) == 3


def test_upgrade_refuses_what_it_cannot_upgrade_and_creates_nothing(tmp_path: Path) -> None:
    missing_file = tmp_path / "none.sqlite"
    code, _, err = invoke("store", "upgrade", "--storage", str(missing_file))
    assert code == 2 and f"no store at {missing_file}" in one_line(err)
    assert not missing_file.exists()
    path = tmp_path / "s.sqlite"
    Store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    code, _, err = invoke("store", "upgrade", "--storage", str(path))
    assert code == 2 and "newer than this workbench" in one_line(err)
    assert list(tmp_path.glob("*.sqlite")) == [path]


def test_a_store_at_this_version_is_not_backed_up(tmp_path: Path) -> None:
    from workbench.store.upgrade import upgrade_store

    path = tmp_path / "s.sqlite"
    Store(f"sqlite:///{path}").close()
    done = upgrade_store(f"sqlite:///{path}")
    assert (done.from_version, done.to_version, done.backup) == (SCHEMA_VERSION,) * 2 + (None,)
    assert done.studies == done.evaluations == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite") == ["s.sqlite"]
