"""Which archs to build a space for, checked against the space and the installed NVRTC."""

from __future__ import annotations

from workbench.errors import ArchError
from workbench.spaces.model import SpaceSpec
from workbench.toolchain import Arch


def resolve_arches(spec: SpaceSpec, requested: str | None) -> list[Arch]:
    """The archs named by ``--arch`` (``None``: the newest declared; ``all``: every declared).

    Raises:
        ArchError: an arch that is not a CUDA arch, that NVRTC cannot target, or that the space
            does not declare (its kernel was not written or checked for it).
    """
    declared = [Arch.parse(a) for a in spec.arches]
    if requested is None:
        chosen = [max(declared)]
    elif requested.strip().lower() == "all":
        chosen = declared
    else:
        chosen = [Arch.parse(a) for a in requested.split(",") if a.strip()]
        if not chosen:
            raise ArchError(f"--arch {requested!r} names no arch (e.g. sm_90, or 'all')")
    for arch in chosen:
        if arch not in declared:
            names = ", ".join(a.sm for a in declared)
            raise ArchError(
                f"{spec.name} declares the archs {names}; {arch.sm} is not among them "
                f"(add it to 'arches' in {spec.path.name} once the kernel supports it)"
            )
        try:
            arch.check_supported()
        except ArchError as exc:  # the space file declares it: say which file and line
            raise spec.error("arches", str(exc)) from None
    return chosen


def one_arch(spec: SpaceSpec, requested: str | None) -> Arch:
    """The arch of a command that builds for one (it runs on a GPU, or profiles, or shows one
    space): ``--arch`` naming one, or the newest declared.

    Raises:
        ArchError: as :func:`resolve_arches`, or ``--arch`` names several (``all``).
    """
    chosen = resolve_arches(spec, requested)
    if len(chosen) > 1:
        names = ", ".join(a.sm for a in chosen)
        raise ArchError(
            f"--arch {requested}: this command builds for one arch; name one of {names}"
        )
    return chosen[0]
