"""User Python (references, baselines' modules, Numba kernel modules) runs in a process of its
own, so that it cannot decide how a command ends.

A user module may call ``sys.exit(0)`` at import, ``os._exit``, crash the interpreter or loop
for ever; a gate (``compile --fail-on``, ``regress check``) whose exit status such code could
set would be worse than none. So every call into user code goes through :func:`in_user_process`:
a child process started once per process (the ``spawn`` context, supervised like the GPU
worker: :class:`~workbench.supervisor.Supervisor`) imports the user's module and runs the call;
the parent gets the answer, or the exception the call raised, or one located error of the
caller's class when the child exited, died or said nothing for too long (the child is then
killed and the next call starts a fresh one). Inside the child, :func:`guarded` turns
``SystemExit`` and ``KeyboardInterrupt`` raised by user code into that error too.

How long user code may take: :data:`LOAD_TIMEOUT_S` to load a module and check a function,
:data:`CALL_TIMEOUT_S` for one call (a reference on a big shape); the environment variable
:data:`TIMEOUT_ENV` overrides both (seconds).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import pickle
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from workbench.errors import WorkbenchError
from workbench.supervisor import (
    Progress,
    Supervisor,
    WorkerCrashed,
    WorkerError,
    WorkerFault,
    WorkerTimeout,
    describe_exit,
)

#: Seconds a user module may take to import (Numba, CuPy or PyTorch imports included).
LOAD_TIMEOUT_S = 300.0
#: Seconds one call of user code may take (a NumPy reference on the largest shape).
CALL_TIMEOUT_S = 1800.0
#: Environment variable that sets both timeouts, in seconds.
TIMEOUT_ENV = "WORKBENCH_USER_CODE_TIMEOUT_S"

T = TypeVar("T")


def load_timeout() -> float:
    """Seconds a module load may take (:data:`TIMEOUT_ENV` or :data:`LOAD_TIMEOUT_S`)."""
    return _timeout(LOAD_TIMEOUT_S)


def call_timeout() -> float:
    """Seconds one call may take (:data:`TIMEOUT_ENV` or :data:`CALL_TIMEOUT_S`)."""
    return _timeout(CALL_TIMEOUT_S)


def _timeout(default: float) -> float:
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise WorkbenchError(f"{TIMEOUT_ENV}={text!r}: expected seconds, a number") from None
    if not value > 0:
        raise WorkbenchError(f"{TIMEOUT_ENV}={text!r}: expected a positive number of seconds")
    return value


def guarded(what: str, error: type[WorkbenchError], fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, with an exit or interrupt raised by user code turned into ``error``.

    Raises:
        error: the user code raised ``SystemExit`` or ``KeyboardInterrupt``.
    """
    try:
        return fn(*args)
    except SystemExit as exc:
        raise error(f"{what} called sys.exit({exc.code!r})") from None
    except KeyboardInterrupt:
        raise error(f"{what} raised KeyboardInterrupt") from None


def in_user_process(
    fn: Callable[..., T],
    *args: Any,
    what: str,
    error: type[WorkbenchError],
    timeout_s: float,
) -> T:
    """``fn(*args)`` run in the user-code process: ``fn`` is a module-level function of the
    workbench (pickled by name) that loads and calls user code; the arguments and the result
    are pickled.

    Args:
        what: the user code, for the errors (``reference 'ref.py:f'``).
        error: the error class for an exit, a crash or a hang.
        timeout_s: the longest the call may take.

    Raises:
        error: the call exited, crashed its process or took longer than ``timeout_s``.
        Exception: whatever ``fn`` raised (a workbench error keeps its class).
    """
    if multiprocessing.current_process().daemon:  # (a daemon may not start a child: run here)
        return guarded(what, error, fn, *args)
    with _LOCK:
        try:
            answer = _host().call((fn, args), timeout_s, stage="call")
        except WorkerTimeout:
            raise error(
                f"{what} did not finish in {timeout_s:g} s (an endless loop?); it was stopped "
                f"({TIMEOUT_ENV} sets the limit)"
            ) from None
        except WorkerCrashed as exc:
            raise error(f"{what} ended its process ({_how(exc.exitcode)})") from None
        except WorkerError as exc:  # (the child's own machinery failed: not user code)
            raise error(f"{what}: the process running it failed: {exc}") from None
        except WorkerFault as exc:
            raise error(f"{what}: the process running it did not start: {exc}") from None
    if isinstance(answer, _Raised):
        raise answer.rebuild(error)
    return answer


def _how(exitcode: int | None) -> str:
    """How the child ended, in the user's words: ``os._exit(0)`` is not a crash."""
    if exitcode is not None and exitcode >= 0:
        return f"os._exit({exitcode}) or a similar exit: {describe_exit(exitcode)}"
    return describe_exit(exitcode)


@dataclass(frozen=True)
class _Raised:
    """An exception raised in the child: the exception itself where it survives pickling,
    else its class name and message."""

    exception: BaseException | None
    type_name: str
    message: str

    def rebuild(self, error: type[WorkbenchError]) -> BaseException:
        if self.exception is not None:
            return self.exception
        return error(f"{self.type_name}: {self.message}")


def _raised(exc: BaseException) -> _Raised:
    if isinstance(exc, Exception):
        try:
            copy = pickle.loads(pickle.dumps(exc))
        except Exception:  # (an exception whose __init__ does not take its args back)
            copy = None
        if isinstance(copy, type(exc)):
            copy.__traceback__ = None
            return _Raised(copy, type(exc).__name__, str(exc))
    return _Raised(None, type(exc).__name__, str(exc))


class _Executor:
    """The child's side: runs one ``(fn, args)`` at a time and answers with the result or
    what it raised (an exit included: the child stays up)."""

    def info(self) -> Mapping[str, Any]:
        return {}

    def handle(self, request: tuple[Callable[..., object], tuple[Any, ...]], _: Progress) -> Any:
        fn, args = request
        try:
            return fn(*args)
        except BaseException as exc:  # SystemExit and KeyboardInterrupt from user code too
            return _raised(exc)

    def close(self) -> None:
        pass


def _make_executor() -> _Executor:
    # Ctrl-C goes to the whole process group: the parent decides, and stops this child
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return _Executor()


_LOCK = threading.Lock()
_HOST: Supervisor | None = None


def _host() -> Supervisor:
    global _HOST
    if _HOST is None:
        _HOST = Supervisor(_make_executor, name="workbench-user-code")
        atexit.register(close)
    return _HOST


def close() -> None:
    """Stop the user-code process (the next call starts a fresh one)."""
    global _HOST
    host, _HOST = _HOST, None
    if host is not None:
        host.close()
