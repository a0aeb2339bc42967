"""Warm starts from other studies of the store (``tune --enqueue best``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.errors import ConfigError
from workbench.runners.base import Measurement, TrialOutcome
from workbench.search.problem import SpaceProblem
from workbench.search.warm_start import best_elsewhere, fit_config
from workbench.spaces import Space, load_space
from workbench.spaces.model import base_kernel
from workbench.store import Store

TINY_PARAMETERS = [("BLOCK", [32, 64, 128, 256]), ("SCALE", [1, 2, 3]), ("WAVES", [1, 2])]


@pytest.fixture
def scale3(project: Path) -> SpaceProblem:
    """The tiny space with SCALE pinned to 3 (BLOCK * SCALE <= 512 then rules out 256)."""
    return SpaceProblem(Space(load_space(project / "spaces" / "tiny.yaml")), {"SCALE": 3})


def test_base_kernel_drops_the_problem_variant() -> None:
    assert base_kernel("reduce[OP=max,DTYPE=f16]") == "reduce"
    assert base_kernel("convolution_kernel") == "convolution_kernel"


def test_a_config_is_fitted_to_the_problem_or_told_why_not(scale3: SpaceProblem) -> None:
    # a parameter this problem does not tune (pinned) takes this problem's value; extra
    # parameters of the other study are dropped
    assert fit_config(scale3, {"BLOCK": 64, "SCALE": 1, "WAVES": 2, "OTHER": 5}) == (
        {"BLOCK": 64, "SCALE": 3, "WAVES": 2},
        None,
    )
    config, why = fit_config(scale3, {"BLOCK": 256, "SCALE": 1, "WAVES": 1})
    assert config is None and "invalid here" in why and "keeps the test space small" in why
    config, why = fit_config(scale3, {"BLOCK": 48, "WAVES": 1})
    assert config is None and why == "BLOCK=48 outside this space"
    config, why = fit_config(scale3, {"BLOCK": 64})
    assert config is None and why == "it has no WAVES"


def test_best_elsewhere_takes_each_other_study_of_the_kernel(
    tmp_path: Path, scale3: SpaceProblem
) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")

    def study(kernel: str, device: str, shape: str = "n=1000", params=TINY_PARAMETERS):
        return store.study(kernel=kernel, shape_label=shape, device_key=device, parameters=params)

    target = study("tiny[SCALE=3]", "A")
    variant = study("tiny[SCALE=2]", "B")
    same_device = study("tiny", "A", shape="n=10")
    failed = study("tiny", "C")
    other_kernel = study("axpy", "A", params=[("X", [1])])
    run = store.start_run(target, None)
    ok = {(variant, 64, 2, 2): 1.0, (variant, 32, 2, 1): 2.0, (same_device, 256, 1, 1): 0.5}
    for (s, block, scale, waves), value in ok.items():
        config = {"BLOCK": block, "SCALE": scale, "WAVES": waves}
        store.record(s, run, None, config, Measurement(TrialOutcome.OK, value=value))
    crash = Measurement.failure(TrialOutcome.LAUNCH_FAILED, "illegal address")
    store.record(failed, run, None, {"BLOCK": 32, "SCALE": 1, "WAVES": 1}, crash)
    store.record(other_kernel, run, None, {"X": 1}, Measurement(TrialOutcome.OK, value=0.1))

    found = best_elsewhere(store, scale3, target)
    # the same device first (another shape), then by creation; never another kernel
    assert [w.source.name for w in found] == [same_device.name, variant.name, failed.name]
    assert found[0].config is None and "invalid here" in found[0].reason  # 256 * 3 > 512
    assert found[0].value == 0.5
    assert found[1].config == {"BLOCK": 64, "SCALE": 3, "WAVES": 2} and found[1].reason is None
    assert found[1].value == 1.0 and "BLOCK=64,SCALE=3,WAVES=2 (1 ms in" in found[1].describe()
    assert found[2].config is None and found[2].reason == "it has no correct evaluation"
    # one study by name, id or a unique part of its name, of any kernel
    (named,) = best_elsewhere(store, scale3, target, "SCALE=2")  # a unique part of the name
    assert named.config == {"BLOCK": 64, "SCALE": 3, "WAVES": 2}
    (by_id,) = best_elsewhere(store, scale3, target, str(other_kernel.id))
    assert by_id.config is None and by_id.reason == "it has no BLOCK, WAVES"
    # the studies there are, but the one being tuned
    with pytest.raises(
        ConfigError, match=rf"no study matches 'nope'; studies: {variant.id}: "
    ) as e:
        best_elsewhere(store, scale3, target, "nope")
    assert f"{target.id}: " not in str(e.value)
    with pytest.raises(ConfigError, match="several studies match 'tiny'"):
        best_elsewhere(store, scale3, target, "tiny")
    with pytest.raises(ConfigError, match="names the study being tuned"):
        best_elsewhere(store, scale3, target, str(target.id))
