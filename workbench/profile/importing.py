"""``workbench profile --import FILE.ncu-rep``: profiles made elsewhere, into the store."""

from __future__ import annotations

from pathlib import Path

from workbench.profile.errors import ReportError
from workbench.profile.metrics import MetricSet, metrics_of
from workbench.profile.nvperf import is_ncu_side
from workbench.profile.profiler import record_from_kernel
from workbench.profile.report import KernelProfile, Report, load_report
from workbench.profile.storage import ProfileRecord
from workbench.runners.protocol import NVTX_DOMAIN
from workbench.spaces.model import Config, parse_config_label


def incomplete_note(kernel: KernelProfile) -> str | None:
    """A note for a launch whose counters are mostly NaN (a replay that did not finish)."""
    if kernel.complete:
        return None
    counters = [n for n in kernel.metrics if not is_ncu_side(n)]
    nan = [n for n in kernel.nan if not is_ncu_side(n)]
    return (
        f"incomplete profile: {len(nan)} of {len(counters)} counters are NaN (reported as missing)"
    )


def workbench_range(kernel: KernelProfile) -> tuple[str, Config] | None:
    """The workbench kernel and config a launch ran, from the NVTX range the CUDA runner puts
    around each config's launches (``workbench@KERNEL:NAME=VALUE,...``); None outside one."""
    for name in reversed(kernel.nvtx):  # the innermost range first
        domain, _, label = name.partition("@")
        what, sep, config_text = label.partition(":")
        config = parse_config_label(config_text) if sep else None
        if domain == NVTX_DOMAIN and what and config:
            return what, config
    return None


def import_report(
    path: Path | str,
    *,
    select: str | None = None,
    kernel: str | None = None,
    config: Config | None = None,
    shape: str | None = None,
    metric_set: MetricSet = MetricSet.FULL,
) -> tuple[Report, list[ProfileRecord]]:
    """Read a report and turn each launch (or those matching ``select``) into a record.

    Args:
        path: the ``.ncu-rep`` file.
        select: keep launches whose mangled, demangled or short name matches (see
            :meth:`KernelProfile.matches`).
        kernel: the workbench kernel the launches belong to (default: the one named by the
            workbench NVTX range around the launch, else the launch's name).
        config: the config they ran (with ``kernel``; default: the NVTX range's).
        shape: the shape label they ran.
        metric_set: the set whose names are checked for presence (``missing``).

    Raises:
        ReportError: unreadable report, or no launch matches ``select``.
    """
    report = load_report(path)
    kernels = list(report.kernels) if select is None else report.find(select)
    if not kernels:
        names = sorted({k.function_name for k in report.kernels})
        raise ReportError(report.path, f"no launch matches {select!r} (it holds {names})")
    expected = [m.name for m in metrics_of(metric_set) if not m.optional]
    records = []
    for k in kernels:
        note = incomplete_note(k)
        ran = workbench_range(k) if kernel is None and config is None else None
        records.append(
            record_from_kernel(
                k,
                source="import",
                metric_set=metric_set.value,
                expected=expected,
                kernel_name=ran[0] if ran else kernel,
                config=ran[1] if ran else config,
                shape=shape,
                source_file=report.path.resolve(),
                sha256=report.sha256,
                notes=[note] if note else [],
            )
        )
    return report, records
