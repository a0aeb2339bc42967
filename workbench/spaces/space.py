"""The configurations of a space: count, enumerate lazily, sample uniformly, explain.

A space is the cartesian product of its parameter domains cut down by constraints, for one
problem shape, target device and arch. Enumeration is depth-first in declaration order, and
each constraint is checked as soon as the parameters it depends on are bound, so large
invalid regions are pruned without being visited.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from workbench.devices import DeviceSpec, arch_namespace, device_for
from workbench.errors import ConfigError, ExpressionError, SparseSampleError, WorkbenchError
from workbench.expressions import Expression
from workbench.spaces.counting import CLOCK_EVERY, CountTimeout, ValidCounter
from workbench.spaces.model import Config, Constraint, Geometry, Shape, SpaceSpec, Value
from workbench.toolchain import Arch

#: Up to this many cartesian points, ``sample`` lists the valid set to draw from; above, it
#: rejects (not the search's limit on valid configs listed: ``search.problem.VALID_LIST_LIMIT``).
SAMPLE_LIST_LIMIT = 200_000
#: Rejection sampling makes this many draws before it counts the valid set and draws indices
#: into it instead (a sparse space: gemm_int8's 2 M valid configs are 1e-5 of its product). A
#: count, not a time, so a seed gives the same sample on a fast machine and a loaded one; about
#: a second on a 2-core VM, and a space with one valid config in 1,000 yields 50.
REJECTION_DRAWS = 50_000
#: ... and a walk or a count of the valid set gives up after this.
WALK_SECONDS = 120.0
#: Product draws explained when no valid config turns up, to say what rules them out.
REASON_DRAWS = 1000
#: Results kept per derived value or constraint while walking (see Space.run_level).
MEMO_LIMIT = 100_000


class WalkTimeout(WorkbenchError):
    """A walk of the valid configs ran past its deadline; says how far it got."""

    def __init__(self, space: str, seconds: float, visited: int, found: int) -> None:
        self.seconds = seconds
        self.visited = visited  #: values the walk tried (partial configs checked)
        self.found = found  #: valid configs it had found
        super().__init__(
            f"{space}: listing the valid configs stopped after {seconds:.0f} s, having checked "
            f"{visited:,} partial configs and found {found:,} valid"
        )


class _Deadline:
    """The clock of a walk: the walk yields only valid configs, and in a sparse space hours
    can pass between two, so the values it tries are counted as it enters each domain and
    the clock read every CLOCK_EVERY of them (:meth:`timed` wraps the domains)."""

    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds
        self.visited = 0  #: values tried, i.e. partial configs checked
        self._next_check = 0  # (a deadline already past stops the walk at once)

    def timed(self, domains: Sequence[Sequence[Value]]) -> list[Sequence[Value]]:
        return [_TimedValues(self, d) for d in domains]

    def enter(self, values: Sequence[Value]) -> None:
        self.visited += len(values)
        if self.visited >= self._next_check:
            self._next_check = self.visited + CLOCK_EVERY
            if time.perf_counter() > self.end:
                raise _OutOfTime


class _OutOfTime(Exception):
    """Raised out of a walk by its _Deadline (caught by the walk's caller)."""


class _TimedValues(Sequence[Value]):
    """A parameter's values, counted (and the clock read) each time a walk loops over them
    (once per value would cost the walk half its speed)."""

    def __init__(self, deadline: _Deadline, values: Sequence[Value]) -> None:
        self._deadline = deadline
        self._values = values

    def __iter__(self) -> Iterator[Value]:
        self._deadline.enter(self._values)
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i):
        return self._values[i]


@dataclass(frozen=True)
class Violation:
    """Why a config is invalid: the constraint it breaks (or the error evaluating it)."""

    message: str
    constraint: Constraint | None = None


class Space:
    """The valid configurations of ``spec`` for one shape on one device and arch."""

    def __init__(
        self,
        spec: SpaceSpec,
        *,
        shape: Mapping[str, int] | None = None,
        arch: Arch | None = None,
        device: DeviceSpec | None = None,
    ) -> None:
        self.spec = spec
        self.arch = arch or Arch.parse(spec.arches[-1])
        self.device = device or device_for(self.arch)
        self.shape: Shape = dict(shape) if shape is not None else dict(spec.default_shape)
        if sorted(self.shape) != sorted(spec.default_shape):
            raise ConfigError(
                f"{spec.name}: shape {self.shape} must give exactly {list(spec.default_shape)}"
            )
        self.names = spec.parameter_names
        #: the file's constraints, then the limits every launch obeys (see launch_limits)
        limits = launch_limits(spec)
        self.constraints: tuple[Constraint, ...] = (*spec.constraints, *limits)
        #: per derived value and constraint: its value for each tuple of the values of the
        #: names it reads (see run_level)
        self._memo: dict[int, dict[tuple, object]] = {}
        self._base_env = self._make_base_env()
        self._plan_levels()
        self._valid_cache: list[tuple[Value, ...]] | None = None

    # -- setup ---------------------------------------------------------------------------
    def _make_base_env(self) -> dict[str, object]:
        env: dict[str, object] = {}
        env.update(self.device.namespace())
        env.update(arch_namespace(self.arch))
        for k, v in self.shape.items():
            env[k] = v
            env[f"shape.{k}"] = v
        return env

    def _plan_levels(self) -> None:
        """Assign each derived value and constraint to the first level where it can run."""
        index = {n: i for i, n in enumerate(self.names)}
        deps: dict[str, int] = {}  # derived name -> highest parameter index it depends on

        def level_of(expr: Expression) -> int:
            lv = -1
            for name in expr.names:
                lv = max(lv, index.get(name, -1), deps.get(name, -1))
            return lv

        n = len(self.names)
        self._derived_at: list[list[tuple[str, Expression]]] = [[] for _ in range(n + 1)]
        self._constraints_at: list[list[Constraint]] = [[] for _ in range(n + 1)]
        #: per derived name, the parameters it reads, directly or through other derived names
        self._derived_reads: dict[str, frozenset[str]] = {}
        for name, expr in self.spec.derived:
            deps[name] = level_of(expr)
            self._derived_at[deps[name] + 1].append((name, expr))
            self._derived_reads[name] = self.parameters_read(expr)
        for c in self.constraints:
            self._constraints_at[level_of(c.expr) + 1].append(c)

    def parameters_read(self, expr: Expression) -> frozenset[str]:
        """The parameters ``expr`` reads, directly or through derived values."""
        found = {n for n in expr.names if n in self.names}
        for name in expr.names:
            found |= self._derived_reads.get(name, frozenset())
        return frozenset(found)

    # -- sizes ---------------------------------------------------------------------------
    @property
    def cartesian_size(self) -> int:
        """Points before constraints."""
        return math.prod(len(p.values) for p in self.spec.parameters)

    def count_valid(self, seconds: float | None = None) -> int:
        """Number of valid configs (walks the pruned tree, counting each level's completions
        once per frontier: :mod:`workbench.spaces.counting`; for up to ``seconds``, by default
        WALK_SECONDS).

        Raises:
            WalkTimeout: the walk took longer (it says how far it got).
        """
        if self._valid_cache is not None:
            return len(self._valid_cache)
        seconds = WALK_SECONDS if seconds is None else seconds
        counter = ValidCounter(self, [p.values for p in self.spec.parameters], seconds)
        try:
            return counter.count()
        except CountTimeout as exc:
            raise WalkTimeout(self.spec.name, seconds, exc.visited, exc.found) from None

    def derived_at(self, level: int) -> list[tuple[str, Expression]]:
        """The derived values computed once the first ``level`` parameters are bound."""
        return self._derived_at[level]

    def constraints_at(self, level: int) -> list[Constraint]:
        """The constraints checked once the first ``level`` parameters are bound."""
        return self._constraints_at[level]

    # -- enumeration ---------------------------------------------------------------------
    def iter_valid(self, fixed: Mapping[str, Value] | None = None) -> Iterator[Config]:
        """Every valid config, lazily, in domain order; with ``fixed``, those that take its
        values (the walk binds them, so it prunes there rather than filtering the whole set)."""
        for values in self._walk(self._domains(fixed or {})):
            yield dict(zip(self.names, values, strict=True))

    def start_env(self) -> dict[str, object] | None:
        """What a walk of the parameters starts from: the names every config sees (device,
        arch, shape, the derived values of those alone); None when a constraint of those
        alone fails (no config is valid at this shape). Bind the parameters in declaration
        order, checking each level with :meth:`run_level`."""
        env = dict(self._base_env)
        return env if self.run_level(0, env) else None

    def _walk(
        self, domains: Sequence[Sequence[Value]] | None = None
    ) -> Iterator[tuple[Value, ...]]:
        """The valid configs' values, in domain order (of ``domains`` when given: the
        parameters' values, some of them fixed)."""
        env = self.start_env()
        if env is None:
            return
        if domains is None:
            domains = [p.values for p in self.spec.parameters]
        names = self.names
        depth = len(names)
        chosen: list[Value] = []

        def descend(level: int) -> Iterator[tuple[Value, ...]]:
            if level == depth:
                yield tuple(chosen)
                return
            name = names[level]
            for value in domains[level]:
                env[name] = value
                if self.run_level(level + 1, env):
                    chosen.append(value)
                    yield from descend(level + 1)
                    chosen.pop()

        yield from descend(0)

    def run_level(self, level: int, env: dict[str, object]) -> bool:
        """Compute the derived values and check the constraints that become ready at ``level``.

        A derived value or constraint usually reads a few of the parameters but becomes
        ready only at the last of them, deep in the walk: its result is kept per tuple of
        the values it reads (the int8 GEMM's half million valid configs are listed 1.5x
        faster; its memos hold 25,000 results in all), up to MEMO_LIMIT per expression.
        """
        try:
            for name, expr in self._derived_at[level]:
                env[name] = self._memoized(expr, env)
            for c in self._constraints_at[level]:  # noqa: SIM110 - a loop: no generator per call
                if not self._memoized(c.expr, env):
                    return False
            return True
        except ExpressionError:
            return False  # explain() reports the error itself

    def _memoized(self, expr: Expression, env: dict[str, object]) -> object:
        memo = self._memo.get(id(expr))
        if memo is None:
            memo = self._memo[id(expr)] = {}
        key = tuple([env.get(n) for n in expr.names])
        value = memo.get(key, memo)  # (the memo itself: no result yet, None being one)
        if value is memo:
            value = expr.evaluate(env)
            if len(memo) < MEMO_LIMIT:
                memo[key] = value
        return value

    # -- single configs ------------------------------------------------------------------
    def default_config(self, pins: Mapping[str, Value] | None = None) -> Config:
        """The space's default config: the parameters' defaults, with its arch's ``defaults:``;
        with ``pins`` (problem variants' values), that problem's (see
        :meth:`SpaceSpec.default_config`)."""
        return self.spec.default_config(self.arch.sm, pins)

    def variant_values(self, config: Mapping[str, Value]) -> Config:
        """The values ``config`` gives problem variants (``tunable: false`` parameters)."""
        return {
            p.name: config[p.name]
            for p in self.spec.parameters
            if not p.tunable and p.name in config
        }

    def env(self, config: Mapping[str, Value]) -> dict[str, object]:
        """Names an expression sees for ``config``: parameters, shape, derived, device, arch.

        Raises:
            ExpressionError: a derived value fails to evaluate.
        """
        env = dict(self._base_env)
        env.update(config)
        for name, expr in self.spec.derived:
            env[name] = expr.evaluate(env)
        return env

    def explain(self, config: Mapping[str, Value]) -> list[Violation]:
        """Every reason ``config`` is invalid; empty when it is valid."""
        problems = [Violation(m) for m in self._domain_problems(config)]
        if problems:
            return problems
        env = dict(self._base_env)
        env.update(config)
        for name, expr in self.spec.derived:
            try:
                env[name] = expr.evaluate(env)
            except ExpressionError as exc:
                return [Violation(f"derived value {name} fails: {exc}")]
        for c in self.constraints:
            try:
                ok = bool(c.expr.evaluate(env))
            except ExpressionError as exc:
                problems.append(Violation(f"{c.describe()} fails to evaluate: {exc}", c))
                continue
            if not ok:
                where = f" (line {c.line})" if c.line else ""
                problems.append(Violation(f"violates {c.describe()}{where}", c))
        return problems

    def is_valid(self, config: Mapping[str, Value]) -> bool:
        return not self.explain(config)

    def _domain_problems(self, config: Mapping[str, Value]) -> list[str]:
        out = []
        for name in config:
            if name not in self.names:
                out.append(f"unknown parameter {name!r}; parameters: {', '.join(self.names)}")
        for p in self.spec.parameters:
            if p.name not in config:
                out.append(f"parameter {p.name} has no value")
            elif not any(_same(config[p.name], v) for v in p.values):
                out.append(f"{p.name}={config[p.name]!r} is not in its domain {list(p.values)}")
        return out

    def parse_config(self, assignments: Sequence[str], base: Config | None = None) -> Config:
        """``["BLOCK=256", "fast_math=true"]`` over ``base`` (when not given, the default
        config of the problem variant the assignments name), with typed values.

        Raises:
            ConfigError: unknown parameter, malformed assignment, a name given twice, or a
                value outside the domain.
        """
        domains = {p.name: p.values for p in self.spec.parameters}
        if base is not None:
            return parse_assignments(domains, assignments, base)
        given = parse_assignments(domains, assignments, {})
        return parse_assignments(
            domains, assignments, self.default_config(self.variant_values(given))
        )

    def parse_pins(self, assignments: Sequence[str] | None) -> Config:
        """Only the named values of ``["OP=max", ...]`` (``--set``), typed by their domains.

        Raises:
            ConfigError: as :meth:`parse_config`.
        """
        if not assignments:
            return {}
        domains = {p.name: p.values for p in self.spec.parameters}
        return parse_assignments(domains, assignments, {})

    # -- sampling ------------------------------------------------------------------------
    def sample(
        self, n: int, seed: int | None = 0, *, fixed: Mapping[str, Value] | None = None
    ) -> list[Config]:
        """Up to ``n`` distinct valid configs, uniformly at random (all of them if fewer);
        with ``fixed``, among those that take those values (a problem variant, ``--set``).

        Raises:
            WorkbenchError: no config is valid.
            SparseSampleError: a very large space is too sparse to find ``n`` by random draws
                and too large to list within WALK_SECONDS.
        """
        rng = random.Random(seed)
        fixed = dict(fixed or {})
        if self.cartesian_size <= SAMPLE_LIST_LIMIT:
            if self._valid_cache is None:
                self._valid_cache = list(self._walk())
            valid = self._valid_cache
            if fixed:
                where = [(self.names.index(k), v) for k, v in fixed.items()]
                valid = [row for row in valid if all(_same(row[i], v) for i, v in where)]
            picks = rng.sample(valid, min(n, len(valid)))
            return [dict(zip(self.names, v, strict=True)) for v in picks]
        return self._rejection_sample(n, rng, fixed)

    def _rejection_sample(
        self, n: int, rng: random.Random, fixed: Mapping[str, Value]
    ) -> list[Config]:
        """Uniform draws from the product, each checked level by level (a draw stops at the
        first constraint it breaks), up to REJECTION_DRAWS of them; a space too sparse for that
        is counted instead, and ``n`` of its valid configs drawn by index
        (:meth:`_counted_sample`).

        Raises:
            WorkbenchError: no valid config (the reasons counted over product draws).
            SparseSampleError: the count ran out of time.
        """
        domains = self._domains(fixed)
        if self.start_env() is None:  # a constraint of the shape alone fails: nothing to draw
            raise self._none_valid(rng, domains)
        found: dict[tuple[Value, ...], None] = {}
        attempts = 0
        while len(found) < n:
            if attempts >= REJECTION_DRAWS:
                break
            attempts += 1
            values = self._draw(rng, domains)
            if values is not None:
                found[values] = None
        else:
            return [dict(zip(self.names, v, strict=True)) for v in found]
        return self._counted_sample(n, rng, domains, found, attempts)

    def _counted_sample(
        self,
        n: int,
        rng: random.Random,
        domains: Sequence[Sequence[Value]],
        found: Mapping[tuple[Value, ...], None],
        attempts: int,
    ) -> list[Config]:
        """``n`` distinct valid configs, uniformly (all of them if fewer): the valid set is
        counted (:mod:`workbench.spaces.counting`), ``n`` indices into it drawn, and each
        config built from its index. (The draws' ``found`` are dropped: keeping them would
        favour the configs a product draw finds.)

        Raises:
            WorkbenchError: no valid config.
            SparseSampleError: counting took longer than WALK_SECONDS.
        """
        counter = ValidCounter(self, domains, WALK_SECONDS)
        try:
            total = counter.count()
            picks = [counter.config_at(i) for i in rng.sample(range(total), min(n, total))]
        except CountTimeout as exc:
            why = (
                "" if found else f" The draws that failed, by reason: {self._reasons(rng, domains)}"
            )
            raise SparseSampleError(
                f"{self.spec.name}: found {len(found)} of the {n} valid configs asked for in "
                f"{attempts:,} random draws from {self.cartesian_size:,} points, and counting "
                f"the valid ones stopped after {WALK_SECONDS:.0f} s, having checked "
                f"{exc.visited:,} partial configs and found {exc.found:,} valid: the space is "
                f"too sparse to sample; ask for fewer, or loosen its constraints.{why}"
            ) from None
        if not total:
            raise self._none_valid(rng, domains)
        return [dict(zip(self.names, v, strict=True)) for v in picks]

    def _none_valid(self, rng: random.Random, domains: Sequence[Sequence[Value]]) -> WorkbenchError:
        """The error for a space whose constraints exclude every config, with the reasons."""
        return WorkbenchError(
            f"{self.spec.name}: no valid config among {self.cartesian_size:,} points; the "
            "constraints exclude everything. The reasons, counted over "
            f"{REASON_DRAWS} random draws: {self._reasons(rng, domains)}"
        )

    def _domains(self, fixed: Mapping[str, Value]) -> list[Sequence[Value]]:
        """Each parameter's values, a fixed parameter's value alone."""
        return [(fixed[p.name],) if p.name in fixed else p.values for p in self.spec.parameters]

    def _draw(self, rng: random.Random, domains: Sequence[Sequence[Value]]) -> tuple | None:
        """One uniform draw from the product, or None as soon as a constraint rules it out."""
        env = self.start_env()
        if env is None:
            return None
        values = []
        for level, name in enumerate(self.names):
            value = rng.choice(domains[level])
            env[name] = value
            if not self.run_level(level + 1, env):
                return None
            values.append(value)
        return tuple(values)

    def reservoir(
        self,
        n: int,
        rng: random.Random,
        *,
        fixed: Mapping[str, Value] | None = None,
        seconds: float,
    ) -> tuple[list[Config], int]:
        """A uniform sample of ``n`` valid configs from one walk of the valid set (all of
        them, in domain order, when there are no more), with ``fixed`` values only, and how
        many valid configs there are.

        Raises:
            WalkTimeout: the walk took longer than ``seconds`` (however few configs it found).
        """
        deadline = _Deadline(seconds)
        domains = deadline.timed(self._domains(fixed or {}))
        kept: list[tuple[Value, ...]] = []
        seen = 0
        try:
            for values in self._walk(domains):  # (a fixed value prunes the walk, not a filter)
                seen += 1
                if len(kept) < n:
                    kept.append(values)
                elif n and (j := rng.randrange(seen)) < n:
                    kept[j] = values
        except _OutOfTime:
            raise WalkTimeout(self.spec.name, seconds, deadline.visited, seen) from None
        return [dict(zip(self.names, v, strict=True)) for v in kept], seen

    def _reasons(self, rng: random.Random, domains: Sequence[Sequence[Value]]) -> str:
        """The three commonest reasons that rule out random draws from the product."""
        reasons: Counter[str] = Counter()
        for _ in range(REASON_DRAWS):
            config = {name: rng.choice(d) for name, d in zip(self.names, domains, strict=True)}
            reasons.update(v.message for v in self.explain(config))
        return "; ".join(f"{why} ({count})" for why, count in reasons.most_common(3))


def launch_limits(spec: SpaceSpec) -> list[Constraint]:
    """What every launch of the space's geometry must obey, as constraints: each grid and
    block dimension a positive integer within CUDA's limits, the threads of a block and its
    dynamic shared memory within the device's. A config that breaks one could never launch:
    it is invalid, with the reason, rather than compiled "ok" and failed on the GPU."""
    g = spec.geometry
    out: list[Constraint] = []

    def add(text: str, reason: str) -> None:
        out.append(Constraint(Expression.parse(text), f"launch limit: {reason}"))

    for what, dims, caps in (
        ("grid", g.grid, (2**31 - 1, 65535, 65535)),
        ("block", g.block, (1024, 1024, 64)),
    ):
        for axis, expr, cap in zip("xyz", dims, caps, strict=False):
            e = f"({expr.text})"
            add(f"{e} >= 1 and floor({e}) == {e} and {e} <= {cap}",
                f"{what}.{axis} is a whole number from 1 to {cap}")  # fmt: skip
    if g.cluster is not None:
        out += cluster_limits(g)
    threads = " * ".join(f"({e.text})" for e in g.block)
    add(f"{threads} <= device.max_threads_per_block", "threads per block within the device's")
    smem = f"({g.shared_bytes.text})"
    add(
        f"{smem} >= 0 and {smem} <= device.max_smem_per_block",
        "dynamic shared memory within the device's per-block limit",
    )
    return out


#: The most CTAs a thread-block cluster may hold without the driver's non-portable opt-in
#: (CUDA Programming Guide, "Thread Block Clusters": 8 is the portable maximum).
MAX_PORTABLE_CLUSTER = 8


def cluster_limits(g: Geometry) -> list[Constraint]:
    """What a launch in thread-block clusters obeys, as constraints at ``geometry.cluster``'s
    line: each cluster dimension a positive integer dividing the grid's (the driver launches
    whole clusters only), at most :data:`MAX_PORTABLE_CLUSTER` CTAs, and clusters only on sm_90
    and later (a cluster of one CTA is a plain launch anywhere)."""
    assert g.cluster is not None
    one = Expression.parse("1")
    grid = [*g.grid, *[one] * (3 - len(g.grid))]
    cluster = [*g.cluster, *[one] * (3 - len(g.cluster))]
    out: list[Constraint] = []

    def add(text: str, reason: str) -> None:
        out.append(Constraint(Expression.parse(text), f"launch limit: {reason}", g.cluster_line))

    for axis, n, c in zip("xyz", grid, cluster, strict=True):
        cx, gx = f"({c.text})", f"({n.text})"
        add(
            f"{cx} >= 1 and floor({cx}) == {cx} and {gx} % {cx} == 0",
            f"cluster.{axis} is a whole number that divides grid.{axis} (whole clusters)",
        )
    size = " * ".join(f"({c.text})" for c in cluster)
    add(
        f"{size} <= {MAX_PORTABLE_CLUSTER}",
        f"a cluster holds at most {MAX_PORTABLE_CLUSTER} CTAs (the portable size)",
    )
    add(f"{size} == 1 or arch.cc >= 90", "thread-block clusters need sm_90 or later")
    return out


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def parse_assignments(
    domains: Mapping[str, Sequence[Value]], assignments: Sequence[str], base: Config
) -> Config:
    """``["BLOCK=256", "fast_math=true"]`` over ``base``, each value typed by matching its
    text to the parameter's domain (``domains``: each parameter's values, in order).

    Raises:
        ConfigError: unknown parameter, malformed assignment, a name given twice, or a value
            outside the domain.
    """
    names = [item.partition("=")[0].strip() for item in assignments]
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ConfigError(f"{', '.join(twice)} set more than once in one config")
    config = dict(base)
    for item in assignments:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep:
            raise ConfigError(f"{item!r}: expected NAME=VALUE")
        if name not in domains:
            raise ConfigError(f"unknown parameter {name!r}; parameters: {', '.join(domains)}")
        config[name] = _match_value(domains[name], name, text.strip())
    return config


def _match_value(domain: Sequence[Value], name: str, text: str) -> Value:
    for v in domain:
        shown = ("true" if v else "false") if isinstance(v, bool) else str(v)
        if text == shown or text.lower() == shown.lower():
            return v
    raise ConfigError(f"{name}={text} is not in its domain {list(domain)}")
