"""The valid set of a space, kept on disk: listed once, read back by every later tune.

Listing gemm_int8's valid configs (a pruned walk of a product of ~10^9 points, 501,372 valid,
a uniform sample of 500,000 kept) takes ~18 s on a 2-core CPU before a tune's first evaluation;
reading it back takes well under a second. An entry is keyed by everything the walk depends
on: the space file's content as parsed into the space (not as the file is by the time the list
is stored) and the kernel source's (:func:`space_sha256`), the arch, the device limits, the
shape, the pinned values, the sample size and seed, and this module's format version. Each
config is stored as the index of each parameter's value in its domain (one small integer per
parameter), beside the domains themselves, which are checked on reading: a damaged or foreign
entry is a miss (listed again, and the entry rewritten), never a wrong set nor an error.

Layout: ``ROOT/valid-sets/<key>.npz``, written to a temporary file and renamed into place (a
concurrent writer of the same key writes the same bytes).

An entry may hold no configs, only the count: ``workbench space K --count`` keeps the count of
a whole space too large to count by default (gemm_int8: 2,011,280 valid of 6.7e10 points, a
minute), under the key of a sample of 0, which later runs of ``space`` read back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from workbench.compiler.cache import default_cache_dir, say_unwritable
from workbench.spaces.model import Config, Value, space_sha256
from workbench.spaces.space import Space

#: Bump when the entry format or the walk's order changes.
FORMAT_VERSION = 1
#: what a valid-set folder that cannot be written costs (said once with the folder)
LISTED_AGAIN = "the valid set is listed again by every tune"


class ValidSetCache:
    """Valid sets on disk under ``root`` (default: the compile cache's ``valid-sets``)."""

    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir() / "valid-sets"

    @staticmethod
    def key(space: Space, pinned: Mapping[str, Value], limit: int, seed: int) -> str | None:
        """The entry's key, or None when the kernel source cannot be read (no caching)."""
        try:
            content = space_sha256(space.spec)
        except OSError:
            return None
        facts = {
            "format": FORMAT_VERSION,
            "space": content,
            "arch": space.arch.sm,
            "device": repr(space.device),
            "shape": sorted(space.shape.items()),
            "pinned": sorted((k, repr(v)) for k, v in pinned.items()),
            "limit": limit,
            "seed": seed,
        }
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.npz"

    def get(
        self, key: str, names: Sequence[str], domains: Sequence[Sequence[Value]]
    ) -> tuple[list[Config], int] | None:
        """The valid configs and their total count, or None (absent, damaged or foreign: the
        caller lists the set again and :meth:`put` replaces the entry)."""
        read = _read(self._path(key))
        if read is None:
            return None
        header, index = read
        total = _total(header, index, names, domains)
        if total is None:
            return None
        columns = [
            [domain[i] for i in column.tolist()]
            for domain, column in zip(domains, index.T, strict=True)
        ]
        configs = [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]
        return configs, total

    def total(
        self, key: str, names: Sequence[str], domains: Sequence[Sequence[Value]]
    ) -> int | None:
        """The count of valid configs an entry holds, without reading its configs back; None as
        for :meth:`get`."""
        read = _read(self._path(key))
        return None if read is None else _total(*read, names, domains)

    def count(self, space: Space) -> int | None:
        """The valid count of the whole ``space`` that :meth:`put_count` kept, or None."""
        key = self.key(space, {}, 0, 0)
        return None if key is None else self.total(key, *_whole(space))

    def put_count(self, space: Space, total: int) -> None:
        """Keep the valid count of the whole ``space`` (an entry of no configs; best effort, as
        :meth:`put`)."""
        key = self.key(space, {}, 0, 0)
        if key is not None:
            self.put(key, *_whole(space), [], total)

    def put(
        self,
        key: str,
        names: Sequence[str],
        domains: Sequence[Sequence[Value]],
        configs: Sequence[Config],
        total: int,
    ) -> None:
        """Keep ``configs`` (best effort: a folder that cannot be written is no error; it is
        said once, as the compile cache says its own)."""
        positions = [{_token(v): i for i, v in enumerate(domain)} for domain in domains]
        longest = max((len(d) for d in domains), default=0)
        dtype = np.uint8 if longest <= 2**8 else np.uint16 if longest <= 2**16 else np.uint32
        index = np.empty((len(configs), len(names)), dtype=dtype)
        for j, (name, where) in enumerate(zip(names, positions, strict=True)):
            index[:, j] = [where[_token(c[name])] for c in configs]
        header = {"names": list(names), "domains": _jsonable(domains), "total": total}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            _write(self._path(key), header, index)
        except OSError as exc:
            say_unwritable(self.root, exc, LISTED_AGAIN)


def _write(path: Path, header: dict[str, object], index: np.ndarray) -> None:
    """Write an entry to a temporary file beside ``path`` and rename it into place.

    Raises:
        OSError: the folder cannot be written (no temporary file is left).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, header=np.array(json.dumps(header)), index=index)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):  # (renamed into place: nothing left to remove)
            os.unlink(tmp)


def _read(path: Path) -> tuple[object, np.ndarray] | None:
    """An entry's header and index as stored, or None when it is absent or not an entry."""
    try:
        with np.load(path, allow_pickle=False) as entry:
            return json.loads(str(entry["header"])), entry["index"]
    except FileNotFoundError:
        return None
    # Any bytes may be there (a truncated write, a full disk, another tool): numpy, zipfile
    # and json raise a dozen kinds on them (BadZipFile, EOFError, zlib.error, KeyError for a
    # missing member, TypeError for a lone .npy, NotImplementedError for an unknown
    # compression...). Only the file is read here; every one of them means "not an entry".
    except Exception:
        return None


def _total(
    header: object, index: np.ndarray, names: Sequence[str], domains: Sequence[Sequence[Value]]
) -> int | None:
    """The entry's count of valid configs when the entry is one of these domains (an index of
    one in-range position per parameter per config), else None."""
    if not isinstance(header, dict):
        return None
    if header.get("names") != list(names) or header.get("domains") != _jsonable(domains):
        return None
    total = header.get("total")
    if not isinstance(total, int) or isinstance(total, bool):
        return None
    # unsigned: a negative position would silently read a domain from its end
    if index.ndim != 2 or index.shape[1] != len(names) or index.dtype.kind != "u":
        return None
    if len(index) > total:
        return None
    if len(index) and any(int(index[:, j].max()) >= len(d) for j, d in enumerate(domains)):
        return None
    return total


def _whole(space: Space) -> tuple[list[str], list[tuple[Value, ...]]]:
    """The names and domains of every parameter of ``space`` (nothing pinned)."""
    params = space.spec.parameters
    return [p.name for p in params], [p.values for p in params]


def _token(value: Value) -> tuple[str, Value]:
    """A value with its type, so that ``True`` and ``1`` stay apart."""
    return type(value).__name__, value


def _jsonable(domains: Sequence[Sequence[Value]]) -> list[list[list[object]]]:
    return [[[type(v).__name__, v] for v in domain] for domain in domains]
