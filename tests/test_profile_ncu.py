"""The ncu command and everything after the report exists, on the CPU: a stand-in ``ncu``
writes a real public report where the real one would, or fails the ways the real one does."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from dataset_paths import REPORTS, needs_reports

from workbench.compiler import CompileCache, compile_job, make_job
from workbench.devices import device_for
from workbench.gpu import GpuProbe
from workbench.profile import ncu as ncu_mod
from workbench.profile import profiler
from workbench.profile.errors import NcuProblem, NcuUnavailable
from workbench.profile.metrics import MetricSet
from workbench.profile.ncu import (
    LaunchSelection,
    classify,
    find_ncu,
    kernel_filter,
    ncu_command,
    nvtx_filter,
    nvtx_range,
    run_ncu,
)
from workbench.profile.summary import summarize
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.spaces import Space, config_label, load_kernel, load_space
from workbench.toolchain import Arch

S8 = REPORTS / "panjd123_report-s8.ncu-rep"

FAKE_NCU = """\
#!{python}
import json, os, shutil, sys
args = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
mode = os.environ.get("FAKE_NCU_MODE", "copy")
if mode == "perm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
          "Performance Counters on the target device 0.")
    print("==WARNING== No kernels were profiled.")
    sys.exit(1)
if mode == "vgpu":
    print("==ERROR== Profiling is not supported on this device (vGPU).")
    sys.exit(1)
if mode == "nvtx-misses" and "--nvtx" in args:
    print("==PROF== Disconnected from process 4242")
    print("==WARNING== No kernels were profiled.")
    sys.exit(0)
out = args[args.index("--export") + 1] + ".ncu-rep"
shutil.copyfile(os.environ["FAKE_NCU_REPORT"], out)
outcome = os.environ.get("FAKE_TARGET_OUTCOME", "ok")
print("WORKBENCH_PROFILE_TARGET " + json.dumps({{"outcome": outcome, "reason": "max error 3"}}))
print("==PROF== Report: " + out)
"""


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin" / "ncu"
    path.parent.mkdir()
    path.write_text(FAKE_NCU.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    monkeypatch.setenv("FAKE_NCU_REPORT", str(S8))
    return path


def _calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "ncu.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def tiny(project: Path) -> Space:
    spec = load_space(project / "spaces" / "tiny.yaml")
    return Space(spec, shape={"n": 1000}, arch=Arch(9, 0), device=device_for(Arch(9, 0)))


def test_find_ncu(tmp_path: Path, fake_ncu: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert find_ncu(fake_ncu) == fake_ncu
    monkeypatch.setenv(ncu_mod.NCU_ENV, str(fake_ncu))
    assert find_ncu() == fake_ncu
    monkeypatch.setenv(ncu_mod.NCU_ENV, str(tmp_path / "nope"))
    with pytest.raises(NcuUnavailable, match="not an executable ncu") as info:
        find_ncu()
    assert info.value.problem is NcuProblem.NOT_FOUND
    monkeypatch.delenv(ncu_mod.NCU_ENV)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(ncu_mod, "SEARCH_GLOBS", ())
    with pytest.raises(NcuUnavailable, match=r"ncu not found: not on \$PATH"):
        find_ncu()


def test_the_command_selects_one_launch_of_one_config() -> None:
    symbol = "_Z10reduce_allIfLi256EEvPKT_Pf"
    command = ncu_command(
        "/opt/ncu",
        metrics=["dram__bytes.sum", "gpu__time_duration.sum"],
        selection=LaunchSelection(symbol, nvtx_filter("reduce", "BLOCK=256,ITEMS=8")),
        output=Path("out/r"),
        target=["python", "-m", "workbench.profile.target", "reduce"],
    )
    assert command[0] == "/opt/ncu"

    def value(flag: str) -> str:
        return command[command.index(flag) + 1]

    assert value("--target-processes") == "all"
    assert value("--clock-control") == "none"
    assert value("--kernel-name-base") == "mangled"
    assert value("--launch-count") == "1" and value("--launch-skip") == "0"
    assert value("--metrics") == "dram__bytes.sum,gpu__time_duration.sum"
    assert value("--nvtx-include") == "workbench@reduce:BLOCK=256,ITEMS=8/"
    assert "--nvtx" in command and value("--export") == "out/r"
    assert command[-4:] == ["python", "-m", "workbench.profile.target", "reduce"]
    # the kernel regex matches the symbol and nothing longer or shorter
    pattern = re.compile(value("--kernel-name").removeprefix("regex:"))
    assert pattern.search(symbol) and not pattern.search(symbol + "x")
    assert not pattern.search(symbol[1:])
    assert kernel_filter("_Z3fooi") == "regex:^_Z3fooi$"
    without = ncu_command(
        "ncu", metrics=[], selection=LaunchSelection(symbol, None), output=Path("o"), target=["t"]
    )
    assert "--nvtx" not in without and "--metrics" not in without


def test_plan_matches_what_the_cuda_runner_launches(tiny: Space, tmp_path: Path) -> None:
    """The NVTX range and the symbol in the command are the runner's own (its ``KernelJob``)."""
    from workbench.runners.kernel_jobs import kernel_job

    config = {"BLOCK": 64, "SCALE": 3, "WAVES": 2}
    request = profiler.ProfileRequest(
        space=tiny,
        config=config,
        metric_set=MetricSet.MEMORY,
        cache_dir=tmp_path / "cache",
        report_dir=tmp_path / "reports",
        device_preset="h200",
        spaces=(tmp_path / "mine",),
        seed=7,
    )
    plan = profiler.plan(request)
    job = kernel_job(
        tiny, config, compile_job(make_job(tiny, config), CompileCache(tmp_path / "cache"))
    )
    assert plan.symbol == job.entry == "axpy"
    assert plan.selection.nvtx == f"workbench@{job.label}/"
    assert job.label == nvtx_range("tiny", config_label(config))
    assert plan.chip == "GH100"  # the h200 preset (no GPU here)
    assert plan.report.parent == tmp_path / "reports" and plan.report.suffix == ".ncu-rep"
    target = list(plan.target)
    # the profiled process loads this very file (not a space found by its name, or none)
    assert target[1:4] == ["-m", "workbench.profile.target", str(tiny.spec.path)]
    assert load_kernel(target[3], []) == tiny.spec
    assert target[target.index("--config") + 1] == "BLOCK=64,SCALE=3,WAVES=2"
    assert "n=1000" in target and "sm_90" in target and "h200" in target and "7" in target
    assert str(tmp_path / "mine") in target and str(tmp_path / "cache") in target
    command = plan.command("ncu")
    assert command[command.index("--metrics") + 1].split(",") == list(plan.resolved.collect)
    assert "--nvtx" not in plan.command("ncu", nvtx=False)


@pytest.mark.parametrize(
    ("output", "problem"),
    [
        (
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
            "GPU Performance Counters on the target device 0.",
            NcuProblem.NO_PERMISSION,
        ),
        ("==ERROR== Profiling is not supported on this device", NcuProblem.UNSUPPORTED),
        ("==WARNING== No kernels were profiled.", NcuProblem.NO_KERNELS),
        ("==ERROR== The application returned an error code (2).", NcuProblem.FAILED),
        ("", NcuProblem.FAILED),
    ],
)
def test_classify_failures(output: str, problem: NcuProblem) -> None:
    found = classify(output, report_exists=False)
    assert found is not None and found[0] is problem
    assert classify(output, report_exists=True) is None  # a report is a report


def test_run_ncu_errors_carry_the_command(tmp_path: Path, fake_ncu: Path) -> None:
    os.environ["FAKE_NCU_MODE"] = "perm"
    try:
        with pytest.raises(NcuUnavailable, match="permission") as info:
            run_ncu([str(fake_ncu), "--export", str(tmp_path / "r")], tmp_path / "r.ncu-rep")
    finally:
        del os.environ["FAKE_NCU_MODE"]
    assert info.value.problem is NcuProblem.NO_PERMISSION and str(fake_ncu) in str(info.value)


class _Gpu:
    """Pretend an A100 is here (for the steps that only ask whether one is)."""

    probe = GpuProbe(True, "ok", 1, "NVIDIA A100 80GB PCIe", 80)


def _pretend_gpu(monkeypatch: pytest.MonkeyPatch, symbol: str) -> None:
    monkeypatch.setattr(profiler, "probe_gpu", lambda: _Gpu.probe)
    monkeypatch.setattr(profiler, "kernel_symbol", lambda space, config, cache: symbol)


@needs_reports
@pytest.mark.parametrize("mode", ["copy", "nvtx-misses", "wrong"])
def test_profile_after_the_report_exists(
    tiny: Space, tmp_path: Path, fake_ncu: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    from workbench.profile.report import load_report

    reference = load_report(S8).kernels[1]  # ReferenceGemm_kernel: its symbol is "ours"
    _pretend_gpu(monkeypatch, reference.mangled_name)
    monkeypatch.setenv("FAKE_NCU_MODE", "nvtx-misses" if mode == "nvtx-misses" else "copy")
    if mode == "wrong":
        monkeypatch.setenv("FAKE_TARGET_OUTCOME", "wrong")
    request = profiler.ProfileRequest(
        space=tiny,
        config={"BLOCK": 128, "SCALE": 2, "WAVES": 1},
        metric_set=MetricSet.ROOFLINE,
        ncu=fake_ncu,
        report_dir=tmp_path / "reports",
        cache_dir=tmp_path / "cache",
    )
    outcome = profiler.profile_config(request)
    calls = _calls(tmp_path)
    assert (
        calls[0][calls[0].index("--nvtx-include") + 1]
        == "workbench@tiny:BLOCK=128,SCALE=2,WAVES=1/"
    )
    if mode == "nvtx-misses":  # retried once, selected by symbol alone, and said so
        assert len(calls) == 2 and "--nvtx" not in calls[1]
        assert any("matched nothing" in n for n in outcome.notes)
    else:
        assert len(calls) == 1
    wrong = [n for n in outcome.notes if "profiled process reports wrong: max error 3" in n]
    assert len(wrong) == (mode == "wrong")
    r = outcome.record
    assert outcome.fallback is None and r.source == "ncu" and r.chip == "GA100"
    assert (r.kernel, r.config_key, r.shape_label) == (
        "tiny",
        "BLOCK=128,SCALE=2,WAVES=1",
        "n=1000",
    )
    assert r.mangled_name == reference.mangled_name and r.report_index == 1
    assert r.metrics["gpu__time_duration.sum"] == reference.value("gpu__time_duration.sum")
    assert Path(r.source_file).is_file() and r.command and "ncu" in r.command
    # the A100 report lacks some names of the roofline set: listed, not invented
    assert "lts__t_bytes.sum" in r.missing
    assert outcome.achieved.ops_per_s["fp32"] == pytest.approx(3.494e11, rel=1e-3)
    assert any("Perfworks" in n for n in outcome.notes)
    figures = summarize(r)
    assert figures.divergence is not None and figures.divergence.threads_per_inst == 32.0


@needs_reports
def test_a_report_without_the_kernel_is_an_error(
    tiny: Space, tmp_path: Path, fake_ncu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.profile.errors import ReportError

    _pretend_gpu(monkeypatch, "_Z3notthere")
    request = profiler.ProfileRequest(
        space=tiny, config={}, ncu=fake_ncu, report_dir=tmp_path, cache_dir=tmp_path / "c"
    )
    with pytest.raises(ReportError, match="no launch of _Z3notthere"):
        profiler.profile_config(request)


class _FakeRunner:
    def __init__(self, space: Space, cache: Any, seed: int = 0) -> None:
        self.device = DeviceInfo("NVIDIA A100 80GB PCIe", 80)

    def __enter__(self) -> _FakeRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def evaluate(self, config: dict[str, Any]) -> Measurement:
        return Measurement(TrialOutcome.OK, 0.004, (0.004,), 0.0039, 0.0041)


@pytest.mark.parametrize("mode", ["perm", "vgpu", "missing"])
def test_no_counters_falls_back_to_event_timing(
    tiny: Space, tmp_path: Path, fake_ncu: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    import workbench.runners.cuda.runner as cuda_runner

    _pretend_gpu(monkeypatch, "axpy")
    monkeypatch.setattr(cuda_runner, "CudaRunner", _FakeRunner)
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    request = profiler.ProfileRequest(
        space=tiny,
        config={"BLOCK": 128, "SCALE": 2, "WAVES": 1},
        ncu=fake_ncu if mode != "missing" else tmp_path / "no-ncu",
        report_dir=tmp_path / "reports",
        cache_dir=tmp_path / "cache",
    )
    outcome = profiler.profile_config(request)
    expected = {
        "perm": "no permission to read GPU performance counters",
        "vgpu": "does not expose performance counters",
        "missing": "ncu not found",
    }[mode]
    assert outcome.fallback is not None and expected in outcome.fallback
    r = outcome.record
    assert r.source == "event-timing" and r.metric_set == "timing"
    # the tiny space's work model at n=1000: 2n FLOP, 12n bytes, in 4 us
    assert r.metrics["work_ops"] == 2000 and r.metrics["work_min_bytes"] == 12000
    assert outcome.achieved.ops_per_s == {"fp32": pytest.approx(2000 / 4e-6)}
    assert outcome.achieved.bytes_per_s == {"dram": pytest.approx(12000 / 4e-6)}
    assert any("fell back to event timing" in n for n in r.notes)
    again = summarize(r)  # the stored record gives the same figures
    assert again.achieved.ops_per_s == outcome.achieved.ops_per_s


def test_without_a_gpu_nothing_is_measured(tiny: Space, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiler, "probe_gpu", lambda: GpuProbe(False, "no NVIDIA driver"))
    with pytest.raises(NcuUnavailable, match="no NVIDIA driver") as info:
        profiler.profile_config(profiler.ProfileRequest(space=tiny, config={}))
    assert info.value.problem is NcuProblem.NO_GPU


def test_the_profiled_process_reports_bad_input(project: Path, capsys: Any) -> None:
    from workbench.profile import target

    assert target.main(["no_such_kernel", "--config", "X=1"]) == 2
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(ncu_mod.TARGET_MARKER)
    assert json.loads(line.removeprefix(ncu_mod.TARGET_MARKER))["outcome"] == "error"
    space = str(project / "spaces" / "tiny.yaml")
    code = target.main([space, "--config", "BLOCK=64", "--shape", "n=100", "--arch", "sm_90"])
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1].split(" ", 1)[1])
    if code == 2:  # no GPU here: the runner says so
        assert "no CUDA GPU" in doc["reason"]
    else:
        assert doc["outcome"] == "ok"


def test_the_retry_by_symbol_shares_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """--timeout bounds both ncu runs together: the retry gets what the first left."""
    import time
    from types import SimpleNamespace

    timeouts: list[float] = []

    def fake_run(command: list[str], report: Path, timeout_s: float) -> str:
        timeouts.append(timeout_s)
        if len(timeouts) == 1:
            time.sleep(0.3)
            raise NcuUnavailable(NcuProblem.NO_KERNELS, "no kernels were profiled")
        return "ran"

    monkeypatch.setattr(profiler, "run_ncu", fake_run)
    plan = SimpleNamespace(
        selection=SimpleNamespace(nvtx="workbench@k:A=1/"),
        command=lambda ncu, nvtx: ["ncu", "--nvtx"] if nvtx else ["ncu"],
        report=Path("r.ncu-rep"),
    )
    notes: list[str] = []
    assert profiler._run(plan, Path("ncu"), 10.0, notes) == "ran"  # type: ignore[arg-type]
    assert timeouts[0] == 10.0 and 9.0 < timeouts[1] <= 9.7
    assert any("matched nothing" in n for n in notes)
