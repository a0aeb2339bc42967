"""One contract, both store backends (``workbench.store.Store`` on SQLite and on PostgreSQL).

Written once and run over a fixture parametrized by every backend, as Optuna runs one suite over
all of its storages: what the tuner, the reports and the scale-out workers rely on, whichever
database holds the store. PostgreSQL runs on the throwaway cluster of tests/pg_cluster.py (a
slow test: it starts a server), skipped, saying why, where the server binaries are absent.
SQLite-only behaviour (files, locks, damage) is in test_store.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench.errors import ConfigError
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.store import RunStatus, Store, StoreError, StudyInfo


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An empty store on each backend (a fresh database per test on PostgreSQL)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    else:
        url = request.getfixturevalue("pg_cluster").database()
    made = Store(url)
    yield made
    made.close()


def study_of(store: Store, shape: str = "n=8", values: tuple[int, ...] = (1, 2, 3)) -> StudyInfo:
    return store.study(
        kernel="k", shape_label=shape, device_key="H200", parameters=[("A", list(values))]
    )


def run_of(store: Store, study: StudyInfo) -> tuple[int, int]:
    env = store.environment(DeviceInfo("H200", cc=90, driver="580"))
    return env, store.start_run(study, env, sampler="tpe", seed=0)


def test_an_evaluation_reads_back_whole_with_its_samples(store: Store) -> None:
    study = study_of(store)
    env, run = run_of(store, study)
    m = Measurement(
        TrialOutcome.OK,
        value=1.5,
        samples=(1.4, 1.5, 1.6),
        ci_low=1.4,
        ci_high=1.6,
        sm_clock_mhz=(1980.0, 1980.0, 1500.0),
        throttled=(False, False, True),
        replayed_from="H200 (rec.json, 2026-12-04)",
        metrics={"gb_per_s": 3107.0},
    )
    store.record(study, run, env, {"A": 1}, m, elapsed_s=0.25)
    store.record(study, run, env, {"A": 2}, Measurement.failure(TrialOutcome.TIMEOUT, "hung"))
    first, second = store.evaluations(study)
    assert (first.sequence, first.config, first.run_id) == (0, {"A": 1}, run)
    assert first.measurement == m and first.elapsed_s == 0.25
    assert second.measurement.outcome is TrialOutcome.TIMEOUT
    assert second.measurement.reason == "hung" and second.measurement.value is None
    assert store.lookup(study, {"A": 1}).measurement == m  # type: ignore[union-attr]
    assert store.lookup(study, {"A": 3}) is None
    assert store.count_evaluations(study) == 2


def test_a_config_is_evaluated_once_per_study(store: Store) -> None:
    study, other = study_of(store), study_of(store, shape="n=9")
    env, run = run_of(store, study)
    store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=1.0))
    with pytest.raises(StoreError, match="already evaluated"):
        store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=2.0))
    store.record(other, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=2.0))  # another
    assert (store.count_evaluations(study), store.count_evaluations(other)) == (1, 1)
    assert store.lookup(study, {"A": 1}).measurement.value == 1.0  # type: ignore[union-attr]


def test_several_evaluations_are_stored_all_or_none(store: Store) -> None:
    study = study_of(store)
    env, run = run_of(store, study)
    items = [({"A": a}, Measurement(TrialOutcome.OK, value=float(a)), None) for a in (1, 2)]
    assert store.record_many(study, run, env, items) == 2
    again = [({"A": 3}, Measurement(TrialOutcome.OK, value=3.0), None), items[0]]
    with pytest.raises(StoreError, match="already evaluated"):
        store.record_many(study, run, env, again)
    assert [e.config for e in store.evaluations(study)] == [{"A": 1}, {"A": 2}]


def test_the_best_is_the_fastest_correct_evaluation_first_committed_among_equals(
    store: Store,
) -> None:
    study = study_of(store)
    env, run = run_of(store, study)
    assert store.best(study) is None
    store.record(study, run, env, {"A": 1}, Measurement.failure(TrialOutcome.WRONG, "max error 3"))
    assert store.best(study) is None  # a wrong config is never the best
    store.record(study, run, env, {"A": 3}, Measurement(TrialOutcome.OK, value=2.0))
    store.record(study, run, env, {"A": 2}, Measurement(TrialOutcome.OK, value=2.0))
    best = store.best(study)
    assert best is not None and best.config == {"A": 3}


def test_a_study_is_found_again_and_its_parameters_are_kept(store: Store) -> None:
    study = study_of(store)
    assert study_of(store) == study  # the same (kernel, shape, device): the same study
    with pytest.raises(StoreError, match="exists with parameters"):
        store.study(kernel="k", shape_label="n=8", device_key="H200", parameters=[("B", [1])])
    fresh = store.study(
        kernel="k", shape_label="n=8", device_key="H200", parameters=[("A", [1])], fresh=True
    )
    assert fresh.name == f"{study.name} #2" and fresh.id != study.id
    assert [s.name for s in store.studies()] == [study.name, fresh.name]
    assert store.find_study(study.name) == study and store.find_study(str(fresh.id)) == fresh
    with pytest.raises(ConfigError, match="no study matches"):
        store.find_study("nothing like it")


def test_runs_count_what_each_stored_and_end_with_their_status(store: Store) -> None:
    study = study_of(store)
    env, first = run_of(store, study)
    store.record(study, first, env, {"A": 1}, Measurement(TrialOutcome.OK, value=1.0))
    store.finish_run(first, RunStatus.INTERRUPTED)
    second = store.start_run(study, env, sampler="portfolio", seed=3)
    store.record(study, second, env, {"A": 2}, Measurement(TrialOutcome.OK, value=2.0))
    store.record(study, second, env, {"A": 3}, Measurement(TrialOutcome.OK, value=3.0))
    store.finish_run(second, RunStatus.FINISHED)
    runs = store.runs(study)
    assert [(r.id, r.sampler, r.seed, r.status, r.evaluations) for r in runs] == [
        (first, "tpe", 0, "interrupted", 1),
        (second, "portfolio", 3, "finished", 2),
    ]


def test_an_environment_is_stored_once(store: Store) -> None:
    device = DeviceInfo("H200", cc=90, driver="580", toolkit="13.0")
    assert store.environment(device) == store.environment(device)
    assert store.environment(DeviceInfo("H200", cc=90, driver="590")) != store.environment(device)


def test_an_unused_study_is_discarded_and_a_used_one_kept(store: Store) -> None:
    used, unused = study_of(store), study_of(store, shape="n=9")
    env, run = run_of(store, used)
    store.record(used, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=1.0))
    assert store.discard_if_unused(unused) and not store.discard_if_unused(used)
    assert [s.id for s in store.studies()] == [used.id]
