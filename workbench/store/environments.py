"""The machine state a run's numbers come from, as read back from the store: what the
regression tracking compares between runs and the reports show."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.store.mapping import record_from_row
from workbench.store.models import Environment

#: Environment fields a change point or a check reports, with their display names.
TRACKED_FIELDS = (
    ("gpu_name", "GPU"),
    ("driver", "driver"),
    ("cuda", "CUDA"),
    ("toolkit", "toolkit"),
    ("git_commit", "commit"),
    ("git_dirty", "dirty"),
    ("sm_clock_max_mhz", "max SM clock"),
    ("hostname", "host"),
    ("replay_source", "recording"),
)


@dataclass(frozen=True)
class EnvChange:
    """One environment field that differs between two runs."""

    field: str
    name: str
    before: object
    after: object

    def text(self) -> str:
        """``driver 535.104 -> 550.54`` (commits shortened to 10 characters)."""
        return f"{self.name} {_short(self.before)} -> {_short(self.after)}"


@dataclass(frozen=True)
class EnvironmentInfo:
    """Where a run's samples come from (see :class:`workbench.store.models.Environment`)."""

    id: int | None
    gpu_name: str
    cc: int | None = None
    driver: str | None = None
    cuda: str | None = None
    toolkit: str | None = None
    sm_clock_max_mhz: int | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    hostname: str | None = None
    replay_source: str | None = None

    def changes_from(self, before: EnvironmentInfo) -> list[EnvChange]:
        """The tracked fields that differ from ``before``, in :data:`TRACKED_FIELDS` order."""
        return [
            EnvChange(f, name, getattr(before, f), getattr(self, f))
            for f, name in TRACKED_FIELDS
            if getattr(before, f) != getattr(self, f)
        ]

    def describe(self) -> str:
        """One line: GPU, driver, CUDA, toolkit, commit (and dirty)."""
        parts = [self.gpu_name]
        parts += [f"{n} {v}" for n, v in (("driver", self.driver), ("CUDA", self.cuda)) if v]
        if self.toolkit:
            parts.append(f"toolkit {self.toolkit}")
        if self.git_commit:
            parts.append(
                f"commit {_short(self.git_commit)}" + (" (dirty)" if self.git_dirty else "")
            )
        return ", ".join(parts)


def environment_info(env: Environment) -> EnvironmentInfo:
    """The facts of a stored environment row."""
    return record_from_row(EnvironmentInfo, env)


def _short(value: object) -> str:
    if value is None:
        return "-"
    text = str(value)
    return text[:10] if len(text) == 40 and all(c in "0123456789abcdef" for c in text) else text
