"""Whether a run's process is still alive: where a pid names one process (this boot, this pid
namespace), and whether that process has ended."""

from __future__ import annotations

import functools
import os
from pathlib import Path


@functools.cache
def process_scope() -> str | None:
    """Where a pid names one process: this boot of the kernel and this pid namespace (a
    container has its own, and may share another's host name). None where that cannot be read
    (not Linux): no run is then judged by its pid."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` of this scope has ended: no such process, or a zombie (killed,
    not yet reaped by its parent). Another user's process exists (the signal is refused)."""
    if pid <= 0 or pid == os.getpid():  # (0 and negative pids name process groups)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")
