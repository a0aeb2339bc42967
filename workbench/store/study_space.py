"""The space a stored study searched, rebuilt from its space file, shape and arch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError
from workbench.spaces.model import parse_shape_label, space_sha256
from workbench.store.store import StudyInfo

if TYPE_CHECKING:
    from workbench.spaces.space import Space


def study_space(study: StudyInfo) -> tuple[Space | None, str | None]:
    """The :class:`~workbench.spaces.Space` of ``study``, or (None, why not) for a recorded
    space (no space file) and a space file that cannot be loaded now."""
    from workbench.devices import device_for
    from workbench.spaces import Space, load_space
    from workbench.toolchain import Arch

    if not study.space_path:
        return None, "a recorded space without a space file (no work model)"
    shape = parse_shape_label(study.shape_label)
    try:
        spec = load_space(study.space_path)
        arch = Arch.parse(study.arch) if study.arch else None
        space = Space(spec, shape=shape, arch=arch, device=device_for(arch) if arch else None)
    except (WorkbenchError, OSError, ValueError) as exc:
        return None, f"its space file cannot be loaded now: {exc}"
    return space, None


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
