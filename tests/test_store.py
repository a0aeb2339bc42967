"""The store: round trips, one evaluation per config, schema versions, damage, locks, several
processes at once, runs whose process is gone."""

from __future__ import annotations

import contextlib
import multiprocessing
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.store import Store, StoreError
from workbench.store.models import SCHEMA_VERSION, Run


def url(path: Path) -> str:
    return f"sqlite:///{path}"


def edit(path: Path, *statements: str | tuple[str, tuple]) -> None:
    """Change a store's file by hand (SQL, or SQL with its parameters), committed and closed."""
    con = sqlite3.connect(path)
    for statement in statements:
        sql, params = statement if isinstance(statement, tuple) else (statement, ())
        con.execute(sql, params)
    con.commit()
    con.close()


def fill(store: Store) -> tuple:
    study = store.study(
        kernel="k", shape_label="n=8", device_key="H200", parameters=[("A", [1, 2, 3])]
    )
    env = store.environment(DeviceInfo("H200", cc=90, driver="580"))
    run = store.start_run(study, env, sampler="tpe", seed=0)
    return study, env, run


def test_round_trip_with_samples(tmp_path: Path) -> None:
    store = Store(url(tmp_path / "s.sqlite"))
    study, env, run = fill(store)
    m = Measurement(
        TrialOutcome.OK,
        value=1.5,
        samples=(1.4, 1.5, 1.6),
        ci_low=1.4,
        ci_high=1.6,
        sm_clock_mhz=(1980.0, 1980.0, 1500.0),
        throttled=(False, False, True),
    )
    first = store.record(study, run, env, {"A": 1}, m, elapsed_s=0.1)
    timeout = Measurement.failure(TrialOutcome.TIMEOUT, "hung")
    assert store.record(study, run, env, {"A": 2}, timeout) > first
    again = Store(url(tmp_path / "s.sqlite"))  # a new process would see the same
    (s2,) = again.studies()
    evs = again.evaluations(s2)
    assert [e.config for e in evs] == [{"A": 1}, {"A": 2}]
    assert evs[0].measurement.samples == (1.4, 1.5, 1.6) and evs[0].measurement.value == 1.5
    assert evs[0].measurement.throttled == (False, False, True)
    assert [e.sequence for e in evs] == [0, 1]
    assert (
        evs[1].measurement.outcome is TrialOutcome.TIMEOUT and evs[1].measurement.reason == "hung"
    )
    assert store.environment(DeviceInfo("H200", cc=90, driver="580")) == env


def test_a_config_is_evaluated_once_per_study(tmp_path: Path) -> None:
    store = Store(url(tmp_path / "s.sqlite"))
    study, env, run = fill(store)
    store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=1.0))
    with pytest.raises(StoreError, match="already evaluated"):
        store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=2.0))
    assert store.count_evaluations(study) == 1


def test_study_with_other_parameters_is_refused(tmp_path: Path) -> None:
    store = Store(url(tmp_path / "s.sqlite"))
    fill(store)
    with pytest.raises(StoreError, match="exists with parameters"):
        store.study(kernel="k", shape_label="n=8", device_key="H200", parameters=[("B", [1])])


def test_older_and_newer_schemas(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(url(path))
    fill(store)
    store.close()
    for version, message in [
        (0, "no migration from 0"),
        (99, "newer than this workbench"),
        ("abc", "schema version reads 'abc', not a number: the meta table is damaged"),
    ]:
        edit(path, ("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),)))
        with pytest.raises(StoreError, match=message):
            Store(url(path))
        con = sqlite3.connect(path)  # refused, and left intact
        assert con.execute("SELECT count(*) FROM studies").fetchone() == (1,)
        con.close()


@pytest.mark.parametrize("read_only", [False, True])
def test_a_store_whose_schema_version_row_is_gone_is_refused_not_stamped(
    tmp_path: Path, read_only: bool
) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(url(path))
    fill(store)
    store.close()
    edit(path, "DELETE FROM meta WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="meta table has no schema version"):
        Store(url(path), read_only=read_only)
    con = sqlite3.connect(path)  # refused, and left as it was
    assert con.execute("SELECT count(*) FROM meta").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM studies").fetchone() == (1,)
    con.close()


def test_read_only_opens_without_writing_and_never_creates(tmp_path: Path) -> None:
    """What list, export and report use: a store the user may only read is read (SQLite is
    told so: a write fails), a missing one is not created, an older one is not migrated."""
    path = tmp_path / "s.sqlite"
    with pytest.raises(StoreError, match="no store at"):
        Store(url(path), read_only=True)
    assert not path.exists()
    store = Store(url(path))
    study, *_ = fill(store)
    store.close()
    before = path.read_bytes()
    reader = Store(url(path), read_only=True)
    assert [s.name for s in reader.studies()] == [study.name]
    with pytest.raises(StoreError, match="readonly"):
        reader.study(kernel="k2", shape_label="n=8", device_key="H200", parameters=[("A", [1])])
    reader.close()
    assert path.read_bytes() == before
    edit(path, "UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 0; reading it needs version"):
        Store(url(path), read_only=True)


def as_version_1(path: Path) -> None:
    """Turn a store back into schema version 1 (no ``studies.replay_note``, no ``runs.drift``,
    no ``runs.host``, ``pid``, ``pid_scope``, no ``runs.phases``, no ``comparison_variants``,
    no ``study_spaces``)."""
    edit(
        path,
        "DROP TABLE comparison_variants",
        "DROP TABLE study_spaces",
        "ALTER TABLE studies DROP COLUMN replay_note",
        "ALTER TABLE runs DROP COLUMN drift",
        "ALTER TABLE runs DROP COLUMN host",
        "ALTER TABLE runs DROP COLUMN pid",
        "ALTER TABLE runs DROP COLUMN pid_scope",
        "ALTER TABLE runs DROP COLUMN phases",
        "UPDATE meta SET value = '1' WHERE key = 'schema_version'",
    )


def test_a_version_1_store_is_migrated_by_a_writing_open_and_keeps_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(url(path))
    study, env, run = fill(store)
    store.record(study, run, env, {"A": 2}, Measurement(TrialOutcome.OK, value=1.5))
    store.close()
    as_version_1(path)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=f"version 1; reading it needs version {SCHEMA_VERSION}"):
        Store(url(path), read_only=True)
    assert path.read_bytes() == before  # reading migrates nothing
    store = Store(url(path))
    (old,) = store.studies()
    assert old.replay_note is None and store.best(old).measurement.value == 1.5
    noted = store.study(
        kernel="k2",
        shape_label="n=8",
        device_key="H200",
        parameters=[("A", [1])],
        replay_note="the file's objective is GFLOP/s",
    )
    store.close()
    reader = Store(url(path), read_only=True)
    assert {s.name: s.replay_note for s in reader.studies()}[noted.name] == (
        "the file's objective is GFLOP/s"
    )
    con = sqlite3.connect(path)
    version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    con.close()


def test_a_store_laid_out_by_another_build_of_the_same_version_is_named(tmp_path: Path) -> None:
    """Same schema version, other tables: a table this build adds is created by a writing open
    and named by a read-only one; a table lacking columns is refused up front, with the
    columns named, instead of "no such column" halfway through a command. Nothing changes."""
    path = tmp_path / "s.sqlite"
    store = Store(url(path))
    fill(store)
    store.close()
    edit(path, "DROP TABLE comparisons")
    with pytest.raises(StoreError, match="lacks the tables comparisons, which this workbench"):
        Store(url(path), read_only=True)
    Store(url(path)).close()  # a writing open adds it
    assert Store(url(path), read_only=True).studies()
    edit(
        path,
        "DROP TABLE comparisons",
        "CREATE TABLE comparisons (id INTEGER PRIMARY KEY, kernel VARCHAR)",
    )
    before = path.read_bytes()
    for read_only in (False, True):
        with pytest.raises(StoreError) as caught:
            Store(url(path), read_only=read_only)
        message = str(caught.value)
        assert f"says schema version {SCHEMA_VERSION} but lacks the columns comparisons." in message
        assert "comparisons.kernel" not in message and "development build" in message
    assert path.read_bytes() == before


def test_a_damaged_row_is_a_store_error_naming_its_table(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(url(path))
    study, env, run = fill(store)
    store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, 1.0, (1.0, 1.1)))
    with sqlite3.connect(path) as con:  # hand-edited or damaged
        con.execute("UPDATE evaluations SET samples = 'not json'")
    for read in (store.evaluations, store.best, lambda s: store.lookup(s, {"A": 1})):
        with pytest.raises(StoreError, match="table evaluations is damaged"):
            read(study)
    store.close()


def test_foreign_and_damaged_files(tmp_path: Path) -> None:
    foreign = tmp_path / "other.sqlite"
    edit(foreign, "CREATE TABLE accounts (id INTEGER)")
    with pytest.raises(StoreError, match="not a workbench store"):
        Store(url(foreign))
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match=r"not a database|damaged"):
        Store(url(junk))


def test_locked_database_gives_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = Store(url(path), lock_timeout_s=0.2)
    study, env, run = fill(store)
    blocker = sqlite3.connect(path, timeout=0.1)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked"):
            store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=1.0))
    finally:
        blocker.rollback()
        blocker.close()
    store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=1.0))
    assert store.count_evaluations(study) == 1


def test_best_is_the_fastest_correct_evaluation_first_committed_among_equals(
    tmp_path: Path,
) -> None:
    store = Store(url(tmp_path / "s.sqlite"))
    study, env, run = fill(store)
    assert store.best(study) is None  # nothing evaluated yet
    store.record(study, run, env, {"A": 1}, Measurement.failure(TrialOutcome.WRONG, "max error 3"))
    store.record(study, run, env, {"A": 2}, Measurement.failure(TrialOutcome.TIMEOUT, "hung"))
    assert store.best(study) is None  # a wrong or failed config is never the best
    store.record(study, run, env, {"A": 3}, Measurement(TrialOutcome.OK, value=2.0, samples=(2.0,)))
    other = store.study(kernel="k", shape_label="n=9", device_key="H200", parameters=[("A", [3])])
    store.record(other, run, env, {"A": 3}, Measurement(TrialOutcome.OK, value=1.0))
    best = store.best(study)
    assert best is not None and best.config == {"A": 3} and best.measurement.value == 2.0
    assert best.measurement.samples == (2.0,)  # read whole, samples included
    later = store.study(
        kernel="k", shape_label="n=10", device_key="H200", parameters=[("A", [1, 2])]
    )
    store.record(later, run, env, {"A": 2}, Measurement(TrialOutcome.OK, value=1.0))
    store.record(later, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=1.0))
    assert store.best(later).config == {"A": 2}  # type: ignore[union-attr]


def test_a_url_without_its_driver_is_a_store_error_with_the_password_masked() -> None:
    with pytest.raises(StoreError) as caught:
        Store("mysql://tuner:s3cret@db.example/wb")
    message = str(caught.value)
    assert "cannot open the store mysql://tuner:***@db.example/wb" in message
    assert "driver is not installed" in message and "s3cret" not in message


def test_a_shown_url_never_holds_a_password() -> None:
    """What messages, tables, JSON summaries and report pages print for a store."""
    from workbench.store.database import shown_url

    assert shown_url("postgresql+psycopg://tuner:s3cret@db/wb") == "postgresql://tuner:***@db/wb"
    assert shown_url("postgresql://tuner@db/wb") == "postgresql://tuner@db/wb"
    assert shown_url("sqlite:////tmp/s.sqlite") == "sqlite:////tmp/s.sqlite"


def test_a_symlink_to_a_store_takes_the_same_study_lock(tmp_path: Path) -> None:
    """The per-study lock is taken beside the real file: a tune through a symlink (or another
    spelling of the path) is refused while another process tunes the study, as through the
    same path."""
    from conftest import study_held_elsewhere

    path = tmp_path / "s.sqlite"
    link = tmp_path / "link.sqlite"
    store = Store(url(path))
    study = fill(store)[0]
    link.symlink_to(path)
    with study_held_elsewhere(url(path), study.name):
        other = Store(url(link))
        with (
            pytest.raises(StoreError, match="being tuned by another process"),
            other.exclusive(other.find_study(study.name)),
        ):
            pass


def test_read_only_works_in_a_directory_the_user_may_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A WAL-mode store read with mode=ro needs a -shm file beside it: in a directory the user
    may not write (a shared results folder), list, export and report failed with "attempt to
    write a readonly database". With no WAL left, the file is read as it stands. (Root may
    write anywhere, so the directory's answer is what os.access would say to a user.)"""
    import os

    path = tmp_path / "s.sqlite"
    store = Store(url(path))
    fill(store)
    store.close()
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if Path(p) == tmp_path else real_access(p, mode)
    )
    reader = Store(url(path), read_only=True)
    assert [s.name for s in reader.studies()] == ["k | n=8 | H200"]
    reader.close()
    assert not (tmp_path / "s.sqlite-shm").exists()


# -- several processes at once ----------------------------------------------------------------
def _get_or_create(let_go: Callable[[], None], store_url: str, name: str, open_first: bool):
    """A process's part in a collision: (let go, then) open the store, (let go, then) get or
    create the environment (the same for every process) and the study ``name``."""
    if not open_first:
        let_go()
    store = Store(store_url)
    if open_first:
        let_go()
    env = store.environment(DeviceInfo("H200", cc=90, driver="580"))
    params = [("A", [1, 2])]
    study = store.study(
        kernel="k", shape_label="n=8", device_key="H200", parameters=params, name=name
    )
    store.close()
    return env, study.id


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for a store that does not exist yet: a SQLite file, or an empty PostgreSQL
    database of the throwaway cluster (tests/pg_cluster.py)."""
    if request.param == "sqlite":
        return url(tmp_path / "s.sqlite")
    return request.getfixturevalue("pg_cluster").database()


def _reset(store_url: str) -> None:
    """Back to no store at all: the SQLite file removed, or every PostgreSQL table dropped."""
    if store_url.startswith("sqlite"):
        for suffix in ("", "-wal", "-shm"):
            Path(store_url.split(":///", 1)[1] + suffix).unlink(missing_ok=True)
        return
    import psycopg

    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")


@pytest.mark.slow
@pytest.mark.parametrize("existing", [False, True], ids=["new store", "existing store"])
def test_processes_getting_or_creating_together_get_one_row_each(
    any_store_url: str, existing: bool
) -> None:
    """Processes started together on one store (documented as supported for different
    studies), 6 times over: each gets or creates the environment (the same for all) and its
    study, two of them the same study. On a store that did not exist, creating its tables took
    no lock on SQLite ("table meta already exists"); on an existing one, the select-then-insert
    of an environment or study lost the race with "UNIQUE constraint failed" (a duplicate key
    on PostgreSQL): 9 and 10 rounds of 10 failed. Now every process gets the one row."""
    from together import together

    names = ["s1", "s2", "s1"]
    for _ in range(6):
        _reset(any_store_url)
        if existing:  # the tables are there: the processes collide on the rows
            Store(any_store_url).close()
        got = together([(_get_or_create, (any_store_url, n, existing)) for n in names])
        assert all(isinstance(g, tuple) for g in got), got
        assert len({env for env, _ in got}) == 1, got
        assert got[0][1] == got[2][1] != got[1][1], got


def _open(let_go: Callable[[], None], store_url: str) -> int:
    let_go()
    Store(store_url).close()
    return 0


def test_processes_opening_an_older_store_together_migrate_it_once(tmp_path: Path) -> None:
    """Three processes opening a version-1 store at once: one migrates it, the others find it
    migrated (each ran the migration: "duplicate column name: replay_note")."""
    from together import together

    path = tmp_path / "s.sqlite"
    for _ in range(3):
        path.unlink(missing_ok=True)
        store = Store(url(path))
        study, env, run = fill(store)
        store.record(study, run, env, {"A": 2}, Measurement(TrialOutcome.OK, value=1.5))
        store.close()
        as_version_1(path)
        assert together([(_open, (url(path),))] * 3) == [0, 0, 0]
        reader = Store(url(path), read_only=True)
        assert reader.best(reader.studies()[0]).measurement.value == 1.5
        reader.close()


# -- runs whose process is gone ---------------------------------------------------------------
def _hold_a_run(store_url: str, started) -> None:
    """A process with a running run of study k | n=8 | H200, until it is killed."""
    store = Store(store_url)
    params = [("A", [1, 2, 3])]
    study = store.study(kernel="k", shape_label="n=8", device_key="H200", parameters=params)
    store.start_run(study, None)
    started.set()
    time.sleep(600)


def _statuses(store: Store) -> list[str]:
    with store.session() as s:
        return list(s.scalars(select(Run.status).order_by(Run.id)))


@contextlib.contextmanager
def _processes_holding_runs(store_url: str, n: int) -> Iterator[list]:
    """``n`` processes, each with a running run of study k (:func:`_hold_a_run`); any still
    alive at the end is killed."""
    ctx = multiprocessing.get_context("fork")
    holders = []
    try:
        for _ in range(n):
            started = ctx.Event()
            holders.append(ctx.Process(target=_hold_a_run, args=(store_url, started)))
            holders[-1].start()
            assert started.wait(60)
        yield holders
    finally:
        for p in holders:
            p.kill()
            p.join()


def _wait_for_zombie(pid: int) -> None:
    stat = Path(f"/proc/{pid}/stat")
    deadline = time.monotonic() + 30
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_killed_process_run_is_abandoned_when_its_study_is_next_opened(
    any_store_url: str,
) -> None:
    """A run whose process was killed (kill -9) stayed "running" for ever. Opening its study
    (``Store.study``, as tune and worker do) now marks it abandoned when its process is provably
    gone: a process of this host (same boot, same pid namespace) that no longer exists, or is
    a zombie not yet reaped. A live process's run and a run of another host (a PostgreSQL
    worker elsewhere: its pid means nothing here) stay running."""
    store = Store(any_store_url)
    study, env, _ = fill(store)  # (this process's own run: alive)
    with _processes_holding_runs(any_store_url, 2) as (killed, alive):
        killed.kill()  # SIGKILL
        killed.join()
        elsewhere = store.start_run(study, env)  # as if on another host, with the killed pid
        with store.session() as s:
            s.execute(
                update(Run)
                .where(Run.id == elsewhere)
                .values(pid=killed.pid, pid_scope="another-boot pid:[4026531836]", host="node7")
            )
        assert _statuses(store) == ["running"] * 4
        assert fill(store)[0] == study  # the study opened again (and a run started)
        assert _statuses(store) == ["running", "abandoned", "running", "running", "running"]
        alive.kill()  # killed, not yet reaped: a zombie
        _wait_for_zombie(alive.pid)
        params = [("A", [1, 2, 3])]
        store.study(kernel="k", shape_label="n=8", device_key="H200", parameters=params)
        assert _statuses(store) == ["running", "abandoned", "abandoned", "running", "running"]
    assert [r.status for r in store.runs(study)] == ["running", "abandoned", "abandoned"] + [
        "running"
    ] * 2
    store.close()
