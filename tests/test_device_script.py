"""The lent-GPU script's plumbing on a CPU: ``scripts/device_check.sh --dry-run`` runs every step
as an echo, writes the summary (JSON and text) and the packed results under $OUT, and every
workbench command line it would run parses with the real CLI."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import device_check  # noqa: E402
import study_recordings  # noqa: E402


def _dry_run(tmp_path: Path, **env: str) -> dict:
    out = tmp_path / "out"
    run_env = {
        **os.environ,
        "OUT": str(out),
        "DEVICE_CHECK_WORK": str(tmp_path / "work"),
        "PYTHON": sys.executable,
        **env,
    }
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "device_check.sh"), "--dry-run"],
        cwd=ROOT,
        env=run_env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    return json.loads((out / "summary.json").read_text())


def test_script_parses() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "device_check.sh")], check=True)


def test_dry_run_writes_the_summary_with_every_step(tmp_path: Path) -> None:
    summary = _dry_run(tmp_path)
    layout = device_check.Layout(tmp_path / "x", tmp_path / "y")
    names = [s.name for s in device_check.build_steps(sys.executable, layout)]
    assert [s["name"] for s in summary["steps"]] == names
    assert {s["status"] for s in summary["steps"]} == {"dry-run"}
    assert summary["dry_run"] is True
    assert all(s["timeout_s"] > 0 and s["estimate_s"] > 0 for s in summary["steps"])
    # the value order of the issue: environment, ceilings, GPU tests, gemm_int8 tunes first
    # the runner's own gpu tests in a step of their own, before the kernels' (a killed pytest
    # writes no junit file, and the runner's tests hold the only fault-handling checks)
    # (issue 42's block, the TMA paths' gpu tests and seeded tune, follows the kernels' tests)
    assert names[:7] == [
        "env",
        "ceilings",
        "pytest_runner",
        "pytest_kernels",
        "pytest_tma",
        "tune_gemm_int8_tma_8192",
        "tune_gemm_int8_8192",
    ]
    out = tmp_path / "out"
    text = (out / "summary.txt").read_text()
    assert all(n in text for n in names)
    assert (out / "device_check.log").is_file()
    with tarfile.open(out / "results.tar.gz") as tar:
        members = tar.getnames()
    assert "logs/env.log" in members and "logs/store_list.log" in members
    # the device tool returns at most 8 files, each named in letters, digits, '.', '_', '-'
    files = [p for p in out.iterdir()]
    assert len(files) <= 8 and all(p.is_file() for p in files)
    assert all(set(p.name) <= set("abcdefghijklmnopqrstuvwxyz0123456789._-") for p in files)


def test_a_failed_step_fails_the_run_and_a_failed_env_step_stops_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check fails loudly: exit 1 when a step failed; nothing runs after a failed env
    step (every later step would fail on a missing import) but the final export."""
    steps = [
        device_check.Step("env", "environment", ["false"], 5, 1),
        device_check.Step("later", "a step", ["true"], 5, 1),
        device_check.Step("export", "the export", ["true"], 5, 1, final=True),
    ]
    monkeypatch.setattr(device_check, "build_steps", lambda py, lay: steps)
    monkeypatch.setenv("OUT", str(tmp_path / "out"))
    monkeypatch.setenv("DEVICE_CHECK_WORK", str(tmp_path / "work"))
    assert device_check.main([]) == 1
    assert [s.status for s in steps] == ["failed", "skipped", "ok"]
    assert "env step failed" in steps[1].note


def test_the_env_step_fails_when_a_required_module_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(device_check, "REQUIRED_MODULES", ("json", "no_such_module_here"))
    assert device_check.main(["--env-json", str(tmp_path / "env.json")]) == 3
    imports = json.loads((tmp_path / "env.json").read_text())["imports"]
    assert "cuda.bindings" in imports and "cuda.pathfinder" in imports


def test_deadline_skips_steps_but_not_the_final_export(tmp_path: Path) -> None:
    summary = _dry_run(tmp_path, DEVICE_CHECK_SOFT_S="-1", DEVICE_CHECK_HARD_S="0")
    status = {s["name"]: s["status"] for s in summary["steps"]}
    assert status["env"] == "skipped" and status["compare_gemm_int8"] == "skipped"
    assert status["recordings_all"] == "dry-run"


def test_packing_keeps_files_under_the_limit(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(device_check, "FILE_LIMIT", 4096)
    lay = device_check.Layout(tmp_path / "out", tmp_path / "work")
    (lay.ncu / "small.ncu-rep").write_bytes(b"x" * 100)
    (lay.ncu / "big.ncu-rep").write_bytes(os.urandom(20000))
    (lay.results / "env.json").write_text("{}")
    notes = device_check.pack(lay)
    assert (lay.out / "ncu.tar.gz").stat().st_size <= 4096
    with tarfile.open(lay.out / "ncu.tar.gz") as tar:
        assert tar.getnames() == ["ncu/small.ncu-rep"]
    assert any("big.ncu-rep" in n for n in notes)


def test_recording_names_and_shape_labels() -> None:
    shape = study_recordings.parse_shape_label("M=16,N=4096,K=4096")
    assert shape == {"M": 16, "N": 4096, "K": 4096}
    assert study_recordings.parse_shape_label("n=1024;seed=0") == {"n": 1024}
    assert study_recordings.parse_shape_label("default") == {}
    name = study_recordings.recording_name("gemm_int8", "NVIDIA H200", shape)
    assert name == "gemm_int8-nvidia-h200-M16_N4096_K4096.json.gz"


def test_export_writes_a_recording_that_replays(tmp_path: Path) -> None:
    """A measured study becomes tuning_spaces-style recordings/<kernel>/ that the no-GPU path
    of tune finds for that shape."""
    from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
    from workbench.runners.recordings import load_recording
    from workbench.search.session import recording_for_shape
    from workbench.store.store import Store

    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    study = store.study(
        kernel="reduce",
        shape_label="n=1024",
        device_key="NVIDIA H200",
        parameters=[("BLOCK", (128, 256))],
    )
    env_id = store.environment(DeviceInfo(name="NVIDIA H200", cc=90, driver="580.159.04"))
    run_id = store.start_run(study, env_id)
    m = Measurement(TrialOutcome.OK, value=0.5, samples=(0.5, 0.51, 0.49))
    store.record(study, run_id, env_id, {"BLOCK": 128}, m)
    store.close()
    paths = study_recordings.export(str(tmp_path / "s.sqlite"), tmp_path / "spaces")
    assert [p.relative_to(tmp_path) for p in paths] == [
        Path("spaces/recordings/reduce/reduce-nvidia-h200-n1024.json.gz")
    ]
    rec = load_recording(paths[0])
    assert rec.device.name == "NVIDIA H200" and rec.device.driver == "580.159.04"
    assert recording_for_shape([rec], {"n": 1024}) is rec
    doc = json.loads(gzip.decompress(paths[0].read_bytes()))
    assert doc["entries"][0]["samples"] == [0.5, 0.51, 0.49]


@pytest.mark.slow
def test_every_workbench_command_line_parses(tmp_path: Path) -> None:
    """Options, types and choices of every ``workbench ...`` step, against the real CLI."""
    layout = device_check.Layout(tmp_path / "out", tmp_path / "work")
    assert device_check.check_cli(device_check.build_steps(sys.executable, layout)) == []
