"""Recordings a tune replays: the ones kept beside a space file (``recordings/KERNEL/``), found
by shape and problem variant, and the banner that says where replayed numbers come from."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from workbench.runners.recordings import Recording, load_recording
from workbench.spaces.model import SpaceSpec, base_kernel


def replay_banner(recording: Recording) -> str:
    when = f" on {recording.date[:10]}" if recording.date else ""
    note = f" Note: {recording.note}." if recording.note else ""
    return (
        f"REPLAY: every number below was measured on {recording.device.name}{when} and read "
        f"from {recording.path}; nothing runs on this machine.{note}"
    )


def recordings_dir(spec: SpaceSpec) -> Path:
    """Where recordings of ``spec``'s kernel are kept: ``recordings/<kernel>/`` beside its
    space file (the library's are in ``tuning_spaces/recordings/``), every problem variant's
    (``reduce[OP=sum]``) in its kernel's folder."""
    return spec.path.parent / "recordings" / spec.name


def shipped_recordings(spec: SpaceSpec) -> list[Recording]:
    """Recordings of ``spec``'s kernel (any of its problem variants) kept in
    :func:`recordings_dir`, and in the folders of its file's named variants (``reduce``:
    ``recordings/reduce_f16/`` too).

    Raises:
        RecordingError: a recording there is damaged (it is not silently skipped).
    """
    names = dict.fromkeys([spec.name, *(v.name for v in spec.variants)])
    out = []
    for name in names:
        folder = spec.path.parent / "recordings" / name
        for path in sorted(folder.glob("*.json*")) if folder.is_dir() else []:
            recording = load_recording(path)
            if base_kernel(recording.kernel) in names:
                out.append(recording)
    return out


def recording_for_shape(
    recordings: list[Recording], shape: Mapping[str, int], kernel: str | None = None
) -> Recording | None:
    """The recording of ``shape`` (and, given ``kernel``, of that problem variant:
    ``reduce[OP=sum]``; a recording named without a variant matches any)."""
    for r in recordings:
        if not r.shape or dict(r.shape) != dict(shape):
            continue
        if kernel is None or r.kernel in (kernel, base_kernel(kernel)):
            return r
    return None
