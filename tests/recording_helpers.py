"""Writing a workbench recording of a space for tests (its times are made up: a fixture)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import write_recording
from workbench.spaces import Space
from workbench.spaces.model import Config


def record_space(
    space: Space,
    path: Path,
    entries: Iterable[tuple[Config, float | Measurement]],
    *,
    device: str | DeviceInfo = "Test GPU",
    kernel: str | None = None,
) -> Path:
    """A recording of ``space`` (its parameters and shape) holding ``entries``, on a device of
    that name; a float is a correct run's value."""
    return write_recording(
        path,
        kernel=kernel or space.spec.name,
        device=DeviceInfo(device) if isinstance(device, str) else device,
        parameters=[(p.name, p.values) for p in space.spec.parameters],
        entries=[
            (c, m if isinstance(m, Measurement) else Measurement(TrialOutcome.OK, value=m))
            for c, m in entries
        ],
        shape=space.shape,
    )
