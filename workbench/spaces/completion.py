"""Complete a partial config: the values a user names are kept, the others come from the
space's default config (its arch's, see ``defaults:``), or, where that is invalid with the
named values, from the nearest valid config.

Nearest: the fewest parameters moved off the default, then the shortest moves (in steps along
each domain), then the earliest-declared parameters kept (a space file lists its main knobs
first). A depth-first branch and bound in declaration order finds it, each constraint checked
as soon as its parameters are bound (as the enumeration does): changing one or two knobs of the
int8 GEMM visits a few thousand partial configs, not its half million valid ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.errors import ConfigError
from workbench.spaces.model import Config, Value, config_label, shape_label
from workbench.spaces.space import Space, Violation

#: Partial configs the search visits before it settles for the nearest found so far (a count,
#: not a time: the answer must not depend on the machine's speed).
SEARCH_STEPS = 2_000_000


@dataclass(frozen=True)
class ConfigCompletion:
    """A partial config made whole, and what was filled in."""

    config: Config
    #: the values the user named, kept
    given: Config
    #: the values taken from the default
    filled: Config
    #: the values moved off the default to make the config valid
    moved: Config
    #: the default it was completed from, and whose it is (``the sm_90a default``)
    default: Config
    default_name: str
    #: what the default with the named values broke (empty when it was valid)
    broken: tuple[Violation, ...] = ()

    def describe(self) -> str | None:
        """One line: which knobs were filled in, with what; None when none were."""
        if not self.filled and not self.moved:
            return None
        line = f"{config_label(self.given)}: "
        if self.filled:
            line += f"filled in {config_label(self.filled)} from {self.default_name}"
        if self.moved:
            moves = ", ".join(
                f"{n}={_text(v)} (not {_text(self.default[n])})" for n, v in self.moved.items()
            )
            why = f" {self.broken[0].message}" if self.broken else " is invalid"
            line += "; " if self.filled else ""
            line += f"moved to be valid: {moves}; {self.default_name} with the given values{why}"
        return line


def complete_config(space: Space, given: Mapping[str, Value]) -> ConfigCompletion:
    """``given`` (typed values of some parameters) completed to a valid config of ``space``.

    Raises:
        ConfigError: a constraint that reads only the given parameters (or none: the shape,
            the device) fails, so no completion can be valid; or no valid config takes the
            given values.
    """
    given = dict(given)
    default = space.default_config(space.variant_values(given))
    variant = space.spec.variant_of(default)
    own = space.spec.arch_defaults.get(space.arch.sm) or (
        variant is not None and variant.arch_defaults.get(space.arch.sm)
    )
    name = f"the {space.arch.sm} default" if own else "the default"
    start = {**default, **given}
    broken = tuple(space.explain(start))
    filled = {n: v for n, v in default.items() if n not in given}
    if not broken:
        return ConfigCompletion(start, given, filled, {}, default, name)
    _refuse_impossible(space, given, broken)
    found = _nearest(space, start, set(given))
    if found is None:
        raise ConfigError(
            f"no valid config has {config_label(given)} ({_where(space)}); with "
            f"{name}'s other values it {broken[0].message}"
        )
    moved = {n: v for n, v in found.items() if n not in given and v != default[n]}
    kept = {n: v for n, v in filled.items() if n not in moved}
    return ConfigCompletion(found, given, kept, moved, default, name, broken)


def _refuse_impossible(space: Space, given: Config, broken: Sequence[Violation]) -> None:
    """Raise for a broken constraint that no other value of the free parameters can mend."""
    for v in broken:
        if v.constraint is not None and space.parameters_read(v.constraint.expr) <= set(given):
            raise ConfigError(
                f"{config_label(given)} cannot be valid ({_where(space)}): it {v.message}"
            )


def _where(space: Space) -> str:
    return f"{space.arch.sm}, {space.device.name}, {shape_label(space.shape)}"


def _nearest(space: Space, start: Config, kept: set[str]) -> Config | None:
    """The valid config nearest ``start`` that keeps the ``kept`` values (see the module's
    docstring); None when there is none. Past SEARCH_STEPS, the nearest found so far."""
    env = space.start_env()
    if env is None:
        return None
    names = space.names
    choices = [_choices(space, n, start[n], n in kept) for n in names]
    best: list[tuple[Value, ...] | None] = [None]
    best_cost = [(len(names) + 1, 0)]
    chosen: list[Value] = []
    steps = [0]

    def descend(level: int, moved: int, distance: int) -> None:
        if level == len(names):
            best[0], best_cost[0] = tuple(chosen), (moved, distance)
            return
        for value, step in choices[level]:
            cost = (moved + (step > 0), distance + step)
            if cost >= best_cost[0] or steps[0] >= SEARCH_STEPS:
                break  # (the values come in order of cost: the rest cost as much or more)
            steps[0] += 1
            env[names[level]] = value
            if space.run_level(level + 1, env):
                chosen.append(value)
                descend(level + 1, *cost)
                chosen.pop()

    descend(0, 0, 0)
    return None if best[0] is None else dict(zip(names, best[0], strict=True))


def _choices(space: Space, name: str, value: Value, kept: bool) -> list[tuple[Value, int]]:
    """A parameter's values to try with the steps each moves off ``value``, nearest first
    (``value`` alone when it is kept)."""
    if kept:
        return [(value, 0)]
    domain = space.spec.parameter(name).values
    at = next(i for i, v in enumerate(domain) if type(v) is type(value) and v == value)
    order = sorted(range(len(domain)), key=lambda i: (abs(i - at), i))
    return [(domain[i], abs(i - at)) for i in order]


def _text(value: Value) -> str:
    return config_label({"_": value}).partition("=")[2]
