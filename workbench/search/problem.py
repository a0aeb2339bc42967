"""What a search explores: named parameter domains, a validity test, and the valid set.

Two kinds of problem: a space file's :class:`Space` for one shape/arch/device, or the space
recorded in a file (Kernel Tuner cache, T4, workbench recording), where a configuration is
valid exactly when the recording holds it. Samplers see parameters as Optuna distributions:
numeric domains as an ordered index (so that neighbours stay neighbours), the rest as
categories.
"""

from __future__ import annotations

import itertools
import math
import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

from workbench.errors import ConfigError
from workbench.runners.recordings import Recording
from workbench.search.valid_sets import ValidSetCache
from workbench.spaces.model import Config, Value, config_label, shape_label
from workbench.spaces.space import Space, WalkTimeout
from workbench.spaces.variants import problem_label

#: Spaces up to this many valid points are listed (for the default, random and brute-force
#: samplers, and for escaping duplicate proposals); of a larger one, a uniform sample of this
#: many is kept (not ``Space.sample``'s limit on the product: ``spaces.space.SAMPLE_LIST_LIMIT``).
VALID_LIST_LIMIT = 500_000
#: ... provided the enumeration (a pruned walk of the product) ends within this time.
ENUMERATE_SECONDS = 60.0
#: Configs drawn to say what rules out every config of an empty space.
EMPTY_SAMPLE = 1000


@dataclass(frozen=True)
class Param:
    """A parameter and its domain. Ordinal domains (all numbers) are searched by index."""

    name: str
    values: tuple[Value, ...]

    @property
    def ordinal(self) -> bool:
        return all(isinstance(v, int | float) and not isinstance(v, bool) for v in self.values)

    def distribution(self) -> BaseDistribution:
        if self.ordinal and len(self.values) > 1:
            return IntDistribution(0, len(self.values) - 1)
        return CategoricalDistribution(self.values)

    def encode(self, value: Value) -> Value:
        if self.ordinal and len(self.values) > 1:
            return self.values.index(value)
        return value

    def decode(self, raw: Value) -> Value:
        if self.ordinal and len(self.values) > 1:
            return self.values[int(raw)]
        return raw


class SearchProblem(ABC):
    """A search problem: parameters, validity, and (when small enough) the valid set."""

    kernel: str
    shape_label: str
    params: tuple[Param, ...]
    #: how many valid configs there are, when more than ``valid_configs()`` holds (a sample)
    valid_total: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def distributions(self) -> dict[str, BaseDistribution]:
        return {p.name: p.distribution() for p in self.params}

    def encode(self, config: Mapping[str, Value]) -> dict[str, Value]:
        return {p.name: p.encode(config[p.name]) for p in self.params}

    def decode(self, params: Mapping[str, Value]) -> Config:
        return {p.name: p.decode(params[p.name]) for p in self.params}

    def key(self, config: Mapping[str, Value]) -> str:
        return config_label({n: config[n] for n in self.names})

    @property
    def cartesian_size(self) -> int:
        return math.prod(len(p.values) for p in self.params)

    @abstractmethod
    def violations(self, config: Mapping[str, Value]) -> list[str]:
        """Why ``config`` is not in the space (empty when it is)."""

    @abstractmethod
    def valid_configs(self) -> list[Config] | None:
        """Every valid config, or None when the space is too large to enumerate."""

    def defaults(self) -> list[Config]:
        """Known-good configs to try first (the space's default, when it has one)."""
        return []

    def unanswerable(self) -> int | None:
        """Valid configs left out of the search because its runner cannot evaluate them (a
        replay's unrecorded configs); None when they were not counted."""
        return 0

    def unanswered(self, asked: int) -> int | None:
        """Valid configs no evaluation answered: ``asked`` in a run (the runner could not
        evaluate them) and those left out of the search; None when those were not counted."""
        left_out = self.unanswerable()
        return None if left_out is None else asked + left_out

    def check_not_empty(self) -> None:
        """Refuse a problem none of whose configs is valid, saying what rules them out (a
        search would end at once with nothing evaluated).

        Raises:
            ConfigError: the valid set is known and empty.
        """
        valid = self.valid_configs()
        if valid is None or valid:
            return
        size = self.cartesian_size
        if size <= EMPTY_SAMPLE:
            rows: Iterable[tuple[Value, ...]] = itertools.product(*(p.values for p in self.params))
            seen = f"all {size}"
        else:
            rng = random.Random(0)
            rows = (tuple(rng.choice(p.values) for p in self.params) for _ in range(EMPTY_SAMPLE))
            seen = f"{EMPTY_SAMPLE} drawn at random"
        reasons: Counter[str] = Counter()
        for row in rows:
            reasons.update(self.violations(dict(zip(self.names, row, strict=True))))
        top = "; ".join(f"{why} ({count})" for why, count in reasons.most_common(3))
        raise ConfigError(
            f"{self.kernel} [{self.shape_label}]: no config is valid ({size:,} in the product "
            f"of the parameters' values); the reasons, counted over {seen}: {top or 'none'}"
        )


class SpaceProblem(SearchProblem):
    """A space file's configs for one shape, arch and device.

    Parameters marked ``tunable: false`` (problem variants) are pinned: to ``pinned[name]``
    when given, else to their default (the named variant's, where the given ones make one);
    the kernel label names the pinned values (through the variant's name: ``reduce_f16[OP=sum]``).
    """

    def __init__(
        self,
        space: Space,
        pinned: Mapping[str, Value] | None = None,
        *,
        valid_sets: ValidSetCache | None = None,
    ) -> None:
        self.space = space
        #: where the valid set is kept between tunes (None: the default cache directory)
        self.valid_sets = valid_sets or ValidSetCache()
        pinned = dict(pinned or {})
        unknown = [n for n in pinned if n not in space.spec.parameter_names]
        if unknown:
            raise ConfigError(f"{space.spec.name} has no parameter(s) {', '.join(unknown)}")
        default = space.default_config(pinned)
        for p in space.spec.parameters:
            if not p.tunable:
                pinned.setdefault(p.name, default[p.name])
        self.pinned = pinned
        self.kernel = problem_label(space.spec, pinned)
        self.shape_label = shape_label(space.shape)
        self.params = tuple(
            Param(p.name, (pinned[p.name],) if p.name in pinned else p.values)
            for p in space.spec.parameters
        )
        self._valid: list[Config] | None = None
        self._too_large = False
        #: how many valid configs the space has (known once they were listed); more than
        #: ``valid_configs()`` returns when that is a sample
        self.valid_total: int | None = None

    def violations(self, config: Mapping[str, Value]) -> list[str]:
        out = [f"{n} is pinned to {v!r}" for n, v in self.pinned.items() if config.get(n) != v]
        return out + [v.message for v in self.space.explain(config)]

    def valid_configs(self) -> list[Config] | None:
        """Every valid config, or, past VALID_LIST_LIMIT of them, a uniform sample of that
        many (the same one each time: a resumed search sees the same set; see
        ``valid_total``); None when listing takes longer than ENUMERATE_SECONDS."""
        if self._valid is None and not self._too_large:
            key, names, domains = self._kept_entry()
            kept = self.valid_sets.get(key, names, domains) if key else None
            if kept is None:
                # a reservoir: a space a little past the limit is searched on a uniform subset
                # by the samplers that need the valid set, not handed to TPE, whose proposals
                # in a sparse space are almost all invalid
                try:
                    kept = self.space.reservoir(
                        VALID_LIST_LIMIT,
                        random.Random(0),
                        fixed=self.pinned,
                        seconds=ENUMERATE_SECONDS,
                    )
                except WalkTimeout:
                    self._too_large = True
                    return None
                if key:
                    self.valid_sets.put(key, names, domains, *kept)
            self._valid, self.valid_total = kept
        return self._valid

    def kept_total(self) -> int | None:
        """How many valid configs an earlier listing (a tune's) found, as the valid-set cache
        keeps it; None when nothing was listed for this problem yet. Lists nothing."""
        key, names, domains = self._kept_entry()
        return self.valid_sets.total(key, names, domains) if key else None

    def _kept_entry(self) -> tuple[str | None, tuple[str, ...], list[tuple[Value, ...]]]:
        """The valid-set cache's key of this problem's listing, and its names and domains."""
        key = self.valid_sets.key(self.space, self.pinned, VALID_LIST_LIMIT, 0)
        return key, self.names, [p.values for p in self.params]

    def defaults(self) -> list[Config]:
        default = self.space.default_config(self.pinned)
        return [default] if self.space.is_valid(default) else []


class RecordedSpaceProblem(SpaceProblem):
    """A space file's configs answered from a recording of the kernel: the search covers the
    valid configs the recording holds (a recording made by ``workbench record --sample`` may
    hold a few hundred of a space's half million), the others could only come back
    unanswered. Nothing is enumerated but the recording."""

    def __init__(
        self, space: Space, recording: Recording, pinned: Mapping[str, Value] | None = None
    ) -> None:
        super().__init__(space, pinned)
        self.recording = recording
        self._recorded: list[Config] | None = None

    def violations(self, config: Mapping[str, Value]) -> list[str]:
        out = super().violations(config)
        if self.recording.lookup(config) is None:
            out.append(f"not in the recording replayed ({self.recording.path.name})")
        return out

    def valid_configs(self) -> list[Config]:
        if self._recorded is None:
            configs = (
                {n: e.config[n] for n in self.names} for e in self.recording.entries.values()
            )
            # (the space's own rules: every recorded config is in the recording)
            self._recorded = [c for c in configs if not SpaceProblem.violations(self, c)]
        return self._recorded

    def defaults(self) -> list[Config]:
        return [c for c in super().defaults() if self.recording.lookup(c) is not None]

    def unanswerable(self) -> int | None:
        """The space's valid configs the recording lacks, when the space is small enough to
        count (its product within the enumeration limit)."""
        if self.cartesian_size > VALID_LIST_LIMIT:
            return None
        try:
            counted = self.space.reservoir(
                0, random.Random(0), fixed=self.pinned, seconds=ENUMERATE_SECONDS
            )
        except WalkTimeout:
            return None
        return counted[1] - len(self.valid_configs())

    def check_not_empty(self) -> None:
        if self.valid_configs():
            return
        SpaceProblem(self.space, self.pinned).check_not_empty()  # an empty space says why
        reasons: Counter[str] = Counter()
        for e in self.recording.entries.values():
            reasons.update(SpaceProblem.violations(self, {n: e.config[n] for n in self.names}))
        top = "; ".join(f"{why} ({count})" for why, count in reasons.most_common(3))
        raise ConfigError(
            f"{self.kernel} [{self.shape_label}]: none of the {len(self.recording.entries):,} "
            f"configs recorded in {self.recording.path} is valid in the space; the reasons: "
            f"{top or 'none'}"
        )


class RecordingProblem(SearchProblem):
    """The space recorded in a file: valid means recorded (failed entries included)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.kernel = recording.kernel
        self.shape_label = recording.problem or "recorded"
        self.params = tuple(Param(n, v) for n, v in recording.parameters)
        self._valid = [dict(e.config) for e in recording.entries.values()]

    def violations(self, config: Mapping[str, Value]) -> list[str]:
        return [] if self.recording.lookup(config) is not None else ["not in the recorded space"]

    def valid_configs(self) -> list[Config]:
        return self._valid
