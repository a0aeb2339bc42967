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
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.analysis.signature import require_matching_arguments
from workbench.compiler import CompileAhead, CompileCache, CompileResult, compile_job, make_job
from workbench.devices import DeviceSpec
from workbench.errors import ArchError, CompileError, ConfigError, ToolchainError, WorkbenchError
from workbench.roofline.timed import rate_in_unit
from workbench.runners.base import DeviceInfo, Measurement, Runner, TrialOutcome
from workbench.runners.buffers import (
    draw_named_input,
    input_config_names,
    input_config_values,
    input_shapes,
    input_specs,
    kernel_arguments,
    named_scalars,
    numpy_dtype,
    output_buffers,
)
from workbench.runners.device_verify import DeviceVerifier
from workbench.runners.phases import Phase, PhaseTimes
from workbench.runners.protocol import (
    DeviceVerdicts,
    InputFile,
    KernelJob,
    LoadInputs,
    OutputFiles,
    RunOnce,
    ThenStep,
    TimeKernel,
    Timing,
    nvtx_range,
    read_raw,
    write_raw,
)
from workbench.runners.reference import ExpectedOutputs
from workbench.runners.timing import TimingOptions, TimingSummary, summarize
from workbench.runners.verify import Verification, tolerance_for, verify_outputs
from workbench.spaces.launch import launch_geometry, then_geometry, work_counts
from workbench.spaces.model import Config, InputSpec, Value, config_label, shape_label
from workbench.spaces.schema import DType
from workbench.spaces.space import Space
from workbench.static.register_budget import register_budget_problem
from workbench.supervisor import (
    Executor,
    Supervisor,
    WorkerFault,
    WorkerStartError,
    WorkerTimeout,
)
from workbench.toolchain import Arch, nvrtc_version

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
        if shape is not None and dict(shape) != space.shape:
            space = Space(space.spec, shape=shape, arch=space.arch, device=space.device)
        if verify and space.spec.reference is None:
            raise WorkbenchError(
                f"{space.spec.name}: the space file has no reference, so no config can be "
                "verified; add one (reference: {python: module:function, ...}) or pass verify=False"
            )
        self.space = space
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
            executor_factory, startup_timeout_s=startup_timeout_s, name=f"wb-{space.spec.name}"
        )
        self._tmp = Path(tempfile.mkdtemp(prefix="workbench-run-", dir=workdir))
        self._verify_configs = verify
        #: (worker generation, key of the input set it holds)
        self._loaded: tuple[int, str] | None = None
        try:
            info = self._supervisor.info
            self._device = device_info(info)
            self.notes: tuple[str, ...] = tuple(info.get("notes", ()))
            self.space = self._live_space(info)
            reference = self.space.spec.reference
            self._inputs = InputSets(
                self.space,
                seed,
                self._tmp,
                reference.target if verify and reference is not None else None,
                given_inputs,
            )
            self._inputs.prepare()
            if device_verify and verify:
                sms = self.space.device.sm_count
                self.on_device = DeviceVerifier(self.space.arch, sms, cache, self._tmp)
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
        return self._measurement(config, timing, extra)

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

    def _measurement(self, config: Config, timing: Timing, extra: dict[str, Any]) -> Measurement:
        summary = summarize(timing.samples_ms, timing.throttled, level=self.timing.ci_level)
        metrics = {
            "mean_ms": summary.mean,
            "stdev_ms": summary.stdev,
            "rel_stderr": summary.rel_stderr,
            "ci_coverage": summary.ci_coverage,
            "samples_used": float(summary.n_used),
            "samples_throttled": float(sum(summary.throttled)),
            "warmup_launches": float(timing.warmup_launches),
            "timing_seconds": timing.seconds,
        }
        metrics.update(throughput(self.space, config, summary.median))
        metrics.update(energy_metrics(timing))
        clocks = tuple(float("nan") if c is None else float(c) for c in timing.sm_clock_mhz)
        return Measurement(
            outcome=TrialOutcome.OK,
            value=summary.median,
            samples=summary.samples,
            ci_low=summary.ci_low,
            ci_high=summary.ci_high,
            reason=timing_note(summary, timing, self.notes),
            sm_clock_mhz=clocks,
            throttled=summary.throttled,
            metrics=metrics,
            **extra,
        )

    # -- setup ---------------------------------------------------------------------------
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


@dataclass(frozen=True)
class InputSet:
    """The inputs of one problem: the arrays, the files a worker loads them from, and the
    cache of the reference's outputs on them (None when nothing is verified)."""

    key: str  #: the problem shape, the config values input shapes use, and the seed
    arrays: Mapping[str, np.ndarray]
    files: tuple[InputFile, ...]
    expected: ExpectedOutputs | None


class InputSets:
    """A space's inputs at one shape: drawn once per shape and per the values of the
    parameters and derived values their shapes use (``n_scales``: one set per scale count),
    each array written once to ``directory`` as the ``.npy`` file a worker loads.

    Args:
        space: the space at the problem shape (on the device that runs it).
        seed: seed of the random inputs.
        directory: where the input files go.
        reference: the reference's target, to cache its outputs per set (None: no reference).
        given: arrays used instead of drawing the inputs of those names.
    """

    def __init__(
        self,
        space: Space,
        seed: int,
        directory: Path,
        reference: str | None,
        given: Mapping[str, np.ndarray] | None = None,
    ) -> None:
        self.space = space
        self.given = dict(given or {})
        self.seed = seed
        self.directory = directory
        self.reference = reference
        self._sets: dict[str, InputSet] = {}
        #: (input name, dtype, shape, low, high) -> the array and its file: drawn and written once
        self._arrays: dict[
            tuple[str, DType, tuple[int, ...], float, float], tuple[np.ndarray, InputFile]
        ] = {}

    def key(self, config: Mapping[str, Value]) -> str:
        """The key of ``config``'s inputs: the problem shape, the values of the config names
        the input shapes use, and the seed (``M=4096,K=4096;n_scales=4096;seed=0``).

        Raises:
            ConfigError: a derived value fails to evaluate.
        """
        values = input_config_values(self.space, config)
        used = "".join(f";{name}={value}" for name, value in values)
        return f"{shape_label(self.space.shape)}{used};seed={self.seed}"

    def shapes(self, config: Mapping[str, Value]) -> dict[str, tuple[int, ...]]:
        """The shape of each input of ``config`` (nothing drawn).

        Raises:
            ConfigError: an input's shape fails to evaluate.
        """
        return input_shapes(self.space, config)

    def prepare(self) -> None:
        """Draw the inputs now when the problem shape alone decides them, so that an input
        that cannot be drawn stops the run before any config (otherwise: at each config)."""
        if not input_config_names(self.space):
            self.get({})

    def get(self, config: Mapping[str, Value]) -> InputSet:
        """The inputs ``config`` runs on.

        Raises:
            ConfigError: an input's shape fails to evaluate, or its draw gives only zeros.
        """
        key = self.key(config)
        found = self._sets.get(key)
        if found is not None:
            return found
        shapes = self.shapes(config)
        arrays, files = {}, []
        for spec in input_specs(self.space, config).values():
            array, file = self._array(spec, shapes[spec.name])
            arrays[spec.name] = array
            files.append(file)
        expected = (
            ExpectedOutputs(self.reference, arrays, self.space.shape) if self.reference else None
        )
        made = self._sets[key] = InputSet(key, arrays, tuple(files), expected)
        return made

    def _array(self, spec: InputSpec, shape: tuple[int, ...]) -> tuple[np.ndarray, InputFile]:
        """Input ``spec`` (its dtype fixed) at ``shape``: drawn and written once."""
        dtype = DType(spec.dtype)
        # (bounds that were expressions differ between problems of one shape: they are part of
        # the array's identity, and of its file's name)
        key = (spec.name, dtype, shape, spec.low, spec.high)
        known = self._arrays.get(key)
        if known is None:
            array = self._given(spec, dtype, shape)
            if array is None:
                array = draw_named_input(spec, shape, self.seed)
            dims = "x".join(map(str, shape))
            same = sum(k[:3] == key[:3] for k in self._arrays)
            path = (
                self.directory
                / f"input-{spec.name}-{dtype.value}-{dims}{f'-{same}' if same else ''}.npy"
            )
            file = InputFile(spec.name, str(path), write_raw(path, array))
            known = self._arrays[key] = (array, file)
        return known

    def _given(self, spec: InputSpec, dtype: DType, shape: tuple[int, ...]) -> np.ndarray | None:
        """The given array of input ``spec`` (None: draw it).

        Raises:
            ConfigError: it has another dtype or shape than the input.
        """
        array = self.given.get(spec.name)
        if array is None:
            return None
        want = numpy_dtype(dtype)
        if array.dtype != want or tuple(array.shape) != shape:
            raise ConfigError(
                f"given input {spec.name} is {array.dtype} {tuple(array.shape)}; "
                f"{self.space.spec.name} takes {want} {shape}"
            )
        return np.ascontiguousarray(array)


def kernel_job(space: Space, config: Config, compiled: CompileResult) -> KernelJob:
    """Everything a worker needs to launch ``config`` once: binary, geometry, arguments and
    outputs.

    Raises:
        ConfigError: the geometry, an argument or an output fails to evaluate for ``config``.
    """
    assert compiled.cubin is not None and compiled.entry is not None
    return KernelJob(
        label=nvtx_range(space.spec.name, config_label(config)),
        module_key=compiled.key,
        cubin=compiled.cubin,
        entry=compiled.entry,
        launch=launch_geometry(space, config),
        args=kernel_arguments(space, config),
        outputs=output_buffers(space, config),
        then=then_steps(space, config),
    )


def then_steps(space: Space, config: Config) -> tuple[ThenStep, ...]:
    """The space's second kernel (``then``) for ``config``, if it runs for it.

    Raises:
        ConfigError: its geometry or an argument fails to evaluate for ``config``.
    """
    then = space.spec.then
    launch = then_geometry(space, config)
    if then is None or launch is None:
        return ()
    return (ThenStep(then.kernel, launch, kernel_arguments(space, config, then.args)),)


def check_launch_layout(space: Space, config: Config) -> None:
    """Evaluate what a launch of ``config`` lays out on the host (geometry, arguments, outputs,
    input shapes; nothing drawn), so that a command can say what stops it before it looks for
    a GPU. An invalid config is left to the caller (a runner reports it as infeasible).

    Raises:
        ConfigError: one of them fails to evaluate for ``config``.
    """
    if space.explain(config):
        return
    launch_geometry(space, config)
    kernel_arguments(space, config)
    then_steps(space, config)
    output_buffers(space, config)
    input_shapes(space, config)


def output_verdict(
    space: Space, config: Config, job: KernelJob, inputs: InputSet, reply: OutputFiles
) -> Verification:
    """What a worker wrote for ``job`` (``reply``'s files) against the reference on ``inputs``.

    Raises:
        BadReferenceError: the reference is missing, raises, or returns the wrong outputs.
        ConfigError: the tolerance fails to evaluate.
    """
    assert inputs.expected is not None and space.spec.reference is not None
    got = {o.name: read_raw(reply.paths[o.name], o.np_dtype, o.shape) for o in job.outputs}
    expected = inputs.expected.get(config, named_scalars(job.args), job.outputs)
    tolerance = tolerance_for(space.spec.reference, space.env(config))
    return verify_outputs(got, expected, job.outputs, tolerance)


def cubin_runs_on(arch: Arch, device_cc: int) -> bool:
    """Whether a CUBIN for ``arch`` loads on a device of compute capability ``device_cc``.

    A CUBIN runs on its own major version with an equal or higher minor version; an
    arch-specific target (``sm_90a``) runs only on exactly its compute capability.
    """
    major, minor = divmod(device_cc, 10)
    if arch.suffix == "a":
        return arch.cc == device_cc
    return arch.major == major and minor >= arch.minor


_PEAKS = ("peak_int8_tops", "peak_fp8_tflops", "peak_fp16_tflops", "peak_fp32_tflops")


def live_device(preset: DeviceSpec, gpu_name: str, limits: Mapping[str, int]) -> DeviceSpec:
    """``preset`` with the limits the driver reported for the real GPU.

    The preset's datasheet peaks are kept when its model number appears in ``gpu_name``
    (``H200`` in ``NVIDIA H200``) and zeroed (unknown) otherwise.
    """
    fields = {f.name for f in dataclasses.fields(DeviceSpec)}
    changes: dict[str, Any] = {k: int(v) for k, v in limits.items() if k in fields}
    models = [t for t in re.split(r"[\s\-]+", preset.name) if any(c.isdigit() for c in t)]
    same_model = any(m.lower() in gpu_name.lower() for m in models)
    if not same_model:
        changes.update({k: 0.0 for k in _PEAKS})
        changes["dram_bandwidth_gbs"] = 0.0
    updated = dataclasses.replace(preset, **changes)
    if updated == preset:
        return preset
    source = f"driver limits of {gpu_name}; " + (
        f"peaks: {preset.source} ({preset.name})" if same_model else "peaks unknown"
    )
    return dataclasses.replace(updated, name=gpu_name or preset.name, source=source)


def device_info(info: Mapping[str, Any]) -> DeviceInfo:
    """The worker's ``info["device"]`` as a DeviceInfo (unknown keys ignored)."""
    raw = dict(info.get("device") or {})
    fields = {f.name for f in dataclasses.fields(DeviceInfo)}
    kwargs = {k: v for k, v in raw.items() if k in fields}
    kwargs.setdefault("name", "unknown device")
    if kwargs.get("toolkit") is None:
        try:
            kwargs["toolkit"] = f"nvrtc {nvrtc_version()}"
        except ToolchainError:
            kwargs["toolkit"] = None
    return DeviceInfo(**kwargs)


def fault_measurement(fault: WorkerFault, label: str, **extra: Any) -> Measurement:
    """A worker fault as a failed measurement: TIMEOUT for a hang, LAUNCH_FAILED otherwise."""
    hung = isinstance(fault, WorkerTimeout)
    outcome = TrialOutcome.TIMEOUT if hung else TrialOutcome.LAUNCH_FAILED
    stage = f" during {fault.stage}" if fault.stage and fault.stage not in str(fault) else ""
    restarted = "; the worker was restarted" if fault.restarted else ""
    return Measurement.failure(outcome, f"{fault}{stage} [{label}]{restarted}", **extra)


def throughput(space: Space, config: Config, median_ms: float) -> dict[str, float]:
    """Achieved rates at the median time, from the space's work model, in GB/s and TOPS
    whatever the space's unit ({} when the model fails or the time is not positive)."""
    try:
        ops, nbytes = work_counts(space, config)
    except ConfigError:
        return {}
    if not median_ms > 0:
        return {}
    seconds = median_ms * 1e-3
    return {
        "gb_per_s": rate_in_unit(ops, nbytes, seconds, "GB/s"),
        "tera_ops_per_s": rate_in_unit(ops, nbytes, seconds, "TOPS"),
    }


def energy_metrics(timing: Timing) -> dict[str, float]:
    """Joules per sample (the L2 flush before it included) and the mean power over the
    samples, from the GPU's energy counter ({} without one, or when it did not move: a
    window shorter than the counter's update period)."""
    if not timing.energy_mj or timing.energy_mj <= 0 or not timing.samples_ms:
        return {}
    joules = timing.energy_mj / 1e3
    out = {"energy_j": joules / len(timing.samples_ms)}
    if timing.sampling_seconds > 0:
        out["power_w"] = joules / timing.sampling_seconds
    return out


def timing_note(summary: TimingSummary, timing: Timing, notes: tuple[str, ...]) -> str:
    """How the samples were taken, for an OK measurement's ``reason``."""
    parts = [
        f"median of {summary.n_used} samples ({timing.stop_reason.value}, rel. stderr "
        f"{100 * summary.rel_stderr:.2f} %, {100 * summary.ci_coverage:.1f} % CI)"
    ]
    if any(summary.throttled):
        parts.append(f"{sum(summary.throttled)} throttled samples left out")
    if summary.all_throttled:
        parts.append("every sample was throttled: the median includes them")
    parts.extend(n for n in notes if n)
    return "; ".join(parts)
