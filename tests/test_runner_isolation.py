"""Fault isolation of the worker process, for real, on the CPU.

The supervisor and the runner's parent side are exercised with executors that crash
(``os.abort``, a segfault through ``ctypes.string_at(0)``), hang, raise, or answer: the same
code paths a CUDA worker takes after an illegal address or a kernel that never returns.
Each failure must become its TrialOutcome with a reason, the worker must be restarted, and
the next evaluation must work.
"""

from __future__ import annotations

import ctypes
import functools
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# Only light imports at the top: every worker process imports this module to find its
# executor, and a spawn start pays for each import again.
from workbench.supervisor import (
    Progress,
    Supervisor,
    WorkerCrashed,
    WorkerError,
    WorkerStartError,
    WorkerTimeout,
    describe_exit,
)

# -- executors that misbehave on request ---------------------------------------------------


def segfault() -> None:
    ctypes.string_at(0)  # reads address 0: SIGSEGV


class Recoverable(RuntimeError):
    """Like a CUDA error that leaves the context usable (CUDA_ERROR_INVALID_VALUE)."""

    recoverable = True


class ContextLost(RuntimeError):
    """Like a sticky CUDA error (CUDA_ERROR_ILLEGAL_ADDRESS): the worker must go."""


class FaultyExecutor:
    """Answers ``(action, argument)`` requests: echo, pid, abort, segv, hang, raise, ..."""

    def __init__(self, fail_at_start: str = "") -> None:
        if fail_at_start == "raise":
            raise RuntimeError("no device here")
        if fail_at_start == "hang":
            time.sleep(3600)
        if fail_at_start == "abort":
            os.abort()
        self.calls = 0

    def info(self) -> Mapping[str, Any]:
        return {"pid": os.getpid()}

    def handle(self, request: Any, progress: Progress) -> Any:
        action, arg = request
        self.calls += 1
        if action == "echo":
            return arg
        if action == "pid":
            return os.getpid()
        if action == "calls":
            return self.calls
        if action == "abort":
            os.abort()
        if action == "segv":
            segfault()
        if action == "exit":
            os._exit(3)
        if action == "hang":
            progress("spinning")
            while True:
                time.sleep(0.05)
        if action == "slow":  # busy for `arg` s, reporting progress: must not time out
            end = time.monotonic() + arg
            while time.monotonic() < end:
                progress("working")
                time.sleep(0.05)
            return "done"
        if action == "raise":
            raise Recoverable(arg)
        if action == "lose":
            raise ContextLost(arg)
        if action == "unpicklable":
            return lambda: None
        raise ValueError(action)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def supervisor() -> Iterator[Supervisor]:
    sup = Supervisor(FaultyExecutor, startup_timeout_s=60)
    yield sup
    sup.close()


def test_answers_and_keeps_state() -> None:
    with Supervisor(FaultyExecutor, startup_timeout_s=60) as sup:
        assert sup.call(("echo", [1, 2]), 10) == [1, 2]
        assert sup.call(("calls", None), 10) == 2
        assert sup.generation == 1 and sup.restarts == 0
        assert sup.info["pid"] == sup.pid != os.getpid()


@pytest.mark.parametrize(
    ("action", "signal_name"), [("abort", "SIGABRT"), ("segv", "SIGSEGV"), ("exit", "exit code 3")]
)
def test_crash_restarts_and_next_call_works(
    supervisor: Supervisor, action: str, signal_name: str
) -> None:
    first = supervisor.call(("pid", None), 10)
    restarts, generation = supervisor.restarts, supervisor.generation
    with pytest.raises(WorkerCrashed) as info:
        supervisor.call((action, None), 10, stage="launch")
    assert signal_name in str(info.value)
    assert info.value.restarted and info.value.stage == "launch"
    assert supervisor.restarts == restarts + 1 and supervisor.generation == generation + 1
    second = supervisor.call(("pid", None), 10)
    assert second != first
    assert supervisor.call(("calls", None), 10) == 2  # a fresh executor


def test_hang_is_killed_after_the_timeout(supervisor: Supervisor) -> None:
    first = supervisor.call(("pid", None), 10)
    start = time.monotonic()
    with pytest.raises(WorkerTimeout) as info:
        supervisor.call(("hang", None), 1.0)
    elapsed = time.monotonic() - start
    assert 1.0 <= elapsed < 30
    assert info.value.stage == "spinning" and info.value.restarted
    assert "no answer for 1 s during spinning" in str(info.value)
    assert supervisor.call(("pid", None), 10) != first


def test_progress_restarts_the_clock(supervisor: Supervisor) -> None:
    restarts = supervisor.restarts
    assert supervisor.call(("slow", 2.0), 0.5) == "done"
    assert supervisor.restarts == restarts


def test_recoverable_error_keeps_the_worker(supervisor: Supervisor) -> None:
    pid = supervisor.call(("pid", None), 10)
    with pytest.raises(WorkerError) as info:
        supervisor.call(("raise", "bad launch config"), 10)
    assert info.value.type_name == "Recoverable"
    assert "Recoverable: bad launch config" in str(info.value)
    assert "Traceback" in info.value.detail
    assert not info.value.restarted
    assert supervisor.call(("pid", None), 10) == pid


def test_lost_context_restarts_the_worker(supervisor: Supervisor) -> None:
    pid, restarts = supervisor.call(("pid", None), 10), supervisor.restarts
    with pytest.raises(WorkerError) as info:
        supervisor.call(("lose", "illegal address"), 10)
    assert info.value.restarted and "ContextLost: illegal address" in str(info.value)
    assert supervisor.call(("pid", None), 10) != pid
    assert supervisor.restarts == restarts + 1


def test_unpicklable_answer_is_an_error_not_a_hang(supervisor: Supervisor) -> None:
    with pytest.raises(WorkerError):
        supervisor.call(("unpicklable", None), 10)
    assert supervisor.call(("echo", 5), 10) == 5


@pytest.mark.slow
@pytest.mark.parametrize(("how", "timeout_s"), [("raise", 60), ("abort", 60), ("hang", 4)])
def test_start_failures(how: str, timeout_s: float) -> None:
    sup = Supervisor(functools.partial(FaultyExecutor, how), startup_timeout_s=timeout_s)
    with pytest.raises(WorkerStartError) as info:
        sup.start()
    assert "did not start" in str(info.value)
    if how == "raise":
        assert "RuntimeError: no device here" in str(info.value)
    if how == "abort":
        assert "SIGABRT" in str(info.value)
    sup.close()


def test_close_is_idempotent_and_ends_the_process() -> None:
    sup = Supervisor(FaultyExecutor)
    sup.start()
    worker = sup._worker
    assert worker is not None
    sup.close()
    sup.close()
    assert not worker.process.is_alive() and worker.process.exitcode == 0


def test_describe_exit() -> None:
    assert describe_exit(-11) == "killed by SIGSEGV"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(2) == "exit code 2"


# -- the runner's parent side, driven by an executor that computes on the CPU ----------------


class EmulatedExecutor:
    """Runs stream_scale's math (y = alpha * x, float32) with numpy, and misbehaves on cue.

    Faults by the config's label: HINT=cg segfaults, HINT=cs aborts, HINT=lu hangs in the
    launch, HINT=nc raises a recoverable error, BLOCK=1024 loses the "context", STORE=cs
    leaves the last elements unwritten. Timing measures numpy on this CPU, with the rule.
    """

    def __init__(self, cc: int = 90, limits: Mapping[str, int] | None = None) -> None:
        self.x: np.ndarray | None = None
        self.loads = 0
        self.cc = cc
        self.limits = dict(limits or {})

    def info(self) -> Mapping[str, Any]:
        return {
            "device": {"name": "CPU emulation", "cc": self.cc, "cuda": None},
            "cc": self.cc,
            "limits": self.limits,
            "notes": ["emulated: numpy on the CPU"],
        }

    def handle(self, request: Any, progress: Progress) -> Any:
        from workbench.runners.buffers import BufferArg, ScalarValue
        from workbench.runners.protocol import InputsLoaded, LoadInputs, RunOnce, TimeKernel

        if isinstance(request, LoadInputs):
            (f,) = request.files
            self.x = np.load(f.path).view(np.float32).copy()
            self.loads += 1
            return InputsLoaded(request.key, f.nbytes, 0.0)
        label = request.job.label
        alpha = next(a.value for a in request.job.args if isinstance(a, ScalarValue) and a.name)
        assert [type(a) for a in request.job.args][:2] == [BufferArg, BufferArg]
        if isinstance(request, RunOnce):
            return self._run(request, label, np.float32(alpha), progress)
        assert isinstance(request, TimeKernel)
        return self._time(request.options, np.float32(alpha), progress)

    def _run(self, request: Any, label: str, alpha: np.float32, progress: Progress) -> Any:
        from workbench.runners.protocol import OutputFiles, write_raw

        assert self.x is not None
        progress("launch")
        if "HINT=cg" in label:
            segfault()
        if "HINT=cs" in label:
            os.abort()
        if "HINT=lu" in label:
            while True:
                time.sleep(0.05)
        if "HINT=nc" in label:
            raise Recoverable("CUDA_ERROR_INVALID_VALUE: invalid argument (cuLaunchKernel)")
        if "BLOCK=1024" in label:
            raise ContextLost("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access")
        (out,) = request.job.outputs
        y = out.initial().copy()
        written = len(y) - 7 if "STORE=cs" in label else len(y)
        y[:written] = alpha * self.x[:written]
        path = Path(request.out_dir) / "y.npy"
        write_raw(path, y)
        return OutputFiles({"y": str(path)}, 0.0)

    def _time(self, options: Any, alpha: np.float32, progress: Progress) -> Any:
        from workbench.runners.protocol import Timing

        assert self.x is not None
        rule = options.rule.clone()
        rule.reset()
        y = np.empty_like(self.x)
        samples = []
        while not rule.done():
            start = time.perf_counter()
            np.multiply(alpha, self.x, out=y)
            samples.append((time.perf_counter() - start) * 1e3)
            rule.add(samples[-1])
            progress("timing")
        assert rule.stop_reason is not None
        return Timing(
            tuple(samples), (), (False,) * len(samples), None, rule.stop_reason, 0, 0.0, "no NVML"
        )

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from workbench.compiler import CompileCache
    from workbench.runners.timing import StoppingRule, TimingOptions
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_kernel

    fast = TimingOptions(rule=StoppingRule(min_time_s=0.0, max_time_s=1.0, max_samples=200))
    spec = load_kernel("stream_scale", [])
    cache = CompileCache(tmp_path_factory.mktemp("cache"))
    runner = WorkerRunner(
        Space(spec, shape={"n": 4096}),
        cache,
        executor_factory=EmulatedExecutor,
        timing=fast,
        launch_timeout_s=2.0,
        startup_timeout_s=60,
    )
    yield runner
    runner.close()


def config(runner: Any, **values: Any) -> dict[str, Any]:
    return runner.space.parse_config([f"{k}={v}" for k, v in values.items()])


def test_ok_config_is_verified_and_timed(emulated: Any) -> None:
    from workbench.runners.base import TrialOutcome

    m = emulated.evaluate(config(emulated))
    assert m.outcome is TrialOutcome.OK, m.reason
    assert m.value is not None and m.ci_low is not None and m.ci_high is not None
    assert m.ci_low <= m.value <= m.ci_high
    assert len(m.samples) >= 10 and m.value == float(np.median(m.samples))
    assert m.verify_max_error == 0.0 and m.compile_seconds is not None
    assert "emulated: numpy on the CPU" in m.reason and "median of" in m.reason
    assert m.metrics["gb_per_s"] > 0
    assert emulated.device.name == "CPU emulation"


def test_the_live_tune_keeps_each_compile_in_the_store(emulated: Any, tmp_path: Path) -> None:
    from workbench.search.start import compile_recorder
    from workbench.search.tune_plan import space_study
    from workbench.spaces.model import config_label
    from workbench.store import Store
    from workbench.store.compiles import load_compiles

    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    study = space_study(store, emulated.space, "stream_scale", "CPU emulation", None, None)
    emulated.on_compiled = compile_recorder(store, study, emulated.space)
    try:
        first, second = config(emulated, BLOCK=128), config(emulated, BLOCK=512)
        for cfg in (first, second, first):  # the repeat is a cache hit: its row is replaced
            emulated.evaluate(cfg)
    finally:
        emulated.on_compiled = None
    rows = load_compiles(store, study.id)
    assert [r.config_key for r in rows] == [config_label(first), config_label(second)]
    for r in rows:
        assert r.ok and r.arch == emulated.space.arch.sm and r.cache_key
        assert r.registers and r.spill_stores == 0 and r.spill_loads == 0
        assert r.occupancy is not None and 0 < r.occupancy <= 1
    store.close()


def test_wrong_output_is_wrong_and_stays_wrong(emulated: Any) -> None:
    from workbench.runners.base import TrialOutcome

    m = emulated.evaluate(config(emulated, STORE="cs"))
    assert m.outcome is TrialOutcome.WRONG and m.value is None
    assert "output y untouched at index 4089" in m.reason
    assert "7 of 4096 elements wrong" in m.reason
    again = emulated.evaluate(config(emulated, STORE="cs"))
    assert again.outcome is TrialOutcome.WRONG and again.reason == m.reason


@pytest.mark.parametrize(
    ("hint", "outcome", "words"),
    [
        ("cg", "launch_failed", "killed by SIGSEGV"),
        ("cs", "launch_failed", "killed by SIGABRT"),
        ("lu", "timeout", "no answer for 2 s during launch"),
        ("nc", "launch_failed", "CUDA_ERROR_INVALID_VALUE"),
    ],
)
def test_faults_become_outcomes_and_the_run_goes_on(
    emulated: Any, hint: str, outcome: str, words: str
) -> None:
    from workbench.runners.base import TrialOutcome

    restarts = emulated.restarts
    m = emulated.evaluate(config(emulated, HINT=hint))
    assert m.outcome is TrialOutcome(outcome) and m.value is None
    assert words in m.reason and f"stream_scale:HINT={hint}" in m.reason
    recovered = hint != "nc"
    assert ("the worker was restarted" in m.reason) == recovered
    assert emulated.restarts == restarts + int(recovered)
    after = emulated.evaluate(config(emulated, BLOCK=512))
    assert after.outcome is TrialOutcome.OK, after.reason  # inputs were reloaded


def test_lost_context_restarts(emulated: Any) -> None:
    from workbench.runners.base import TrialOutcome

    m = emulated.evaluate(config(emulated, BLOCK=1024, BLOCKS_PER_SM=2))
    assert m.outcome is TrialOutcome.LAUNCH_FAILED
    assert "ContextLost: CUDA_ERROR_ILLEGAL_ADDRESS" in m.reason
    assert "the worker was restarted" in m.reason
    assert emulated.evaluate(config(emulated, BLOCK=128)).outcome is TrialOutcome.OK


def test_infeasible_config_is_not_run(emulated: Any) -> None:
    from workbench.runners.base import TrialOutcome

    m = emulated.evaluate(config(emulated, BLOCK=1024, BLOCKS_PER_SM=16))
    assert m.outcome is TrialOutcome.INFEASIBLE and "BLOCK * BLOCKS_PER_SM" in m.reason


def test_compile_error_is_compile_failed(tmp_path: Path, write_space: Any) -> None:
    path = write_space(
        """\
        name: broken
        source: ../kernels/broken.cu
        entry: {kernel: broken}
        arches: [sm_90]
        parameters:
          BLOCK: {values: [32, 64], default: 32}
        geometry: {grid: 1, block: BLOCK}
        shapes: {default: {n: 64}}
        inputs: {x: {dtype: float32, shape: [n]}}
        outputs: {y: {dtype: float32, shape: [n]}}
        args: [x, y]
        reference: {python: "workbench.references.elementwise:scale", exact: true}
        work: {bytes: 8 * n}
        """
    )
    kernel = path.parent.parent / "kernels" / "broken.cu"
    kernel.write_text(
        'extern "C" __global__ void broken(const float* x, float* y) {\n'
        "#if BLOCK == 64\n  this is not C++;\n#endif\n  y[threadIdx.x] = x[threadIdx.x];\n}\n"
    )
    from workbench.compiler import CompileCache
    from workbench.runners.base import TrialOutcome
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_space

    spec = load_space(path)
    runner = WorkerRunner(
        Space(spec), CompileCache(tmp_path / "cache"), executor_factory=EmulatedExecutor
    )
    try:
        m = runner.evaluate({"BLOCK": 64})
        assert m.outcome is TrialOutcome.COMPILE_FAILED
        assert "error" in m.reason and "broken.cu" in m.reason
    finally:
        runner.close()


# -- the runner on the worker's real device ------------------------------------------------


def test_the_device_limits_replace_the_preset(tmp_path: Path) -> None:
    from workbench.compiler import CompileCache
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_kernel
    from workbench.spaces.launch import launch_geometry

    spec = load_kernel("stream_scale", [])
    space = Space(spec, shape={"n": 1 << 24})
    factory = functools.partial(EmulatedExecutor, 90, {"sm_count": 7, "l2_bytes": 1 << 20})
    with WorkerRunner(space, CompileCache(tmp_path), executor_factory=factory) as runner:
        assert runner.space.device.sm_count == 7 and runner.space.device.l2_bytes == 1 << 20
        assert runner.space.device.name == "CPU emulation"
        assert "peaks unknown" in runner.space.device.source
        config = spec.default_config()
        assert launch_geometry(runner.space, config).grid[0] == 7 * config["BLOCKS_PER_SM"]
        assert runner.device.cc == 90 and runner.device.toolkit


def test_an_arch_the_device_cannot_run_is_refused(tmp_path: Path) -> None:
    from workbench.compiler import CompileCache
    from workbench.errors import ArchError
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_kernel

    space = Space(load_kernel("stream_scale", []), shape={"n": 1024})  # sm_90
    factory = functools.partial(EmulatedExecutor, 80)
    with pytest.raises(ArchError, match="sm_90, which does not run on CPU emulation"):
        WorkerRunner(space, CompileCache(tmp_path), executor_factory=factory)


def test_cubin_compatibility_rule() -> None:
    from workbench.runners.worker_device import cubin_runs_on
    from workbench.toolchain import Arch

    assert cubin_runs_on(Arch.parse("sm_80"), 86) and cubin_runs_on(Arch.parse("sm_90"), 90)
    assert not cubin_runs_on(Arch.parse("sm_86"), 80)  # newer minor than the device
    assert not cubin_runs_on(Arch.parse("sm_80"), 90)  # another major version
    assert cubin_runs_on(Arch.parse("sm_90a"), 90) and not cubin_runs_on(Arch.parse("sm_90a"), 91)


def test_live_device_keeps_peaks_of_the_same_model() -> None:
    from workbench.devices import DEVICES
    from workbench.runners.worker_device import live_device

    h200 = DEVICES["h200"]
    same = live_device(h200, "NVIDIA H200", {"sm_count": 132, "l2_bytes": 60 * 2**20})
    assert same.l2_bytes == 60 * 2**20 and same.peak_int8_tops == h200.peak_int8_tops
    assert same.name == "NVIDIA H200"
    other = live_device(h200, "NVIDIA H100 PCIe", {"sm_count": 114})
    assert other.sm_count == 114 and other.peak_int8_tops == 0 and other.dram_bandwidth_gbs == 0
    assert live_device(h200, "NVIDIA H200", {"sm_count": 132}) is h200  # nothing changed


def test_no_reference_needs_verify_false(tmp_path: Path, write_space: Any) -> None:
    from workbench.errors import WorkbenchError
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_space

    path = write_space(
        """\
        name: unchecked
        source: ../kernels/axpy.cu
        entry: {kernel: axpy}
        arches: [sm_90]
        parameters:
          BLOCK: {values: [32], default: 32}
          SCALE: {values: [1], default: 1}
        geometry: {grid: 1, block: BLOCK}
        shapes: {default: {n: 64}}
        inputs: {x: {dtype: float32, shape: [n]}}
        outputs: {y: {dtype: float32, shape: [n]}}
        args: [x, y, {value: n, dtype: int32}]
        work: {bytes: 8 * n}
        """
    )
    with pytest.raises(WorkbenchError, match="no reference"):
        WorkerRunner(Space(load_space(path)), None, executor_factory=EmulatedExecutor)
