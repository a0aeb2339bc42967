"""The CUDA runner on a real GPU (``-m gpu``), and what it says without one.

GPU tests verify and time library kernels, and check that a kernel writing out of bounds, a
kernel that never ends and a kernel with more than 48 KB of dynamic shared memory are each
handled as they must be. They skip cleanly where :func:`workbench.gpu.probe_gpu` finds none.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workbench.compiler import CompileCache
from workbench.devices import device_for
from workbench.errors import ArchError, WorkbenchError
from workbench.gpu import probe_gpu
from workbench.runners.base import TrialOutcome
from workbench.runners.cuda import CudaRunner, NoGpuError
from workbench.runners.timing import StoppingRule, TimingOptions
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.model import SpaceSpec
from workbench.toolchain import Arch

GPU = probe_gpu()
gpu = pytest.mark.skipif(not GPU.available, reason=f"no CUDA GPU: {GPU.reason}")


def test_without_a_gpu_construction_says_so(tmp_path: Path) -> None:
    if GPU.available:
        pytest.skip("a GPU is present")
    space = Space(load_kernel("stream_scale", []), shape={"n": 1024})
    with pytest.raises(NoGpuError, match=r"^no CUDA GPU: ") as info:
        CudaRunner(space, CompileCache(tmp_path))
    assert isinstance(info.value, WorkbenchError)


# -- helpers for the GPU tests -------------------------------------------------------------


def on_this_gpu(spec: SpaceSpec, shape: dict[str, int]) -> Space:
    """The space compiled for the GPU's own arch (sm_90 on an H200)."""
    arch = Arch.parse(f"sm_{GPU.cc}")
    try:
        device = device_for(arch)
    except ArchError:  # no preset for this arch: the runner replaces the limits anyway
        device = device_for(name="h100")
    return Space(spec, shape=shape, arch=arch, device=device)


QUICK = TimingOptions(rule=StoppingRule(max_time_s=1.0, max_samples=300))

PROBE_KERNELS = """\
// y = 2 * x, with switches that break it on purpose.
extern "C" __global__ void probe(const float* __restrict__ x, float* __restrict__ y,
                                 int* flag, long long n) {
  extern __shared__ float stage[];  // dynamic: SMEM bytes
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#if SPIN
  while (*(volatile int*)flag == 0) { }  // flag starts at 0: never ends
#endif
#if OOB
  if (i == 0) y[1ll << 40] = 1.0f;  // far outside any allocation: illegal address
#endif
  if (i < n) {
    stage[threadIdx.x % (SMEM / 4)] = 2.0f * x[i];
    y[i] = stage[threadIdx.x % (SMEM / 4)];
  }
}
"""

PROBE_SPACE = """\
name: probe
source: ../kernels/probe.cu
entry: {kernel: probe}
arches: [sm_80, sm_86, sm_89, sm_90]
parameters:
  SPIN: {values: [0, 1], default: 0}
  OOB: {values: [0, 1], default: 0}
  SMEM: {values: [1024, 102400], default: 1024}
  BLOCK: {values: [256], default: 256}
  CLUSTER: {values: [1, 2], default: 1, role: launch}
geometry:
  grid: round_up(cdiv(n, BLOCK), CLUSTER)
  block: BLOCK
  shared_bytes: SMEM
  cluster: [CLUSTER, 1, 1]
shapes: {default: {n: 1048576}}
inputs: {x: {dtype: float32, shape: [n]}}
outputs:
  y: {dtype: float32, shape: [n]}
  flag: {dtype: int32, shape: [1], scratch: true}
args: [x, y, flag, {value: n, dtype: int64}]
reference: {file: ../refs/double.py, function: double, exact: true}
work: {bytes: 8 * n}
"""

DOUBLE = """\
import numpy as np

def double(call):
    return {"y": (np.float32(2) * call.inputs["x"]).astype(np.float32)}

def double_plus_one(call):  # disagrees with the kernel everywhere
    return {"y": (np.float32(2) * call.inputs["x"] + np.float32(1)).astype(np.float32)}
"""


@pytest.fixture
def probe(project: Path, write_space: Callable[[str], Path], tmp_path: Path) -> Iterator[Any]:
    (project / "kernels" / "probe.cu").write_text(PROBE_KERNELS)
    (project / "refs").mkdir()
    (project / "refs" / "double.py").write_text(DOUBLE)
    spec = load_space(write_space(textwrap.dedent(PROBE_SPACE), "probe.yaml"))
    runner = CudaRunner(
        on_this_gpu(spec, {"n": 1 << 20}),
        CompileCache(tmp_path / "cache"),
        timing=QUICK,
        launch_timeout_s=5.0,
    )
    yield runner
    runner.close()


def assert_ok(m: Any) -> None:
    assert m.outcome is TrialOutcome.OK, m.reason
    assert m.value is not None and m.value > 0
    assert m.ci_low is not None and m.ci_high is not None and m.ci_low <= m.value <= m.ci_high
    assert len(m.samples) >= 10 and len(m.throttled) == len(m.samples)


# -- the GPU tests -------------------------------------------------------------------------


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize(("kernel", "n"), [("reduce", 1 << 24), ("stream_scale", 1 << 24)])
def test_library_defaults_verify_and_time(kernel: str, n: int, tmp_path: Path) -> None:
    space = on_this_gpu(load_kernel(kernel, []), {"n": n})
    with CudaRunner(space, CompileCache(tmp_path), timing=QUICK) as runner:
        m = runner.evaluate(space.spec.default_config())
        assert_ok(m)
        assert m.verify_max_error is not None
        assert runner.device.name == GPU.name and runner.device.cc == GPU.cc
        assert runner.device.uuid and runner.device.uuid.startswith(("GPU-", "MIG-"))
        assert m.metrics["gb_per_s"] > 1  # any real GPU streams more than 1 GB/s
        if "no NVML" not in m.reason:
            assert len(m.sm_clock_mhz) == len(m.samples) and max(m.sm_clock_mhz) > 0


@gpu
@pytest.mark.gpu
def test_out_of_bounds_write_fails_and_the_next_config_runs(probe: Any) -> None:
    bad = probe.evaluate({**probe.space.spec.default_config(), "OOB": 1})
    assert bad.outcome is TrialOutcome.LAUNCH_FAILED
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in bad.reason or "died" in bad.reason, bad.reason
    assert "restarted" in bad.reason and probe.restarts == 1
    assert_ok(probe.evaluate(probe.space.spec.default_config()))


@gpu
@pytest.mark.gpu
def test_a_kernel_that_never_ends_times_out(probe: Any) -> None:
    hung = probe.evaluate({**probe.space.spec.default_config(), "SPIN": 1})
    assert hung.outcome is TrialOutcome.TIMEOUT, hung.reason
    assert "no answer for 5 s during launch" in hung.reason and "restarted" in hung.reason
    assert_ok(probe.evaluate(probe.space.spec.default_config()))


@gpu
@pytest.mark.gpu
def test_dynamic_shared_memory_above_48_kb(probe: Any) -> None:
    m = probe.evaluate({**probe.space.spec.default_config(), "SMEM": 102400})
    assert_ok(m)
    assert m.verify_max_error == 0.0


@gpu
@pytest.mark.gpu
def test_cluster_launch(probe: Any) -> None:
    if GPU.cc < 90:
        pytest.skip("thread-block clusters need sm_90")
    assert_ok(probe.evaluate({**probe.space.spec.default_config(), "CLUSTER": 2}))


@gpu
@pytest.mark.gpu
def test_timing_the_same_config_twice_agrees(tmp_path: Path) -> None:
    space = on_this_gpu(load_kernel("stream_scale", []), {"n": 1 << 24})
    with CudaRunner(space, CompileCache(tmp_path)) as runner:
        config = space.spec.default_config()
        first, second = runner.evaluate(config), runner.evaluate(config)
        assert_ok(first)
        assert_ok(second)
        assert abs(first.value - second.value) / first.value < 0.05, (first.value, second.value)
        assert second.compile_seconds is not None


@gpu
@pytest.mark.gpu
def test_wrong_kernel_is_wrong(probe: Any, tmp_path: Path) -> None:
    """A reference that disagrees makes the config WRONG, with the first bad index."""
    spec = probe.space.spec
    assert spec.reference is not None
    target = spec.reference.target.replace(":double", ":double_plus_one")
    wrong = dataclasses.replace(spec, reference=dataclasses.replace(spec.reference, target=target))
    space = on_this_gpu(wrong, probe.space.shape)
    with CudaRunner(space, CompileCache(tmp_path / "cache2"), timing=QUICK) as runner:
        m = runner.evaluate(spec.default_config())
        assert m.outcome is TrialOutcome.WRONG and m.value is None
        assert "output y differs at index 0" in m.reason
        assert m.verify_max_error == pytest.approx(1.0)


@gpu
@pytest.mark.gpu
def test_a_drift_check_times_the_reference_again_on_the_gpu(tmp_path: Path) -> None:
    """The tuner's drift watch on real timings: the reference is re-timed (already verified,
    not re-verified) and compared; a quiet GPU gives a ratio near 1, never 'not comparable'."""
    from workbench.search.drift import DriftWatch

    space = on_this_gpu(load_kernel("stream_scale", []), {"n": 1 << 24})
    with CudaRunner(space, CompileCache(tmp_path)) as runner:
        config = space.spec.default_config()
        watch = DriftWatch(runner, every=1)
        assert watch.observe(config, runner.evaluate(config)) is None  # the reference
        check = watch.observe(config, runner.evaluate(config))
        assert check is not None and check.ratio is not None, check
        assert 0.8 < check.ratio < 1.25 and len(check.samples) >= 10, check
        assert check.verdict.value in ("same", "slower", "faster")
