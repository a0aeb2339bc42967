"""``workbench profile --import`` into a store, the metrics read back, and the CLI's checks."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import REPORTS, needs_reports

from workbench.errors import ConfigError
from workbench.profile.report import load_report
from workbench.profile.storage import ProfileRecord, load_profiles, save_profile
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("private_dirs")


@needs_reports
def test_import_stores_every_launch_and_reads_back(private_dirs: Path) -> None:
    path = REPORTS / "flyinglandlord_profile.ncu-rep"
    code, out, err = invoke("profile", "--import", str(path))
    assert code == 0, err
    assert "flash_fwd_kernel" in out and "incomplete profile" in out
    store = Store(f"sqlite:///{private_dirs}")
    rows = load_profiles(store)
    assert len(rows) == 5 and [r.report_index for r in rows] == [0, 1, 2, 3, 4]
    report = load_report(path)
    for row, kernel in zip(rows, report.kernels, strict=True):
        assert row.source == "import" and row.metric_set == "full"
        assert row.metrics == dict(kernel.metrics)  # every number, NaN as None
        assert row.mangled_name == kernel.mangled_name and row.chip == "GH100"
        assert row.source_sha256 == report.sha256 and Path(row.source_file) == path.resolve()
        assert row.device == "NVIDIA H800" and row.cc == 90
    flash = rows[4]
    assert flash.metrics["gpu__time_duration.sum"] is None
    assert "gpu__time_duration.sum" in flash.missing
    assert any("incomplete profile" in n for n in flash.notes)
    assert load_profiles(store, kernel="flash_fwd_kernel")[0].id == flash.id
    # the same report again: every launch is already there, none is stored twice
    code, out, err = invoke("profile", "--import", str(path))
    assert code == 0 and err.count("not stored again") == 5, err
    assert [r.id for r in load_profiles(store)] == [r.id for r in rows]
    store.close()


@needs_reports
def test_import_json_and_selection_by_name() -> None:
    path = REPORTS / "panjd123_report.ncu-rep"
    code, out, err = invoke("profile", "--import", str(path), "--kernel-name", "B2bGemm", "--json")
    assert code == 0, err
    (doc,) = json.loads(out)["profiles"]
    assert doc["function_name"] == "Kernel" and doc["chip"] == "GA100"
    assert doc["divergence"]["threads_per_inst"] == 32.0
    assert doc["occupancy"]["registers_per_thread"] == 254
    assert doc["bytes_per_s"]["dram"] > 0
    # the report's own peaks; L2 derived from its sector peaks (it has no lts__t_bytes peak)
    sources = {c["name"]: c["source"] for c in doc["ceilings"]}
    assert set(sources.values()) == {"ncu", "ncu report"} and sources["l2"] == "ncu report"
    assert "roofline" in doc["missing_by_set"] and doc["id"] == 1


@needs_reports
def test_import_for_a_workbench_kernel_and_config(project: Path) -> None:
    space = str(project / "spaces" / "tiny.yaml")
    path = str(REPORTS / "thedavidchu_profile.ncu-rep")
    code, out, err = invoke(
        "profile", space, "--import", path, "--config", "BLOCK=64", "--arch", "sm_80", "--json"
    )
    assert code == 0, err
    (doc,) = json.loads(out)["profiles"]
    assert (doc["kernel"], doc["config"], doc["shape"]) == (
        "tiny",
        "BLOCK=64,SCALE=2,WAVES=1",
        "n=1000",
    )
    # the sm_80 preset is an A100 (GA100); the report is an RTX 3070 (GA104): the preset's
    # datasheet roofs are left out, with a note, and the report's own peaks remain
    assert {c["source"] for c in doc["ceilings"]} == {"ncu", "ncu report"}
    assert any("A100-SXM4-80GB (GA100) left out" in n for n in doc["notes"])


@pytest.mark.parametrize("content", [b"", b"garbage" * 100, b"NVR\x00\x02\x00\x00\x00\x08\x07"])
def test_a_damaged_report_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(content)
    code, _, err = invoke("profile", "--import", str(bad))
    assert code == 2
    assert "bad.ncu-rep" in err and "Traceback" not in err


def test_a_directory_is_not_a_report(tmp_path: Path) -> None:
    code, _, err = invoke("profile", "--import", str(tmp_path))
    assert code == 2 and "a directory, not a report file" in err


def test_profile_needs_a_kernel_or_a_report() -> None:
    code, _, err = invoke("profile")
    assert code == 2 and "--import" in err


def test_a_metric_typo_fails_before_any_gpu(project: Path) -> None:
    space = str(project / "spaces" / "tiny.yaml")
    code, _, err = invoke("profile", space, "--dry-run", "--metrics", "dram__bytez.sum")
    assert code == 2
    assert "dram__bytez.sum" in err and "did you mean dram__bytes.sum" in err


def test_dry_run_prints_the_command(project: Path) -> None:
    space = str(project / "spaces" / "tiny.yaml")
    code, out, err = invoke(
        "profile", space, "-c", "BLOCK=32,SCALE=3", "--set", "divergence", "--dry-run", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["chip"] == "GH100" and doc["symbol"] == "axpy"
    command = doc["command"]
    assert (
        command[command.index("--nvtx-include") + 1] == "workbench@tiny:BLOCK=32,SCALE=3,WAVES=1/"
    )
    assert "smsp__thread_inst_executed_per_inst_executed.ratio" in doc["metrics"]


def test_config_best_comes_from_the_store(project: Path, private_dirs: Path) -> None:
    space_path = project / "spaces" / "tiny.yaml"
    store = Store(f"sqlite:///{private_dirs}")
    study = store.study(
        kernel="tiny",
        shape_label="n=1000",
        device_key="NVIDIA H200",
        parameters=[("BLOCK", (32, 64, 128, 256)), ("SCALE", (1, 2, 3)), ("WAVES", (1, 2))],
    )
    env = store.environment(DeviceInfo("NVIDIA H200", 90))
    run = store.start_run(study, env)
    for block, ms in ((32, 0.9), (64, 0.3), (128, 0.5)):
        cfg = {"BLOCK": block, "SCALE": 2, "WAVES": 1}
        store.record(study, run, env, cfg, Measurement(TrialOutcome.OK, ms, (ms,)))
    store.record(
        study,
        run,
        env,
        {"BLOCK": 256, "SCALE": 1, "WAVES": 1},
        Measurement.failure(TrialOutcome.WRONG, "wrong"),
    )
    store.close()
    code, out, err = invoke("profile", str(space_path), "--config", "best", "--dry-run", "--json")
    assert code == 0, err
    command = json.loads(out)["command"]
    assert (
        command[command.index("--nvtx-include") + 1] == "workbench@tiny:BLOCK=64,SCALE=2,WAVES=1/"
    )
    code, _, err = invoke(
        "profile", str(space_path), "--config", "best", "--shape", "n=7", "--dry-run"
    )
    assert code == 2 and "has no study of tiny at n=7" in err
    # run takes it too (then needs the GPU this machine may not have: the choice is said first)
    code, out, err = invoke("run", str(space_path), "--config", "best")
    assert "the best config of study 'tiny | n=1000 | NVIDIA H200': BLOCK=64,SCALE=2" in " ".join(
        err.split()
    )
    code, _, err = invoke("run", str(space_path), "-c", "best", "--shape", "n=7")
    assert code == 2 and "has no study of tiny at n=7" in err


def test_best_config_takes_a_problem_variants_study_not_a_compile_only_one(
    private_dirs: Path,
) -> None:
    """`compare/profile reduce --config best` after `tune reduce` (study `reduce[OP=sum]`)."""
    from workbench.profile.storage import best_config

    store = Store(f"sqlite:///{private_dirs}")
    params = [("OP", ("sum",)), ("BLOCK", (64, 128))]

    def study(device: str):
        return store.study(
            kernel="reduce[OP=sum]", shape_label="n=8", device_key=device, parameters=params
        )

    compiled = study("compile only (sm_90)")
    measured = study("NVIDIA H200")
    env = store.environment(DeviceInfo("NVIDIA H200", 90))
    run = store.start_run(measured, env)
    for block, ms in ((64, 1.0), (128, 0.5)):
        cfg = {"OP": "sum", "BLOCK": block}
        store.record(measured, run, env, cfg, Measurement(TrialOutcome.OK, ms, (ms,)))
    best, chosen = best_config(store, "reduce", "n=8")
    assert best == {"OP": "sum", "BLOCK": 128} and chosen.id == measured.id
    assert best_config(store, "reduce", "n=8", study=str(measured.id))[1].id == measured.id
    with pytest.raises(ConfigError, match="has no correct evaluation"):
        best_config(store, "reduce", "n=8", study=str(compiled.id))
    with pytest.raises(ConfigError, match="no study of reduce at n=9"):
        best_config(store, "reduce", "n=9")
    store.close()


def test_an_older_store_gains_the_profiles_table(private_dirs: Path) -> None:
    Store(f"sqlite:///{private_dirs}").close()
    with sqlite3.connect(private_dirs) as conn:
        conn.execute("DROP TABLE profiles")
    store = Store(f"sqlite:///{private_dirs}")
    record = ProfileRecord(
        kernel="k", source="import", metric_set="memory", metrics={"a": 1.0, "b": float("nan")}
    )
    pid = save_profile(store, record)
    (back,) = load_profiles(store, profile_id=pid)
    assert back.metrics == {"a": 1.0, "b": None} and back.created_at is not None
    store.close()


@needs_reports
def test_measured_ceilings_of_another_gpu_are_left_out(tmp_path: Path) -> None:
    ceilings = tmp_path / "h200.json"
    ceilings.write_text(json.dumps({"gpu": "NVIDIA H200", "copy": {"gbs_read_plus_write": 4300.0}}))
    a100 = str(REPORTS / "thedavidchu_profile.ncu-rep")  # an RTX 3070 (GA104)
    code, out, err = invoke("profile", "--import", a100, "--ceilings", str(ceilings), "--json")
    assert code == 0, err
    (doc,) = json.loads(out)["profiles"]
    assert [c["source"] for c in doc["ceilings"] if c["name"] == "dram"] == ["ncu"]
    assert any("NVIDIA H200 (GH100) left out" in n for n in doc["notes"])
    h800 = str(REPORTS / "flyinglandlord_profile.ncu-rep")  # same chip as the H200: kept
    code, out, err = invoke(
        "profile",
        "--import",
        h800,
        "--kernel-name",
        "distribution",
        "--ceilings",
        str(ceilings),
        "--json",
    )
    assert code == 0, err
    dram = [c for c in json.loads(out)["profiles"][0]["ceilings"] if c["name"] == "dram"]
    assert [c["source"] for c in dram] == ["measured"] and dram[0]["value"] == 4.3e12


@needs_reports
def test_storage_given_as_a_plain_path(tmp_path: Path) -> None:
    """``--storage FILE`` is a SQLite file, as for every other command."""
    target = tmp_path / "elsewhere.sqlite"
    path = REPORTS / "thedavidchu_profile.ncu-rep"
    code, out, err = invoke("profile", "--import", str(path), "--storage", str(target), "--json")
    assert code == 0, err
    assert json.loads(out)["profiles"][0]["device"] == "NVIDIA GeForce RTX 3070"
    store = Store(f"sqlite:///{target}")
    assert [r.function_name for r in load_profiles(store)] == ["kernel"]
    store.close()
