"""``CudaRunner``: compile, verify and time configurations on the local CUDA GPU.

A :class:`~workbench.runners.worker_runner.WorkerRunner` whose worker holds a
:class:`~workbench.runners.cuda.worker.CudaExecutor`: the worker owns the CUDA context, so an
illegal address, a trap or a hang costs one config and a worker restart, never the search.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from workbench.compiler import CompileAhead, CompileCache
from workbench.errors import NoGpuError
from workbench.gpu import probe_gpu
from workbench.runners.timing import TimingOptions
from workbench.runners.worker_runner import LAUNCH_TIMEOUT_S, STARTUP_TIMEOUT_S, WorkerRunner
from workbench.spaces.space import Space


class CudaRunner(WorkerRunner):
    """Runs configurations of ``space`` on CUDA device ``device`` (Driver API, cuda-bindings).

    Args:
        space: the space (shape, arch, device preset; the driver's limits replace the
            preset's).
        cache: compile cache (None: compile every time).
        shape: the problem shape, when not the space's own.
        seed: seed of the random inputs.
        timing: warm-up, L2 flush, stopping rule and throttling options.
        launch_timeout_s: longest silence of the worker during one launch or sample before it
            is killed and the config is recorded as TIMEOUT.
        startup_timeout_s: longest worker start (context creation) or input upload.
        device: CUDA device ordinal.
        verify: compare each new config with the reference.
        workdir: parent directory of the temporary input/output files.
        compile_ahead: compile configs handed to ``prepare`` in background processes.
        device_verify: compare outputs with the reference on the GPU (the host compares only
            what the GPU finds wrong).
        given_inputs: arrays to run on instead of drawing those inputs (see WorkerRunner).

    Raises:
        NoGpuError: no driver or no GPU ("no CUDA GPU: ...").
        WorkbenchError: the worker cannot start, the arch does not run on the GPU, or the
            space has no reference while ``verify``.
    """

    def __init__(
        self,
        space: Space,
        cache: CompileCache | None = None,
        *,
        shape: Mapping[str, int] | None = None,
        seed: int = 0,
        timing: TimingOptions | None = None,
        launch_timeout_s: float = LAUNCH_TIMEOUT_S,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        device: int = 0,
        verify: bool = True,
        workdir: Path | str | None = None,
        compile_ahead: CompileAhead | None = None,
        device_verify: bool = False,
        given_inputs: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        probe = probe_gpu()
        if not probe.available:
            raise NoGpuError(f"no CUDA GPU: {probe.reason}")
        if device >= probe.count:
            raise NoGpuError(f"no CUDA GPU: device {device} requested, {probe.count} present")
        from workbench.runners.cuda.worker import CudaExecutor

        super().__init__(
            space,
            cache,
            executor_factory=functools.partial(CudaExecutor, device),
            shape=shape,
            seed=seed,
            timing=timing,
            launch_timeout_s=launch_timeout_s,
            startup_timeout_s=startup_timeout_s,
            verify=verify,
            workdir=workdir,
            compile_ahead=compile_ahead,
            device_verify=device_verify,
            given_inputs=given_inputs,
        )
