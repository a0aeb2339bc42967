"""Where a tune's time goes: the phases the runner, the worker and the search loop count, summed
per run, printed, in ``--json`` and in the store.

The runner's phases are checked through the CUDA worker's own code on host memory
(``HostDevice``): a compile, the inputs, the verification launch, the module load, a warm-up
and timed samples really happen there; only the kernel runs nowhere, so the sample values say
nothing and are not looked at.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import invoke
from host_device import host_executor

from workbench.compiler import CompileCache
from workbench.report.data import gather_study
from workbench.report.phases import draw_phases, gather_phases, phases_table
from workbench.runners.base import TrialOutcome
from workbench.runners.phases import Phase, PhaseTimes
from workbench.runners.timing import StoppingRule, TimingOptions
from workbench.runners.worker_runner import WorkerRunner
from workbench.spaces import Space, load_kernel
from workbench.store import Store

FAST = TimingOptions(
    rule=StoppingRule(min_time_s=0.0, max_time_s=0.5, max_samples=20),
    warmup_s=0.01,
    flush_l2=False,  # the flush is a driver memset: host memory has none
)


def test_nested_phases_count_each_second_once() -> None:
    phases = PhaseTimes()
    start = time.perf_counter()
    with phases.timed(Phase.WORKER):
        time.sleep(0.02)
        inner_start = time.perf_counter()  # (the sleeps' own lengths: a loaded machine overshoots)
        with phases.timed(Phase.VERIFICATION):
            time.sleep(0.03)
            phases.add(Phase.MODULE_LOAD, 0.01)  # reported from inside: not verification's
        inner = time.perf_counter() - inner_start
        phases.add(Phase.TIMING, 0.005)
    wall = time.perf_counter() - start
    assert phases.total == pytest.approx(wall, abs=2e-3)
    assert phases.get(Phase.VERIFICATION) == pytest.approx(inner - 0.01, abs=2e-3)
    assert phases.get(Phase.MODULE_LOAD) == 0.01 and phases.get(Phase.TIMING) == 0.005
    assert phases.get(Phase.WORKER) == pytest.approx(wall - inner - 0.005, abs=2e-3)
    idle = phases.with_idle(wall + 1.0)
    assert idle.get(Phase.IDLE) == pytest.approx(1.0, abs=2e-3)
    assert idle.total == pytest.approx(wall + 1)
    assert PhaseTimes.from_json(idle.to_json() | {"new_phase": 3.0}).to_json() == idle.to_json()
    assert idle.gpu_busy == pytest.approx(0.005 / (wall + 1.0))


@pytest.fixture
def host_runner(tmp_path: Path) -> Iterator[WorkerRunner]:
    runner = WorkerRunner(
        Space(load_kernel("stream_scale"), shape={"n": 4096}),
        CompileCache(tmp_path / "cache"),
        executor_factory=functools.partial(host_executor, str(tmp_path / "l.jsonl"), 0.001),
        timing=FAST,
        startup_timeout_s=120,
        workdir=tmp_path,
    )
    yield runner
    runner.close()


def test_the_runner_counts_every_phase_of_an_evaluation(host_runner: WorkerRunner) -> None:
    runner = host_runner
    config = runner.space.default_config()
    start = time.perf_counter()
    m = runner.evaluate(config)
    wall = time.perf_counter() - start
    # nothing ran on host memory: the verification finds the output untouched
    assert m.outcome is TrialOutcome.WRONG and "untouched" in m.reason
    first = runner.phases.copy()
    for phase in (Phase.COMPILE, Phase.INPUTS, Phase.VERIFICATION, Phase.MODULE_LOAD):
        assert first.get(phase) > 0, phase
    assert first.get(Phase.TIMING) == 0  # a wrong config is never timed
    assert first.total == pytest.approx(wall, abs=0.01)

    runner._verify_configs = False  # the same worker, timing only: warm-up and samples
    start = time.perf_counter()
    m = runner.evaluate({**config, "BLOCK": 128})
    wall = time.perf_counter() - start
    assert m.outcome is TrialOutcome.OK, m.reason
    second = runner.phases.since(first)
    for phase in (Phase.COMPILE, Phase.MODULE_LOAD, Phase.WARMUP, Phase.TIMING, Phase.WORKER):
        assert second.get(phase) > 0, phase
    assert second.get(Phase.WARMUP) >= FAST.warmup_s
    assert second.get(Phase.VERIFICATION) == 0
    assert second.total == pytest.approx(wall, abs=0.01)


def test_a_tune_prints_stores_and_reports_its_phases(tmp_path: Path) -> None:
    """A replayed tune: the runner keeps no phases (its time is the worker's), the loop's are
    search and store, and the rest of the wall time is idle; the run stores them."""
    storage = f"sqlite:///{tmp_path / 's.sqlite'}"
    code, out, err = invoke("tune", "reduce", "--budget", "12", "--json", "--storage", storage)
    assert code == 0, out + err
    doc = json.loads(out)
    phases = doc["phases"]
    assert {"search", "store", "worker", "idle"} <= set(phases), phases
    assert set(phases) <= {p.value for p in Phase}
    assert doc["gpu_busy"] is None  # replayed: no GPU was busy
    store = Store(storage, read_only=True)
    (study,) = store.studies()
    (run,) = store.runs(study)
    assert run.phases == pytest.approx(phases)
    assert "Time: " in err and "search " in err
    (shown,) = gather_phases(gather_study(store, study))
    assert not shown.live and shown.phases.to_json() == pytest.approx(phases)
    html = phases_table([shown])
    assert "<th>search</th>" in html and "<th>GPU busy</th>" in html
    assert draw_phases([shown]).data  # one stacked bar per phase
