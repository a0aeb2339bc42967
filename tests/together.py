"""Several processes at once on one store: how the tests make them collide.

Each call runs in a process forked from the test (nothing to import again, so they start within
milliseconds of each other) and waits at a barrier until all are ready: the races they run into
are those of processes started together from a shell.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any


def _call(index: int, function: Callable[..., Any], args: tuple, barrier, results) -> None:
    try:
        results.put((index, function(lambda: barrier.wait(timeout=60), *args)))
    except BaseException as exc:  # the test reads it: a process's error is its result
        results.put((index, f"{type(exc).__name__}: {exc}"))


def together(calls: Sequence[tuple[Callable[..., Any], tuple]]) -> list[Any]:
    """Each ``(function, args)`` in a forked process of its own, called as
    ``function(let_go, *args)``: ``let_go()`` returns once every process has called it (call it
    just before the step that should collide). Returns what each returned, in the order of
    ``calls``, or the text of the exception it raised."""
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(len(calls)), ctx.Queue()
    procs = [
        ctx.Process(target=_call, args=(i, function, args, barrier, results))
        for i, (function, args) in enumerate(calls)
    ]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    return [got[i] for i in range(len(calls))]
