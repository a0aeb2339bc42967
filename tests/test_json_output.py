"""Every JSON document the CLI writes is JSON proper: a number past a float (an EDP that
overflowed in a store written before it was refused) is written as null, and the document says
which fields and why, instead of Python's ``Infinity``/``NaN``, which strict parsers refuse."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, needs_caches

from workbench.jsontext import NON_FINITE_KEY, strict_dumps
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.store import Store

ENERGY_CACHE = CACHES / "kernel_tuner_test_cache_time_energy_RTX4000Ada.json"


def strict_json(text: str) -> dict:
    """``text`` parsed as JSON proper: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_written_as_null_and_listed() -> None:
    doc = {"best": math.inf, "rows": [{"ratio": 1.5}, {"ratio": math.nan}], "low": -math.inf}
    out = strict_json(strict_dumps(doc, indent=1))
    assert out["best"] is None and out["rows"] == [{"ratio": 1.5}, {"ratio": None}]
    assert out[NON_FINITE_KEY] == {"best": "inf", "rows[1].ratio": "nan", "low": "-inf"}
    assert strict_json(strict_dumps({"a": 1.0})) == {"a": 1.0}  # nothing to say: no key
    assert strict_json(strict_dumps([math.nan])) == [None]  # (a list has nowhere to say it)
    assert doc["best"] == math.inf  # the caller's document is left as it was


def test_store_list_json_of_an_infinite_best_is_null_with_a_note(tmp_path: Path) -> None:
    """A study whose only correct value is infinite (an EDP that overflowed, stored before
    such a value failed its config): ``store list --json`` stays JSON."""
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = store.study(
        kernel="k", shape_label="n=8", device_key="H200", parameters=[("A", [1])],
        objective="edp", unit="J*s",
    )  # fmt: skip
    env = store.environment(DeviceInfo("H200"))
    run = store.start_run(study, env, sampler="tpe", seed=0)
    store.record(study, run, env, {"A": 1}, Measurement(TrialOutcome.OK, value=math.inf))
    store.close()
    code, out, err = invoke("store", "list", "--json", "--storage", str(tmp_path / "s.sqlite"))
    assert code == 0, err
    doc = strict_json(out)
    assert doc["studies"][0]["best_value"] is None
    assert doc[NON_FINITE_KEY] == {"studies[0].best_value": "inf"}


@needs_caches
def test_tune_json_of_an_infinite_best_is_null_with_a_note(tmp_path: Path) -> None:
    """A study's stored values made infinite (as an older workbench stored an EDP that
    overflowed); tuning it again serves them from the store and ``--json`` stays JSON."""
    db = tmp_path / "s.sqlite"
    args = ["tune", "--replay", str(ENERGY_CACHE), "--objective", "edp", "--budget", "15"]
    code, out, err = invoke(*args, "--storage", str(db))
    assert code == 0, out + err
    with sqlite3.connect(db) as con:
        con.execute("UPDATE evaluations SET value = ? WHERE value IS NOT NULL", (math.inf,))
    code, out, err = invoke(*args, "--json", "--storage", str(db))
    assert code == 0, out + err
    doc = strict_json(out)
    assert doc["best_value"] is None and doc[NON_FINITE_KEY]["best_value"] == "inf"


@pytest.mark.parametrize("command", [["regress", "runs", "--json"], ["store", "list", "--json"]])
def test_json_errors_are_json(tmp_path: Path, command: list[str]) -> None:
    code, out, _ = invoke(*command, "--storage", str(tmp_path / "missing.sqlite"))
    assert code == 2 and strict_json(out)["exit_status"] == 2
