"""A worker process that can crash, hang or corrupt its state without taking the caller along.

The worker (started with the ``spawn`` context, so it inherits no locks, threads or CUDA
state) builds an *executor* from a picklable factory and answers requests over a pipe. The
parent (:class:`Supervisor`) sends one request at a time and waits for the answer; while it
works, the executor may report progress (``progress("launch")``), and each report restarts
the clock. So the timeout bounds the silence between two reports, not the whole request: a
long timing loop that reports every quarter second is fine, a kernel that never returns is
not. Outcomes the parent sees:

- the answer: returned;
- the executor raised: :class:`WorkerError` with the type, message and traceback; when the
  exception is not marked ``recoverable`` (a CUDA context after an illegal address is lost),
  the worker exits and is restarted;
- the worker died (``os.abort``, a segfault, the OOM killer): :class:`WorkerCrashed`,
  with the signal; restarted;
- no answer and no progress within the timeout: :class:`WorkerTimeout`; the worker is killed
  (SIGKILL) and restarted.

The protocol knows nothing about CUDA: tests drive it with executors that crash on purpose.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from workbench.errors import WorkbenchError

#: Seconds to wait for a worker to exit after ``shutdown`` before it is killed.
SHUTDOWN_GRACE_S = 5.0
#: Seconds to wait for a killed worker to be reaped (a process inside a driver call can take
#: a moment to die).
KILL_GRACE_S = 30.0

Progress = Callable[[str], None]


class Executor(Protocol):
    """What runs inside the worker: built by the factory, then asked one request at a time."""

    def info(self) -> Mapping[str, Any]:
        """Facts about the worker's resources, sent to the parent once at start."""

    def handle(self, request: Any, progress: Progress) -> Any:
        """Answer one request (picklable in, picklable out); call ``progress`` while busy."""

    def close(self) -> None:
        """Release resources before a clean exit."""


class WorkerFault(WorkbenchError):
    """A request did not produce an answer. ``restarted`` says whether a fresh worker runs."""

    def __init__(self, message: str, *, stage: str = "", restarted: bool = False) -> None:
        self.stage = stage
        self.restarted = restarted
        super().__init__(message)


class WorkerError(WorkerFault):
    """The executor raised ``type_name(message)``; ``detail`` holds the worker's traceback."""

    def __init__(
        self, type_name: str, message: str, detail: str, *, stage: str, restarted: bool
    ) -> None:
        self.type_name = type_name
        self.detail = detail
        super().__init__(f"{type_name}: {message}", stage=stage, restarted=restarted)


class WorkerCrashed(WorkerFault):
    """The worker process died; ``exitcode`` is negative for a signal."""

    def __init__(self, exitcode: int | None, *, stage: str, restarted: bool) -> None:
        self.exitcode = exitcode
        super().__init__(
            f"the worker process died ({describe_exit(exitcode)})",
            stage=stage,
            restarted=restarted,
        )


class WorkerTimeout(WorkerFault):
    """The worker sent nothing for ``seconds``; it was killed."""

    def __init__(self, seconds: float, *, stage: str, restarted: bool) -> None:
        self.seconds = seconds
        super().__init__(
            f"no answer for {seconds:g} s" + (f" during {stage}" if stage else ""),
            stage=stage,
            restarted=restarted,
        )


class WorkerStartError(WorkerFault):
    """The worker could not start (the factory raised, the process died or hung at start)."""


def describe_exit(exitcode: int | None) -> str:
    """``SIGSEGV``, ``exit code 3``: how a process ended."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


# -- messages ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Call:
    request: Any


@dataclass(frozen=True)
class _Shutdown:
    pass


@dataclass(frozen=True)
class _Ready:
    info: Mapping[str, Any]


@dataclass(frozen=True)
class _Progress:
    stage: str


@dataclass(frozen=True)
class _Result:
    value: Any


@dataclass(frozen=True)
class _Failure:
    type_name: str
    message: str
    detail: str
    restart: bool = True


# -- the worker side -----------------------------------------------------------------------
def serve(conn: Connection, factory: Callable[[], Executor]) -> None:
    """The worker's main loop: build the executor, then answer requests until told to stop.

    An exception without a true ``recoverable`` attribute ends the loop after it is reported:
    the executor's state can no longer be trusted.
    """
    try:
        executor = factory()
        conn.send(_Ready(dict(executor.info())))
    except BaseException as exc:
        conn.send(_failure(exc))
        return

    def progress(stage: str) -> None:
        conn.send(_Progress(stage))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            break
        if isinstance(message, _Shutdown):
            break
        try:
            conn.send(_Result(executor.handle(message.request, progress)))
        except Exception as exc:
            failure = _failure(exc)
            conn.send(failure)
            if failure.restart:
                return  # no close(): a broken context may hang in cleanup; exit releases it
    executor.close()


def _failure(exc: BaseException) -> _Failure:
    return _Failure(
        type(exc).__name__,
        str(exc),
        traceback.format_exc(),
        restart=not getattr(exc, "recoverable", False),
    )


# -- the parent side -----------------------------------------------------------------------
@dataclass
class _Worker:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    info: Mapping[str, Any] = field(default_factory=dict)


class Supervisor:
    """Owns one worker process: starts it, sends requests, restarts it after a fault.

    Args:
        factory: picklable callable that builds the executor inside the worker.
        startup_timeout_s: how long the worker may take to report ready.
        name: process name (shows in ``ps``).
    """

    def __init__(
        self,
        factory: Callable[[], Executor],
        *,
        startup_timeout_s: float = 120.0,
        name: str = "workbench-worker",
    ) -> None:
        self.factory = factory
        self.startup_timeout_s = startup_timeout_s
        self.name = name
        self.generation = 0  #: incremented by every start: state in the worker is per generation
        self.restarts = 0
        self._worker: _Worker | None = None
        self._context = multiprocessing.get_context("spawn")

    @property
    def alive(self) -> bool:
        return self._worker is not None and self._worker.process.is_alive()

    @property
    def pid(self) -> int | None:
        return self._worker.process.pid if self._worker else None

    @property
    def info(self) -> Mapping[str, Any]:
        """What the executor reported at start (starts the worker if needed).

        Raises:
            WorkerStartError: the worker cannot start.
        """
        return self.start().info

    def start(self) -> _Worker:
        """The running worker, started if there is none.

        Raises:
            WorkerStartError: the factory raised, or the worker died or hung before ready.
        """
        if self._worker is not None and self._worker.process.is_alive():
            return self._worker
        self._discard()
        parent, child = self._context.Pipe(duplex=True)
        process = self._context.Process(
            target=serve, args=(child, self.factory), name=self.name, daemon=True
        )
        process.start()
        child.close()
        worker = _Worker(process, parent)
        try:
            message = self._receive(worker, self.startup_timeout_s, "start")
        except WorkerFault as exc:
            self._kill(worker)
            raise WorkerStartError(f"the worker did not start: {exc}", stage="start") from exc
        if isinstance(message, _Failure):
            self._kill(worker)
            raise WorkerStartError(
                f"the worker did not start: {message.type_name}: {message.message}",
                stage="start",
            )
        assert isinstance(message, _Ready)
        worker.info = message.info
        self._worker = worker
        self.generation += 1
        return worker

    def call(self, request: Any, timeout_s: float, stage: str = "request") -> Any:
        """Send ``request`` and return the executor's answer.

        Args:
            request: a picklable request for the executor.
            timeout_s: the longest silence allowed (progress reports restart the clock).
            stage: what the request is, for messages until the worker reports a stage.

        Raises:
            WorkerStartError: no worker could be started (also when restarting after a fault).
            WorkerError, WorkerCrashed, WorkerTimeout: the request failed; ``restarted`` says
                whether a fresh worker is already running.
        """
        worker = self.start()
        try:
            worker.conn.send(_Call(request))
        except (BrokenPipeError, OSError):
            self._reap(worker)
            crash = WorkerCrashed(worker.process.exitcode, stage=stage, restarted=False)
            raise self._restarted(crash) from None
        last_stage = stage
        while True:
            try:
                message = self._receive(worker, timeout_s, last_stage)
            except WorkerFault as exc:
                raise self._restarted(exc) from None
            if isinstance(message, _Progress):
                last_stage = message.stage
                continue
            if isinstance(message, _Result):
                return message.value
            if isinstance(message, _Failure):
                error = WorkerError(
                    message.type_name,
                    message.message,
                    message.detail,
                    stage=last_stage,
                    restarted=False,
                )
                if not message.restart:
                    raise error
                self._kill(worker)
                raise self._restarted(error)
            raise WorkerError("ProtocolError", repr(message), "", stage=last_stage, restarted=False)

    def restart(self) -> None:
        """Kill the worker (if any) and start a fresh one.

        Raises:
            WorkerStartError: the new worker cannot start.
        """
        self._discard()
        self.restarts += 1
        self.start()

    def close(self) -> None:
        """Ask the worker to exit; kill it if it does not within ``SHUTDOWN_GRACE_S``."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        with contextlib.suppress(BrokenPipeError, OSError):
            worker.conn.send(_Shutdown())
        worker.process.join(SHUTDOWN_GRACE_S)
        self._kill(worker)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------
    def _receive(self, worker: _Worker, timeout_s: float, stage: str) -> Any:
        """The next message, or a fault: the process died, or nothing came in time."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill(worker)
                raise WorkerTimeout(timeout_s, stage=stage, restarted=False)
            ready = wait([worker.conn, worker.process.sentinel], timeout=remaining)
            if worker.conn in ready or worker.conn.poll():
                try:
                    return worker.conn.recv()
                except (EOFError, OSError):
                    pass  # the pipe closed: the process is dying; fall through
            if ready or not worker.process.is_alive():
                self._reap(worker)
                raise WorkerCrashed(worker.process.exitcode, stage=stage, restarted=False)

    def _restarted(self, fault: WorkerFault) -> WorkerFault:
        """Start a fresh worker after ``fault`` and mark the fault as restarted.

        Raises:
            WorkerStartError: the fresh worker cannot start.
        """
        self._discard()
        self.restarts += 1
        try:
            self.start()
        except WorkerStartError as exc:
            message = f"{fault}; restarting the worker failed: {exc}"
            raise WorkerStartError(message, stage=fault.stage) from fault
        fault.restarted = True
        return fault

    def _discard(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            self._kill(worker)

    def _reap(self, worker: _Worker) -> None:
        worker.process.join(KILL_GRACE_S)
        worker.conn.close()
        if self._worker is worker:
            self._worker = None

    def _kill(self, worker: _Worker) -> None:
        if worker.process.is_alive():
            worker.process.kill()
        self._reap(worker)
