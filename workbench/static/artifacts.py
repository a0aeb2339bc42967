"""``workbench compile --emit DIR``: each compiled config's PTX, SASS and CUBIN as files.

A kernel engineer reads the code a config compiled to: the SASS to see what a knob changed
(vector widths, cache hints, unrolling, spills), the PTX to see what NVRTC was handed to
ptxas, the CUBIN for cuobjdump, nvdisasm or a loader of their own. Files are named
``KERNEL.ARCH.KEY`` after the compile's content key (the same config, source and toolchain
give the same name, so a rerun overwrites rather than piles up), with a ``.log`` for a compile
that failed; a text file's header names the config that wrote it. ``index.json`` in the
directory says which config, shape and arch each file is: one entry per config, shape and
arch (configs that differ only in launch parameters share their files), kept across runs (a
run adds its entries to what is there).
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

from workbench.compiler import CompileResult
from workbench.errors import WorkbenchError
from workbench.jsontext import strict_dumps
from workbench.spaces.model import shape_label
from workbench.static.sweep import StaticRecord

INDEX = "index.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")


class ArtifactError(WorkbenchError):
    """The emit directory cannot be used (a file in the way, an index that is not ours)."""


class ArtifactDir:
    """Where one ``compile --emit`` writes (checked before anything compiles); ``write`` is
    called from the sweep's inspection threads, ``close`` writes the index."""

    def __init__(self, path: Path) -> None:
        if path.exists() and not path.is_dir():
            raise ArtifactError(f"`emit` {path}: not a directory")
        self.path = path
        self._entries = self._read_index()
        self._lock = threading.Lock()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArtifactError(f"`emit` {path}: cannot create it: {exc.strerror}") from None

    def _read_index(self) -> dict[tuple[str, ...], dict]:
        index = self.path / INDEX
        if not index.exists():
            return {}
        try:
            entries = json.loads(index.read_text())
            if not isinstance(entries, list):
                raise ValueError("not a list")
            return {_entry_key(e): e for e in entries}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ArtifactError(
                f"`emit` {self.path}: {INDEX} there is not an index workbench wrote ({exc}); "
                "choose another directory or move it away"
            ) from None

    def write(self, record: StaticRecord, result: CompileResult | None, sass: str | None) -> None:
        """The files of one compile: PTX, SASS and CUBIN of a binary, the log of a failure
        (a config that did not reach the compiler has no files: its error is in the table)."""
        if result is None or not result.key:
            return
        stem = _UNSAFE.sub("_", f"{record.kernel}.{record.arch}.{result.key[:16]}")
        header = (
            f"// workbench compile: {record.kernel} {record.label}\n"
            f"// arch {record.arch}, shape {shape_label(record.shape)}, entry {result.entry}, "
            f"{result.toolchain or 'NVRTC'}\n"
        )
        files: dict[str, str] = {}
        texts = {"ptx": result.ptx, "sass": sass}
        if not result.ok:
            texts = {"log": result.log or "(the compiler said nothing)"}
        for suffix, text in texts.items():
            if text is not None:
                name = f"{stem}.{suffix}"
                self._put(name, (header + text).encode())
                files[suffix] = name
        if result.ok and result.cubin is not None:
            self._put(f"{stem}.cubin", result.cubin)
            files["cubin"] = f"{stem}.cubin"
        entry = {
            "kernel": record.kernel,
            "arch": record.arch,
            "key": result.key,
            "label": record.label,
            "config": record.config,
            "shape": record.shape,
            "entry": result.entry,
            "ok": result.ok,
            "files": files,
        }
        with self._lock:
            self._entries[_entry_key(entry)] = entry

    def _put(self, name: str, data: bytes) -> None:
        """Write ``name`` whole: configs that share a compile write the same file from two
        threads, and a reader never sees a half-written one."""
        target = self.path / name
        partial = target.with_name(f".{name}.{threading.get_ident()}.part")
        try:
            partial.write_bytes(data)
            os.replace(partial, target)
        except OSError as exc:
            raise ArtifactError(
                f"`emit` {self.path}: cannot write {name}: {exc.strerror}"
            ) from None

    def close(self) -> Path:
        """Write the index (entries by kernel, arch and label) and return its path."""
        entries = sorted(self._entries.values(), key=lambda e: (e["kernel"], e["arch"], e["label"]))
        index = self.path / INDEX
        index.write_text(strict_dumps(entries, indent=1) + "\n")
        return index


def _entry_key(entry: dict) -> tuple[str, ...]:
    """An index entry's identity: kernel, arch, shape and config."""
    shape = json.dumps(entry["shape"], sort_keys=True)
    return (str(entry["kernel"]), str(entry["arch"]), shape, str(entry["label"]))
