"""The space a stored study searched, rebuilt from the store's copy of its files or from its
space file, with the study's shape and arch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError
from workbench.spaces.model import parse_shape_label, space_sha256
from workbench.store.records import StudyInfo

if TYPE_CHECKING:
    from workbench.spaces.model import SpaceSpec
    from workbench.spaces.space import Space
    from workbench.store.kept_space import KeptSpace


def study_space(study: StudyInfo, kept: KeptSpace | None = None) -> tuple[Space | None, str | None]:
    """The :class:`~workbench.spaces.Space` of ``study``: from ``kept``, the store's copy of
    its space file and source (what it was tuned from, wherever the store is now), else from
    its space file; or (None, why not) for a recorded space (no space file) and a study whose
    space can be had from neither."""
    if not study.space_path:
        return None, "a recorded space without a space file (no work model)"
    if kept is None:
        return space_file(study)
    try:
        return _space(study, kept.spec()), None
    except (WorkbenchError, ValueError) as exc:
        space, why = space_file(study)
        return space, why and f"{why}; the store's copy of it does not load either: {exc}"


def space_file(study: StudyInfo) -> tuple[Space | None, str | None]:
    """The :class:`~workbench.spaces.Space` of ``study`` from its space file as it is now (what
    a compile here reads), or (None, why not)."""
    from workbench.spaces import load_space

    if not study.space_path:
        return None, "a recorded space without a space file (no work model)"
    try:
        return _space(study, load_space(study.space_path)), None
    except (WorkbenchError, OSError, ValueError) as exc:
        return None, f"its space file cannot be loaded now: {exc}"


def _space(study: StudyInfo, spec: SpaceSpec) -> Space:
    """``spec`` at the study's shape and arch.

    Raises:
        WorkbenchError, ValueError: the shape or arch does not fit the space.
    """
    from workbench.devices import device_for
    from workbench.spaces import Space
    from workbench.toolchain import Arch

    shape = parse_shape_label(study.shape_label)
    arch = Arch.parse(study.arch) if study.arch else None
    return Space(spec, shape=shape, arch=arch, device=device_for(arch) if arch else None)


def space_changed(study: StudyInfo, space: Space) -> bool:
    """Whether the space file or its kernel source changed since the study was tuned (a study
    without a stored hash, or files that cannot be read now, count as unchanged: nothing to
    tell)."""
    if study.space_sha256 is None:
        return False
    try:
        return space_sha256(space.spec) != study.space_sha256
    except OSError:
        return False
