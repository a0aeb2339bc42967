"""Profile one config of a kernel: check the metric names against the chip, run Nsight Compute
on exactly that config's launch, read the report, store the metrics. When ncu is missing or
cannot read counters, say which and measure the event-timing roofline instead.

Steps that need no GPU (the chip, the metric check, the compile that yields the kernel's
symbol, the commands) are in :func:`plan`, so they are tested on any machine.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from workbench.analysis.signature import require_matching_arguments
from workbench.compiler import CompileCache, compile_job, make_job
from workbench.errors import CompileError
from workbench.gpu import probe_gpu
from workbench.profile.chips import chip_for_name, chip_for_preset
from workbench.profile.errors import (
    NcuProblem,
    NcuUnavailable,
    NoGpuToProfile,
    ProfileError,
    ReportError,
)
from workbench.profile.metrics import MetricSet, ResolvedSet, resolve
from workbench.profile.ncu import (
    NCU_TIMEOUT_S,
    LaunchSelection,
    NcuRun,
    find_ncu,
    ncu_command,
    nvtx_filter,
    run_ncu,
    target_command,
)
from workbench.profile.report import KernelProfile, Report, load_report
from workbench.profile.storage import ProfileRecord
from workbench.roofline import Achieved, achieved_from_metrics
from workbench.spaces import Space, config_label
from workbench.spaces.model import Config, shape_label
from workbench.static.register_budget import require_register_budget

#: Where reports of ``workbench profile`` are kept (they are evidence: never deleted here).
DEFAULT_REPORT_DIR = Path(".workbench") / "profiles"


@dataclass(frozen=True)
class ProfileRequest:
    """One ``workbench profile`` run.

    Attributes:
        space: the kernel's space (shape, arch, device preset).
        config: the config to profile.
        metric_set: which metrics to collect.
        extra_metrics: more names (``--metrics``), checked like the set's.
        device_preset: ``--device`` as given (passed on to the profiled process).
        spaces: ``--spaces`` folders (passed on).
        cache_dir: the compile cache (passed on, so the profiled process compiles nothing).
        seed: seed of the inputs.
        ncu: an explicit ncu executable.
        report_dir: where the ``.ncu-rep`` goes.
        timeout_s: the longest ncu may run.
        launch_skip: matching launches to let pass before the profiled one.
    """

    space: Space
    config: Config
    metric_set: MetricSet = MetricSet.FULL
    extra_metrics: tuple[str, ...] = ()
    device_preset: str | None = None
    spaces: tuple[Path, ...] = ()
    cache_dir: Path | None = None
    seed: int = 0
    ncu: Path | None = None
    report_dir: Path = DEFAULT_REPORT_DIR
    timeout_s: float = NCU_TIMEOUT_S
    launch_skip: int = 0

    @property
    def label(self) -> str:
        return config_label(self.config)


@dataclass(frozen=True)
class Plan:
    """Everything decided before a GPU is touched."""

    chip: str
    resolved: ResolvedSet
    symbol: str
    report_base: Path  #: ``--export`` path (ncu appends ``.ncu-rep``)
    target: tuple[str, ...]
    selection: LaunchSelection

    @property
    def report(self) -> Path:
        return self.report_base.with_name(self.report_base.name + ".ncu-rep")

    def command(self, ncu: Path | str, *, nvtx: bool = True) -> list[str]:
        selection = self.selection
        if not nvtx:
            selection = LaunchSelection(selection.mangled, None, selection.launch_skip)
        return ncu_command(
            ncu,
            metrics=self.resolved.collect,
            selection=selection,
            output=self.report_base,
            target=self.target,
        )


@dataclass(frozen=True)
class ProfileOutcome:
    """What a profile produced: the record to store and the figures derived from it."""

    record: ProfileRecord
    achieved: Achieved
    kernel: KernelProfile | None = None
    report: Path | None = None
    fallback: str | None = None  #: why event timing replaced the counters
    notes: tuple[str, ...] = field(default_factory=tuple)


def target_chip(space: Space, device_preset: str | None = None) -> str:
    """The chip metric names are checked against: the GPU here, else the device preset.

    Raises:
        ProfileError: no chip is known for the GPU or preset.
    """
    probe = probe_gpu()
    if probe.available:
        chip = chip_for_name(probe.name, probe.cc)
        if chip:
            return chip
    for name in (device_preset, _preset_key(space)):
        chip = chip_for_preset(name) if name else None
        if chip:
            return chip
    raise ProfileError(
        f"no Perfworks chip known for {space.device.name} (cc {space.device.cc}); "
        "name a `device` preset (a100, h100, h200, ...)"
    )


def _preset_key(space: Space) -> str | None:
    from workbench.devices import DEVICES

    return next((k for k, spec in DEVICES.items() if spec == space.device), None)


def kernel_symbol(space: Space, config: Config, cache: CompileCache) -> str:
    """The mangled symbol the config's binary launches (compiling it into the cache).

    Raises:
        CompileError: the config does not compile.
        SpaceFileError: the space's ``args`` do not match the kernel's parameters.
        LaunchRefusedError: the binary's register count is not its setmaxnreg budget.
    """
    result = compile_job(make_job(space, config), cache)
    if not result.ok or not result.entry or result.cubin is None:
        raise CompileError(f"{space.spec.name} {config_label(config)} does not compile", result.log)
    require_matching_arguments(space.spec, result.cubin, result.entry, result.ptx)
    require_register_budget(space, config, result)
    return result.entry


def plan(request: ProfileRequest, *, nvtx_available: bool = True) -> Plan:
    """Check the metric names, compile, and build the commands; needs no GPU.

    Raises:
        MetricNameError: a metric name is unknown for the chip.
        CompileError: the config does not compile.
        ProfileError: no chip is known for the device.
    """
    space, label = request.space, request.label
    chip = target_chip(space, request.device_preset)
    resolved = resolve(request.metric_set, chip, request.extra_metrics)
    symbol = kernel_symbol(space, request.config, CompileCache(request.cache_dir))
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    digest = hashlib.sha256(f"{shape_label(space.shape)}|{label}".encode()).hexdigest()[:10]
    base = request.report_dir / f"{space.spec.name}-{digest}-{stamp}"
    target = target_command(
        str(space.spec.path),  # the very file: a name could find another space (or none)
        label,
        shape=space.shape,
        arch=space.arch.sm,
        device=request.device_preset,
        spaces=request.spaces,
        cache_dir=request.cache_dir,
        seed=request.seed,
    )
    nvtx = nvtx_filter(space.spec.name, label) if nvtx_available else None
    selection = LaunchSelection(symbol, nvtx, request.launch_skip)
    return Plan(chip, resolved, symbol, base, tuple(target), selection)


def nvtx_available() -> bool:
    """The CUDA runner names its ranges only when the ``nvtx`` package imports."""
    try:
        import nvtx  # noqa: F401
    except ImportError:
        return False
    return True


def profile_config(request: ProfileRequest) -> ProfileOutcome:
    """Profile with Nsight Compute; fall back to event timing when it cannot read counters.

    Raises:
        MetricNameError, CompileError: before any GPU work.
        NoGpuToProfile: no GPU (nothing can be measured here).
        ProfileError: the fallback measurement failed too, or the report lacks the kernel.
    """
    probe = probe_gpu()
    if not probe.available:
        raise NoGpuToProfile(
            f"{probe.reason}: nothing can be measured here (the metrics and the ncu command can "
            "still be checked, and a report made elsewhere imported)"
        )
    has_nvtx = nvtx_available()
    the_plan = plan(request, nvtx_available=has_nvtx)
    notes = [f"metric names checked against {the_plan.resolved.checked_by}"]
    if the_plan.resolved.skipped:
        notes.append(f"not on {the_plan.chip}: {', '.join(the_plan.resolved.skipped)}")
    if not has_nvtx:
        notes.append("the nvtx package is missing: launches selected by kernel symbol only")
    try:
        ncu = find_ncu(request.ncu)
        request.report_dir.mkdir(parents=True, exist_ok=True)
        run = _run(the_plan, ncu, request.timeout_s, notes)
        kernel = pick_kernel(load_report(the_plan.report), the_plan.symbol)
        if not kernel.complete:
            raise NcuUnavailable(
                NcuProblem.UNSUPPORTED,
                f"the report holds the kernel but its counters are NaN ({the_plan.report})",
            )
    except NcuUnavailable as exc:
        from workbench.profile.fallback import profile_with_timing

        return profile_with_timing(request, str(exc), notes)
    notes.extend(_target_notes(run))
    record = record_from_kernel(
        kernel,
        source="ncu",
        metric_set=request.metric_set.value,
        expected=the_plan.resolved.expected,
        kernel_name=request.space.spec.name,
        config=request.config,
        shape=shape_label(request.space.shape),
        source_file=the_plan.report,
        notes=notes,
        command=run.shown,
    )
    return ProfileOutcome(
        record, achieved_from_metrics(kernel.metrics), kernel, the_plan.report, None, tuple(notes)
    )


def _target_notes(run: NcuRun) -> list[str]:
    """What the profiled process said about the config, when it did not run correctly."""
    import json

    notes = []
    for line in run.target_lines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("outcome") != "ok":
            notes.append(f"the profiled process reports {doc.get('outcome')}: {doc.get('reason')}")
    return notes


def _run(the_plan: Plan, ncu: Path, timeout_s: float, notes: list[str]) -> NcuRun:
    """ncu with the NVTX filter; if it matches nothing, once more by kernel symbol alone (the
    profiled process runs this one config only, so the symbol alone selects the same launch).
    ``timeout_s`` bounds both runs together."""
    nvtx = the_plan.selection.nvtx is not None
    started = time.monotonic()
    try:
        return run_ncu(the_plan.command(ncu, nvtx=nvtx), the_plan.report, timeout_s)
    except NcuUnavailable as exc:
        if not nvtx or exc.problem is not NcuProblem.NO_KERNELS:
            raise
        notes.append(f"NVTX filter {the_plan.selection.nvtx!r} matched nothing; selected by symbol")
    left = max(1.0, timeout_s - (time.monotonic() - started))
    return run_ncu(the_plan.command(ncu, nvtx=False), the_plan.report, left)


def pick_kernel(report: Report, symbol: str) -> KernelProfile:
    """The launch of ``symbol`` in a report (the first, when there are several).

    Raises:
        ReportError: no launch of that symbol.
    """
    found = [k for k in report.kernels if k.mangled_name == symbol]
    if not found:
        names = ", ".join(sorted({k.mangled_name for k in report.kernels}))
        raise ReportError(report.path, f"no launch of {symbol} (it holds {names})")
    return found[0]


def record_from_kernel(
    kernel: KernelProfile,
    *,
    source: str,
    metric_set: str,
    expected: tuple[str, ...] | list[str] = (),
    kernel_name: str | None = None,
    config: Config | None = None,
    shape: str | None = None,
    source_file: Path | None = None,
    sha256: str | None = None,
    notes: list[str] | tuple[str, ...] = (),
    command: str | None = None,
) -> ProfileRecord:
    """The store record of one kernel of a report."""
    return ProfileRecord(
        kernel=kernel_name or kernel.function_name,
        source=source,
        metric_set=metric_set,
        metrics=dict(kernel.metrics),
        strings=dict(kernel.strings),
        config_key=config_label(config) if config is not None else None,
        params=dict(config) if config is not None else None,
        shape_label=shape,
        source_file=str(source_file) if source_file else None,
        source_sha256=sha256
        or (hashlib.sha256(source_file.read_bytes()).hexdigest() if source_file else None),
        report_index=kernel.index,
        function_name=kernel.function_name,
        demangled_name=kernel.demangled_name,
        mangled_name=kernel.mangled_name,
        device=kernel.device,
        chip=kernel.chip,
        cc=kernel.cc,
        missing=kernel.missing(expected),
        notes=tuple(notes),
        command=command,
    )
