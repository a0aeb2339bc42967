"""What the kernel families' `gpu` tests share: the probe, the skip mark, and one verification
loop (each config runs on the GPU and matches its reference on fresh random inputs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.compiler import CompileCache
from workbench.gpu import probe_gpu
from workbench.runners.base import TrialOutcome
from workbench.runners.cuda import CudaRunner
from workbench.runners.timing import StoppingRule, TimingOptions
from workbench.spaces import Space, load_kernel
from workbench.toolchain import Arch

GPU = probe_gpu()
gpu = pytest.mark.skipif(not GPU.available, reason=f"no CUDA GPU: {GPU.reason}")
#: verification is the point of these tests; a few timing samples only
BRIEF = TimingOptions(rule=StoppingRule(max_time_s=0.2, max_samples=20))


def verify_on_gpu(kernel: str, shape: dict[str, int], assignments: list[str], tmp: Path) -> None:
    """Every config runs on the GPU and matches the reference on fresh random inputs."""
    spec = load_kernel(kernel)
    arch = f"sm_{GPU.cc}"
    if arch not in spec.arches:
        pytest.skip(f"{kernel} does not declare {arch}")
    space = Space(spec, shape=shape, arch=Arch.parse(arch))
    configs = [space.parse_config(a.split(",") if a else []) for a in assignments]
    assert all(space.is_valid(c) for c in configs)
    with CudaRunner(space, CompileCache(tmp), timing=BRIEF) as runner:
        for config in configs:
            m = runner.evaluate(config)
            assert m.outcome is TrialOutcome.OK, (config, m.reason)
