"""One contract, both ledgers (``workbench.search.loop.Ledger``): the trials of a search as the
loop asks about them.

Written once and run over a fixture parametrized by every ledger, as Optuna runs one suite over
all of its storages: :class:`~workbench.search.tuner.StoreLedger` (one process, its study in a
SQLite store) and :class:`~workbench.fleet.worker.ClaimsLedger` (one worker of a shared study,
on the throwaway PostgreSQL cluster of tests/pg_cluster.py: a slow test, skipped, saying why,
where the server binaries are absent). Each member is driven in the order loop.py's docstring
gives, on a real store and a small recording replayed; then the search runs over each ledger
and must find what it finds over the other.

Where the ledgers differ by design, the shared contract is tested and the difference noted: a
worker learns the study's history in its first ``refresh`` (not in ``open_run``), counts
patience over the whole study's evaluations, tracks no ``best`` (None), answers a key another
worker holds as in flight, has a reservation refused (None) once the study's budget is
claimed, and waits (``wait`` sleeps and returns True) where one process has nothing to wait
for. Several workers at once (re-queued trials, stale ones, outages) are in test_scale_out.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import Recording, load_recording, write_recording
from workbench.search.drift import DriftCheck
from workbench.search.loop import (
    Budget,
    Ledger,
    Search,
    SearchSettings,
    SearchStopReason,
    Standing,
    TuneResult,
)
from workbench.search.problem import SearchProblem
from workbench.search.proposers import Proposer, ValidOrderProposer
from workbench.search.request import DEFAULT_SAMPLER
from workbench.search.start import plan_replay_file
from workbench.search.tune_plan import TunePlan
from workbench.search.tuner import StoreLedger
from workbench.spaces.model import Config
from workbench.stats.rule import Verdict
from workbench.store import RunStatus, Store, StoredEvaluation, StoreError

PARAMETERS = [("block", [32, 64, 128, 256]), ("tile", [1, 2, 4])]
#: an evaluation budget none of the tests below reaches, unless it says otherwise
BUDGET = Budget(evaluations=100)
SETTINGS = {"sampler": "random", "seed": 0, "budget": BUDGET.as_dict(), "command": "pytest"}


def _value(c: Config) -> Measurement:
    """1 ms at block=128, tile=2, more away from it; block=256 with tile=4 is wrong."""
    if (c["block"], c["tile"]) == (256, 4):
        return Measurement.failure(TrialOutcome.WRONG, "max error 3")
    ms = 1.0 + abs(c["block"] - 128) / 64 + abs(c["tile"] - 2) / 2
    return Measurement(TrialOutcome.OK, value=ms, samples=(ms, ms * 1.01))


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """The 12 configs of the product, recorded (11 correct, 1 wrong)."""
    entries = [
        (c, _value(c))
        for block in PARAMETERS[0][1]
        for tile in PARAMETERS[1][1]
        for c in [{"block": block, "tile": tile}]
    ]
    path = tmp_path_factory.mktemp("ledger") / "rec.json"
    return load_recording(
        write_recording(
            path, kernel="k", device=DeviceInfo("GPU"), parameters=PARAMETERS, entries=entries
        )
    )


@dataclass
class LedgerCase:
    """A study of the recording on one backend, and its ledger: each ``open()`` is a new run."""

    store: Store
    plan: TunePlan
    make: Callable[[], Ledger]
    shared: bool  #: a worker of a shared study (ClaimsLedger), else one process (StoreLedger)
    made: list[Ledger] = field(default_factory=list)

    def open(self) -> Ledger:
        ledger = self.make()
        self.made.append(ledger)
        return ledger


def _sqlite_case(store: Store, plan: TunePlan) -> LedgerCase:
    def make() -> Ledger:
        return StoreLedger(plan.problem, store, plan.study, plan.environment_id)

    return LedgerCase(store, plan, make, shared=False)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def case(
    request: pytest.FixtureRequest, tmp_path: Path, recording: Recording
) -> Iterator[LedgerCase]:
    """A new study on each backend (a fresh database per test on PostgreSQL)."""
    if request.param == "sqlite":
        store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
        made = _sqlite_case(store, plan_replay_file(store, recording))
        db = None
    else:
        from workbench.fleet.claims import WorkerId
        from workbench.fleet.connection import open_database
        from workbench.fleet.study import SharedStudy
        from workbench.fleet.worker import ClaimsLedger
        from workbench.search.request import Coordination

        url = request.getfixturevalue("pg_cluster").database()
        db, store = open_database(url, Coordination(heartbeat_s=1, grace_s=2, db_wait_s=30))
        plan = plan_replay_file(store, recording)
        device_class = plan.runner.device.device_class()
        shared = SharedStudy.create(
            db, plan.study.name, {"replay": str(recording.path)}, device_class
        )

        def make() -> Ledger:
            return ClaimsLedger(plan, store, shared, WorkerId.here(None))

        made = LedgerCase(store, plan, make, shared=True)
    yield made
    for ledger in made.made:  # one a failed test left open (closing twice is harmless)
        with contextlib.suppress(Exception):
            ledger.close(RunStatus.FAILED)
    if db is not None:
        db.close()
    store.close()


class Told(ValidOrderProposer):
    """Random order over the valid configs; keeps what the ledger told it of the study."""

    def __init__(self, problem: SearchProblem) -> None:
        super().__init__(problem, problem.valid_configs() or [], shuffle=True, seed=0)
        self.told: list[StoredEvaluation] = []

    def start(self, history: Sequence[StoredEvaluation]) -> None:
        self.told.extend(history)
        super().start(history)


def opened(case: LedgerCase) -> tuple[Ledger, Proposer]:
    """A new run over the case's study, its proposer started as the loop starts it."""
    ledger = case.open()
    proposer = Told(ledger.problem)
    ledger.open_run(SETTINGS, proposer)
    return ledger, proposer


def measure(case: LedgerCase, ledger: Ledger, proposer: Proposer, config: Config) -> Standing:
    """One round of the loop for ``config``: refresh, reserve, measure from the recording,
    record, and tell the proposer; returns the standing the round began with."""
    standing = ledger.refresh(proposer, BUDGET)
    key = ledger.problem.key(config)
    assert ledger.known(key) is None  # open: the loop asks for it
    slot = ledger.reserve(config, key, BUDGET)
    assert slot is not None and (slot.config, slot.key, slot.proposed) == (config, key, True)
    assert ledger.stored(slot) is None  # nothing of it stored yet: it is measured
    m = case.plan.runner.evaluate(config)
    kept = ledger.record(slot, m, 0.25, True)
    assert (kept.config, kept.measurement) == (config, m)
    proposer.observe(config, kept.measurement)
    return standing


def search(
    case: LedgerCase, budget: Budget, *, sampler: str = DEFAULT_SAMPLER, seed: int = 0
) -> TuneResult:
    """A new run of the search over the case's ledger."""
    settings = SearchSettings(sampler=sampler, seed=seed)
    return Search(case.open(), case.plan.runner, settings).run(budget)


def outcomes(evaluations: Sequence[StoredEvaluation]) -> list[tuple[object, ...]]:
    """What a proposer learns of each evaluation: config, outcome, value, reason."""
    return [
        (e.config, e.measurement.outcome, e.measurement.value, e.measurement.reason)
        for e in evaluations
    ]


# -- the run ------------------------------------------------------------------------------------
def test_a_run_starts_in_the_store_and_close_finishes_it(case: LedgerCase) -> None:
    ledger, _ = opened(case)
    (run,) = case.store.runs(case.plan.study)
    assert (run.sampler, run.seed, run.status, run.evaluations) == ("random", 0, "running", 0)
    ledger.close(RunStatus.FINISHED)
    assert [r.status for r in case.store.runs(case.plan.study)] == ["finished"]


def test_close_never_raises_for_the_stores_sake(
    case: LedgerCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger, _ = opened(case)

    def gone(*args: object) -> None:
        raise StoreError("the database went away")

    monkeypatch.setattr(case.store, "finish_run", gone)
    ledger.close(RunStatus.FAILED)  # (the store may be what failed the run)


def test_drift_checks_and_phases_land_with_the_run(case: LedgerCase) -> None:
    from workbench.report.data import gather_study

    checks = [
        DriftCheck(10, "block=128, tile=2", Verdict.SAME, 1.0, "", (1.0, 1.01)),
        DriftCheck(20, "block=128, tile=2", Verdict.SLOWER, 1.06, "", (1.06, 1.07)),
    ]
    ledger, _ = opened(case)
    ledger.record_drift([checks[0].to_json()])
    ledger.record_drift([c.to_json() for c in checks])  # every check so far, replacing
    ledger.record_phases({"runner": 0.5, "search": 0.25, "store": 0.125})
    ledger.close(RunStatus.FINISHED)
    (run,) = gather_study(case.store, case.plan.study).runs
    assert run.drift == tuple(checks)
    assert run.phases == {"runner": 0.5, "search": 0.25, "store": 0.125}


# -- each round ---------------------------------------------------------------------------------
def test_a_reserved_config_is_recorded_in_the_store_and_known_after(case: LedgerCase) -> None:
    ledger, proposer = opened(case)
    assert ledger.refresh(proposer, BUDGET) == Standing(complete=0, since_best=0, exhausted=False)
    assert ledger.requeued(BUDGET) is None  # nothing re-queued: the proposer is asked
    config = {"block": 64, "tile": 2}
    measure(case, ledger, proposer, config)
    m = case.plan.runner.evaluate(config)
    assert ledger.known(ledger.problem.key(config)) == m  # answered, never measured again
    stored = case.store.lookup(case.plan.study, config)  # stored before the next round
    assert stored is not None and stored.measurement == m
    assert ledger.refresh(proposer, BUDGET) == Standing(complete=1, since_best=0, exhausted=False)
    assert ledger.new_evaluations == 1
    assert ledger.settled()  # nothing held: the run may stop
    ledger.close(RunStatus.FINISHED)
    assert [(e.config, e.measurement) for e in ledger.evaluations()] == [(config, m)]
    (run,) = case.store.runs(case.plan.study)
    assert (run.status, run.evaluations) == ("finished", 1)


def test_a_config_the_runner_cannot_answer_never_counts(case: LedgerCase) -> None:
    ledger, proposer = opened(case)
    ledger.refresh(proposer, BUDGET)
    config = {"block": 32, "tile": 4}
    key = ledger.problem.key(config)
    slot = ledger.reserve(config, key, BUDGET)
    assert slot is not None
    ledger.reject(slot)
    known = ledger.known(key)  # answered without asking the runner again
    assert known is not None and known.outcome is TrialOutcome.INFEASIBLE
    assert key in ledger.unanswered
    assert ledger.refresh(proposer, BUDGET) == Standing(complete=0, since_best=0, exhausted=False)
    ledger.close(RunStatus.FINISHED)
    assert ledger.evaluations() == [] and case.store.count_evaluations(case.plan.study) == 0


def test_since_best_counts_evaluations_after_the_best_improved(case: LedgerCase) -> None:
    ledger, proposer = opened(case)
    # 3.0 ms, 2.0 (better), wrong, 3.5, 1.0 (better), 1.5
    order = [(32, 1), (64, 2), (256, 4), (32, 4), (128, 2), (128, 1)]
    since, best = [], []
    for block, tile in order:
        since.append(measure(case, ledger, proposer, {"block": block, "tile": tile}).since_best)
        best.append(ledger.best.config if ledger.best is not None else None)
    since.append(ledger.refresh(proposer, BUDGET).since_best)
    assert since == [0, 0, 0, 1, 2, 0, 1]
    tracked = [(32, 1), (64, 2), (64, 2), (64, 2), (128, 2), (128, 2)]
    # a worker tracks no best (None: "not tracked"); the search's result has it, as below
    want = [None] * 6 if case.shared else [{"block": b, "tile": t} for b, t in tracked]
    assert best == want


def test_the_standing_is_exhausted_when_every_valid_config_is_evaluated_or_unanswerable(
    case: LedgerCase,
) -> None:
    ledger, proposer = opened(case)
    *answered, last = ledger.problem.valid_configs() or []
    for config in answered:
        assert not measure(case, ledger, proposer, config).exhausted
    assert not ledger.refresh(proposer, BUDGET).exhausted  # one left open
    slot = ledger.reserve(last, ledger.problem.key(last), BUDGET)
    assert slot is not None
    ledger.reject(slot)
    standing = ledger.refresh(proposer, BUDGET)
    assert (standing.complete, standing.exhausted) == (11, True)


def test_a_new_run_learns_the_studys_history_before_its_first_proposal(case: LedgerCase) -> None:
    first, proposer = opened(case)
    before = [{"block": 32, "tile": 1}, {"block": 128, "tile": 2}, {"block": 256, "tile": 4}]
    for config in before:
        measure(case, first, proposer, config)
    first.close(RunStatus.FINISHED)
    history = outcomes(case.store.evaluations(case.plan.study))
    second, told = opened(case)
    # one process tells the proposer in open_run, a worker in its first refresh (loop order:
    # open_run, then refresh, then the first proposal)
    standing = second.refresh(told, BUDGET)
    assert isinstance(told, Told) and outcomes(told.told) == history
    for config, outcome, value, reason in history:
        known = second.known(second.problem.key(config))
        assert known is not None and (known.outcome, known.value, known.reason) == (
            outcome,
            value,
            reason,
        )
    # patience: one process counts this run's evaluations (none yet), a worker the study's
    assert standing == Standing(complete=3, since_best=1 if case.shared else 0, exhausted=False)


# -- the search over the ledger -----------------------------------------------------------------
def reference(tmp_path: Path, recording: Recording, budget: Budget, seed: int) -> TuneResult:
    """The same search over a StoreLedger on a SQLite store of its own."""
    store = Store(f"sqlite:///{tmp_path / 'reference.sqlite'}")
    try:
        return search(_sqlite_case(store, plan_replay_file(store, recording)), budget, seed=seed)
    finally:
        store.close()


@pytest.mark.parametrize("budget", [6, 100])
def test_the_search_over_either_ledger_evaluates_the_same_configs(
    case: LedgerCase, tmp_path: Path, recording: Recording, budget: int
) -> None:
    result = search(case, Budget(evaluations=budget), seed=3)
    want = reference(tmp_path, recording, Budget(evaluations=budget), seed=3)
    assert [e.config for e in result.history] == [e.config for e in want.history]
    assert result.best is not None and want.best is not None
    assert (result.best.config, result.best.measurement) == (
        want.best.config,
        want.best.measurement,
    )
    n = min(budget, 12)
    stop = SearchStopReason.BUDGET if budget < 12 else SearchStopReason.EXHAUSTED
    assert (result.stop, result.evaluations, result.new_evaluations) == (stop, n, n)
    assert [(e.config, e.measurement) for e in result.history] == [
        (e.config, e.measurement) for e in case.store.evaluations(case.plan.study)
    ]
    if budget > 12:  # the whole space: its best is the recording's
        assert result.best.config == {"block": 128, "tile": 2}


def test_a_resumed_study_goes_on_without_measuring_again(case: LedgerCase) -> None:
    first = search(case, Budget(evaluations=4), sampler="random", seed=1)
    second = search(case, Budget(evaluations=8), sampler="random", seed=2)
    assert (first.new_evaluations, second.new_evaluations, second.evaluations) == (4, 4, 8)
    assert [e.config for e in second.history[:4]] == [e.config for e in first.history]
    keys = {case.plan.problem.key(e.config) for e in second.history}
    assert len(keys) == 8  # nothing measured twice
    runs = case.store.runs(case.plan.study)
    assert [(r.status, r.evaluations) for r in runs] == [("finished", 4), ("finished", 4)]


@pytest.mark.parametrize("committed", [True, False], ids=["after-commit", "before-commit"])
def test_an_interrupt_counts_what_the_store_holds(
    case: LedgerCase, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """Ctrl-C as the fourth evaluation is stored: right after its commit (before the ledger's
    bookkeeping), or before it (after the runner measured it). The run counts what the store
    holds, ends interrupted, and a new run resumes without measuring anything again."""
    study, record = case.plan.study, case.store.record
    holds = 4 if committed else 3

    def interrupted(*args: object, **kwargs: object) -> int:
        if not committed and case.store.count_evaluations(study) == 3:
            raise KeyboardInterrupt  # the fourth, measured, is never stored
        row = record(*args, **kwargs)  # type: ignore[arg-type]
        if committed and case.store.count_evaluations(study) == 4:
            raise KeyboardInterrupt
        return row

    monkeypatch.setattr(case.store, "record", interrupted)
    result = search(case, Budget(evaluations=8), sampler="random")
    monkeypatch.setattr(case.store, "record", record)
    assert result.stop is SearchStopReason.INTERRUPTED
    assert result.evaluations == result.new_evaluations == holds == len(result.history)
    assert [(r.status, r.evaluations) for r in case.store.runs(study)] == [("interrupted", holds)]
    resumed = search(case, Budget(evaluations=8), sampler="random")
    assert (resumed.stop, resumed.evaluations, resumed.new_evaluations) == (
        SearchStopReason.BUDGET,
        8,
        8 - holds,
    )
    assert len({case.plan.problem.key(e.config) for e in resumed.history}) == 8
