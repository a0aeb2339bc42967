"""A tune as a request: its defaults, a shared study's spec written and read back, what a joiner
keeps, and the five places a plan's numbers come from (recorded data, no GPU here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.fleet.connection import Coordination
from workbench.gpu import probe_gpu
from workbench.runners.recordings import RecordingError
from workbench.search.configs import CompileSelection, compile_batches
from workbench.search.loop import Budget
from workbench.search.planning import Source, plan_tune
from workbench.search.request import (
    DEFAULT_BUDGET,
    DEFAULT_GRACE_S,
    DEFAULT_HEARTBEAT_S,
    NO_GPU_SAMPLE,
    TuneRequest,
)
from workbench.store import Store

CACHES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "tuning-caches"
PNPOLY = CACHES / "pnpoly_RTX_3090.json.gz"
no_gpu = pytest.mark.skipif(probe_gpu().available, reason="a GPU here measures instead")


def test_the_budget_defaults_to_100_evaluations_unless_a_limit_is_given() -> None:
    def asked(**budget: object) -> TuneRequest:
        limits = {"evaluations": None, "seconds": None, "patience": None} | budget
        return TuneRequest.from_options(**limits, kernel="reduce")  # type: ignore[arg-type]

    assert asked().budget == Budget(evaluations=DEFAULT_BUDGET) and not asked().budget_given
    assert asked(seconds=30.0).budget == Budget(seconds=30.0)
    assert asked(patience=5).budget == Budget(patience=5)
    assert asked(evaluations=7).budget_given
    with pytest.raises(WorkbenchError, match="`evaluations` 0: the budget must be at least 1"):
        asked(evaluations=0)
    # one home of the shared-study timing: the study's defaults are the coordination's
    assert (Coordination().heartbeat_s, Coordination().grace_s) == (10, 60)
    assert (DEFAULT_HEARTBEAT_S, DEFAULT_GRACE_S, NO_GPU_SAMPLE) == (10, 60, 8)


@pytest.mark.parametrize(
    "fields,message",
    [
        ({}, "name a kernel"),
        ({"kernel": "reduce", "sampler": "magic"}, "unknown sampler"),
        ({"kernel": "reduce", "enqueue": ("none", "default")}, "`enqueue` none"),
        ({"kernel": "reduce", "all_configs": True, "sample": 2}, "cannot go with `sample`"),
    ],
)
def test_what_no_path_can_take_is_refused(fields: dict, message: str) -> None:
    with pytest.raises(WorkbenchError, match=message):
        TuneRequest(**fields).check()


def test_a_shared_study_refuses_fresh_and_shape_sets() -> None:
    TuneRequest(kernel="reduce", fresh=True, shapes="odd").check()  # one process: fine
    with pytest.raises(WorkbenchError, match="`fresh` makes a study of this process's own"):
        TuneRequest(kernel="reduce", fresh=True).check(shared=True)
    with pytest.raises(WorkbenchError, match="a shared study tunes one shape"):
        TuneRequest(kernel="reduce", shapes="odd").check(shared=True)


def test_a_shared_studys_spec_is_written_as_before_and_read_back(tmp_path: Path) -> None:
    request = TuneRequest(
        kernel="gemm_int8",
        replay=Path("rec.json"),
        spaces=(Path("spaces"),),
        shape=("M=64,N=64",),
        arch="sm_90a",
        device="h200",
        pin=("BM=64",),
        budget=Budget(evaluations=50, seconds=20.0, patience=9),
        budget_given=True,
        sampler="tpe",
        seed=4,
        drift_every=5,
        heartbeat_s=2,
        grace_s=9,
        replay_delay=0.5,  # this process's: not the study's
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
    assert back.to_spec() == spec and back.budget == request.budget
    # a spec from before sampler, seed or coordination were kept: the defaults
    old = TuneRequest.from_spec({"replay": "r.json", "budget": {"evaluations": 3}})
    assert (old.sampler, old.seed, old.heartbeat_s, old.grace_s) == ("portfolio", 0, 10, 60)
    # a study with no evaluation budget: each worker brings its own --time
    with pytest.raises(WorkbenchError, match="a budget needs"):
        TuneRequest.from_spec({"replay": "r.json", "budget": {"evaluations": None}})
    assert TuneRequest.from_spec({"replay": "r.json"}, seconds=5.0).budget == Budget(seconds=5.0)


def test_a_joiner_keeps_the_studys_search_and_its_budget_unless_given() -> None:
    study = TuneRequest(
        replay=PNPOLY, budget=Budget(evaluations=200), seed=3, heartbeat_s=1, grace_s=3
    ).to_spec()
    joiner = TuneRequest(replay=PNPOLY, sampler="random", seed=3, budget=Budget(evaluations=9))
    joined, kept = joiner.joining(study)
    assert (joined.sampler, joined.seed, joined.heartbeat_s, joined.grace_s) == (
        "portfolio",
        3,
        1,
        3,
    )
    assert kept == {"sampler": "portfolio", "coordination": {"heartbeat_s": 1, "grace_s": 3}}
    assert joined.budget == Budget(evaluations=200)  # --budget not given: the study's
    given = TuneRequest(replay=PNPOLY, budget=Budget(evaluations=9, seconds=4.0), budget_given=True)
    assert given.joining(study)[0].budget == Budget(evaluations=9, seconds=4.0)


def test_a_recording_that_cannot_be_read_opens_no_store(tmp_path: Path) -> None:
    def never() -> Store:
        raise AssertionError("the store was opened")

    request = TuneRequest(replay=tmp_path / "missing.json")
    with pytest.raises(RecordingError, match="cannot read"):
        plan_tune(request, never)
    with pytest.raises(WorkbenchError, match="not on this machine: give its path as `replay`"):
        plan_tune(request, never, shared=True)


@pytest.mark.skipif(not PNPOLY.exists(), reason=f"{PNPOLY} is not here")
def test_a_recorded_space_and_a_space_answered_by_a_recording(
    tmp_path: Path, project: Path, recording_without_scale_3: Path
) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    setup = plan_tune(TuneRequest(replay=PNPOLY, replay_delay=0.25), lambda: store)
    assert setup.source is Source.RECORDED_SPACE and len(setup.plans) == 1
    assert setup.plans[0].runner.delay_s == 0.25  # type: ignore[attr-defined]
    space = project / "spaces" / "tiny.yaml"
    asked = TuneRequest(kernel=str(space), replay=recording_without_scale_3, study="tiny")
    setup = plan_tune(asked, lambda: store)
    assert setup.source is Source.REPLAY and [p.study.name for p in setup.plans] == ["tiny"]
    with pytest.raises(WorkbenchError, match="not a recording of this space"):
        plan_tune(TuneRequest(kernel=str(space), replay=PNPOLY), lambda: store)


@no_gpu
def test_without_a_gpu_a_kept_recording_answers_else_the_compile_stage(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    setup = plan_tune(TuneRequest(kernel="reduce"), lambda: store)  # an H200 recording is kept
    assert setup.source is Source.SHIPPED and setup.no_gpu and "REPLAY" in setup.plans[0].banner  # type: ignore[operator]
    compiled = TuneRequest(kernel="reduce", shape=("n=4096",), sample=1, seed=2)
    setup = plan_tune(compiled, lambda: store)
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
        plan_tune(compiled, lambda: store, shared=True)
