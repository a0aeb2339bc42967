"""Which archs (and shapes) to build a space for, checked against the space and NVRTC."""

from __future__ import annotations

from collections.abc import Mapping

from workbench.errors import ArchError, ConfigError
from workbench.spaces.model import SpaceSpec
from workbench.spaces.space import Space
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


def shape_spaces(
    spec: SpaceSpec,
    target: Arch,
    device: str | None,
    shape: Mapping[str, int] | None,
    shapes: str | None,
) -> list[Space]:
    """One space per shape a command covers: ``shape`` (default: the space's default shape),
    or each shape of the named set ``shapes`` (``default`` included).

    Raises:
        ConfigError: both given, or no such shape set.
        WorkbenchError: an unknown device preset.
    """
    from workbench.devices import device_for

    if shape is not None and shapes is not None:
        raise ConfigError("--shape and --shapes both name the shapes: give one of them")
    dev = device_for(target, device)
    if shapes is not None:
        if shapes != "default" and shapes not in spec.shape_sets:
            known = ", ".join(["default", *spec.shape_sets])
            raise ConfigError(f"{spec.name} has no shape set {shapes!r}; sets: {known}")
        chosen = list(spec.shapes(shapes))
    else:
        chosen = [dict(shape or spec.default_shape)]
    return [Space(spec, shape=s, arch=target, device=dev) for s in chosen]
