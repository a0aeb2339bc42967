"""The executor inside the CUDA worker process: owns the context, runs what the parent asks.

Requests (see :mod:`workbench.runners.protocol`): ``LoadInputs`` once per input set (from
``.npy`` files), ``RunOnce`` to launch a config once on poisoned outputs and hand the outputs back
for verification, ``TimeKernel`` to warm up and take samples until the stopping rule is
satisfied, with an L2 flush before each sample (one event pair per sample) and the SM clock
read after it. Every config's launches sit inside an NVTX range ``kernel:config`` in the
``workbench`` domain, so ``ncu --nvtx --nvtx-include "workbench@reduce:BLOCK=256,.../"`` and
nsys can pick them out.

Progress is reported between stages and at most every ``HEARTBEAT_S`` while timing: the parent
kills the worker when it hears nothing for its per-launch timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from workbench.runners.buffers import ArgPack, BufferArg, OutputBuffer, launch_arguments
from workbench.runners.cuda.driver import (
    DeviceBuffer,
    DeviceProperties,
    Gpu,
    Kernel,
    L2Flush,
)
from workbench.runners.cuda.nvml import ClockReader
from workbench.runners.protocol import (
    NVTX_DOMAIN,
    DeviceVerdicts,
    InputsLoaded,
    KernelJob,
    LoadInputs,
    OutputFiles,
    RunOnce,
    ThenStep,
    TimeKernel,
    Timing,
    VerifyOnDevice,
    write_raw,
)
from workbench.runners.timing import TimingOptions, is_throttled
from workbench.spaces.launch import Launch
from workbench.supervisor import Progress

#: Loaded modules kept per worker (a search revisits configs; a module is a few hundred KB).
MODULE_CACHE = 32
#: Longest gap between progress reports while warming up or timing (s).
HEARTBEAT_S = 0.25
#: The compare kernel's result struct (:mod:`workbench.runners.device_verify`): seven u64,
#: and its state before a comparison (no element checked, no wrong index).
RESULT_BYTES = 56
INITIAL_RESULT = bytes(32) + b"\xff" * 8 + bytes(16)


class NvtxRanges:
    """NVTX push/pop ranges in the ``workbench`` domain, or nothing without the package."""

    def __init__(self) -> None:
        try:
            import nvtx
        except ImportError:
            self._nvtx: Any = None
            self.note = "no NVTX: the nvtx package is not installed (no ranges for ncu/nsys)"
        else:
            self._nvtx = nvtx
            self.note = ""

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        if self._nvtx is None:
            yield
            return
        self._nvtx.push_range(message=name, domain=NVTX_DOMAIN)
        try:
            yield
        finally:
            self._nvtx.pop_range(domain=NVTX_DOMAIN)


class Heartbeat:
    """Reports progress at stage changes and at most every ``HEARTBEAT_S`` within a stage."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self._last = 0.0
        self._stage = ""

    def __call__(self, stage: str, detail: str = "") -> None:
        now = time.monotonic()
        if stage != self._stage or now - self._last >= HEARTBEAT_S:
            self.progress(f"{stage} {detail}".strip())
            self._stage, self._last = stage, now


def measure(
    opts: TimingOptions,
    *,
    launch: Callable[[], None],
    timed_launch: Callable[[], float],
    flush: Callable[[], None],
    clocks: ClockReader | None,
    clock_note: str,
    beat: Heartbeat,
    before_launch: Callable[[], None] = lambda: None,
    unit: str = "launch",
) -> Timing:
    """The timing protocol, one copy for a config and for a baseline library call: warm up
    (``launch`` runs once and synchronises) for at least ``warmup_min_launches`` and
    ``warmup_s``, then take samples until the stopping rule is satisfied, each after an L2
    flush (when ``opts.flush_l2``) and followed by an SM clock reading that marks throttled
    samples. ``before_launch`` runs before every launch, warm-up or timed (outputs that must
    start from their fill value)."""
    start = time.perf_counter()
    warmups = 0
    while warmups < opts.warmup_min_launches or time.perf_counter() - start < opts.warmup_s:
        before_launch()
        launch()
        warmups += 1
        beat("warm-up", f"{unit} {warmups}")
    warmed = time.perf_counter()
    energy_before = clocks.energy_mj() if clocks else None
    rule = opts.rule.clone()
    rule.reset()
    max_clock = clocks.max_sm_clock_mhz if clocks else None
    samples: list[float] = []
    readings: list[float | None] = []
    flags: list[bool] = []
    while not rule.done():
        before_launch()
        if opts.flush_l2:
            flush()
        samples.append(timed_launch())
        readings.append(clocks.sm_clock_mhz() if clocks else None)
        flags.append(is_throttled(readings[-1], max_clock, opts.throttle_fraction))
        rule.add(samples[-1], throttled=flags[-1])
        beat("timing", f"sample {len(samples)}")
    assert rule.stop_reason is not None
    sampled = time.perf_counter()
    energy_after = clocks.energy_mj() if energy_before is not None and clocks else None
    energy = None if energy_after is None else energy_after - energy_before  # type: ignore[operator]
    return Timing(
        samples_ms=tuple(samples),
        sm_clock_mhz=tuple(readings) if clocks else (),
        throttled=tuple(flags),
        max_sm_clock_mhz=max_clock,
        stop_reason=rule.stop_reason,
        warmup_launches=warmups,
        seconds=time.perf_counter() - start,
        clock_note=clock_note,
        warmup_seconds=warmed - start,
        energy_mj=energy,
        sampling_seconds=sampled - warmed,
    )


class CudaExecutor:
    """Owns the primary context of one GPU and answers the runner's requests.

    Args:
        ordinal: CUDA device ordinal.
        gpu: the device to use instead of opening ``ordinal`` (something with :class:`Gpu`'s
            methods: the CPU tests pass host memory, so that everything but the launch itself
            runs as it does on a GPU).

    Raises:
        CudaError: no driver or device, or the context cannot be set up.
    """

    def __init__(self, ordinal: int = 0, gpu: Gpu | None = None) -> None:
        self.gpu = gpu if gpu is not None else Gpu(ordinal)
        self.props: DeviceProperties = self.gpu.properties()
        self.clocks, self.clock_note = ClockReader.open(self.props.uuid)
        self.ranges = NvtxRanges()
        self.flusher = L2Flush(self.gpu, self.props.limits["l2_bytes"])
        self.inputs: dict[str, DeviceBuffer] = {}
        self.inputs_key: str | None = None
        self.outputs: dict[str, DeviceBuffer] = {}
        self.kernels: OrderedDict[str, Kernel] = OrderedDict()
        #: the reference's outputs on the GPU (device verification), and whose they are
        self.expected: dict[str, DeviceBuffer] = {}
        self.expected_key: str | None = None
        self.result: DeviceBuffer | None = None

    def info(self) -> Mapping[str, Any]:
        p, clocks = self.props, self.clocks
        return {
            "device": {
                "name": p.name,
                "cc": p.cc,
                "uuid": p.uuid,
                "driver": clocks.driver_version if clocks else None,
                "cuda": p.cuda,
                "sm_clock_max_mhz": _int(clocks.max_sm_clock_mhz if clocks else None)
                or p.sm_clock_max_mhz,
                "memory_clock_mhz": _int(clocks.max_memory_clock_mhz if clocks else None)
                or p.memory_clock_mhz,
            },
            "cc": p.cc,
            "limits": dict(p.limits),
            "notes": [n for n in (self.clock_note, self.ranges.note) if n],
        }

    def handle(self, request: Any, progress: Progress) -> Any:
        if isinstance(request, LoadInputs):
            return self._load_inputs(request, progress)
        if isinstance(request, RunOnce):
            return self._run_once(request, progress)
        if isinstance(request, TimeKernel):
            return self._time(request, progress)
        if isinstance(request, VerifyOnDevice):
            return self._verify_on_device(request, progress)
        raise TypeError(f"the CUDA worker does not handle {type(request).__name__}")

    # -- inputs --------------------------------------------------------------------------
    def _load_inputs(self, request: LoadInputs, progress: Progress) -> InputsLoaded:
        start = time.perf_counter()
        for buf in self.inputs.values():
            self.gpu.free(buf)
        self.inputs, self.inputs_key = {}, None
        total = 0
        for f in request.files:
            progress(f"loading input {f.name}")
            host = np.load(f.path, mmap_mode="r", allow_pickle=False)
            buf = self.gpu.alloc(f.nbytes)
            self.inputs[f.name] = buf
            self.gpu.upload(buf, host)
            total += f.nbytes
        self.inputs_key = request.key
        return InputsLoaded(request.key, total, time.perf_counter() - start)

    # -- one config ----------------------------------------------------------------------
    def _kernel(self, job: KernelJob, launch: Launch | None = None) -> Kernel:
        kernel = self.kernels.get(job.module_key)
        if kernel is None:
            kernel = self.gpu.load(job.cubin, job.entry)
            self.kernels[job.module_key] = kernel
            while len(self.kernels) > MODULE_CACHE:
                _, old = self.kernels.popitem(last=False)
                self.gpu.unload(old)
        else:
            self.kernels.move_to_end(job.module_key)
        self.gpu.prepare(kernel, job.launch if launch is None else launch)
        return kernel

    def _output(self, out: OutputBuffer) -> DeviceBuffer:
        buf = self.outputs.get(out.name)
        if buf is None or buf.nbytes < out.nbytes:
            if buf is not None:
                self.gpu.free(buf)
            buf = self.outputs[out.name] = self.gpu.alloc(out.nbytes)
        return DeviceBuffer(buf.ptr, out.nbytes)

    def _then(self, job: KernelJob, step: ThenStep) -> Kernel:
        """The kernel of ``job``'s second launch ``step`` (its own module of the same binary)."""
        return self._kernel(
            dataclasses.replace(
                job, module_key=f"{job.module_key}:{step.entry}", entry=step.entry, then=()
            ),
            step.launch,
        )

    def _prepare(self, job: KernelJob, progress: Progress) -> tuple[_Launches, list, float]:
        progress("loading module")
        start = time.perf_counter()
        kernel = self._kernel(job)
        thens = [(self._then(job, step), step) for step in job.then]
        loaded = time.perf_counter() - start
        outputs = [(o, self._output(o)) for o in job.outputs]
        buffers = {**self.inputs, **{o.name: b for o, b in outputs}}
        for arg in job.args:
            name = arg.name if isinstance(arg, BufferArg) else getattr(arg, "buffer", None)
            if name is not None and name not in buffers:
                raise _NotLoaded(f"buffer {name} is not loaded (inputs: {self.inputs_key})")
        addresses = {name: buf.ptr for name, buf in buffers.items()}
        args = launch_arguments(job.args, addresses, self.gpu.encode_tensor_map)
        then = tuple(
            (k, step.launch, launch_arguments(step.args, addresses, self.gpu.encode_tensor_map))
            for k, step in thens
        )
        return _Launches(self.gpu, kernel, job.launch, args, then), outputs, loaded

    def _run_once(self, request: RunOnce, progress: Progress) -> OutputFiles:
        job = request.job
        launches, outputs, loaded = self._prepare(job, progress)
        with self.ranges.range(job.label):
            progress("filling outputs")
            for out, buf in outputs:
                self.gpu.fill(buf, out.fill)
            progress("launch")
            start = time.perf_counter()
            launches.run()
            self.gpu.synchronize()
            seconds = time.perf_counter() - start
        progress("copying outputs back")
        paths = {}
        for out, buf in outputs:
            host = np.empty(out.nbytes, dtype=np.uint8)
            self.gpu.download(buf, host)
            path = Path(request.out_dir) / f"{out.name}.npy"
            write_raw(path, host)
            paths[out.name] = str(path)
        return OutputFiles(paths, seconds, load_seconds=loaded)

    def _verify_on_device(self, request: VerifyOnDevice, progress: Progress) -> DeviceVerdicts:
        job = request.job
        launches, outputs, loaded = self._prepare(job, progress)
        start = time.perf_counter()
        self._load_expected(request, progress)
        compares = [(c, self._kernel(c.kernel)) for c in request.compares]
        loaded += time.perf_counter() - start
        if self.result is None:
            self.result = self.gpu.alloc(RESULT_BYTES)
        start = time.perf_counter()
        with self.ranges.range(job.label):
            progress("filling outputs")
            for out, buf in outputs:
                self.gpu.fill(buf, out.fill)
            progress("launch")
            launches.run()
            self.gpu.synchronize()
        by_name = {o.name: b for o, b in outputs}
        results = {}
        for compare, compare_kernel in compares:
            progress(f"comparing {compare.output}")
            addresses = {
                compare.output: by_name[compare.output].ptr,
                "expected": self.expected[compare.output].ptr,
                "result": self.result.ptr,
            }
            self.gpu.upload(self.result, np.frombuffer(INITIAL_RESULT, dtype=np.uint8))
            packed = launch_arguments(compare.kernel.args, addresses)
            self.gpu.launch(compare_kernel, compare.kernel.launch, packed)
            self.gpu.synchronize()
            raw = np.empty(RESULT_BYTES, dtype=np.uint8)
            self.gpu.download(self.result, raw)
            results[compare.output] = raw.tobytes()
        return DeviceVerdicts(results, time.perf_counter() - start, load_seconds=loaded)

    def _load_expected(self, request: VerifyOnDevice, progress: Progress) -> None:
        """The reference's outputs of ``request.key`` on the GPU (uploaded once per key)."""
        if self.expected_key == request.key:
            return
        for buf in self.expected.values():
            self.gpu.free(buf)
        self.expected, self.expected_key = {}, None
        for compare in request.compares:
            progress(f"loading the reference's {compare.output}")
            host = np.load(compare.expected.path, mmap_mode="r", allow_pickle=False)
            buf = self.gpu.alloc(compare.expected.nbytes)
            self.expected[compare.output] = buf
            self.gpu.upload(buf, host)
        self.expected_key = request.key

    def _time(self, request: TimeKernel, progress: Progress) -> Timing:
        job, opts = request.job, request.options
        launches, outputs, loaded = self._prepare(job, progress)
        resets = [(o, b) for o, b in outputs if o.reset_each_launch]

        def reset() -> None:
            for out, buf in resets:
                self.gpu.fill(buf, out.fill)

        def launch() -> None:
            launches.run()
            self.gpu.synchronize()

        with self.ranges.range(job.label):
            timing = measure(
                opts,
                launch=launch,
                timed_launch=launches.timed,
                flush=self.flusher.flush,
                clocks=self.clocks,
                clock_note=self.clock_note,
                beat=Heartbeat(progress),
                before_launch=reset,
            )
        return dataclasses.replace(timing, load_seconds=loaded)

    def close(self) -> None:
        for kernel in self.kernels.values():
            self.gpu.unload(kernel)
        for buf in (*self.inputs.values(), *self.outputs.values(), *self.expected.values()):
            self.gpu.free(buf)
        if self.result is not None:
            self.gpu.free(self.result)
        self.flusher.close()
        if self.clocks:
            self.clocks.close()
        self.gpu.close()


@dataclasses.dataclass(frozen=True)
class _Launches:
    """A config's launches on the GPU's stream: the entry, then its second kernels (``then``),
    run and timed as one call."""

    gpu: Any
    kernel: Kernel
    launch: Launch
    args: ArgPack
    then: tuple[tuple[Kernel, Launch, ArgPack], ...] = ()

    def run(self) -> None:
        self.gpu.launch(self.kernel, self.launch, self.args)
        for kernel, launch, args in self.then:
            self.gpu.launch(kernel, launch, args)

    def timed(self) -> float:
        """Milliseconds from before the entry to after the last kernel (one event pair)."""
        if not self.then:
            return float(self.gpu.timed_launch(self.kernel, self.launch, self.args))
        return float(self.gpu.timed_launch(self.kernel, self.launch, self.args, then=self.then))


class _NotLoaded(RuntimeError):
    """A request names a buffer the worker does not hold (a protocol bug, not the kernel's)."""

    recoverable = True


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
