"""Scale-out against a real PostgreSQL server (tests/pg_cluster.py): several worker processes on
one shared study, a worker killed with kill -9, the database stopped mid-run, and several local
processes on one SQLite store. Measurements come from recordings (the replay runner).

Workers that must be processes of their own (concurrent, killed, outliving an outage, holding a
SQLite study) are started as ``workbench`` processes; the other commands (status, store copy,
a single tune, a refused worker) run in this process through the same CLI, which saves a
process start (seconds of imports) each.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, missing

from workbench.fleet.connection import open_database
from workbench.fleet.sql import CLAIM
from workbench.fleet.study import SharedStudy
from workbench.runners.recordings import load_recording
from workbench.search.request import Coordination
from workbench.store import Store, StoreError
from workbench.store.database import sqlalchemy_url
from workbench.store.models import SCHEMA_VERSION

PNPOLY = CACHES / "pnpoly_RTX_3090.json.gz"
CONV_A100 = CACHES / "convolution_milo_A100.json.gz"
CONV_A4000 = CACHES / "convolution_milo_A4000.json.gz"
WORKBENCH = [sys.executable, "-m", "workbench.cli.main"]
FAST = ["--heartbeat", "1", "--grace", "3"]

pytestmark = pytest.mark.skipif(not PNPOLY.exists(), reason=missing(PNPOLY))


def tune_args(
    storage: object, study: str, budget: int, *extra: str, recording: Path = PNPOLY
) -> list[str]:
    """``tune --replay RECORDING --storage STORAGE --study STUDY --budget N EXTRA...``"""
    return [
        "tune",
        "--replay",
        str(recording),
        "--storage",
        str(storage),
        "--study",
        study,
        "--budget",
        str(budget),
        *extra,
    ]


def worker_args(storage: object, study: str, *extra: str, recording: Path = PNPOLY) -> list[str]:
    """``worker --storage STORAGE --study STUDY --replay RECORDING EXTRA...``"""
    return [
        "worker",
        "--storage",
        str(storage),
        "--study",
        study,
        "--replay",
        str(recording),
        *extra,
    ]


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*WORKBENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def store_rows(url: str) -> list[tuple]:
    """(config_key, n_samples, samples, run_id) of every evaluation in the store."""
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT config_key, n_samples, samples, run_id FROM evaluations ORDER BY id"
        ).fetchall()


def has_heartbeat(url: str, trial_id: int) -> bool:
    with psycopg.connect(url) as conn:
        query = "SELECT 1 FROM optuna.trial_heartbeats WHERE trial_id = %s"
        return conn.execute(query, (trial_id,)).fetchone() is not None


def shared(url: str, name: str) -> SharedStudy:
    db, _ = open_database(url, Coordination(heartbeat_s=1, grace_s=3, db_wait_s=30))
    return SharedStudy(db, name)


def claimed_complete(study: SharedStudy) -> list:
    from optuna.trial import TrialState

    return [t for t in study.trials() if t.state is TrialState.COMPLETE and CLAIM in t.system_attrs]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_four_workers_share_one_budget(pg_cluster) -> None:
    url = pg_cluster.database()
    budget = 200
    procs = [start(*tune_args(url, "fleet", budget, "--json", *FAST)) for _ in range(4)]
    results = [finish(p) for p in procs]
    for rc, _, err in results:
        assert rc == 0, err[-2000:]
    docs = [json.loads(out) for _, out, _ in results]
    stats = [d["worker"] for d in docs]
    assert sum(s["completed"] for s in stats) == budget
    # every trial was measured exactly once, by one worker: measurements == evaluations
    assert sum(s["measured"] for s in stats) == budget
    assert all(s["completed"] > 0 for s in stats), stats  # all four took part
    rows = store_rows(url)
    assert len(rows) == budget == len({r[0] for r in rows})
    recording = load_recording(PNPOLY)
    by_key = {k: e for k, e in ((",".join(map(str, c)), e) for c, e in recording.entries.items())}
    assert len({r[3] for r in rows}) == 4  # one run per worker
    for key, n, samples, _ in rows:
        config = dict(item.split("=") for item in key.split(","))
        entry = by_key[",".join(config[n_] for n_ in recording.parameter_names)]
        assert n == len(entry.samples) and (samples or []) == pytest.approx(list(entry.samples))
    assert sum(n for _, n, _, _ in rows) > 5 * budget  # raw samples (~10 per config)
    study = shared(url, "fleet")
    complete = claimed_complete(study)
    assert len(complete) == budget
    assert len({tuple(sorted(t.params.items())) for t in complete}) == budget
    rc, out, err = invoke("status", "--storage", url, "--study", "fleet", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["counts"]["complete"] == budget and doc["counts"]["running"] == 0
    assert len(doc["workers"]) == 4 and doc["alive"] == 0  # all stopped
    values = [d["best_value"] for d in docs]
    assert doc["best"]["value"] == pytest.approx(min(values))
    # a later command with another sampler joins: the study keeps how it searches
    rc, out, err = invoke(*tune_args(url, "fleet", budget, "--sampler", "random", "--json"))
    assert rc == 0 and "its sampler, coordination (portfolio" in err, err
    rc, out, err = invoke("status", "--storage", url, "--study", "fleet", "--json")
    assert json.loads(out)["spec"]["sampler"] == "portfolio"
    assert json.loads(out)["spec"]["coordination"]["grace_s"] == 3


def test_kill_9_mid_trial_recovers_and_a_restarted_worker_resumes(pg_cluster) -> None:
    url = pg_cluster.database()
    budget = 16
    # each trial measures for 1.5 s, so that the kill lands while the victim measures: with
    # 0.4 s, finding the trial's heartbeat (a query per trial, every 0.2 s) and the kill took
    # longer once in CI, and the victim completed the trial first
    creator = start(*tune_args(url, "k", budget, "--replay-delay", "1.5", "--json", *FAST))
    worker = worker_args(url, "k", "--replay-delay", "1.5", "--json")
    victim = start(*worker)  # started with the creator: a worker waits for the study
    wait_for(lambda: _exists(url, "k"), 60, "the study")
    study = shared(url, "k")
    victim_key = f":{victim.pid}:"
    held = []

    def victim_holds_a_trial() -> bool:
        """...and is measuring it: the trial has its first heartbeat (a worker killed before
        that is the case of test_a_trial_left_without_a_heartbeat_is_failed_and_requeued)."""
        from optuna.trial import TrialState

        held[:] = [
            t
            for t in study.trials((TrialState.RUNNING,))
            if victim_key in str(t.system_attrs.get(CLAIM, "")) and has_heartbeat(url, t._trial_id)
        ]
        return bool(held)

    wait_for(victim_holds_a_trial, 60, "the victim to hold a trial")
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = time.time()
    killed = held[0]
    restarted = start(*worker)  # the same worker, started again, joins and helps
    for proc in (creator, restarted):
        rc, _, err = finish(proc)
        assert rc == 0, err[-2000:]
    from optuna.trial import TrialState

    trials = {t._trial_id: t for t in shared(url, "k").trials()}
    assert trials[killed._trial_id].state is TrialState.FAIL  # failed by a survivor
    retries = [t for t in trials.values() if t.system_attrs.get("failed_trial") == killed.number]
    assert len(retries) == 1 and retries[0].state is TrialState.COMPLETE
    assert retries[0].params == killed.params  # re-queued with its config, and completed
    complete = claimed_complete(shared(url, "k"))
    assert len(complete) == budget
    assert len({tuple(sorted(t.params.items())) for t in complete}) == budget
    rows = store_rows(url)
    assert len(rows) == budget == len({r[0] for r in rows})  # nothing lost or duplicated
    # the killed worker's run: abandoned by the restarted one, which opened the study on this
    # host when the killed process was gone; the others finished
    with psycopg.connect(url) as conn:
        runs = conn.execute("SELECT label, status FROM runs ORDER BY id").fetchall()
    assert sorted(status for label, status in runs if victim_key in f":{label}:") == ["abandoned"]
    assert sorted(status for _, status in runs) == ["abandoned", "finished", "finished"], runs
    # status judges the killed worker by the study's grace (3 s), not its own default (60 s)
    wait_for(lambda: time.time() - killed_at > 4, 10, "the study's grace to pass")
    rc, out, err = invoke("status", "--storage", url, "--study", "k", "--json")
    doc = json.loads(out)
    (gone,) = [w for w in doc["workers"] if victim_key in f":{w['key']}:"]
    assert rc == 0 and gone["alive"] is False, gone
    # each worker's trials are counted from the claims: the killed one's last ones too
    by_claim = sum(1 for t in complete if str(t.system_attrs.get(CLAIM)) != "store")
    assert sum(w["completed"] for w in doc["workers"]) == by_claim


def test_a_trial_left_without_a_heartbeat_is_failed_and_requeued(pg_cluster) -> None:
    """A worker killed between creating its trial and its first heartbeat leaves a RUNNING
    trial that Optuna never judges stale (it has no heartbeat). The survivors release it a
    grace period after they first see it: FAIL, and a WAITING retry with its config. A trial
    whose worker beats is left alone."""
    from optuna.distributions import IntDistribution
    from optuna.trial import TrialState

    timing = Coordination(heartbeat_s=1, grace_s=2, db_wait_s=30)
    db, _ = open_database(pg_cluster.database(), timing)
    study = SharedStudy.create(db, "zombie", {"kernel": "k"}, "GPU")
    dists = {"x": IntDistribution(0, 3)}
    zombie = study.create_trial({"x": 1}, dists, system_attrs={CLAIM: "w:1:"})
    alive = study.create_trial({"x": 2}, dists, system_attrs={CLAIM: "w:2:"})
    study.heartbeat(alive)
    study.fail_stale()  # first seen without a heartbeat: not yet
    assert study.storage.get_trial(zombie).state is TrialState.RUNNING
    assert not study.settled()  # a worker whose budget is complete waits for the release
    time.sleep(2.2)
    study.heartbeat(alive)
    study.fail_stale()
    trials = {t._trial_id: t for t in study.trials()}
    assert trials[zombie].state is TrialState.FAIL
    assert trials[alive].state is TrialState.RUNNING
    retries = [
        t for t in trials.values() if t.system_attrs.get("failed_trial") == trials[zombie].number
    ]
    assert len(retries) == 1 and retries[0].state is TrialState.WAITING
    assert retries[0].params == {"x": 1} and CLAIM not in retries[0].system_attrs
    assert study.settled()  # released once only
    assert len([t for t in study.trials() if t.state is TrialState.WAITING]) == 1


def test_database_outage_makes_workers_wait_not_crash(pg_cluster) -> None:
    url = pg_cluster.database()
    budget = 24
    # grace longer than the outage: running trials are not re-queued meanwhile
    slow = ["--replay-delay", "0.25", "--heartbeat", "1", "--grace", "20"]
    creator = start(*tune_args(url, "o", budget, "--json", *slow))
    # started with the creator: a worker waits for the study
    other = start(*worker_args(url, "o", "--replay-delay", "0.25", "--json"))
    wait_for(lambda: _n_rows(url) >= 6, 60, "some evaluations")
    pg_cluster.stop()
    time.sleep(4)
    pg_cluster.start()
    results = [finish(p) for p in (creator, other)]
    for rc, _, err in results:
        assert rc == 0, err[-2000:]
    errs = "".join(err for _, _, err in results)
    assert "unavailable" in errs and "back after" in errs
    creator_doc, worker_doc = (json.loads(out) for _, out, _ in results)
    assert creator_doc["worker"]["outages"] >= 1 and worker_doc["outages"] >= 1
    rows = store_rows(url)
    assert len(rows) == budget == len({r[0] for r in rows})
    assert len(claimed_complete(shared(url, "o"))) == budget


def test_device_classes_never_mix(pg_cluster) -> None:
    url = pg_cluster.database()
    rc, _, err = invoke(*tune_args(url, "conv", 3, *FAST, recording=CONV_A100))
    assert rc == 0, err
    rc, _, err = invoke(*worker_args(url, "conv", recording=CONV_A4000))
    assert rc == 2
    assert "device class" in err and "A100" in err and "A4000" in err


def test_store_copy_from_sqlite_then_workers_continue(tmp_path: Path, pg_cluster) -> None:
    local = tmp_path / "store.sqlite"
    rc, out, err = invoke(*tune_args(local, "mig", 15, "--json"))
    assert rc == 0, err
    url = pg_cluster.database()
    rc, out, err = invoke("store", "copy", str(local), url)
    assert rc == 0, err
    assert "evaluations: 15 copied" in out
    rc, out, _ = invoke("store", "copy", str(local), url)  # twice: nothing new
    assert "evaluations: 0 copied, 15 already there" in out
    assert "runs: 0 copied, 1 already there" in out
    before = {r[0] for r in store_rows(url)}
    rc, out, err = invoke(*tune_args(url, "mig", 25, "--json", *FAST))
    assert rc == 0, err
    doc = json.loads(out)
    assert "15 evaluations already in the store joined" in err
    assert doc["worker"]["measured"] == 10 and doc["evaluations"] == 25
    rows = store_rows(url)
    assert len(rows) == 25 == len({r[0] for r in rows}) and before <= {r[0] for r in rows}


def test_store_copy_twice_adds_no_run_either(tmp_path: Path) -> None:
    """Runs have no unique key: a run copied before is known by its values, so a second copy
    adds nothing, and a run added to the source since is copied."""
    src, dst = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    for budget in (5, 8):  # two runs of one study
        assert invoke(*tune_args(src, "s", budget))[0] == 0
    rc, out, err = invoke("store", "copy", str(src), str(dst))
    assert rc == 0 and "runs: 2 copied" in out, out + err
    rc, out, err = invoke("store", "copy", str(src), str(dst))
    assert "runs: 0 copied, 2 already there" in out and "evaluations: 0 copied" in out, out + err
    assert invoke(*tune_args(src, "s", 10))[0] == 0
    rc, out, err = invoke("store", "copy", str(src), str(dst))
    assert "runs: 1 copied, 2 already there" in out and "evaluations: 2 copied" in out, out + err
    with sqlite3.connect(dst) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (3,)
    # a source that is not there: named, and neither store is created
    missing, fresh = tmp_path / "missing.sqlite", tmp_path / "fresh.sqlite"
    rc, out, err = invoke("store", "copy", str(missing), str(fresh))
    assert rc == 2 and "no store at" in err and not missing.exists() and not fresh.exists()


@pytest.mark.slow
def test_sqlite_with_several_processes_refuses_or_works(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    extra = ("--json", "--replay-delay", "0.1")
    # two processes on one study: one tunes, the other (this one) is refused with a pointer to
    # PostgreSQL
    first = start(*tune_args(path, "same", 60, *extra))
    wait_for(lambda: _sqlite_count(path) > 0, 60, "the first process to store something")
    rc, _, err = invoke(*tune_args(path, "same", 60, *extra))
    assert rc == 2 and "another process" in err and "PostgreSQL" in err
    # meanwhile another study of the same file works from another process (this one)
    assert first.poll() is None, "the first process should still be tuning"
    rc2, _, err2 = invoke(*tune_args(path, "other", 10, *extra))
    rc1, _, err1 = finish(first)
    assert rc1 == 0 and rc2 == 0, err1 + err2
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    rows = con.execute(
        "SELECT s.name, count(*), count(DISTINCT e.config_key) FROM evaluations e "
        "JOIN studies s ON s.id = e.study_id GROUP BY s.name ORDER BY s.name"
    ).fetchall()
    assert rows == [("other", 10, 10), ("same", 60, 60)]
    # workers need PostgreSQL, and say so
    rc, _, err = invoke("worker", "--storage", str(path), "--study", "same")
    assert rc == 2 and "PostgreSQL" in err


def _tune(let_go, args: list[str]) -> tuple[int, str, str]:
    let_go()
    return invoke(*args)


def _sqlite_studies(path: Path) -> list[tuple]:
    """(study, evaluations, distinct configs) of every study in a SQLite store, empty ones too."""
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return con.execute(
            "SELECT s.name, count(e.id), count(DISTINCT e.config_key) FROM studies s "
            "LEFT JOIN evaluations e ON e.study_id = s.id GROUP BY s.name ORDER BY s.name"
        ).fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_sqlite_tunes_started_together_finish_or_are_refused_never_fail(tmp_path: Path) -> None:
    """``for i in 1 2; do workbench tune --replay ... --study s$i --storage r.sqlite & done``
    and a second process on s1, 3 times over, on a new file or an existing one (processes let go
    together, tests/together.py). 7 such rounds of 8 failed: "table meta already exists" on a
    new file, "UNIQUE constraint failed" on the environment or the study, leaving an empty
    study. Now both studies are tuned whole, and of the two processes on s1 one tunes it and the
    other is refused with the "being tuned by another process" message and exit status 2. The
    replay's pace (0.1 s a config) keeps the winner tuning while the loser reaches the study."""
    from together import together

    path = tmp_path / "r.sqlite"
    budget = 20
    for existing in (False, True, False):
        for leftover in tmp_path.glob("r.sqlite*"):
            leftover.unlink()
        if existing:
            Store(f"sqlite:///{path}").close()
        args = [tune_args(path, s, budget, "--replay-delay", "0.1") for s in ("s1", "s1", "s2")]
        got = together([(_tune, (a,)) for a in args])
        assert all(isinstance(g, tuple) for g in got), got
        rcs = [rc for rc, _, _ in got]
        assert rcs[2] == 0 and sorted(rcs[:2]) == [0, 2], got
        (err,) = [err for rc, _, err in got if rc == 2]
        assert "is being tuned by another process" in err and "PostgreSQL" in err, err
        assert _sqlite_studies(path) == [("s1", budget, budget), ("s2", budget, budget)]


def _tune_in_this_process(args: list[str]) -> None:
    invoke(*args)


def test_sqlite_a_killed_tune_is_abandoned_when_its_study_is_next_tuned(tmp_path: Path) -> None:
    """A tune killed with kill -9 left its run "running" for ever (a report showed ten of them
    beside the finished one). The next tune of the study holds its lock, under which every run
    of the study lived: the killed run is marked abandoned, whatever it recorded of its process
    (here nothing, as in a store from before runs recorded it), and store list says so."""
    import multiprocessing

    path = tmp_path / "store.sqlite"
    args = tune_args(path, "k", 200, "--replay-delay", "0.05")
    killed = multiprocessing.get_context("fork").Process(target=_tune_in_this_process, args=(args,))
    killed.start()
    wait_for(lambda: _sqlite_count(path) > 0, 60, "the tune to store something")
    os.kill(killed.pid, signal.SIGKILL)
    killed.join()
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("running",)]
        con.execute("UPDATE runs SET host = NULL, pid = NULL, pid_scope = NULL")
    con.close()
    rc, _, err = invoke(*tune_args(path, "k", 5))  # (already more: nothing new to evaluate)
    assert rc == 0, err
    with sqlite3.connect(path) as con:
        statuses = con.execute("SELECT status FROM runs ORDER BY id").fetchall()
    con.close()
    assert statuses == [("abandoned",), ("finished",)]
    rc, out, _ = invoke("store", "list", "--storage", str(path), "--json")
    assert json.loads(out)["studies"][0]["runs"] == {"abandoned": 1, "finished": 1}
    rc, _, err = invoke("report", "--storage", str(path), "--out", str(tmp_path / "pages"))
    pages = "".join(p.read_text() for p in (tmp_path / "pages").glob("*.html"))
    assert rc == 0 and "<td>abandoned</td>" in pages, err
    assert "abandoned: the process of the run ended without saying how" in pages


def _sqlite_count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        con = sqlite3.connect(path, timeout=5)
        return con.execute("SELECT count(*) FROM evaluations").fetchone()[0]
    except sqlite3.Error:
        return 0


def _n_rows(url: str) -> int:
    try:
        return len(store_rows(url))
    except psycopg.Error:
        return 0  # the store's tables are not created yet


def _exists(url: str, name: str) -> bool:
    try:
        return SharedStudy.exists(open_database(url, Coordination(db_wait_s=5))[0], name)
    except Exception:
        return False


def test_a_database_never_reached_is_named_after_db_wait_not_300_s() -> None:
    """A wrong URL (nothing listens on port 1): tune waits --db-wait seconds, then says the
    database was never reached, not that a worker's trial will be re-queued."""
    start = time.monotonic()
    code, out, err = invoke(
        "tune", "--replay", str(PNPOLY), "--budget", "2", "--db-wait", "1",
        "--storage", "postgresql://tuner:s3cret@127.0.0.1:1/wb",
    )  # fmt: skip
    assert code == 2 and time.monotonic() - start < 60
    assert "postgresql://tuner:***@127.0.0.1:1/wb" in err and "s3cret" not in out + err
    assert "up to 1 s (--db-wait" in out + err
    assert "never reached: check the URL" in out + err and "re-queued" not in out + err


def test_a_database_or_user_that_does_not_exist_fails_at_once(pg_cluster) -> None:
    """Waiting does not create a database: only a server that is away is waited for."""
    url = pg_cluster.database()
    server, _, _ = url.rpartition("/")
    for wrong in (f"{server}/nosuchdb", url.replace("://postgres@", "://nobody@", 1)):
        start = time.monotonic()
        code, out, err = invoke(*tune_args(wrong, "s", 2), "--db-wait", "120")
        assert code == 2 and "does not exist" in out + err, out + err
        assert time.monotonic() - start < 30 and "waiting and retrying" not in out + err


def test_a_worker_waits_for_its_study_no_longer_than_its_time(pg_cluster) -> None:
    start = time.monotonic()
    code, out, err = invoke(*worker_args(pg_cluster.database(), "never", "--time", "2"))
    assert code == 2 and "no shared study 'never'" in err and "after 2 s" in err, out + err
    assert time.monotonic() - start < 30


def test_postgresql_urls_use_psycopg_3() -> None:
    assert sqlalchemy_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert sqlalchemy_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert sqlalchemy_url("sqlite:///x.sqlite") == "sqlite:///x.sqlite"


def test_a_shared_study_starts_from_another_gpus_best(pg_cluster) -> None:
    url = pg_cluster.database()
    rc, _, err = invoke(*tune_args(url, "a4000", 6, *FAST, recording=CONV_A4000))
    assert rc == 0, err
    rc, _, err = invoke(
        *tune_args(url, "a100", 2, "--enqueue", "best", "--json", *FAST, recording=CONV_A100)
    )
    assert rc == 0, err
    assert "--enqueue best: first" in err and "a4000" in err
    store = Store(url)
    a4000, a100 = (store.find_study(name) for name in ("a4000", "a100"))
    assert store.evaluations(a100)[0].config == store.best(a4000).config  # type: ignore[union-attr]
    store.close()


def test_a_shared_study_ends_when_only_unrecorded_configs_are_left(
    pg_cluster, project: Path, recording_without_scale_3: Path
) -> None:
    space = project / "spaces" / "tiny.yaml"  # 22 valid configs, 6 missing from the recording
    url = pg_cluster.database()
    rec = str(recording_without_scale_3)
    args = ["tune", str(space), "--replay", rec, "--storage", url, "--study", "gaps"]
    # (a time budget, so that a regression fails the test instead of hanging it)
    rc, out, err = invoke(*args, "--budget", "50", "--time", "60", "--json", *FAST)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["stop"] == "exhausted" and doc["evaluations"] == 16 and doc["unanswered"] == 6


def test_store_copy_refuses_a_same_named_study_of_other_parameters(tmp_path: Path) -> None:
    """A study of the same name holding another space in the destination would receive
    evaluations it cannot read (empty parameter columns, a report's KeyError): refused,
    nothing copied, as tune and import refuse it."""
    src, dst = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    gemm = PNPOLY.parent / "gemm_RTX_3090.json.gz"
    assert invoke(*tune_args(src, "shared", 5))[0] == 0
    assert invoke(*tune_args(dst, "shared", 5, recording=gemm))[0] == 0
    rc, _out, err = invoke("store", "copy", str(src), str(dst))
    assert rc == 2 and "study 'shared' exists in" in err and "Nothing was copied" in err, err
    with sqlite3.connect(dst) as conn:
        assert conn.execute("SELECT count(*) FROM evaluations").fetchone() == (5,)


def test_a_version_1_store_on_postgresql_is_migrated(pg_cluster) -> None:
    """The migration step runs on PostgreSQL too (ALTER TABLE inside the opening transaction,
    under the schema lock), and a store whose layout lacks a column is named, not half-used."""
    url = pg_cluster.database()
    store = Store(url)
    study = store.study(kernel="k", shape_label="n=8", device_key="H200", parameters=[("A", [1])])
    store.close()
    _as_version_1(url)
    store = Store(url)
    (again,) = store.studies()
    assert again.name == study.name and again.replay_note is None
    store.close()
    with psycopg.connect(url) as db:
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)
        db.execute("ALTER TABLE studies DROP COLUMN replay_note")  # this version, without it
    with pytest.raises(StoreError, match=r"lacks the columns studies\.replay_note"):
        Store(url)


def _as_version_1(url: str) -> None:
    """Turn a PostgreSQL store back into schema version 1 (as tests/test_store.py does a
    SQLite one)."""
    with psycopg.connect(url) as db:
        db.execute("DROP TABLE comparison_variants")
        db.execute("DROP TABLE study_spaces")
        db.execute("ALTER TABLE studies DROP COLUMN replay_note")
        db.execute("ALTER TABLE runs DROP COLUMN drift")
        for column in ("host", "pid", "pid_scope", "phases"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")


def test_store_upgrade_leaves_a_postgresql_backup_to_its_owner(pg_cluster) -> None:
    """The workbench copies SQLite files only: on PostgreSQL, store upgrade says how to back
    the database up and migrates nothing until --no-backup says that was done."""
    url = pg_cluster.database()
    store = Store(url)
    store.study(kernel="k", shape_label="n=8", device_key="H200", parameters=[("A", [1])])
    store.close()
    _as_version_1(url)
    code, _, err = invoke("store", "upgrade", "--storage", url)
    said = " ".join(err.split())
    assert code == 2 and "backs up SQLite files only" in said and "pg_dump" in said, said
    assert "--no-backup" in said
    with psycopg.connect(url) as db:
        assert db.execute("SELECT value FROM meta").fetchone() == ("1",)
    code, out, err = invoke("store", "upgrade", "--storage", url, "--no-backup")
    assert code == 0, err
    said = " ".join(out.split())
    done = f"from schema version 1 to {SCHEMA_VERSION}; no backup taken; 1 study, 0 evaluations"
    assert done in said, said
    with psycopg.connect(url) as db:
        assert db.execute("SELECT value FROM meta").fetchone() == (str(SCHEMA_VERSION),)


def test_a_worker_watches_its_own_gpu_for_drift(pg_cluster) -> None:
    """A worker of a shared study re-times the first config it measured, as a single tune
    does, and stores the checks with its run (here a test runner slowing 0.5 % per call)."""
    import dataclasses

    from test_drift import WarmingGpu

    from workbench.fleet.claims import WorkerId
    from workbench.fleet.worker import SharedTuner
    from workbench.report.data import gather_studies
    from workbench.search.loop import SearchSettings
    from workbench.search.request import Budget
    from workbench.search.start import plan_replay_file

    url = pg_cluster.database()
    db, store = open_database(url, Coordination(heartbeat_s=1, grace_s=2, db_wait_s=30))
    recording = load_recording(CONV_A100)
    plan = plan_replay_file(store, recording)
    plan = dataclasses.replace(plan, runner=WarmingGpu(recording, slowdown=0.005))
    shared = SharedStudy.create(db, plan.study.name, {"replay": str(CONV_A100)}, "A100")
    tuner = SharedTuner(
        plan,
        store,
        shared,
        WorkerId.here(None),
        SearchSettings(sampler="random", seed=1, drift_every=10),
    )
    result = tuner.run(Budget(evaluations=25))
    assert result.drift and all(c.verdict.value == "slower" for c in result.drift)
    (data,) = gather_studies(store)
    assert [r.drift for r in data.runs if r.drift] == [result.drift]
    db.close()


def test_a_failed_trial_reaches_the_other_workers_with_its_outcome(pg_cluster, monkeypatch) -> None:
    """A config one worker found WRONG is told to another worker's proposer as WRONG, with its
    reason (not as a launch failure "on another worker"), and the study's summary says WRONG."""
    import dataclasses

    from workbench.fleet.claims import WorkerId
    from workbench.fleet.worker import SharedTuner
    from workbench.runners.base import Measurement, Runner, TrialOutcome
    from workbench.runners.replay import ReplayRunner
    from workbench.search.loop import SearchSettings
    from workbench.search.proposers import ValidOrderProposer
    from workbench.search.request import Budget
    from workbench.search.samplers import SAMPLERS
    from workbench.search.start import plan_replay_file

    reason = "output differs from the reference at 12 of 4096 elements (max abs error 3)"

    class WrongGpu(Runner):
        """Runs every config to a wrong output, as a kernel with a race would."""

        def __init__(self, recording) -> None:
            self.inner = ReplayRunner(recording)

        @property
        def device(self):
            return self.inner.device

        def evaluate(self, config):
            return Measurement.failure(TrialOutcome.WRONG, reason)

    told: list = []

    class Listening(ValidOrderProposer):
        """Random order over the valid configs; keeps what it is told of other workers'."""

        def start(self, history) -> None:
            told.extend(e.measurement for e in history)
            super().start(history)

    def listening(problem, seed):
        return Listening(problem, problem.valid_configs(), shuffle=True, seed=seed)

    monkeypatch.setitem(SAMPLERS, "listening", (listening, "test"))
    url = pg_cluster.database()
    db, store = open_database(url, Coordination(heartbeat_s=1, grace_s=2, db_wait_s=30))
    recording = load_recording(PNPOLY)
    plan = plan_replay_file(store, recording)
    shared = SharedStudy.create(db, plan.study.name, {"replay": str(PNPOLY)}, "RTX 3090")
    wrong = dataclasses.replace(plan, runner=WrongGpu(recording))
    first = SharedTuner(
        wrong, store, shared, WorkerId("a", 1, 0), SearchSettings(sampler="random", seed=1)
    )
    assert first.run(Budget(evaluations=2)).best is None
    other = SharedTuner(
        plan, store, shared, WorkerId("b", 2, 0), SearchSettings(sampler="listening", seed=2)
    )
    result = other.run(Budget(evaluations=5))
    assert [(m.outcome, m.reason) for m in told] == [(TrialOutcome.WRONG, reason)] * 2
    failed = [e.measurement for e in result.history if e.measurement.outcome.failed]
    assert [(m.outcome, m.reason) for m in failed] == [(TrialOutcome.WRONG, reason)] * 2
    db.close()
    store.close()
