"""What a command's ``--config`` names, and the config it comes to: one syntax for every
command that takes one (compile, run, profile, compare).

An option is ``default`` (the space's default config: its arch's, see ``defaults:`` in the
space file), ``best`` (the fastest correct config of the shape's study in the store) or
``NAME=VALUE[,NAME=VALUE...]``, a partial config completed to a valid one (the named values
kept, the others from the default, or from the nearest valid config where the default does
not fit them: :mod:`workbench.spaces.completion`). A command that takes one config merges
its repeated options (``-c BM=64 -c BN=128``); ``compile`` takes one config per option.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from workbench.errors import ConfigError
from workbench.spaces import Space, config_label
from workbench.spaces.completion import ConfigCompletion, complete_config
from workbench.spaces.model import Config, Value, shape_label
from workbench.spaces.space import parse_assignments
from workbench.store import Store, StudyInfo


class ConfigKind(Enum):
    """The three forms of a ``--config`` option."""

    DEFAULT = "default"
    BEST = "best"
    GIVEN = "given"  #: NAME=VALUE,...


@dataclass(frozen=True)
class ConfigRequest:
    """One config as a ``--config`` option names it."""

    kind: ConfigKind
    #: the NAME=VALUE items of a GIVEN config
    items: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return ",".join(self.items) if self.kind is ConfigKind.GIVEN else self.kind.value


#: What a command that takes one config uses without a ``--config``.
DEFAULT_CONFIG = ConfigRequest(ConfigKind.DEFAULT)
BEST_CONFIG = ConfigRequest(ConfigKind.BEST)


def parse_config_option(text: str) -> ConfigRequest:
    """``default``, ``best`` or ``NAME=VALUE[,NAME=VALUE...]``.

    Raises:
        ConfigError: an item that is none of those, or a keyword with other items.
    """
    items = tuple(item.strip() for item in text.split(","))
    keywords = [i.lower() for i in items if i.lower() in (ConfigKind.DEFAULT.value, "best")]
    if keywords and len(items) > 1:
        raise ConfigError(
            f"--config {text!r}: {keywords[0]!r} names a whole config; it cannot go with "
            "other items"
        )
    if keywords:
        return ConfigRequest(ConfigKind(keywords[0]))
    for item in items:
        if not item.partition("=")[0].strip() or "=" not in item:
            raise ConfigError(f"--config {text!r}: {item!r} is not 'default', 'best' or NAME=VALUE")
    return ConfigRequest(ConfigKind.GIVEN, items)


def parse_config_options(texts: Sequence[str] | None, *, merge: bool) -> list[ConfigRequest]:
    """The configs that repeated ``--config`` options name: one per option, or with
    ``merge`` (a command that takes one config) the NAME=VALUE items of all of them as one.

    Raises:
        ConfigError: as :func:`parse_config_option`; with ``merge``, a keyword among
            several options.
    """
    requests = [parse_config_option(t) for t in texts or []]
    if not merge or len(requests) <= 1:
        return requests
    if keyword := next((r for r in requests if r.kind is not ConfigKind.GIVEN), None):
        raise ConfigError(
            f"--config {keyword.text} names a whole config: give it as the only --config"
        )
    return [ConfigRequest(ConfigKind.GIVEN, tuple(i for r in requests for i in r.items))]


def wants_best(requests: Sequence[ConfigRequest]) -> bool:
    """Whether a config is the store's best (the store must be opened)."""
    return any(r.kind is ConfigKind.BEST for r in requests)


@dataclass(frozen=True)
class ResolvedConfig:
    """The config a request came to, and where it came from."""

    config: Config
    request: ConfigRequest
    #: ``best``: the study it was taken from
    study: StudyInfo | None = None
    #: NAME=VALUE,...: what was filled in
    completion: ConfigCompletion | None = None

    @property
    def origin(self) -> str:
        """Where the config came from, in a few words (a table's cell)."""
        if self.study is not None:
            return f"best of study {self.study.name}"
        if self.request.kind is ConfigKind.DEFAULT:
            return "the default"
        return "given on the command line"

    def notes(self) -> list[str]:
        """What a command says about the config: the study of ``best``, what was filled in."""
        if self.study is not None:
            return [f"the best config of study {self.study.name!r}: {config_label(self.config)}"]
        line = self.completion.describe() if self.completion is not None else None
        return [line] if line else []


def resolve_config(
    space: Space,
    request: ConfigRequest,
    *,
    store: Store | None = None,
    study: str | None = None,
    variant: str | None = None,
    fixed: Mapping[str, Value] | None = None,
) -> ResolvedConfig:
    """The valid config ``request`` names in ``space``. ``best`` reads ``store``: the study
    named by ``study``, else the shape's one (of this machine's GPU when there are several;
    ``variant``, a pinned problem variant as tune names it, ``reduce[OP=max]``, takes only that
    variant's studies). ``fixed`` (``--set``) values hold in every config: the default takes
    them, a given config keeps them.

    Raises:
        ConfigError: a malformed or impossible config, an invalid default or best, no store or
            study or correct evaluation for ``best``.
    """
    fixed = dict(fixed or {})
    if request.kind is ConfigKind.BEST:
        config, chosen = _best(space, store, study, variant)
        _check(space, config, fixed)
        return ResolvedConfig(config, request, study=chosen)
    if request.kind is ConfigKind.DEFAULT:
        config = {**space.default_config(), **fixed}
        _check(space, config, fixed)
        return ResolvedConfig(config, request)
    domains = {p.name: p.values for p in space.spec.parameters}
    named = parse_assignments(domains, request.items, {})
    if clash := [f"{n} is set to {fixed[n]!r}" for n, v in named.items() if fixed.get(n, v) != v]:
        raise ConfigError(f"{config_label(named)} is invalid: {'; '.join(clash)} (--set)")
    completion = complete_config(space, {**fixed, **named})
    return ResolvedConfig(completion.config, request, completion=completion)


def _check(space: Space, config: Config, fixed: Mapping[str, Value]) -> None:
    """Raise when ``config`` is invalid in ``space`` or leaves a ``fixed`` value."""
    problems = [f"{n} is set to {v!r}" for n, v in fixed.items() if config.get(n) != v]
    problems += [v.message for v in space.explain(config)]
    if problems:
        raise ConfigError(f"{config_label(config)} is invalid: {'; '.join(problems)}")


def _best(
    space: Space, store: Store | None, study: str | None, variant: str | None
) -> tuple[Config, StudyInfo]:
    """The fastest correct config of the shape's study in ``store`` (over the space's
    default, for a parameter the study did not have), with that study."""
    from workbench.gpu import probe_gpu
    from workbench.profile.storage import best_config

    if store is None:
        raise ConfigError("--config best needs a store (--storage)")
    probe = probe_gpu()
    best, chosen = best_config(
        store,
        variant or space.spec.name,
        shape_label(space.shape),
        study,
        probe.name if probe.available else None,
    )
    return space.parse_config([f"{k}={v}" for k, v in best.items()]), chosen
