"""The parent side of running kernels in a worker: compile, verify, time, and survive faults.

:class:`WorkerRunner` turns a configuration into a :class:`~workbench.runners.base.Measurement`:
it checks the config against the space, compiles through the cache, builds the launch (geometry,
arguments, output fills), has the worker launch it once on poisoned outputs and compares the
outputs with the reference (first run of each config only; a wrong config stays wrong), then
has the worker time it. Everything that can go wrong with one config becomes a failed
measurement with its reason; the worker is restarted after a crash, a hang or a lost context,
and the next config runs as if nothing happened.

The executor in the worker is a parameter: :class:`~workbench.runners.cuda.CudaRunner` plugs
in the CUDA executor, and the tests plug in executors that crash, hang or lie on purpose.

The pieces it is made of: the inputs (:mod:`~workbench.runners.input_sets`), the launch and
the host's verdict on its outputs (:mod:`~workbench.runners.kernel_jobs`), the worker's device
(:mod:`~workbench.runners.worker_device`) and its answers as measurements
(:mod:`~workbench.runners.worker_results`).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from workbench.analysis.signature import require_matching_arguments
from workbench.compiler import CompileAhead, CompileCache, CompileResult, compile_job, make_job
from workbench.errors import ArchError, CompileError, ConfigError, ToolchainError, WorkbenchError
from workbench.runners.base import DeviceInfo, Measurement, Runner, TrialOutcome
from workbench.runners.buffers import named_scalars
from workbench.runners.device_verify import DeviceVerifier
from workbench.runners.input_sets import InputSet, InputSets
from workbench.runners.kernel_jobs import kernel_job, output_verdict
from workbench.runners.phases import Phase, PhaseTimes
from workbench.runners.protocol import (
    DeviceVerdicts,
    KernelJob,
    LoadInputs,
    OutputFiles,
    RunOnce,
    TimeKernel,
)
from workbench.runners.timing import TimingOptions
from workbench.runners.verify import Verification, tolerance_for
from workbench.runners.worker_device import cubin_runs_on, device_info, live_device
from workbench.runners.worker_results import fault_measurement, timed_measurement
from workbench.spaces.model import Config, config_label
from workbench.spaces.space import Space
from workbench.static.register_budget import register_budget_problem
from workbench.supervisor import Executor, Supervisor, WorkerFault, WorkerStartError

#: Longest silence of the worker during a launch, its synchronisation or a timing sample (s).
LAUNCH_TIMEOUT_S = 10.0
#: Longest the worker may take to start (CUDA context, L2 flush buffer) or to load inputs.
STARTUP_TIMEOUT_S = 120.0


class WorkerRunner(Runner):
    """Evaluates configurations of ``space`` with an executor in a supervised worker process.

    Args:
        space: the space (its shape, arch and device preset).
        cache: compile cache (None: compile every time).
        executor_factory: picklable callable building the executor inside the worker.
        shape: the problem shape, when not the space's own.
        seed: seed of the random inputs (inputs depend on the shape, the seed and the config
            values their shapes use).
        timing: warm-up, L2 flush, stopping rule and throttling options.
        launch_timeout_s: the longest the worker may be silent during a launch or a sample
            before it is killed and the config recorded as TIMEOUT.
        startup_timeout_s: the longest the worker may take to start or load inputs.
        verify: compare each new config with the reference (needs one in the space).
        workdir: where the temporary directory for input/output files goes.
        compile_ahead: compile configs handed to :meth:`prepare` in background processes (one
            per core) while others are measured (None: compile each when it is evaluated).
        device_verify: compare outputs with the reference on the GPU; the host compares only
            what the GPU finds wrong, and the first config the GPU finds right, to check it.
        given_inputs: arrays to run on instead of drawing those inputs (by name; each with
            the input's dtype and shape): another problem's data made into this one's
            (``compare``'s variant baselines).

    Raises:
        WorkbenchError: no reference while ``verify``; the worker cannot start; the space's
            arch cannot run on the worker's device; inputs that depend on the shape alone
            cannot be drawn.
    """

    def __init__(
        self,
        space: Space,
        cache: CompileCache | None = None,
        *,
        executor_factory: Callable[[], Executor],
        shape: Mapping[str, int] | None = None,
        seed: int = 0,
        timing: TimingOptions | None = None,
        launch_timeout_s: float = LAUNCH_TIMEOUT_S,
        startup_timeout_s: float = STARTUP_TIMEOUT_S,
        verify: bool = True,
        workdir: Path | str | None = None,
        compile_ahead: CompileAhead | None = None,
        device_verify: bool = False,
        given_inputs: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.space = _space_to_run(space, shape, verify)
        self.cache = cache
        self.seed = seed
        self.timing = timing or TimingOptions()
        self.launch_timeout_s = launch_timeout_s
        self.startup_timeout_s = startup_timeout_s
        self.verdicts: dict[str, Verification] = {}
        #: where this runner's time went, summed over its evaluations
        self.phases = PhaseTimes()
        self.ahead = compile_ahead
        self.on_device: DeviceVerifier | None = None
        self._cross_checked = False
        #: called with each config and its compile result (failures included), before it runs
        self.on_compiled: Callable[[Config, CompileResult], None] | None = None
        self._supervisor = Supervisor(
            executor_factory, startup_timeout_s=startup_timeout_s, name=f"wb-{self.space.spec.name}"
        )
        self._tmp = Path(tempfile.mkdtemp(prefix="workbench-run-", dir=workdir))
        self._verify_configs = verify
        #: (worker generation, key of the input set it holds)
        self._loaded: tuple[int, str] | None = None
        try:
            self._start(device_verify, given_inputs)
        except BaseException:
            self.close()
            raise

    # -- Runner --------------------------------------------------------------------------
    @property
    def device(self) -> DeviceInfo:
        return self._device

    @property
    def restarts(self) -> int:
        """How many times the worker was restarted after a fault."""
        return self._supervisor.restarts

    def inputs_for(self, config: Config) -> Mapping[str, np.ndarray]:
        """The input arrays ``config`` runs on (drawn now if no config has needed them yet).

        Raises:
            ConfigError: an input's shape fails for ``config``, or its draw gives only zeros.
        """
        return self._inputs.get(config).arrays

    def phase_times(self) -> PhaseTimes:
        return self.phases

    def prepare(self, config: Config) -> None:
        if self.ahead is None or self.space.explain(config):
            return
        try:
            self.ahead.submit(make_job(self.space, config))
        except (CompileError, ConfigError):  # evaluate() says what is wrong with it
            return

    def evaluate(self, config: Config) -> Measurement:
        # what no other phase accounts for is the worker's: round trips, job setup
        with self.phases.timed(Phase.WORKER):
            return self._evaluate(dict(config))

    def _evaluate(self, config: Config) -> Measurement:
        problems = self.space.explain(config)
        if problems:
            return Measurement.failure(
                TrialOutcome.INFEASIBLE, "; ".join(p.message for p in problems)
            )
        compiled = self._compile(config)
        if isinstance(compiled, Measurement):
            return compiled
        extra: dict[str, Any] = {"compile_seconds": compiled.seconds}
        try:
            job = kernel_job(self.space, config, compiled)
            with self.phases.timed(Phase.INPUTS):
                inputs = self._inputs.get(config)
        except ConfigError as exc:
            return Measurement.failure(TrialOutcome.INFEASIBLE, str(exc), **extra)
        label = config_label(config)
        try:
            verdict = self.verdicts.get(label)
            if verdict is None and self._verify_configs:
                verdict = self.verdicts[label] = self._verify(config, job, inputs)
            if verdict is not None:
                extra["verify_max_error"] = verdict.max_abs_error
                if not verdict.ok:
                    return Measurement.failure(TrialOutcome.WRONG, verdict.reason, **extra)
            request = TimeKernel(job, self.timing)
            timing = self._request(request, self.launch_timeout_s, "timing", inputs)
        except WorkerStartError:
            raise
        except WorkerFault as fault:
            return fault_measurement(fault, job.label, **extra)
        self.phases.add(Phase.MODULE_LOAD, timing.load_seconds)
        self.phases.add(Phase.WARMUP, timing.warmup_seconds)
        self.phases.add(Phase.TIMING, timing.seconds - timing.warmup_seconds)
        return timed_measurement(
            self.space, config, timing, self.timing.ci_level, self.notes, **extra
        )

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        self._supervisor.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    # -- stages --------------------------------------------------------------------------
    def _compile(self, config: Config) -> CompileResult | Measurement:
        try:
            with self.phases.timed(Phase.COMPILE):
                result = self.compiled(config)
        except ToolchainError:
            raise
        except CompileError as exc:
            return Measurement.failure(TrialOutcome.COMPILE_FAILED, str(exc))
        if self.on_compiled is not None:
            with self.phases.timed(Phase.STORE):
                self.on_compiled(config, result)
        if not result.ok or result.cubin is None or not result.entry:
            log = result.log.strip() or "no binary or no entry symbol"
            return Measurement.failure(
                TrialOutcome.COMPILE_FAILED, log, compile_seconds=result.seconds
            )
        # a space bug, the same for every config: stop rather than launch garbage each time
        require_matching_arguments(self.space.spec, result.cubin, result.entry, result.ptx)
        if problem := register_budget_problem(self.space, config, result):  # it would hang
            return Measurement.failure(
                TrialOutcome.LAUNCH_FAILED, problem, compile_seconds=result.seconds
            )
        return result

    def compiled(self, config: Config) -> CompileResult:
        """``config``'s compile result, from the cache or NVRTC.

        Raises:
            CompileError, ToolchainError: as :func:`~workbench.compiler.compile_job`.
        """
        job = make_job(self.space, config)
        return self.ahead.result(job) if self.ahead is not None else compile_job(job, self.cache)

    def _verify(self, config: Config, job: KernelJob, inputs: InputSet) -> Verification:
        """On the GPU when it can, else (and when the GPU finds it wrong) on the host."""
        if inputs.expected is None:
            return self._verify_on_host(config, job, inputs)
        with self.phases.timed(Phase.INPUTS):  # the reference's outputs: once per input set
            expected = inputs.expected.get(config, named_scalars(job.args), job.outputs)
        verdict = self._verify_on_device(config, job, inputs, expected)
        if verdict is None or not verdict.ok:
            return self._verify_on_host(config, job, inputs)
        if not self._cross_checked:  # the first "right" of the GPU is checked by the host
            self._cross_checked = True
            host = self._verify_on_host(config, job, inputs)
            if not host.ok:
                self.on_device = None
                self.notes += (
                    "the GPU's verification disagreed with the host's: verified on "
                    "the host from then on",
                )
                return host
        return verdict

    def _verify_on_device(
        self, config: Config, job: KernelJob, inputs: InputSet, expected: Mapping[str, np.ndarray]
    ) -> Verification | None:
        if self.on_device is None or self.space.spec.reference is None:
            return None
        tolerance = tolerance_for(self.space.spec.reference, self.space.env(config))
        set_key = f"{inputs.key}#{id(expected)}"  # (one dict per cached reference result)
        with self.phases.timed(Phase.COMPILE):
            request = self.on_device.request(job, set_key, expected, tolerance)
        if request is None:
            return None
        with self.phases.timed(Phase.VERIFICATION):
            reply: DeviceVerdicts = self._request(
                request, self.launch_timeout_s, "verification on the GPU", inputs
            )
            self.phases.add(Phase.MODULE_LOAD, reply.load_seconds)
        return self.on_device.verdict(job, reply, tolerance)

    def _verify_on_host(self, config: Config, job: KernelJob, inputs: InputSet) -> Verification:
        out_dir = self._tmp / "outputs"
        out_dir.mkdir(exist_ok=True)
        with self.phases.timed(Phase.VERIFICATION):
            reply: OutputFiles = self._request(
                RunOnce(job, str(out_dir)), self.launch_timeout_s, "verification launch", inputs
            )
            self.phases.add(Phase.MODULE_LOAD, reply.load_seconds)
        try:
            with self.phases.timed(Phase.VERIFICATION):
                return output_verdict(self.space, config, job, inputs, reply)
        finally:  # the arrays are memory-mapped: unlinking keeps them readable until dropped
            for path in reply.paths.values():
                Path(path).unlink(missing_ok=True)

    def _request(self, request: object, timeout_s: float, stage: str, inputs: InputSet) -> Any:
        """Send ``request`` to a worker that holds ``inputs`` (loaded first if it does not)."""
        if not self._supervisor.alive or self._loaded != (self._supervisor.generation, inputs.key):
            self._supervisor.start()
            generation = self._supervisor.generation
            try:
                with self.phases.timed(Phase.INPUTS):
                    self._supervisor.call(
                        LoadInputs(inputs.key, inputs.files),
                        self.startup_timeout_s,
                        "loading inputs",
                    )
            except WorkerFault as fault:
                raise WorkbenchError(f"cannot load the inputs into the worker: {fault}") from fault
            self._loaded = (generation, inputs.key)
        return self._supervisor.call(request, timeout_s, stage)

    # -- setup ---------------------------------------------------------------------------
    def _start(self, device_verify: bool, given_inputs: Mapping[str, np.ndarray] | None) -> None:
        """Start the worker, take the space to its device, and draw the inputs the shape alone
        decides (with the GPU's verifier when ``device_verify``)."""
        info = self._supervisor.info
        self._device = device_info(info)
        self.notes: tuple[str, ...] = tuple(info.get("notes", ()))
        self.space = self._live_space(info)
        reference = self.space.spec.reference
        self._inputs = InputSets(
            self.space,
            self.seed,
            self._tmp,
            reference.target if self._verify_configs and reference is not None else None,
            given_inputs,
        )
        self._inputs.prepare()
        if device_verify and self._verify_configs:
            sms = self.space.device.sm_count
            self.on_device = DeviceVerifier(self.space.arch, sms, self.cache, self._tmp)

    def _live_space(self, info: Mapping[str, Any]) -> Space:
        """The space on the worker's real device: its limits, and an arch that runs there.

        Raises:
            ArchError: the space's arch does not run on the device.
        """
        cc = info.get("cc")
        if isinstance(cc, int) and not cubin_runs_on(self.space.arch, cc):
            raise ArchError(
                f"{self.space.spec.name}: the space compiles for {self.space.arch.sm}, which "
                f"does not run on {self._device.name} (sm_{cc}); choose an arch with the "
                "GPU's major version and a minor version no higher than its own"
            )
        limits = info.get("limits")
        if not limits:
            return self.space
        device = live_device(self.space.device, self._device.name, limits)
        if device == self.space.device:
            return self.space
        return Space(self.space.spec, shape=self.space.shape, arch=self.space.arch, device=device)


def _space_to_run(space: Space, shape: Mapping[str, int] | None, verify: bool) -> Space:
    """``space`` at ``shape`` (when given).

    Raises:
        WorkbenchError: ``verify`` and the space has no reference.
    """
    if shape is not None and dict(shape) != space.shape:
        space = Space(space.spec, shape=shape, arch=space.arch, device=space.device)
    if verify and space.spec.reference is None:
        raise WorkbenchError(
            f"{space.spec.name}: the space file has no reference, so no config can be "
            "verified; add one (reference: {python: module:function, ...}) or pass verify=False"
        )
    return space
