"""Which archs (and shapes) to build a space for, checked against the space and NVRTC."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

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
            raise ArchError(f"`arch` {requested!r} names no arch (e.g. sm_90, or 'all')")
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
            f"`arch` {requested}: this command builds for one arch; name one of {names}"
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
        raise ConfigError("`shape` and `shapes` both name the shapes: give one of them")
    dev = device_for(target, device)
    if shapes is not None:
        if shapes != "default" and shapes not in spec.shape_sets:
            known = ", ".join(["default", *spec.shape_sets])
            raise ConfigError(f"{spec.name} has no shape set {shapes!r}; sets: {known}")
        chosen = list(spec.shapes(shapes))
    else:
        chosen = [dict(shape or spec.default_shape)]
    return [Space(spec, shape=s, arch=target, device=dev) for s in chosen]


def parse_shape(items: list[str] | None, default: dict[str, int]) -> dict[str, int]:
    """``["n=1024"]`` or ``["M=4096,N=4096"]`` over the default shape.

    Raises:
        ConfigError: unknown name or a non-integer size.
    """
    shape = dict(default)
    for item in (part.strip() for raw in items or [] for part in raw.split(",")):
        name, sep, text = item.partition("=")
        if not sep or name not in shape:
            raise ConfigError(f"`shape` {item!r}: expected NAME=INT with NAME in {list(shape)}")
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"`shape` {item!r}: {text!r} is not an integer") from None
        if value <= 0:
            raise ConfigError(f"`shape` {item!r}: sizes must be positive")
        if value >= 2**63:  # kernels take sizes as 64-bit integers at most
            raise ConfigError(f"`shape` {item!r}: larger than a 64-bit size")
        shape[name] = value
    return shape


def option_spaces(
    spec: SpaceSpec,
    target: Arch,
    device: str | None,
    shape: list[str] | None,
    shapes: str | None,
) -> list[Space]:
    """:func:`shape_spaces` of the command line's ``--shape`` items (over the default shape)
    or ``--shapes`` set.

    Raises:
        ConfigError: a malformed ``--shape``, both options given, or no such shape set.
        WorkbenchError: an unknown device preset.
    """
    given = parse_shape(shape, spec.default_shape) if shape else None
    return shape_spaces(spec, target, device, given, shapes)


def space_from_options(
    kernel: str,
    spaces: list[Path] | None,
    arch: str | None,
    device: str | None,
    shape: list[str] | None,
) -> Space:
    """The space of one kernel for the commands that work on one arch and one shape (``run``,
    ``record``, ``profile``): the arch of ``--arch`` (one), the shape from ``--shape``."""
    from workbench.spaces.registry import load_kernel

    spec = load_kernel(kernel, spaces or [])
    return option_spaces(spec, one_arch(spec, arch), device, shape, None)[0]
