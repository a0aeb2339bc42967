"""The best config in the store: one rule (workbench.store.best), the same in SQL on SQLite and
PostgreSQL and in memory, and every caller that asks it getting the same answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.profile.storage import best_config
from workbench.regress.recorder import best_from_studies
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.store import Store, StudyInfo
from workbench.store.best import (
    StudySelection,
    Variants,
    best_across,
    best_of,
    best_selected,
    ranked,
    select_studies,
    study_best,
)
from workbench.store.header import collect

PARAMS = [("A", [1, 2, 3, 4, 5, 6])]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """An empty store: a SQLite file, or a database of the throwaway PostgreSQL cluster (the
    two order NULLs differently: the rule must not depend on it)."""
    if request.param == "sqlite":
        return Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    return Store(request.getfixturevalue("pg_cluster").database())


def _study(store: Store, kernel: str = "k", shape: str = "n=8", device: str = "H200") -> StudyInfo:
    return store.study(kernel=kernel, shape_label=shape, device_key=device, parameters=PARAMS)


def _record(store: Store, study: StudyInfo, *evaluations: tuple[int, Measurement]) -> None:
    env = store.environment(DeviceInfo(study.device_key))
    run = store.start_run(study, env)
    for a, m in evaluations:
        store.record(study, run, env, {"A": a}, m)


def ok(value: float, ci_high: float | None = None, replayed: str | None = None) -> Measurement:
    low = None if ci_high is None else value - (ci_high - value)
    return Measurement(
        TrialOutcome.OK, value=value, ci_low=low, ci_high=ci_high, replayed_from=replayed
    )


def _both(store: Store, study: StudyInfo) -> tuple[int | None, int | None]:
    """The best config's A as the SQL query and the in-memory rule find it."""
    in_sql = study_best(store, study)
    in_memory = best_of(store.evaluations(study))
    return (
        in_sql.config["A"] if in_sql else None,  # type: ignore[return-value]
        in_memory.config["A"] if in_memory else None,  # type: ignore[return-value]
    )


def test_equal_medians_go_to_the_tighter_interval_then_to_the_earliest(store: Store) -> None:
    study = _study(store)
    _record(
        store,
        study,
        (1, ok(2.0, 2.2)),
        (2, ok(1.0)),  # no interval: after those with one
        (3, ok(1.0, 1.3)),
        (4, ok(1.0, 1.1)),  # the tightest
        (5, ok(1.0, 1.1)),  # as tight, later
    )
    assert _both(store, study) == (4, 4)
    assert [e.config["A"] for e in ranked(store.evaluations(study))] == [4, 5, 3, 2, 1]


def test_equal_medians_without_intervals_go_to_the_earliest(store: Store) -> None:
    study = _study(store)
    _record(store, study, (3, ok(1.0)), (1, ok(1.0)), (2, ok(1.5)))
    assert _both(store, study) == (3, 3)


def test_wrong_failed_and_infeasible_evaluations_are_never_best(store: Store) -> None:
    study = _study(store)
    wrong = Measurement.failure(TrialOutcome.WRONG, "output differs from the reference")
    timeout = Measurement.failure(TrialOutcome.TIMEOUT, "hung")
    failed = Measurement.failure(TrialOutcome.LAUNCH_FAILED, "illegal address")
    infeasible = Measurement.failure(TrialOutcome.INFEASIBLE, "outside the space")
    _record(store, study, (1, wrong), (2, timeout), (3, failed), (5, infeasible), (4, ok(3.0)))
    assert _both(store, study) == (4, 4)
    nothing = _study(store, shape="n=9")
    _record(store, nothing, (1, wrong), (2, failed))
    assert _both(store, nothing) == (None, None)
    assert collect_skips(store, nothing) == "no correct evaluation"


def collect_skips(store: Store, study: StudyInfo) -> str:
    from workbench.errors import ConfigError

    with pytest.raises(ConfigError, match="no correct evaluation"):
        collect(store, study.kernel, [study.name])
    return "no correct evaluation"


def test_a_measured_value_ranks_before_a_replayed_one(store: Store) -> None:
    """A recording's tool may time otherwise (no L2 flush): its faster value is not preferred
    to one measured here; where nothing was measured, the replayed best is the best, and says
    where it came from."""
    measured = _study(store)
    _record(store, measured, (1, ok(2.0, 2.1)))
    replayed = _study(store, device="NVIDIA H200")  # another study of the same kernel and shape
    _record(store, replayed, (2, ok(1.0, 1.1, replayed="kt-cache.json")))
    found = best_across(store, [replayed, measured])
    assert found is not None and found[0] == measured and found[1].config == {"A": 1}
    only = best_across(store, [replayed])
    assert only is not None and only[1].measurement.replayed_from == "kt-cache.json"
    mixed = _study(store, shape="n=16")  # in one study too (in memory as in SQL)
    _record(store, mixed, (3, ok(1.0, replayed="kt-cache.json")), (4, ok(5.0)))
    assert _both(store, mixed) == (4, 4)


def test_across_studies_a_tie_goes_to_the_earliest_evaluation(store: Store) -> None:
    first, second = _study(store, shape="n=8"), _study(store, shape="n=9")
    _record(store, second, (2, ok(1.0, 1.1)))
    _record(store, first, (1, ok(1.0, 1.1)))
    found = best_across(store, [first, second])
    assert found is not None and found[0] == second and found[1].config == {"A": 2}
    assert best_across(store, []) is None


def test_variant_rules_select_the_studies_each_question_is_about(store: Store) -> None:
    plain = _study(store, kernel="reduce")
    summed = _study(store, kernel="reduce[OP=sum]")
    maxed = _study(store, kernel="reduce[OP=max]", device="A100")
    other = _study(store, kernel="reducer")
    compiled = _study(store, kernel="reduce", device="compile only (sm_90)")

    def names(kernel: str, variants: Variants, **where: str) -> list[str]:
        chosen = select_studies(store, StudySelection(kernel, variants, **where))
        return [s.kernel for s in chosen]

    assert names("reduce", Variants.EXACT) == ["reduce"]
    assert names("reduce[OP=sum]", Variants.EXACT) == ["reduce[OP=sum]"]
    assert names("reduce", Variants.AS_NAMED) == ["reduce", "reduce[OP=sum]", "reduce[OP=max]"]
    assert names("reduce[OP=max]", Variants.AS_NAMED) == ["reduce[OP=max]"]
    assert names("reduce[OP=max]", Variants.FAMILY) == [
        "reduce",
        "reduce[OP=sum]",
        "reduce[OP=max]",
    ]
    assert names("reduce", Variants.AS_NAMED, device_key="A100") == ["reduce[OP=max]"]
    assert names("reduce", Variants.AS_NAMED, shape_label="n=9") == []
    assert other.kernel == "reducer" and compiled.compile_only  # never selected above
    _record(store, plain, (1, ok(3.0)))
    _record(store, summed, (2, ok(2.0)))
    _record(store, maxed, (3, ok(1.0)))
    fastest = best_selected(store, StudySelection("reduce", Variants.AS_NAMED))
    assert fastest is not None and fastest[0] == maxed
    on_h200 = best_selected(store, StudySelection("reduce", Variants.EXACT, "n=8", "H200"))
    assert on_h200 is not None and on_h200[0] == plain


def test_every_caller_gets_the_rules_answer(store: Store) -> None:
    """A tie at the fastest median, broken by the interval, and a faster replayed value: the
    store, the regression tracker, profile --config best, the tuned header and the in-memory
    ranking (tuner, report) all pick config 4 (before, all took the replayed 5, and without it
    the earliest of the tie, 3)."""
    from workbench.report.data import StudyData

    study = _study(store, kernel="gemm")
    _record(
        store,
        study,
        (3, ok(1.0, 1.2)),
        (4, ok(1.0, 1.05)),
        (5, ok(0.5, 0.51, replayed="rec.json")),
        (6, ok(2.0, 2.1)),
    )
    assert store.best(study).config == {"A": 4}  # type: ignore[union-attr]
    assert best_from_studies(store, "gemm", "n=8", "H200") == {"A": 4}
    assert best_config(store, "gemm", "n=8")[0] == {"A": 4}
    (entry,) = collect(store, "gemm", [study.name]).entries
    assert entry.config == {"A": 4}
    assert ranked(store.evaluations(study))[0].config == {"A": 4}
    data = StudyData(study, tuple(store.evaluations(study)), ())
    assert data.best is not None and data.best.config == {"A": 4}
