"""Content-addressed on-disk cache of compile results (failed compiles included).

Layout: ``ROOT/ab/abcdef.../{meta.json, kernel.cubin, kernel.ptx}``. An entry is written into a
temporary directory and renamed into place, so readers never see half an entry and concurrent
writers of the same key are harmless (the loser's rename fails; both entries are identical).

A cache folder that cannot be written (a shared read-only cache, a full disk) is no error:
results are then not kept, and the process says so once (:func:`say_unwritable`, which the
valid-set cache uses too).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from workbench.compiler.result import CompileResult

CACHE_ENV = "WORKBENCH_CACHE_DIR"
#: what a compile cache that cannot be written costs (said once with the folder)
COMPILE_UNCACHED = "compiling without caching"

#: cache folders this process has said it cannot write: each is said once (a sweep would
#: otherwise say it once per config)
_said_unwritable: set[Path] = set()


def say_unwritable(root: Path, error: OSError, consequence: str) -> None:
    """Say on stderr, once per process and folder, that the cache at ``root`` cannot be written
    (``error``: why) and what the run does instead; the caller goes on without storing."""
    if root in _said_unwritable:
        return
    _said_unwritable.add(root)
    why = error.strerror or str(error)
    sys.stderr.write(f"warning: the cache folder {root} cannot be written ({why}); {consequence}\n")


def default_cache_dir() -> Path:
    """``$WORKBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/workbench/compile``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "workbench" / "compile"


class CompileCache:
    """Compile results keyed by :meth:`CompileJob.key`."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self._writable: bool | None = None

    def writable(self) -> bool:
        """Whether entries can be stored under ``root``, found once per cache object by making
        (and removing) a folder there; a folder that cannot be written is said once.

        Compile processes are handed the folder only when it can be written: each would
        otherwise find out, and say so, on its own.
        """
        if self._writable is None:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                os.rmdir(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
            except OSError as exc:
                say_unwritable(self.root, exc, COMPILE_UNCACHED)
                self._writable = False
            else:
                self._writable = True
        return self._writable

    def _dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def get(self, key: str) -> CompileResult | None:
        """The cached result, or None (a damaged entry counts as a miss and is removed)."""
        entry = self._dir(key)
        meta_path = entry / "meta.json"
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            cubin = (entry / "kernel.cubin").read_bytes() if meta["ok"] else None
            ptx_path = entry / "kernel.ptx"
            ptx = ptx_path.read_text() if ptx_path.is_file() else None
            return CompileResult(
                ok=meta["ok"],
                key=key,
                arch=meta["arch"],
                entry=meta["entry"],
                cubin=cubin,
                ptx=ptx,
                log=meta["log"],
                lowered_names=meta["lowered_names"],
                seconds=meta["seconds"],
                cached=True,
                toolchain=meta["toolchain"],
            )
        except (OSError, ValueError, KeyError, TypeError):
            shutil.rmtree(entry, ignore_errors=True)
            return None

    def put(self, result: CompileResult) -> bool:
        """Store ``result`` under its key (no-op if an entry exists).

        Returns:
            False when the folder cannot be written (said once): the result is not kept.
        """
        final = self._dir(result.key)
        if (final / "meta.json").is_file():
            return True
        try:
            self._store(result, final)
        except OSError as exc:
            say_unwritable(self.root, exc, COMPILE_UNCACHED)
            return False
        return True

    @staticmethod
    def _store(result: CompileResult, final: Path) -> None:
        """Write ``result`` into a temporary folder beside ``final`` and rename it into place.

        Raises:
            OSError: the folder cannot be written.
        """
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        try:
            if result.cubin is not None:
                (tmp / "kernel.cubin").write_bytes(result.cubin)
            if result.ptx is not None:
                (tmp / "kernel.ptx").write_text(result.ptx)
            meta = {
                "ok": result.ok,
                "arch": result.arch,
                "entry": result.entry,
                "log": result.log,
                "lowered_names": result.lowered_names,
                "seconds": result.seconds,
                "toolchain": result.toolchain,
            }
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
            with contextlib.suppress(OSError):  # another process stored the same key first
                tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def get_artifact(self, key: str, name: str) -> str | None:
        """A derived text stored beside an entry (``sass.txt``), or None."""
        try:
            return (self._dir(key) / _artifact_name(name)).read_text()
        except OSError:
            return None

    def put_artifact(self, key: str, name: str, text: str) -> None:
        """Store a derived text beside an existing entry (atomically; no entry: no-op; a folder
        that cannot be written: not kept, said once)."""
        entry = self._dir(key)
        if not entry.is_dir():
            return
        try:
            _write_atomically(entry / _artifact_name(name), text)
        except OSError as exc:
            say_unwritable(self.root, exc, COMPILE_UNCACHED)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _write_atomically(target: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``target`` and rename it into place.

    Raises:
        OSError: the folder cannot be written (no temporary file is left).
    """
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):  # (renamed into place: nothing left to remove)
            os.unlink(tmp)


def _artifact_name(name: str) -> str:
    if not name.replace(".", "").replace("_", "").isalnum() or name.startswith("."):
        raise ValueError(f"bad artifact name {name!r}")
    return "artifact-" + name
