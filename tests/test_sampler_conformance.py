"""One contract, every registered sampler (``workbench.search.samplers.SAMPLERS``).

Written once and run over a fixture parametrized by every name in the registry, as Optuna runs
one suite over all of its samplers: a sampler added to the registry is checked without a line
here. Each is driven through the public path (``make_proposer``, the ``Tuner``) on a small
recorded space with a region outside the space and a region that fails to run. ``gp`` needs
PyTorch (``pip install 'workbench[gp]'``) and is skipped, saying so, without it.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import Recording, load_recording, write_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordingProblem
from workbench.search.samplers import EXTRA_PACKAGES, SAMPLERS, make_proposer
from workbench.search.tuner import Budget, SearchSettings, SearchStopReason, Tuner, TuneResult
from workbench.spaces.model import Config
from workbench.store import Store

PARAMETERS = [("block", [32, 64, 128, 256]), ("tile", [1, 2, 4, 8]), ("layout", ["aos", "soa"])]


def _missing_packages(name: str) -> list[str]:
    packages, _ = EXTRA_PACKAGES.get(name, ((), ""))
    return [p for p in packages if importlib.util.find_spec(p) is None]


#: Samplers that need extra packages (GP: a Gaussian-process fit per proposal, seconds each on
#: two cores) run in the slow loop.
SAMPLER_PARAMS = [
    pytest.param(name, marks=pytest.mark.slow) if name in EXTRA_PACKAGES else name
    for name in sorted(SAMPLERS)
]


@pytest.fixture(params=SAMPLER_PARAMS)
def sampler(request: pytest.FixtureRequest) -> str:
    """Every registered sampler's name; one whose extra packages are absent is skipped."""
    name = request.param
    if missing := _missing_packages(name):
        _, how = EXTRA_PACKAGES[name]
        pytest.skip(f"the {name} sampler needs {' and '.join(missing)} ({how})")
    return name


def _value(c: Config) -> Measurement:
    """A space with an interaction (soa wants large tiles) and a failing corner."""
    if c["block"] == 256 and c["tile"] == 8:
        return Measurement.failure(TrialOutcome.LAUNCH_FAILED, "too many registers")
    tile_cost = abs(math.log2(c["tile"]) - (3 if c["layout"] == "soa" else 1))
    return Measurement(TrialOutcome.OK, value=1.0 + abs(c["block"] - 128) / 64 + tile_cost)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """30 recorded configs: the product less block=32 with tile=8 (outside the space, as a
    constraint would leave it); the two with block=256 and tile=8 fail."""
    entries = [
        (c, _value(c))
        for block in PARAMETERS[0][1]
        for tile in PARAMETERS[1][1]
        for layout in PARAMETERS[2][1]
        if not (block == 32 and tile == 8)
        for c in [{"block": block, "tile": tile, "layout": layout}]
    ]
    path = tmp_path_factory.mktemp("conformance") / "space.json"
    return load_recording(
        write_recording(
            path, kernel="conf", device=DeviceInfo("GPU"), parameters=PARAMETERS, entries=entries
        )
    )


def tune(store_path: Path, rec: Recording, name: str, budget: Budget, seed: int = 0) -> TuneResult:
    store = Store(f"sqlite:///{store_path}")
    study = store.study(
        kernel=rec.kernel, shape_label="x", device_key="GPU", parameters=rec.parameters
    )
    try:
        return Tuner(
            RecordingProblem(rec),
            ReplayRunner(rec),
            store,
            study,
            SearchSettings(sampler=name, seed=seed),
        ).run(budget)
    finally:
        store.close()


def test_proposals_name_every_parameter_with_a_value_of_its_domain(
    sampler: str, recording: Recording
) -> None:
    problem = RecordingProblem(recording)
    proposer = make_proposer(sampler, problem, 0)
    proposer.start([])
    proposer.plan(12)
    domains = dict(PARAMETERS)
    for _ in range(12):
        config = proposer.next()
        assert config is not None
        assert set(config) == set(domains)
        assert all(config[name] in values for name, values in domains.items()), config
        entry = recording.lookup(config)
        m = (
            entry.to_measurement(recording.source)
            if entry is not None
            else Measurement.failure(TrialOutcome.INFEASIBLE, "outside the space")
        )
        proposer.observe(config, m)


def test_a_queued_config_comes_before_the_strategys_own(sampler: str, recording: Recording) -> None:
    proposer = make_proposer(sampler, RecordingProblem(recording), 0)
    proposer.start([])
    queued = {"block": 64, "tile": 2, "layout": "soa"}
    proposer.enqueue(queued)
    assert proposer.next() == queued


def test_the_budget_counts_unique_evaluations_and_the_best_is_the_fastest_correct(
    sampler: str, recording: Recording, tmp_path: Path
) -> None:
    result = tune(tmp_path / "s.sqlite", recording, sampler, Budget(evaluations=15))
    assert result.stop is SearchStopReason.BUDGET and result.evaluations == 15
    keys = [tuple(sorted(e.config.items())) for e in result.history]
    assert len(set(keys)) == len(keys)  # nothing measured twice
    assert all(recording.lookup(e.config) is not None for e in result.history)  # in the space
    ok = [e for e in result.history if e.measurement.outcome is TrialOutcome.OK]
    assert result.best is not None and result.best.measurement.outcome is TrialOutcome.OK
    assert result.best.measurement.value == min(e.measurement.value for e in ok)  # type: ignore[type-var]


def test_the_same_seed_searches_the_same_way(
    sampler: str, recording: Recording, tmp_path: Path
) -> None:
    runs = [
        tune(tmp_path / f"{i}.sqlite", recording, sampler, Budget(evaluations=12), seed=7)
        for i in range(2)
    ]
    assert [e.config for e in runs[0].history] == [e.config for e in runs[1].history]


def test_a_resumed_study_goes_on_without_measuring_again(
    sampler: str, recording: Recording, tmp_path: Path
) -> None:
    first = tune(tmp_path / "s.sqlite", recording, sampler, Budget(evaluations=8))
    second = tune(tmp_path / "s.sqlite", recording, sampler, Budget(evaluations=16))
    assert (first.new_evaluations, second.new_evaluations, second.evaluations) == (8, 8, 16)
    assert [(e.config, e.measurement.value) for e in second.history[:8]] == [
        (e.config, e.measurement.value) for e in first.history
    ]
    configs = [tuple(sorted(e.config.items())) for e in second.history]
    assert len(set(configs)) == 16


def test_the_search_ends_when_every_config_of_the_space_is_evaluated(
    sampler: str, recording: Recording, tmp_path: Path
) -> None:
    result = tune(tmp_path / "s.sqlite", recording, sampler, Budget(evaluations=100))
    assert result.stop is SearchStopReason.EXHAUSTED
    assert result.evaluations == len(recording.entries) == 30
    assert result.best is not None and result.best.measurement.value == 1.0
    failed = [e.config for e in result.history if e.measurement.outcome.failed]
    assert sorted(c["layout"] for c in failed) == ["aos", "soa"]
    assert all((c["block"], c["tile"]) == (256, 8) for c in failed)
