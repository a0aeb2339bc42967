"""The valid set kept on disk: listed once per space, shape, arch, device and pins, read back
by every later tune, and never wrong (an edited space file, another shape or pin is another
entry; a damaged entry is listed again)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from workbench.search.problem import SpaceProblem
from workbench.search.valid_sets import ValidSetCache
from workbench.spaces import Space, load_kernel
from workbench.spaces.loader import load_space
from workbench.spaces.space import WalkTimeout


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
