"""Exports (DataFrame, CSV, Parquet, Kernel Tuner cache) and imports of recorded spaces."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from dataset_paths import CACHES, needs_caches
from typer.testing import CliRunner

from workbench.cli.main import app
from workbench.runners.base import TrialOutcome
from workbench.runners.recordings import load_recording
from workbench.store import Store
from workbench.store.exchange import export_kt_cache, export_table, import_recording, to_dataframe

PNPOLY = CACHES / "pnpoly_RTX_3090.json.gz"


@pytest.mark.slow
@needs_caches
def test_import_export_round_trip(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.sqlite")
    study, added = import_recording(store, PNPOLY)
    original = load_recording(PNPOLY)
    assert added == len(original.entries) == 4092
    assert import_recording(store, PNPOLY)[1] == 0  # idempotent
    df = to_dataframe(store, study)
    assert len(df) == 4092
    assert {"block_size_x", "tile_size", "outcome", "value"} <= set(df.columns)
    assert (df["outcome"] == "launch_failed").sum() == 318
    assert df["value"].min() == original.optimum().value
    back = load_recording(export_kt_cache(store, study, tmp_path / "kt.json"))
    assert back.format == "kt-cache" and len(back.entries) == 4092
    assert back.optimum().config == original.optimum().config
    failed = [e for e in back.entries.values() if e.outcome is not TrialOutcome.OK]
    assert len(failed) == 318
    # the day it was measured survives the export (a replay banner of it names it)
    assert original.date is not None and back.date == f"{original.date[:10]} 00:00:00+00:00"
    # the exported file reads back as the same study: importing it adds nothing, gzipped too
    gz = export_kt_cache(store, study, tmp_path / "kt.json.gz")
    assert gz.read_bytes()[:2] == b"\x1f\x8b"
    for exported in (tmp_path / "kt.json", gz):
        again, added = import_recording(store, exported)
        assert (again.id, added) == (study.id, 0)
    assert len(store.studies()) == 1
    csv = pd.read_csv(export_table(store, study, tmp_path / "t.csv"))
    parquet = pd.read_parquet(export_table(store, study, tmp_path / "t.parquet"))
    assert len(csv) == len(parquet) == 4092


def test_a_live_measurement_exports_its_time_and_benchmark_time(tmp_path: Path) -> None:
    import datetime as dt
    import json

    from workbench.runners.base import Measurement

    store = Store(f"sqlite:///{tmp_path}/s.sqlite")
    study = store.study(kernel="k", shape_label="n=1", device_key="GPU", parameters=[("a", [1])])
    run = store.start_run(study, None)
    before = dt.datetime.now(dt.timezone.utc)
    m = Measurement(
        TrialOutcome.OK, value=1.5, samples=(1.5, 1.5), metrics={"timing_seconds": 0.25}
    )
    store.record(study, run, None, {"a": 1}, m)
    (entry,) = json.loads(export_kt_cache(store, study, tmp_path / "kt.json").read_text())[
        "cache"
    ].values()
    assert entry["benchmark_time"] == 250.0 and entry["times"] == [1.5, 1.5]
    stamp = dt.datetime.fromisoformat(entry["timestamp"])
    assert before - dt.timedelta(seconds=1) <= stamp <= dt.datetime.now(dt.timezone.utc)


@needs_caches
def test_store_cli(tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "s.sqlite")
    result = runner.invoke(app, ["store", "import", str(PNPOLY), "--storage", db])
    assert result.exit_code == 0 and "4092 evaluations imported" in result.output
    result = runner.invoke(app, ["store", "list", "--storage", db])
    assert "cn_pnpoly" in result.output and "4092" in result.output
    result = runner.invoke(app, ["store", "list", "--storage", db, "--json"])
    (study,) = json.loads(result.stdout)["studies"]
    assert study["evaluations"] == 4092 and study["failed"] == 318
    assert study["replay_note"] is None  # tuned on its own objective, time
    assert study["best_value"] == load_recording(PNPOLY).optimum().value
    out = tmp_path / "x.csv"
    result = runner.invoke(app, ["store", "export", "pnpoly", "-o", str(out), "--storage", db])
    assert result.exit_code == 0 and out.exists()
    result = runner.invoke(app, ["store", "export", "nothing", "-o", str(out), "--storage", db])
    assert result.exit_code == 2 and "no study matches" in result.output
    # an unreadable recording is refused before any store is opened (none is created)
    empty = tmp_path / "empty.json"
    empty.write_text("")
    fresh = tmp_path / "fresh.sqlite"
    result = runner.invoke(app, ["store", "import", str(empty), "--storage", str(fresh)])
    assert result.exit_code == 2 and "not valid JSON" in result.output and not fresh.exists()
    # a suffix that says another format is refused, not written as CSV or JSON under it
    for args, message in [
        (["-o", str(tmp_path / "x.json")], "written as .csv or .parquet"),
        (["-o", str(tmp_path / "x.csv"), "--format", "kt-cache"], "written as .json or .json.gz"),
    ]:
        result = runner.invoke(app, ["store", "export", "pnpoly", *args, "--storage", db])
        assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "x.json").exists()


ENERGY = CACHES / "kernel_tuner_test_cache_time_energy_RTX4000Ada.json"


@needs_caches
def test_a_kt_cache_export_keeps_the_files_numbers_and_problem_size(tmp_path: Path) -> None:
    """What Kernel Tuner needs of a cache comes back out: problem_size as it compares it
    (80000000, not "80000000"), each entry's other results (energy, GFLOPS/W), its compile
    and benchmark times."""
    import json

    store = Store(f"sqlite:///{tmp_path}/s.sqlite")
    study, _ = import_recording(store, ENERGY)
    original = json.loads(ENERGY.read_text())
    doc = json.loads(export_kt_cache(store, study, tmp_path / "kt.json").read_text())
    assert doc["problem_size"] == original["problem_size"] == 80000000
    for key, before in original["cache"].items():
        after = doc["cache"][key]
        for field in ("time", "energy", "GFLOPS/W", "ps_energy", "temperature"):
            assert after[field] == before[field], (key, field)
        assert abs(after["compile_time"] - before["compile_time"]) < 1e-9
        assert abs(after["benchmark_time"] - before["benchmark_time"]) < 1e-9
    assert import_recording(store, tmp_path / "kt.json")[1] == 0  # the same study, nothing new
    # a workbench shape label: Kernel Tuner's number, and the label beside it for the import
    from workbench.store.exchange import kt_problem_size

    assert kt_problem_size("[4096, 4096]") == {"problem_size": [4096, 4096]}
    assert kt_problem_size("n=16777216") == {
        "problem_size": 16777216,
        "workbench_shape_label": "n=16777216",
    }
    assert kt_problem_size("M=16,N=4096,K=4096")["problem_size"] == [16, 4096, 4096]


@needs_caches
@pytest.mark.kernel_tuner
def test_kernel_tuner_reads_the_export_and_finds_the_same_optimum(tmp_path: Path) -> None:
    import json

    import kernel_tuner

    store = Store(f"sqlite:///{tmp_path}/s.sqlite")
    study, _ = import_recording(store, ENERGY)
    exported = export_kt_cache(store, study, tmp_path / "kt.json")
    original = json.loads(ENERGY.read_text())
    copy = tmp_path / "original.json"  # Kernel Tuner may reopen a cache it reads for appending
    copy.write_bytes(ENERGY.read_bytes())
    best = {}
    for cache in (copy, exported):
        results, _ = kernel_tuner.tune_kernel(
            original["kernel_name"],
            "",
            original["problem_size"],
            [],
            original["tune_params"],
            cache=str(cache),
            simulation_mode=True,
            objective="GFLOPS/W",
            objective_higher_is_better=True,
            strategy="brute_force",
            quiet=True,
        )
        top = max(
            (r for r in results if isinstance(r.get("GFLOPS/W"), float)),
            key=lambda r: r["GFLOPS/W"],
        )
        best[str(cache)] = (top["block_size_x"], top["nvml_gr_clock"], top["GFLOPS/W"])
    assert best[str(copy)] == best[str(exported)]


@needs_caches
def test_a_kt_cache_export_writes_back_each_failure_marker_it_read(tmp_path: Path) -> None:
    """A failed config goes back out under the marker its cache gave it (InvalidConfig and
    ErrorConfig are replayed as launch failures, like RuntimeFailedConfig, but are not one);
    a failure measured here gets the marker closest to its outcome."""
    original = json.loads(ENERGY.read_text())
    markers = ["InvalidConfig", "ErrorConfig", "CompilationFailedConfig", "RuntimeFailedConfig"]
    keys = list(original["cache"])[: len(markers)]
    for key, marker in zip(keys, markers, strict=True):
        original["cache"][key]["time"] = marker
    source = tmp_path / "marked.json"
    source.write_text(json.dumps(original))
    store = Store(f"sqlite:///{tmp_path}/s.sqlite")
    study, _ = import_recording(store, source)
    doc = json.loads(export_kt_cache(store, study, tmp_path / "kt.json").read_text())
    assert [doc["cache"][k]["time"] for k in keys] == markers
    assert all(isinstance(v["time"], float) for k, v in doc["cache"].items() if k not in keys)

    from workbench.runners.base import Measurement
    from workbench.store.exchange import kt_marker

    timed_out = Measurement(outcome=TrialOutcome.TIMEOUT, reason="killed after 10 s")
    assert kt_marker(timed_out) == "RuntimeFailedConfig"
    # a T4 file's reason names its own invalidity, which Kernel Tuner has no marker of
    t4 = Measurement(outcome=TrialOutcome.COMPILE_FAILED, reason="recorded as compile")
    assert kt_marker(t4) == "CompilationFailedConfig"


@needs_caches
def test_an_import_adds_no_empty_run_and_waits_for_no_tune(tmp_path: Path) -> None:
    """Importing a file twice adds no second (empty) import run; importing into a study that
    another process is tuning is refused (it used to make that tune fail on a duplicate)."""
    from conftest import study_held_elsewhere

    from workbench.store.errors import StoreError

    path = tmp_path / "s.sqlite"
    store = Store(f"sqlite:///{path}")
    study, _ = import_recording(store, PNPOLY)
    assert import_recording(store, PNPOLY)[1] == 0
    with store.session() as s:
        from sqlalchemy import func, select

        from workbench.store.models import Run

        assert s.scalar(select(func.count(Run.id))) == 1
    with (
        study_held_elsewhere(f"sqlite:///{path}", study.name),
        pytest.raises(StoreError, match="being tuned by another process"),
    ):
        import_recording(Store(f"sqlite:///{path}"), PNPOLY)
