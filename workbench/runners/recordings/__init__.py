"""Recorded measurements: Kernel Tuner cache files, T4 files and the workbench's own recordings.

A :class:`Recording` is a brute-forced (or sampled) space measured on one device: what the
replay runner answers from, what ``workbench record`` writes, and what the store imports and
exports. Every reader refuses damaged input with a :class:`RecordingError` that names the file
and what is wrong.

- :mod:`~workbench.runners.recordings.model`: the recording, its entries, its error;
- :mod:`~workbench.runners.recordings.reading`: :func:`load_recording`, any format;
- :mod:`~workbench.runners.recordings.kt_cache`, :mod:`~workbench.runners.recordings.t4`,
  :mod:`~workbench.runners.recordings.native`: one format each (the last also writes);
- :mod:`~workbench.runners.recordings.fields`: the fields every format has, read one way.

The format lives under ``runners/`` because its entries are the runner contract's own values
(:class:`~workbench.runners.base.TrialOutcome`, ``DeviceInfo``, ``Objective``, a
``Measurement`` when replayed), and the replay runner reads it.
"""

from __future__ import annotations

from workbench.runners.recordings.model import (
    RECORDED_AS,
    RecordedEntry,
    Recording,
    RecordingError,
)
from workbench.runners.recordings.native import median_interval_of, write_recording
from workbench.runners.recordings.reading import load_recording

__all__ = [
    "RECORDED_AS",
    "RecordedEntry",
    "Recording",
    "RecordingError",
    "load_recording",
    "median_interval_of",
    "write_recording",
]
