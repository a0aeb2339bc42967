"""Which configs a compile sweep covers, and where its results are kept: the space's
compile-only study in the store.

``workbench compile`` and tune's compile stage (no GPU, no recording) both describe what they
compile as a :class:`CompileSelection` and take its :func:`compile_batches`, one per arch and
shape; :func:`select_configs` picks the configs of one space.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from workbench.devices import device_for
from workbench.errors import ConfigError, WorkbenchError
from workbench.search.enqueue import Say, warm_starts
from workbench.search.problem import SpaceProblem
from workbench.search.tune_plan import space_study
from workbench.spaces import Space, config_label
from workbench.spaces.model import Config, Shape, SpaceSpec, Value
from workbench.static.sweep import StaticRecord
from workbench.store import Store, StudyInfo
from workbench.store.compiles import save_compiles
from workbench.store.records import COMPILE_ONLY
from workbench.toolchain import Arch


def select_configs(
    space: Space,
    *,
    all_configs: bool = False,
    sample: int | None = None,
    given: Sequence[Config] = (),
    seed: int = 0,
    fixed: Mapping[str, Value] | None = None,
) -> list[Config]:
    """Which configs a sweep covers: given ones (each once), all valid ones, or the default
    (the space's, for its arch) plus a sample; with ``fixed``, those that take its values (a
    problem variant, ``--set``: the default gets them).

    Raises:
        ConfigError: a given config is invalid (with the reasons), or no config of the space
            is valid.
    """
    fixed = dict(fixed or {})

    def violations(cfg: Config) -> list[str]:
        unset = [f"{n} is set to {v!r}" for n, v in fixed.items() if cfg.get(n) != v]
        return unset + [v.message for v in space.explain(cfg)]

    if given:
        configs: dict[str, Config] = {}
        for cfg in given:
            if problems := violations(cfg):
                raise ConfigError(f"{config_label(cfg)} is invalid: {'; '.join(problems)}")
            configs.setdefault(config_label(cfg), cfg)
        return list(configs.values())
    if all_configs:
        configs_ = [c for c in space.iter_valid(fixed) if not fixed or not violations(c)]
        if not configs_:
            SpaceProblem(space, fixed).check_not_empty()  # raises, naming what rules them out
        return configs_
    default = {**space.default_config(fixed), **fixed}  # (the variant's own defaults)
    picked: list[Config] = []
    if space.is_valid(default):
        picked.append(default)
    for cfg in space.sample(sample or 0, seed=seed, fixed=fixed) if sample else []:
        if cfg != default:
            picked.append(cfg)
    if not picked and sample:  # the sample holds every valid config when there are few
        SpaceProblem(space, fixed).check_not_empty()
    if not picked:
        raise ConfigError(
            f"{space.spec.name}: the default config is invalid ("
            + "; ".join(v.message for v in space.explain(default))
            + "); ask for a `sample` of N configs or `all_configs`"
        )
    return picked


def store_sweep(
    store: Store, space: Space, records: Sequence[StaticRecord], kernel: str | None = None
) -> StudyInfo:
    """Keep a sweep's compile results in the store, under the space's compile-only study
    (``kernel | shape | compile only (sm_XX)``: nothing was run, so no GPU names it);
    ``kernel`` names a problem variant (``reduce[OP=max]``, as tune's studies do).

    Raises:
        StoreError: the database failed, or the study exists with other parameters.
    """
    study = compile_only_study(store, space, kernel)
    save_compiles(store, study, records)
    return study


def compile_only_study(store: Store, space: Space, kernel: str | None = None) -> StudyInfo:
    """The space's compile-only study (created on first use), where compile sweeps are kept.

    Raises:
        StoreError: the database failed, or the study exists with other parameters.
    """
    device_key = f"{COMPILE_ONLY} ({space.arch.sm})"
    return space_study(store, space, kernel or space.spec.name, device_key, None, None)


class NamedConfigs(Protocol):
    """The configs a command's user named, in the command's own syntax (``compile
    --config``, tune's ``--enqueue NAME=VALUE,...``), as configs of one space: ``fixed`` holds
    the values every config takes (``--set``), ``kernel`` names the problem (variant) the
    sweep's results are kept under. What is invalid is refused afterwards, by
    :func:`select_configs`."""

    def __call__(self, space: Space, fixed: Mapping[str, Value], kernel: str) -> list[Config]:
        """The named configs in ``space`` (in order; a repeat is dropped later).

        Raises:
            ConfigError: a config that cannot be read, or found.
        """
        ...


@dataclass(frozen=True)
class Assignments:
    """Configs named as ``NAME=VALUE,...`` items (tune's ``--enqueue``): each over the
    space's default (with the fixed values), every other parameter kept at its default."""

    items: tuple[str, ...]

    def __call__(self, space: Space, fixed: Mapping[str, Value], kernel: str) -> list[Config]:
        base = {**space.default_config(fixed), **fixed}
        return [space.parse_config(item.split(","), base) for item in self.items]


@dataclass(frozen=True)
class CompileSelection:
    """What a compile sweep compiles: for each arch and shape, the given configs (each once)
    and other studies' best (``warm``), then, unless configs were given and ``then_sweep`` is
    False, every valid config (``all_configs``) or the default plus ``sample`` sampled ones.

    ``pin`` (``--set NAME=VALUE`` items) fixes parameters: every config takes those values.
    With ``one_variant`` the problem variant a tune searches is compiled: every ``tunable:
    false`` parameter not pinned takes its default, as in tune's :class:`SpaceProblem`;
    without, only the pinned values are fixed, so a sweep may cover every variant.
    """

    spec: SpaceSpec
    arches: tuple[Arch, ...]
    shapes: tuple[Shape, ...]
    device: str | None = None  #: a device preset (None: each arch's own)
    pin: tuple[str, ...] = ()
    given: NamedConfigs | None = None
    warm: tuple[str, ...] = ()  #: ``best``, ``best:STUDY``: other studies' best, from a store
    all_configs: bool = False
    sample: int | None = None
    seed: int = 0
    one_variant: bool = False
    then_sweep: bool = False  #: given configs come first (tune: what its search starts from)


@dataclass(frozen=True)
class CompileBatch:
    """Configs of one space (arch and shape) a compile sweep compiles, in order."""

    space: Space
    kernel: str  #: the problem (variant) its results are kept under
    configs: list[Config]
    default: Config  #: the space's default config with the fixed values (a table marks it)


def compile_batches(
    selection: CompileSelection, *, store: Store | None = None, say: Say = print
) -> Iterator[CompileBatch]:
    """The batches of ``selection``, per arch and then shape, each made when it is asked for
    (so that a batch can be compiled before the next is chosen). ``store`` is where other
    studies' best are read for ``selection.warm``; ``say``: what the user is told of them.

    Raises:
        ConfigError: a malformed, invalid or impossible config, or no valid config.
        WorkbenchError: no store or no study to start a warm-start item from.
    """
    if selection.warm and store is None:
        raise ConfigError("other studies' best configs are read from a store: give `storage`")
    for target in selection.arches:
        for shape in selection.shapes:
            yield _batch(selection, target, shape, store, say)


def _batch(
    selection: CompileSelection, target: Arch, shape: Shape, store: Store | None, say: Say
) -> CompileBatch:
    """The batch of one arch and shape (see :func:`compile_batches`)."""
    device = device_for(target, selection.device)
    sp = Space(selection.spec, shape=shape, arch=target, device=device)
    pins = sp.parse_pins(list(selection.pin))
    problem = SpaceProblem(sp, pins)
    fixed = problem.pinned if selection.one_variant else pins
    kernel = problem.kernel if selection.one_variant or pins else selection.spec.name
    named = selection.given(sp, fixed, kernel) if selection.given is not None else []
    configs = select_configs(sp, given=named, fixed=fixed) if named else []
    if selection.warm:
        assert store is not None  # (checked by compile_batches)
        configs += _warm_configs(store, problem, selection.warm, configs, say)
    if selection.then_sweep or not named:
        more = select_configs(
            sp,
            all_configs=selection.all_configs,
            sample=selection.sample,
            seed=selection.seed,
            fixed=fixed,
        )
        configs += [c for c in more if c not in configs]
    return CompileBatch(sp, kernel, configs, sp.default_config(fixed))


def _warm_configs(
    store: Store, problem: SpaceProblem, items: Sequence[str], have: list[Config], say: Say
) -> list[Config]:
    """Other studies' best configs (``--enqueue best``, ``best:STUDY``) not in ``have``."""
    study = compile_only_study(store, problem.space, problem.kernel)
    found: list[Config] = []
    try:
        for item in items:
            configs = warm_starts(problem, study, item, store, say)
            found += [c for c in configs if c not in have and c not in found]
    except WorkbenchError:  # refused: no empty study left behind
        store.discard_if_unused(study)
        raise
    return found
