"""Reading a recording of any format: the bytes (gzip or not, capped), the JSON, and the
reader its content names."""

from __future__ import annotations

import contextlib
import gc
import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

from workbench.runners.recordings.kt_cache import closed_kt_cache, read_kt_cache
from workbench.runners.recordings.model import Recording, RecordingError
from workbench.runners.recordings.native import FORMAT_NAME, read_workbench_recording
from workbench.runners.recordings.t4 import read_t4

#: The most bytes of JSON a recording may hold (decompressed): 32x the largest real cache at
#: hand (gemm_RTX_3090.json.gz, 17,956 configs: 3.5 MB of gzip, 16.5 MB of JSON). Parsed JSON
#: takes several times its size in memory; a 2.6 MB gzip bomb expanding to 2.5 GiB took 5.4 GB
#: before the format was even checked.
MAX_RECORDING_BYTES = 512 * 2**20


def load_recording(path: str | Path) -> Recording:
    """Read any supported recording (format detected from the content).

    Raises:
        RecordingError: unreadable, truncated, not JSON, unknown format, inconsistent entries.
    """
    path = Path(path)
    with _collector_paused():
        data = _read_json(path)
        if not isinstance(data, dict):
            raise RecordingError(path, "expected a JSON object at the top level")
        recording = None
        try:
            if data.get("format") == FORMAT_NAME:
                recording = read_workbench_recording(path, data)
            elif "cache" in data and "tune_params_keys" in data:
                recording = read_kt_cache(path, data)
            elif "schema_version" in data and "results" in data:
                recording = read_t4(path, data)
        except RecordingError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            # a field of the wrong JSON type somewhere the checks above do not look: named,
            # not a traceback
            raise RecordingError(
                path, f"malformed {_format_of(data)} ({type(exc).__name__}: {exc})"
            ) from exc
    if recording is not None:
        if not recording.entries:  # nothing to replay or import: said, for every command
            raise RecordingError(path, "holds no measured configs (its entries are empty)")
        return recording
    raise RecordingError(
        path,
        "unknown format: expected a Kernel Tuner cache file (cache, tune_params_keys), a T4 "
        "file (schema_version, results) or a workbench recording",
    )


def _format_of(data: dict) -> str:
    if data.get("format") == FORMAT_NAME:
        return "workbench recording"
    return "Kernel Tuner cache" if "cache" in data else "T4 file"


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a recording is read: parsing and building
    allocate hundreds of thousands of containers, none of them garbage, and each full pass
    over them rescans the whole parse (about a quarter of building the entries of an 18k-config
    cache, measured)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_json(path: Path) -> object:
    raw = _read_capped(path)
    try:
        return json.loads(raw)
    except UnicodeDecodeError as exc:
        raise RecordingError(path, f"not text (JSON is UTF-8): {exc}") from exc
    except json.JSONDecodeError as exc:
        if (closed := closed_kt_cache(exc.doc)) is not None:
            return closed
        # JSON that stops short ends in "Expecting ..." at its very end
        cut = " (truncated?)" if exc.pos >= len(exc.doc.rstrip()) else ""
        raise RecordingError(path, f"not valid JSON at byte {exc.pos}{cut}: {exc}") from exc


def _read_capped(path: Path) -> bytes:
    """The file's bytes, decompressed when it is gzip, read up to MAX_RECORDING_BYTES (a
    stream: a larger file or gzip bomb costs no more memory than the cap).

    Raises:
        RecordingError: unreadable, corrupt gzip, or larger than the cap.
    """
    cap = MAX_RECORDING_BYTES
    try:
        with path.open("rb") as f:
            compressed = f.peek(2)[:2] == b"\x1f\x8b"  # (no seek: a pipe works too)
            try:
                raw = (gzip.GzipFile(fileobj=f) if compressed else f).read(cap + 1)
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise RecordingError(path, f"corrupt or truncated gzip data ({exc})") from exc
    except OSError as exc:
        raise RecordingError(path, f"cannot read: {exc.strerror or exc}") from exc
    if len(raw) > cap:
        what = "decompresses to" if compressed else "holds"
        raise RecordingError(
            path,
            f"{what} more than {cap // 2**20} MiB of JSON, the most a recording may hold "
            "(the largest real Kernel Tuner caches hold tens of MB): not read",
        )
    return raw
