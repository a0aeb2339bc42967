"""``workbench profile --import FILE.ncu-rep``: profiles made elsewhere, into the store."""

from __future__ import annotations

from pathlib import Path

from workbench.profile.errors import ReportError
from workbench.profile.metrics import MetricSet, metrics_of
from workbench.profile.nvperf import is_ncu_side
from workbench.profile.profiler import record_from_kernel
from workbench.profile.report import KernelProfile, Report, load_report
from workbench.profile.storage import ProfileRecord
from workbench.spaces.model import Config


def incomplete_note(kernel: KernelProfile) -> str | None:
    """A note for a launch whose counters are mostly NaN (a replay that did not finish)."""
    if kernel.complete:
        return None
    counters = [n for n in kernel.metrics if not is_ncu_side(n)]
    nan = [n for n in kernel.nan if not is_ncu_side(n)]
    return (
        f"incomplete profile: {len(nan)} of {len(counters)} counters are NaN (reported as missing)"
    )


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
        kernel: the workbench kernel the launches belong to (default: the report's name).
        config: the config they ran (with ``kernel``).
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
        records.append(
            record_from_kernel(
                k,
                source="import",
                metric_set=metric_set.value,
                expected=expected,
                kernel_name=kernel,
                config=config,
                shape=shape,
                source_file=report.path.resolve(),
                sha256=report.sha256,
                notes=[note] if note else [],
            )
        )
    return report, records
