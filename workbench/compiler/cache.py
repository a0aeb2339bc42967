"""Content-addressed on-disk cache of compile results (failed compiles included).

Layout: ``ROOT/ab/abcdef.../{meta.json, kernel.cubin, kernel.ptx}``. An entry is written into a
temporary directory and renamed into place, so readers never see half an entry and concurrent
writers of the same key are harmless (the loser's rename fails; both entries are identical).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from workbench.compiler.result import CompileResult

CACHE_ENV = "WORKBENCH_CACHE_DIR"


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

    def put(self, result: CompileResult) -> None:
        """Store ``result`` under its key (no-op if an entry exists)."""
        final = self._dir(result.key)
        if (final / "meta.json").is_file():
            return
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
        """Store a derived text beside an existing entry (atomically; no entry: no-op)."""
        entry = self._dir(key)
        if not entry.is_dir():
            return
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=entry)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, entry / _artifact_name(name))

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _artifact_name(name: str) -> str:
    if not name.replace(".", "").replace("_", "").isalnum() or name.startswith("."):
        raise ValueError(f"bad artifact name {name!r}")
    return "artifact-" + name
