"""A tune as a request: its defaults, a shared study's spec written and read back, what a joiner
keeps, and the five places a plan's numbers come from (recorded data, no GPU here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.gpu import probe_gpu
from workbench.runners.recordings import RecordingError
from workbench.search.configs import CompileSelection, compile_batches
from workbench.search.request import (
    DEFAULT_BUDGET,
    DEFAULT_GRACE_S,
    DEFAULT_HEARTBEAT_S,
    NO_GPU_SAMPLE,
    Budget,
    CompileStage,
    Coordination,
    Measuring,
    SearchStrategy,
    StudyChoice,
    TuneRequest,
    TuneTarget,
    requested_budget,
)
from workbench.search.start import Source, check_request, plan_tune
from workbench.store import Store

CACHES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "tuning-caches"
PNPOLY = CACHES / "pnpoly_RTX_3090.json.gz"
no_gpu = pytest.mark.skipif(probe_gpu().available, reason="a GPU here measures instead")


def kernel(name: str | None = None, **target: object) -> TuneTarget:
    return TuneTarget(kernel=name, **target)  # type: ignore[arg-type]


def test_the_budget_defaults_to_100_evaluations_unless_a_limit_is_given() -> None:
    def asked(**budget: object) -> Budget:
        limits = {"evaluations": None, "seconds": None, "patience": None} | budget
        return requested_budget(**limits)  # type: ignore[arg-type]

    assert asked() == Budget(evaluations=DEFAULT_BUDGET) == TuneRequest().strategy.budget
    assert not TuneRequest().strategy.budget_given
    assert asked(seconds=30.0) == Budget(seconds=30.0)
    assert asked(patience=5) == Budget(patience=5)
    with pytest.raises(WorkbenchError, match="`evaluations` 0: the budget must be at least 1"):
        asked(evaluations=0)
    # one home of the shared-study timing: the study's defaults are the coordination's
    assert (Coordination().heartbeat_s, Coordination().grace_s) == (10, 60)
    assert (DEFAULT_HEARTBEAT_S, DEFAULT_GRACE_S, NO_GPU_SAMPLE) == (10, 60, 8)
    assert TuneRequest().compile.sample_size == NO_GPU_SAMPLE
    with pytest.raises(WorkbenchError, match="a grace period longer than the heartbeat"):
        Coordination(heartbeat_s=5, grace_s=5)


def test_the_request_is_a_leaf() -> None:
    """Light to import: none of the loop, the store, the runners' machinery or Optuna (the
    loop, the samplers and the fleet take their defaults and types from it)."""
    import subprocess
    import sys

    probe = (
        "import sys, workbench.search.request; "
        "print(','.join(m for m in ('optuna', 'sqlalchemy', 'workbench.search.loop', "
        "'workbench.store', 'workbench.runners.base', 'workbench.spaces') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "", done.stdout + done.stderr


@pytest.mark.parametrize(
    "request_,message",
    [
        (TuneRequest(), "name a kernel"),
        (
            TuneRequest(kernel("reduce"), strategy=SearchStrategy(sampler="magic")),
            "unknown sampler",
        ),
        (
            TuneRequest(kernel("reduce"), strategy=SearchStrategy(enqueue=("none", "default"))),
            "`enqueue` none",
        ),
        (
            TuneRequest(kernel("reduce"), compile=CompileStage(all_configs=True, sample=2)),
            "cannot go with `sample`",
        ),
    ],
)
def test_what_no_path_can_take_is_refused(request_: TuneRequest, message: str) -> None:
    with pytest.raises(WorkbenchError, match=message):
        check_request(request_)


def test_a_shared_study_refuses_fresh_and_shape_sets() -> None:
    fresh = StudyChoice(fresh=True)
    check_request(TuneRequest(kernel("reduce", shapes="odd"), study=fresh))  # one process: fine
    with pytest.raises(WorkbenchError, match="`fresh` makes a study of this process's own"):
        check_request(TuneRequest(kernel("reduce"), study=fresh), shared=True)
    with pytest.raises(WorkbenchError, match="a shared study tunes one shape"):
        check_request(TuneRequest(kernel("reduce", shapes="odd")), shared=True)


def test_a_shared_studys_spec_is_written_as_before_and_read_back(tmp_path: Path) -> None:
    request = TuneRequest(
        kernel(
            "gemm_int8",
            spaces=(Path("spaces"),),
            shape=("M=64,N=64",),
            arch="sm_90a",
            device="h200",
            pin=("BM=64",),
        ),
        Measuring(replay=Path("rec.json"), replay_delay=0.5),  # the delay: this process's
        SearchStrategy(
            budget=Budget(evaluations=50, seconds=20.0, patience=9),
            budget_given=True,
            sampler="tpe",
            seed=4,
            drift_every=5,
        ),
        coordination=Coordination(heartbeat_s=2, grace_s=9, db_wait_s=7.0),  # the wait: its own
    )
    spec = request.to_spec()
    # the layout studies created by earlier versions hold, which their workers read
    assert spec == {
        "kernel": "gemm_int8",
        "replay": str(Path("rec.json").absolute()),
        "spaces": [str(Path("spaces").absolute())],
        "shape": ["M=64,N=64"],
        "arch": "sm_90a",
        "device": "h200",
        "pin": ["BM=64"],
        "sampler": "tpe",
        "seed": 4,
        "budget": {"evaluations": 50, "seconds": None, "patience": 9},
        "drift_every": 5,
        "coordination": {"heartbeat_s": 2, "grace_s": 9},
    }
    back = TuneRequest.from_spec(spec, seconds=20.0)
    assert back.to_spec() == spec and back.strategy.budget == request.strategy.budget
    # a spec from before sampler, seed or coordination were kept: the defaults
    old = TuneRequest.from_spec({"replay": "r.json", "budget": {"evaluations": 3}})
    assert (old.strategy.sampler, old.strategy.seed) == ("portfolio", 0)
    assert old.coordination == Coordination()
    # a study with no evaluation budget: each worker brings its own --time
    with pytest.raises(WorkbenchError, match="a budget needs"):
        TuneRequest.from_spec({"replay": "r.json", "budget": {"evaluations": None}})
    from_spec = TuneRequest.from_spec({"replay": "r.json"}, seconds=5.0)
    assert from_spec.strategy.budget == Budget(seconds=5.0)


def test_a_joiner_keeps_the_studys_search_and_its_budget_unless_given() -> None:
    replay = Measuring(replay=PNPOLY)
    study = TuneRequest(
        measuring=replay,
        strategy=SearchStrategy(budget=Budget(evaluations=200), seed=3),
        coordination=Coordination(heartbeat_s=1, grace_s=3),
    ).to_spec()
    asked = SearchStrategy(sampler="random", seed=3, budget=Budget(evaluations=9))
    joiner = TuneRequest(measuring=replay, strategy=asked, coordination=Coordination(db_wait_s=9))
    joined, kept = joiner.joining(study)
    assert (joined.strategy.sampler, joined.strategy.seed) == ("portfolio", 3)
    assert joined.coordination == Coordination(heartbeat_s=1, grace_s=3, db_wait_s=9)
    assert kept == {"sampler": "portfolio", "coordination": {"heartbeat_s": 1, "grace_s": 3}}
    assert joined.strategy.budget == Budget(evaluations=200)  # --budget not given: the study's
    given = SearchStrategy(budget=Budget(evaluations=9, seconds=4.0), budget_given=True)
    joined, _ = TuneRequest(measuring=replay, strategy=given).joining(study)
    assert joined.strategy.budget == Budget(evaluations=9, seconds=4.0)


def test_a_recording_that_cannot_be_read_opens_no_store(tmp_path: Path) -> None:
    storage = tmp_path / "never.sqlite"
    request = TuneRequest(
        measuring=Measuring(replay=tmp_path / "missing.json"),
        study=StudyChoice(storage=str(storage)),
    )
    with pytest.raises(RecordingError, match="cannot read"):
        plan_tune(request)
    with pytest.raises(WorkbenchError, match="not on this machine: give its path as `replay`"):
        plan_tune(request, shared=True)
    assert not storage.exists()


@pytest.mark.skipif(not PNPOLY.exists(), reason=f"{PNPOLY} is not here")
def test_a_recorded_space_and_a_space_answered_by_a_recording(
    tmp_path: Path, project: Path, recording_without_scale_3: Path
) -> None:
    storage = StudyChoice(storage=str(tmp_path / "s.sqlite"))  # (opened by plan_tune)
    delayed = Measuring(replay=PNPOLY, replay_delay=0.25)
    setup = plan_tune(TuneRequest(measuring=delayed, study=storage))
    assert setup.source is Source.RECORDED_SPACE and len(setup.plans) == 1
    assert setup.plans[0].runner.delay_s == 0.25  # type: ignore[attr-defined]
    assert setup.store.url == f"sqlite:///{tmp_path / 's.sqlite'}"
    space = kernel(str(project / "spaces" / "tiny.yaml"))
    tiny = StudyChoice(name="tiny")
    asked = TuneRequest(space, Measuring(replay=recording_without_scale_3), study=tiny)
    setup = plan_tune(asked, setup.store)
    assert setup.source is Source.REPLAY and [p.study.name for p in setup.plans] == ["tiny"]
    with pytest.raises(WorkbenchError, match="not a recording of this space"):
        plan_tune(TuneRequest(space, Measuring(replay=PNPOLY)), setup.store)


@no_gpu
def test_without_a_gpu_a_kept_recording_answers_else_the_compile_stage(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    setup = plan_tune(TuneRequest(kernel("reduce")), store)  # an H200 recording is kept
    assert setup.source is Source.SHIPPED and setup.no_gpu and "REPLAY" in setup.plans[0].banner  # type: ignore[operator]
    compiled = TuneRequest(
        kernel("reduce", shape=("n=4096",)),
        strategy=SearchStrategy(seed=2),
        compile=CompileStage(sample=1),
    )
    setup = plan_tune(compiled, store)
    assert setup.source is Source.COMPILE and setup.plans == [] and setup.no_gpu
    assert setup.spec is not None
    shapes = tuple(sp.shape for sp in setup.spaces)
    selection = CompileSelection(
        setup.spec, tuple(setup.arches), shapes, sample=1, seed=2, one_variant=True
    )
    (batch,) = list(compile_batches(selection, store=setup.store))
    assert batch.space.shape == {"n": 4096} and len(batch.configs) == 2  # default + 1 sampled
    assert batch.configs[0] == {**batch.space.default_config(), **setup.pinned}  # type: ignore[dict-item]
    # a shared study's worker measures, or replays: it never only compiles
    with pytest.raises(WorkbenchError, match="a worker of a live study needs one"):
        plan_tune(compiled, store, shared=True)
