"""The valid set kept on disk: listed once per space, shape, arch, device and pins, read back
by every later tune, and never wrong (an edited space file, another shape or pin is another
entry; a damaged entry is listed again)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
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
