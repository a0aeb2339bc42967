"""Which configs a compile sweep covers, and where its results are kept: the space's
compile-only study in the store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workbench.errors import ConfigError
from workbench.search.problem import SpaceProblem
from workbench.search.session import space_study
from workbench.spaces import Space, config_label
from workbench.spaces.model import Config, Value
from workbench.static.sweep import StaticRecord
from workbench.store import Store, StudyInfo
from workbench.store.compiles import save_compiles
from workbench.store.records import COMPILE_ONLY


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
        configs_ = [c for c in space.iter_valid() if not fixed or not violations(c)]
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
