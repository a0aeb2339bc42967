"""The baseline worker: runs library baselines under the CUDA runner's timing protocol.

It lives in a supervised worker process (:class:`~workbench.supervisor.Supervisor`),
like the CUDA runner's, so a library that crashes or hangs costs one baseline and a restart,
and CuPy and PyTorch are imported there, never in the command's process. It holds the
device's primary context (which CuPy and PyTorch share through the runtime API) and one
stream that every library call, L2 flush and event is ordered on. The timing script is the
CUDA executor's (``workbench.runners.cuda.worker``): warm-up, then until the stopping rule is
done an L2 flush, one event pair around one call, and the SM clock read after it; every sample
is kept, and the median with its interval is computed by the parent with the same
:func:`~workbench.runners.timing.summarize`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.compare.baselines import BaselineUnsupported, Prepared, _load_all, baseline_for
from workbench.compare.problems import BaselineProblem
from workbench.runners.protocol import Timing, read_raw, write_raw
from workbench.runners.timing import TimingOptions
from workbench.supervisor import Progress


@dataclass(frozen=True)
class ArrayFile:
    """An array as raw bytes in an ``.npy`` file (``runners.protocol.write_raw``)."""

    name: str
    path: str
    dtype: str  #: space dtype name (``int8``, ``float8_e4m3``) or ``uint8``
    shape: tuple[int, ...]

    def load(self) -> Any:
        from workbench.runners.buffers import numpy_dtype
        from workbench.spaces.schema import DType

        return read_raw(self.path, numpy_dtype(DType(self.dtype)), self.shape)


@dataclass(frozen=True)
class BaselineJob:
    """Run one baseline (one of its variants) on one problem: once on poisoned outputs, then
    timed. ``cache_dir``: where a library may keep what it compiles between runs."""

    baseline: str
    problem: BaselineProblem
    inputs: tuple[ArrayFile, ...]
    out_dir: str
    options: TimingOptions
    variant: str | None = None
    cache_dir: str | None = None


@dataclass(frozen=True)
class VariantsJob:
    """List the variants of a baseline that :attr:`~Baseline.has_variants` for a problem on
    this GPU; the reply is a tuple of :class:`~workbench.compare.baselines.BaselineVariant`."""

    baseline: str
    problem: BaselineProblem


@dataclass(frozen=True)
class BaselineReply:
    outputs: tuple[ArrayFile, ...]
    timing: Timing
    library: str
    compile_s: float | None = None  #: what the library compiled before it ran, if anything
    compile_note: str = ""  #: how (JIT, loaded from a cache)


class BaselineExecutor:
    """Owns the primary context of one GPU and answers :class:`BaselineJob` requests.

    Args:
        ordinal: CUDA device ordinal.
    """

    def __init__(self, ordinal: int = 0) -> None:
        from workbench.runners.cuda.driver import Gpu, L2Flush
        from workbench.runners.cuda.nvml import ClockReader
        from workbench.runners.cuda.worker import NvtxRanges

        self.gpu = Gpu(ordinal)
        self.props = self.gpu.properties()
        self.clocks, self.clock_note = ClockReader.open(self.props.uuid)
        self.ranges = NvtxRanges()
        self.flusher = L2Flush(self.gpu, self.props.limits["l2_bytes"])
        self.events = _EventPair(self.gpu.stream)
        _load_all()

    def info(self) -> Mapping[str, Any]:
        p = self.props
        return {
            "device": {"name": p.name, "cc": p.cc, "uuid": p.uuid, "cuda": p.cuda},
            "cc": p.cc,
            "notes": [n for n in (self.clock_note, self.ranges.note) if n],
        }

    def handle(self, request: Any, progress: Progress) -> Any:
        if isinstance(request, VariantsJob):
            progress(f"{request.baseline}: listing variants")
            return baseline_for(request.baseline, request.problem).variants(
                request.problem, self.props.cc
            )
        if not isinstance(request, BaselineJob):
            raise TypeError(f"the baseline worker does not handle {type(request).__name__}")
        baseline = baseline_for(request.baseline, request.problem)
        progress(f"{request.baseline}: preparing")
        inputs = {f.name: f.load() for f in request.inputs}
        stream = int(self.gpu.stream)
        if request.variant is None:
            prepared = baseline.prepare(request.problem, inputs, stream)
        else:
            prepared = baseline.prepare_variant(
                request.problem, inputs, stream, variant=request.variant, cc=self.props.cc,
                cache_dir=request.cache_dir,
            )  # fmt: skip
        try:
            where = "/".join(filter(None, ("compare", request.baseline, request.variant)))
            with self.ranges.range(where):
                prepared.poison()
                progress(f"{request.baseline}: checked run")
                prepared.launch()
                self.gpu.synchronize()
                outputs = self._write(prepared, Path(request.out_dir), request.baseline)
                timing = self._time(prepared, request.options, progress)
            compile_s = getattr(prepared, "compile_s", None)
            note = str(getattr(prepared, "compile_note", ""))
            return BaselineReply(outputs, timing, _version(baseline), compile_s, note)
        finally:
            close = getattr(prepared, "close", None)
            if close is not None:
                close()

    def _write(self, prepared: Prepared, out_dir: Path, name: str) -> tuple[ArrayFile, ...]:
        files = []
        for key, array in prepared.outputs().items():
            path = out_dir / f"{name}-{key}.npy"
            write_raw(path, array)
            files.append(ArrayFile(key, str(path), _dtype_name(array), tuple(array.shape)))
        return tuple(files)

    def _time(self, prepared: Prepared, opts: TimingOptions, progress: Progress) -> Timing:
        # the runner's protocol, so that a baseline and the tuned config are timed alike
        from workbench.runners.cuda.worker import Heartbeat, measure

        def launch() -> None:
            prepared.launch()
            self.gpu.synchronize()

        return measure(
            opts,
            launch=launch,
            timed_launch=lambda: self.events.time(prepared.launch),
            flush=self.flusher.flush,
            clocks=self.clocks,
            clock_note=self.clock_note,
            beat=Heartbeat(progress),
            unit="call",
        )

    def close(self) -> None:
        self.events.close()
        self.flusher.close()
        if self.clocks:
            self.clocks.close()
        self.gpu.close()


class _EventPair:
    """Two CUDA events on the timing stream around one library call."""

    def __init__(self, stream: Any) -> None:
        from cuda.bindings import driver as cu

        from workbench.runners.cuda.driver import call

        self.cu, self.call, self.stream = cu, call, stream
        flags = cu.CUevent_flags.CU_EVENT_DEFAULT.value
        self.start = call(cu.cuEventCreate, flags)
        self.stop = call(cu.cuEventCreate, flags)

    def time(self, launch: Callable[[], None]) -> float:
        """Milliseconds between the events recorded before and after ``launch()``."""
        cu, call = self.cu, self.call
        call(cu.cuEventRecord, self.start, self.stream)
        launch()
        call(cu.cuEventRecord, self.stop, self.stream)
        call(cu.cuEventSynchronize, self.stop)
        return float(call(cu.cuEventElapsedTime, self.start, self.stop))

    def close(self) -> None:
        for event in (self.start, self.stop):
            self.call(self.cu.cuEventDestroy, event)


def _version(baseline: Any) -> str:
    """The library version, or the title when the library cannot say (never fatal)."""
    try:
        return str(baseline.version())
    except Exception as exc:
        return f"{baseline.title} (version unknown: {type(exc).__name__})"


def _dtype_name(array: Any) -> str:
    from workbench.runners.buffers import numpy_dtype
    from workbench.spaces.schema import DType

    for d in DType:
        if numpy_dtype(d) == array.dtype:
            return d.value
    raise BaselineUnsupported(f"a baseline returned an array of {array.dtype}")
