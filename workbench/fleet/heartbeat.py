"""The worker's heartbeat thread."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from workbench.fleet.claims import WorkerId
from workbench.fleet.study import SharedStudy


class Pulse:
    """A worker's background beat: the running trial's heartbeat and the worker's presence,
    every ``heartbeat_s``. Database errors are noted and retried at the next beat (the loop's
    own calls do the waiting)."""

    def __init__(self, shared: SharedStudy, worker: WorkerId, info: dict[str, Any]) -> None:
        self.shared = shared
        self.worker = worker
        self.info = info
        self.trial_id: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="workbench-pulse", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def watch(self, trial_id: int | None) -> None:
        """Beat for ``trial_id`` from now on (None: no trial); the first beat is immediate, so
        a trial is never claimed before it can be found stale."""
        with self._lock:
            self.trial_id = trial_id
        if trial_id is not None:
            self.shared.db.outage.call(self.shared.heartbeat, trial_id)

    def beat(self) -> None:
        with self._lock:
            trial_id = self.trial_id
        if trial_id is not None:
            self.shared.heartbeat(trial_id)
        self.shared.announce(self.worker, self.info)

    def _loop(self) -> None:
        interval = self.shared.db.settings.heartbeat_s
        while not self._stop.wait(interval):
            with contextlib.suppress(Exception):  # an outage: the next beat tries again
                self.beat()

    def stop(self, state: str) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.info["state"] = state
        with self._lock:
            self.trial_id = None
        with contextlib.suppress(Exception):
            self.shared.announce(self.worker, self.info)
