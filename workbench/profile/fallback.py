"""The event-timing roofline, for when Nsight Compute cannot read counters: the CUDA runner's
median time and the space's work model (operations and minimum bytes)."""

from __future__ import annotations

from workbench.compiler import CompileCache
from workbench.profile.chips import chip_for_name
from workbench.profile.errors import ProfileError
from workbench.profile.profiler import ProfileOutcome, ProfileRequest
from workbench.profile.storage import ProfileRecord
from workbench.roofline import achieved_from_timing
from workbench.spaces import config_label
from workbench.spaces.launch import work_counts, work_precision
from workbench.spaces.model import shape_label


def profile_with_timing(
    request: ProfileRequest, reason: str, notes: list[str] | None = None
) -> ProfileOutcome:
    """The event-timing roofline: the CUDA runner's median time and the space's work model.

    Raises:
        ProfileError: the config did not run correctly.
    """
    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda.runner import CudaRunner

    space, config = request.space, request.config
    with CudaRunner(space, CompileCache(request.cache_dir), seed=request.seed) as runner:
        m = runner.evaluate(config)
        device = runner.device
    if m.outcome is not TrialOutcome.OK or m.value is None:
        raise ProfileError(
            f"no counters ({reason}), and the event-timing fallback failed: "
            f"{m.outcome.value}: {m.reason}"
        )
    ops, min_bytes = work_counts(space, config)
    precision = work_precision(space)
    achieved = achieved_from_timing(ops, min_bytes, m.value * 1e-3, precision)
    all_notes = [
        *(notes or ()),
        f"fell back to event timing: {reason}",
        f"compared with the {precision} ceiling (from the inputs' dtypes)",
    ]
    record = ProfileRecord(
        kernel=space.spec.name,
        source="event-timing",
        metric_set="timing",
        metrics={
            "event_time_ms": m.value,
            "event_time_ci_low_ms": m.ci_low,
            "event_time_ci_high_ms": m.ci_high,
            "work_ops": ops,
            "work_min_bytes": min_bytes,
        },
        strings={"work_precision": precision},
        config_key=config_label(config),
        params=dict(config),
        shape_label=shape_label(space.shape),
        device=device.name,
        chip=chip_for_name(device.name, device.cc),
        cc=device.cc,
        notes=tuple(all_notes),
    )
    return ProfileOutcome(record, achieved, None, None, reason, tuple(all_notes))
