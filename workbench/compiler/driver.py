"""Compile jobs: one at a time, or many across processes with a progress bar, through the cache.

A compile error (and even a crash of the compiler process) becomes a failed
:class:`CompileResult` with its log; only a missing toolchain stops a sweep, since then every
job would fail the same way.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from workbench.compiler.cache import CompileCache
from workbench.compiler.jobs import CompileJob
from workbench.compiler.nvrtc import compile_cuda
from workbench.compiler.ptx import assemble_ptx
from workbench.compiler.result import CompileResult
from workbench.errors import CompileError, ToolchainError

ProgressCallback = Callable[[CompileResult], None]


def compile_job(job: CompileJob, cache: CompileCache | None = None) -> CompileResult:
    """Compile one job, answering from ``cache`` when it holds the key.

    Raises:
        ToolchainError: NVRTC or ptxas is missing.
    """
    key = job.key()
    if cache is not None:
        hit = cache.get(key)
        if hit is not None:
            return hit
    result = _compile_uncached(job, key)
    if cache is not None:
        cache.put(result)
    return result


def _compile_uncached(job: CompileJob, key: str) -> CompileResult:
    start = time.perf_counter()
    try:
        if job.language == "ptx":
            out = assemble_ptx(job.source, job.options, filename=job.filename)
        else:
            exprs = (job.name_expression,) if job.name_expression else ()
            out = compile_cuda(
                job.source, job.options, filename=job.filename, name_expressions=exprs
            )
    except ToolchainError:
        raise
    except CompileError as exc:
        return _failed(job, key, str(exc), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    entry = job.entry_kernel
    if job.name_expression:
        entry = out.lowered_names.get(job.name_expression)
    return CompileResult(
        ok=out.ok,
        key=key,
        arch=job.arch.sm,
        entry=entry if out.ok else None,
        cubin=out.cubin,
        ptx=out.ptx,
        log=out.log,
        lowered_names=out.lowered_names,
        seconds=seconds,
        toolchain=job.toolchain(),
    )


def _failed(job: CompileJob, key: str, log: str, seconds: float = 0.0) -> CompileResult:
    return CompileResult(
        ok=False,
        key=key,
        arch=job.arch.sm,
        entry=None,
        cubin=None,
        ptx=None,
        log=log,
        seconds=seconds,
        toolchain=job.toolchain(),
    )


def _store_root(cache: CompileCache | None) -> str | None:
    """The folder compile processes keep their results in: none without a cache, or when it
    cannot be written (found, and said, once here rather than once in every process)."""
    return str(cache.root) if cache is not None and cache.writable() else None


def _worker(job: CompileJob, cache_root: str | None) -> CompileResult:
    cache = CompileCache(cache_root) if cache_root is not None else None
    try:
        return compile_job(job, cache)
    except ToolchainError:
        raise
    except Exception:  # a bug or an odd input: record it, keep the sweep going
        return _failed(job, job.key(), "internal error while compiling:\n" + traceback.format_exc())


def default_workers() -> int:
    """One compile process per available core."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def compile_jobs(
    jobs: Sequence[CompileJob],
    cache: CompileCache | None = None,
    *,
    workers: int | None = None,
    on_result: ProgressCallback | None = None,
) -> list[CompileResult]:
    """Compile ``jobs`` (in order of the input) using up to ``workers`` processes.

    Cache hits are answered here without a process; identical jobs compile once.

    Raises:
        ToolchainError: the toolchain is missing (every job would fail).
    """
    workers = workers or default_workers()
    results: dict[str, CompileResult] = {}
    keys = [job.key() for job in jobs]
    pending: dict[str, CompileJob] = {}
    for key, job in zip(keys, jobs, strict=True):
        if key in results or key in pending:
            continue
        hit = cache.get(key) if cache is not None else None
        if hit is not None:
            results[key] = hit
            if on_result:
                on_result(hit)
        else:
            pending[key] = job
    if pending:
        if workers == 1 or len(pending) == 1:
            cache_root = _store_root(cache)
            for key, job in pending.items():
                results[key] = _worker(job, cache_root)
                if on_result:
                    on_result(results[key])
        else:
            results.update(_compile_in_pool(pending, cache, workers, on_result))
    return [results[k] for k in keys]


def _compile_in_pool(
    pending: dict[str, CompileJob],
    cache: CompileCache | None,
    workers: int,
    on_result: ProgressCallback | None,
) -> dict[str, CompileResult]:
    # spawn, not fork: the parent may run a progress thread, and NVRTC must not inherit locks.
    context = multiprocessing.get_context("spawn")
    cache_root = _store_root(cache)
    out: dict[str, CompileResult] = {}
    crashed: list[str] = []
    with ProcessPoolExecutor(max_workers=min(workers, len(pending)), mp_context=context) as pool:
        futures = {pool.submit(_worker, job, cache_root): key for key, job in pending.items()}
        for future in as_completed(futures):
            key = futures[future]
            try:
                result = future.result()
            except ToolchainError:
                for f in futures:
                    f.cancel()
                raise
            except BrokenProcessPool:  # some job crashed its process; the pool is lost
                crashed.append(key)
                continue
            out[key] = result
            if on_result:
                on_result(result)
    for key in crashed:  # retry each alone, so that only the guilty job is marked failed
        with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
            try:
                result = pool.submit(_worker, pending[key], cache_root).result()
            except BrokenProcessPool as exc:
                result = _failed(pending[key], key, f"the compiler process died: {exc}")
        out[key] = result
        if on_result:
            on_result(result)
    return out


class CompileAhead:
    """Compiles jobs in background processes while the caller does something else (a search
    times one config on the GPU while the next proposals compile on every core).

    Args:
        cache: the compile cache the processes write to (and the caller reads hits from).
        workers: processes (default: one per available core).
    """

    def __init__(self, cache: CompileCache | None, workers: int | None = None) -> None:
        self.cache = cache
        self.workers = workers or default_workers()
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[str, Future[CompileResult]] = {}

    def submit(self, job: CompileJob) -> None:
        """Start compiling ``job`` (nothing when it is cached or already started)."""
        key = job.key()
        if key in self._futures or (self.cache is not None and self.cache.get(key) is not None):
            return
        if self._pool is None:  # spawn: NVRTC must not inherit the parent's locks
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
        self._futures[key] = self._pool.submit(_worker, job, _store_root(self.cache))

    def pending(self) -> int:
        """Jobs started and not yet collected."""
        return len(self._futures)

    def result(self, job: CompileJob) -> CompileResult:
        """``job``'s result: waited for when it was started, else compiled here.

        Raises:
            ToolchainError: the toolchain is missing.
        """
        key = job.key()
        future = self._futures.pop(key, None)
        if future is None:
            return compile_job(job, self.cache)
        try:
            return future.result()
        except BrokenProcessPool:  # a job crashed the pool: this one is retried alone
            self.close()
            return _compile_in_pool({key: job}, self.cache, 1, None)[key]

    def close(self) -> None:
        """Stop the processes (jobs not collected are dropped)."""
        pool, self._pool = self._pool, None
        self._futures.clear()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
