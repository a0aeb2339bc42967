"""The git state of the repository a kernel lives in (commit and dirty flag), when there is one."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RepoState:
    commit: str | None
    dirty: bool | None


def repo_state(path: Path) -> RepoState:
    """Commit and dirty flag of the git work tree holding ``path`` (None, None outside git)."""
    folder = path if path.is_dir() else path.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode != 0:
            return RepoState(None, None)
        status = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return RepoState(None, None)
    return RepoState(head.stdout.strip(), bool(status.stdout.strip()))
