"""``--enqueue``: the configs a tune evaluates first (the space's default, configs given as
NAME=VALUE,..., another study's best), for every path of tune (local, shared, no GPU)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from workbench.errors import ConfigError
from workbench.search.problem import SearchProblem
from workbench.search.tune_plan import TunePlan
from workbench.search.warm_start import MAX_WARM_STARTS, best_elsewhere
from workbench.spaces.space import parse_assignments
from workbench.store import Store, StudyInfo

#: Where what the user is told goes (plain text, one line at a time).
Say = Callable[[str], None]


def check_enqueue(enqueue: Sequence[str] | None) -> None:
    """Refuse ``--enqueue`` items no path of tune can take (before anything is opened).

    Raises:
        ConfigError: ``none`` with other items, or an item that is neither a keyword nor
            NAME=VALUE,...
    """
    if "none" in (enqueue or []) and len(enqueue or []) > 1:
        raise ConfigError(
            "`enqueue` none puts nothing first: it cannot go with other `enqueue` items"
        )
    for item in enqueue or []:
        if not is_keyword(item) and not all("=" in part for part in item.split(",")):
            raise ConfigError(
                f"`enqueue` {item!r}: expected default, none, best, best:STUDY or NAME=VALUE,..."
            )


def is_warm_start(item: str) -> bool:
    """Whether an ``--enqueue`` item asks for another study's best (``best``, ``best:STUDY``)."""
    return item == "best" or item.startswith("best:")


def is_keyword(item: str) -> bool:
    """Whether an ``--enqueue`` item is a keyword (``default``, ``none``, ``best``,
    ``best:STUDY``) rather than a NAME=VALUE,... config."""
    return item in ("default", "none") or is_warm_start(item)


def enqueued_configs(
    plan: TunePlan, items: Sequence[str] | None, store: Store, say: Say
) -> list[dict]:
    """The configs ``--enqueue`` asks to evaluate first, without repeats, in order: the space's
    default, another study's best (``best``, ``best:STUDY``), or NAME=VALUE,..."""
    items = list(items or ["default"])
    queue: list[dict] = []
    for item in items:
        if item == "none":
            return []
        if item == "default":
            queue += plan.problem.defaults()
        elif is_warm_start(item):
            queue += warm_starts(plan.problem, plan.study, item, store, say)
        else:
            config = parse_enqueued(plan, item)
            violations = plan.problem.violations(config)
            if violations:  # said, not silently skipped
                raise ConfigError(f"`enqueue` {item}: invalid here: {'; '.join(violations)}")
            queue.append(config)
    unique: dict[str, dict] = {}
    for config in queue:  # in order, the first of equal configs
        unique.setdefault(plan.problem.key(config), config)
    return list(unique.values())


def parse_enqueued(plan: TunePlan, item: str) -> dict:
    """``--enqueue NAME=VALUE,...``: over the space's defaults (and the --set values), or,
    for a bare recording (which has none), naming every parameter.

    Raises:
        ConfigError: malformed, an unknown name or value, or a recorded parameter left out.
    """
    space = getattr(plan.problem, "space", None)
    if space is not None:
        pinned = getattr(plan.problem, "pinned", {})
        return space.parse_config(item.split(","), {**space.default_config(), **pinned})
    domains = {p.name: p.values for p in plan.problem.params}
    config = parse_assignments(domains, item.split(","), {})
    if missing := [n for n in domains if n not in config]:
        raise ConfigError(
            f"`enqueue` {item}: a recorded space has no defaults; name {', '.join(missing)} too"
        )
    return config


def warm_starts(
    problem: SearchProblem, study: StudyInfo, item: str, store: Store, say: Say
) -> list[dict]:
    """``--enqueue best``: the fastest config of each other study of this kernel in the store
    than ``study`` (those that fit ``problem``, at most MAX_WARM_STARTS; the others are named
    and skipped). ``--enqueue best:STUDY``: that study's, which must fit."""
    source = item.partition(":")[2] if ":" in item else None
    if source == "":
        raise ConfigError(
            "`enqueue` best: takes a study, e.g. best:3 or 'best:NAME' (see store list)"
        )
    found = best_elsewhere(store, problem, study, source)
    if source is not None and found[0].config is None:
        raise ConfigError(f"`enqueue` {item}: {found[0].describe()}")
    if not found:
        say(f"--enqueue best: no other study of {study.kernel} in the store")
    queue: list[dict] = []
    for start in found:
        if start.config is None:
            line = f"skipped {start.describe()}"
        elif start.config in queue:
            line = f"the same config as above, from {start.describe()}"
        elif len(queue) == MAX_WARM_STARTS:
            line = f"not used (at most {MAX_WARM_STARTS}; best:STUDY picks one) {start.describe()}"
        else:
            queue.append(start.config)
            line = f"first {start.describe()}"
        say(f"--enqueue best: {line}")
    return queue
