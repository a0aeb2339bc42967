"""The valid set kept on disk: listed once per space, shape, arch, device and pins, read back
by every later tune, and never wrong (an edited space file, another shape or pin is another
entry; a damaged entry is listed again)."""

from __future__ import annotations

import json
import shutil
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import invoke
from conftest import TINY_SPACE

from workbench.search.problem import VALID_LIST_LIMIT, SpaceProblem
from workbench.search.valid_sets import ValidSetCache
from workbench.spaces import Space, load_kernel
from workbench.spaces.loader import load_space
from workbench.spaces.space import WalkTimeout

#: 9 x 5 configs, all valid; 9 x 3 once the constraint is edited to SCALE <= 3
GRID_SPACE = (
    TINY_SPACE.replace(
        "BLOCK: {values: [32, 64, 128, 256], default: 128}",
        "BLOCK: {values: [1, 2, 3, 4, 5, 6, 7, 8, 9], default: 1}",
    )
    .replace(
        "SCALE: {values: [1, 2, 3], default: 2}", "SCALE: {values: [1, 2, 3, 4, 5], default: 1}"
    )
    .replace(
        "WAVES: {values: [1, 2], default: 1, role: launch}", "WAVES: {values: [1], default: 1}"
    )
    .replace("BLOCK * SCALE <= 512", "SCALE <= 5")
)


def no_walk(*args: object, **kwargs: object) -> None:
    raise WalkTimeout("reduce", 0.0, 0, 0)  # a listing now would be a cache miss


def test_a_valid_set_is_listed_once_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ValidSetCache(tmp_path / "valid")
    space = Space(load_kernel("reduce"), shape={"n": 1 << 20})
    listed = SpaceProblem(space, valid_sets=cache)
    valid = listed.valid_configs()
    assert valid and listed.valid_total == len(valid)
    assert len(list(cache.root.glob("*.npz"))) == 1

    monkeypatch.setattr(Space, "reservoir", no_walk)
    again = SpaceProblem(space, valid_sets=cache)
    assert again.valid_configs() == valid and again.valid_total == listed.valid_total
    assert [type(v) for v in again.valid_configs()[0].values()] == [
        type(v) for v in valid[0].values()
    ]
    # another shape, or a pin, is another entry: not read from this one
    for other in (
        SpaceProblem(Space(space.spec, shape={"n": 1 << 21}), valid_sets=cache),
        SpaceProblem(space, {"OP": "max"}, valid_sets=cache),
    ):
        assert other.valid_configs() is None  # the walk was needed (and refused here)


def test_an_edited_space_file_or_a_damaged_entry_is_listed_again(tmp_path: Path) -> None:
    cache = ValidSetCache(tmp_path / "valid")
    root = tmp_path / "project"
    shutil.copytree(
        Path(load_kernel("reduce").path).parent.parent / "kernels_cu", root / "kernels_cu"
    )
    (root / "tuning_spaces").mkdir()
    path = root / "tuning_spaces" / "reduce.yaml"
    shutil.copy(load_kernel("reduce").path, path)
    space = Space(load_space(path), shape={"n": 1 << 20})
    first = SpaceProblem(space, valid_sets=cache).valid_configs()
    key = cache.key(space, SpaceProblem(space).pinned, 500_000, 0)
    assert key is not None
    (entry,) = cache.root.glob("*.npz")
    entry.write_bytes(b"damaged")
    assert SpaceProblem(space, valid_sets=cache).valid_configs() == first  # listed again
    assert cache.get(key, SpaceProblem(space).names, [p.values for p in SpaceProblem(space).params])

    path.write_text(path.read_text() + "\n# edited\n")
    edited = Space(load_space(path), shape={"n": 1 << 20})
    assert cache.key(edited, SpaceProblem(edited).pinned, 500_000, 0) != key


# -- damaged entries (issue 52) ----------------------------------------------------------------
def _entry_parts(entry: Path) -> tuple[dict, np.ndarray]:
    with np.load(entry, allow_pickle=False) as kept:
        return json.loads(str(kept["header"])), kept["index"]


def _save(entry: Path, **arrays: np.ndarray) -> None:
    with entry.open("wb") as f:
        np.savez(f, **arrays)


def _truncated(entry: Path) -> None:
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])


def _empty(entry: Path) -> None:
    entry.write_bytes(b"")


def _bad_crc(entry: Path) -> None:
    """One bit of the index's stored bytes flipped (np.savez stores members uncompressed)."""
    data = bytearray(entry.read_bytes())
    with zipfile.ZipFile(entry) as z:
        info = z.getinfo("index.npy")
    name_len, extra_len = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    start = info.header_offset + 30 + name_len + extra_len
    data[start + info.file_size - 1] ^= 0x01
    entry.write_bytes(bytes(data))


def _index_out_of_range(entry: Path) -> None:
    header, index = _entry_parts(entry)
    index = index.copy()
    index[0, 0] = len(header["domains"][0])  # one past the first parameter's last value
    _save(entry, header=np.array(json.dumps(header)), index=index)


def _negative_index(entry: Path) -> None:
    header, index = _entry_parts(entry)
    index = index.astype(np.int16)
    index[0, 0] = -1  # would read the domain's last value
    _save(entry, header=np.array(json.dumps(header)), index=index)


def _float_index(entry: Path) -> None:
    header, index = _entry_parts(entry)
    _save(entry, header=np.array(json.dumps(header)), index=index.astype(np.float32))


def _no_header(entry: Path) -> None:
    _, index = _entry_parts(entry)
    _save(entry, index=index)


def _header_not_json(entry: Path) -> None:
    _, index = _entry_parts(entry)
    _save(entry, header=np.array("{not json"), index=index)


def _header_a_list(entry: Path) -> None:
    _, index = _entry_parts(entry)
    _save(entry, header=np.array("[1, 2]"), index=index)


def _header_without_total(entry: Path) -> None:
    header, index = _entry_parts(entry)
    del header["total"]
    _save(entry, header=np.array(json.dumps(header)), index=index)


def _header_total_not_a_count(entry: Path) -> None:
    header, index = _entry_parts(entry)
    header["total"] = "many"
    _save(entry, header=np.array(json.dumps(header)), index=index)


def _header_total_too_small(entry: Path) -> None:
    header, index = _entry_parts(entry)
    header["total"] = len(index) - 1  # fewer valid configs than the entry holds
    _save(entry, header=np.array(json.dumps(header)), index=index)


def _header_of_other_names(entry: Path) -> None:
    header, index = _entry_parts(entry)
    header["names"] = list(reversed(header["names"]))
    _save(entry, header=np.array(json.dumps(header)), index=index)


DAMAGE = [
    _truncated,
    _empty,
    _bad_crc,
    _index_out_of_range,
    _negative_index,
    _float_index,
    _no_header,
    _header_not_json,
    _header_a_list,
    _header_without_total,
    _header_total_not_a_count,
    _header_total_too_small,
    _header_of_other_names,
]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_a_damaged_entry_is_a_miss_listed_again_and_rewritten(
    project: Path, tmp_path: Path, damage: Callable[[Path], None]
) -> None:
    """Whatever is wrong with an entry (a full disk, a crash, another tool), reading it is a
    miss: the valid set is listed again and the entry rewritten, never a traceback."""
    cache = ValidSetCache(tmp_path / "valid")
    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    listed = SpaceProblem(space, valid_sets=cache)
    valid = listed.valid_configs()
    assert valid is not None and len(valid) == 22
    (entry,) = cache.root.glob("*.npz")
    damage(entry)

    again = SpaceProblem(space, valid_sets=cache)
    assert again.valid_configs() == valid and again.valid_total == 22
    key = cache.key(space, again.pinned, VALID_LIST_LIMIT, 0)
    assert key is not None
    assert cache.get(key, again.names, [p.values for p in again.params]) == (valid, 22)


def test_an_entry_is_keyed_by_the_space_as_parsed_not_as_the_file_is_when_stored(
    write_space: Callable[[str], Path], tmp_path: Path
) -> None:
    """A space file saved between the parse and the listing's store: the list (of the parsed
    constraints) is kept under the parsed content's key, so the saved file's own list is not
    answered with it (45 configs stored where the new constraints allow 27)."""
    cache = ValidSetCache(tmp_path / "valid")
    path = write_space(GRID_SPACE)
    parsed = Space(load_space(path))
    path.write_text(path.read_text().replace("SCALE <= 5", "SCALE <= 3"))  # saved meanwhile
    stored = SpaceProblem(parsed, valid_sets=cache).valid_configs()
    assert stored is not None and len(stored) == 45

    saved = Space(load_space(path))
    assert len(SpaceProblem(saved, valid_sets=cache).valid_configs() or []) == 27
    # and the parsed content's entry is what a parse of that content reads back
    path.write_text(path.read_text().replace("SCALE <= 3", "SCALE <= 5"))
    reparsed = SpaceProblem(Space(load_space(path)), valid_sets=cache)
    key = cache.key(reparsed.space, reparsed.pinned, VALID_LIST_LIMIT, 0)
    assert key is not None
    assert cache.get(key, reparsed.names, [p.values for p in reparsed.params]) == (stored, 45)


@pytest.mark.parametrize("damage", [_truncated, _empty], ids=lambda f: f.__name__.strip("_"))
def test_space_command_answers_the_same_with_a_damaged_entry(
    project: Path, private_dirs: Path, damage: Callable[[Path], None]
) -> None:
    """``workbench space`` of a space with no valid config (the walk's answer kept as an empty
    entry) exited 1 with a traceback, or "Aborted.", once the entry was truncated or emptied;
    ``compile --all`` and ``tune`` read the same entry through the same check."""
    path = project / "spaces" / "tiny.yaml"
    path.write_text(path.read_text().replace("BLOCK * SCALE <= 512", "BLOCK * SCALE > 4096"))
    first = invoke("space", str(path))
    assert first[0] == 2 and "no config is valid" in first[2]
    (entry,) = (private_dirs.parent / "cache" / "valid-sets").glob("*.npz")
    damage(entry)
    assert invoke("space", str(path)) == first
    assert invoke("space", str(path)) == first  # (read back from the rewritten entry)


def test_an_unwritable_valid_set_cache_is_said_once(
    project: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A folder no one can write (here under a regular file, which holds for root too): every
    tune lists the valid set again, and the process says so once, as the compile cache does."""
    (tmp_path / "a-file").write_text("")
    cache = ValidSetCache(tmp_path / "a-file" / "valid")
    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    for _ in range(2):
        assert len(SpaceProblem(space, valid_sets=cache).valid_configs() or []) == 22
    (said,) = [line for line in capfd.readouterr().err.splitlines() if str(cache.root) in line]
    assert "cannot be written" in said
