"""What a worker and its claims are: who holds a budget slot, what completed, the progress."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from workbench.fleet.sql import Skip


@dataclass(frozen=True)
class WorkerId:
    """Who a worker is: host, process, GPU. ``key`` names it in trials and in the study."""

    host: str
    pid: int
    gpu: int | None

    @classmethod
    def here(cls, gpu: int | None) -> WorkerId:
        return cls(socket.gethostname(), os.getpid(), gpu)

    @property
    def key(self) -> str:
        gpu = "replay" if self.gpu is None else f"gpu{self.gpu}"
        return f"{self.host}:{self.pid}:{gpu}"


@dataclass
class Claim:
    """The outcome of a claim: ``skip`` None means the key holds a budget slot (``claim_id``)."""

    skip: Skip | None
    claim_id: int | None = None
    reclaimed: bool = False  #: in place of a dead claim (its result may be in the store)


@dataclass(frozen=True)
class CompletedClaim:
    """A claim whose trial completed: what the other workers learn from."""

    order: int  #: completions are read in this order (and after the last one read)
    key: str
    params: dict[str, Any]
    value: float | None  #: the objective, or +inf for a failed config
    outcome: str | None = None  #: how it ended (TrialOutcome's value); None: not kept
    reason: str | None = None  #: why it failed


@dataclass
class StudyProgress:
    """A shared study as one worker's round sees it (one query of the claims table)."""

    done: list[CompletedClaim]  #: completions since the last read, in order
    in_flight: dict[str, dict[str, Any]]  #: key -> params of live claims not complete yet
    complete: int  #: claims whose trial is COMPLETE (they count against the budget)
    live: int  #: claims holding a budget slot (complete or running)
    waiting: list[int]  #: ids of WAITING trials (re-queued ones to take first)
