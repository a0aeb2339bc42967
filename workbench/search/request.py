"""What a tune is asked to do: :class:`TuneRequest`, the one home of tune's defaults.

A leaf: it imports no search loop, store, runner or Optuna, so the loop, the drift watch, the
samplers and the fleet take their defaults and types from here, and ``workbench tune --help``
shows them without importing any of those. Its fields come in groups: what to tune
(:class:`TuneTarget`), where the numbers come from (:class:`Measuring`), how to search and for
how long (:class:`SearchStrategy`), which study (:class:`StudyChoice`), how a shared study's
workers keep time (:class:`Coordination`), and what is compiled without a GPU
(:class:`CompileStage`).

``workbench tune`` builds one from its options; a shared study keeps the part every worker
needs as its spec (:meth:`TuneRequest.to_spec`), which ``workbench worker`` reads back
(:meth:`TuneRequest.from_spec`). :mod:`workbench.search.start` turns a request into the plans
of its studies.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError, WorkbenchError
from workbench.runners.objective_kind import ObjectiveKind

#: Unique configs a tune evaluates when neither --budget, --time nor --patience is given.
DEFAULT_BUDGET = 100
#: The search strategy of ``--sampler`` (:mod:`workbench.search.samplers` registers them).
DEFAULT_SAMPLER = "portfolio"
#: New correct evaluations between two re-timings of the run's reference config (drift).
DEFAULT_EVERY = 25
#: Shared studies: seconds between a trial's heartbeats, and without one before the trial is
#: re-queued (longer than the database outages to ride out).
DEFAULT_HEARTBEAT_S = 10
DEFAULT_GRACE_S = 60
#: Seconds a worker waits for an unavailable database before it stops.
DEFAULT_DB_WAIT_S = 300.0
#: Configs the no-GPU compile stage compiles besides the default (seconds, not minutes).
NO_GPU_SAMPLE = 8
#: What a worker joining a shared study keeps of the study's spec, whatever it was asked.
STUDY_KEEPS = ("sampler", "seed", "coordination")
#: The new pipeline's proposals compiled ahead of the one measured. On the H200 a config's
#: compile took 0.13-0.88 s and its timed samples 0.04-0.27 s: four compiles in flight keep
#: one ready for each measurement once verification no longer dominates.
PIPELINE_AHEAD = 4


@dataclass(frozen=True)
class Budget:
    """When to stop; ``None`` means no limit of that kind (at least one must be set).

    Raises:
        WorkbenchError: no limit, or a limit below 1 (a time that is not positive).
    """

    evaluations: int | None = None
    seconds: float | None = None
    patience: int | None = None

    def __post_init__(self) -> None:
        if self.evaluations is None and self.seconds is None and self.patience is None:
            raise WorkbenchError("a budget needs `evaluations`, `seconds` or `patience`")
        if self.evaluations is not None and self.evaluations < 1:
            raise WorkbenchError(f"`evaluations` {self.evaluations}: the budget must be at least 1")
        if self.seconds is not None and self.seconds <= 0:
            raise WorkbenchError(f"`seconds` {self.seconds}: the time budget must be positive")
        if self.patience is not None and self.patience < 1:
            raise WorkbenchError(f"`patience` {self.patience}: patience must be at least 1")

    def as_dict(self) -> dict[str, object]:
        return {"evaluations": self.evaluations, "seconds": self.seconds, "patience": self.patience}


def requested_budget(
    evaluations: int | None, seconds: float | None, patience: int | None
) -> Budget:
    """``--budget``, ``--time``, ``--patience``: DEFAULT_BUDGET evaluations when none is given.

    Raises:
        WorkbenchError: a budget below 1, or a time that is not positive.
    """
    if evaluations is None and not seconds and not patience:
        evaluations = DEFAULT_BUDGET
    return Budget(evaluations=evaluations, seconds=seconds, patience=patience)


class Pipeline(enum.Enum):
    """How a live tune moves configs through the GPU (``--pipeline``)."""

    #: one config at a time: compile, verify on the host (outputs copied back), time
    OLD = "old"
    #: the next proposals compile on every core while one is timed, and outputs are
    #: compared with the reference on the GPU (the host compares only what the GPU finds wrong)
    NEW = "new"

    @property
    def ahead(self) -> int:
        """Proposals reserved before their turn (1: none ahead)."""
        return PIPELINE_AHEAD + 1 if self is Pipeline.NEW else 1


@dataclass(frozen=True)
class Coordination:
    """How the workers of a shared study keep time. ``grace_s`` should exceed the longest
    database outage to ride out without re-queueing running trials; ``db_wait_s`` bounds how
    long a worker waits for an unavailable database before it stops.

    Raises:
        WorkbenchError: a heartbeat under 1 s, or a grace period not longer than it.
    """

    heartbeat_s: int = DEFAULT_HEARTBEAT_S
    grace_s: int = DEFAULT_GRACE_S
    db_wait_s: float = DEFAULT_DB_WAIT_S
    max_retry: int = 3
    # waiting for the last slots costs one query of the claims table per poll
    poll_s: float = 0.25

    def __post_init__(self) -> None:
        if self.heartbeat_s < 1 or self.grace_s <= self.heartbeat_s:
            raise WorkbenchError(
                f"`heartbeat_s` {self.heartbeat_s} / `grace_s` {self.grace_s}: need heartbeat "
                ">= 1 s and a grace period longer than the heartbeat"
            )

    def of_spec(self, spec: Mapping[str, Any]) -> Coordination:
        """This process's coordination with the heartbeat and grace period a shared study's
        spec keeps (every worker judges staleness alike; a spec without them: the defaults)."""
        timing = spec.get("coordination") or {}
        return dataclasses.replace(
            self,
            heartbeat_s=timing.get("heartbeat_s", DEFAULT_HEARTBEAT_S),
            grace_s=timing.get("grace_s", DEFAULT_GRACE_S),
        )


@dataclass(frozen=True)
class TuneTarget:
    """What to tune: a kernel's space at a shape, for an arch and device, in one problem
    variant (no kernel: the space a recording holds, see :class:`Measuring`).

    Attributes:
        kernel: a kernel name or space file.
        spaces: folders of the user's space files.
        shape: ``--shape`` items (NAME=INT), over the space's default shape.
        shapes: a named shape set of the space (each of its shapes in turn).
        arch: ``--arch`` (``all``: every declared arch, compile stage only).
        device: a device preset whose limits the constraints see.
        pin: ``--set`` items (NAME=VALUE): the problem variant searched.
    """

    kernel: str | None = None
    spaces: tuple[Path, ...] = ()
    shape: tuple[str, ...] | None = None
    shapes: str | None = None
    arch: str | None = None
    device: str | None = None
    pin: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Measuring:
    """Where the numbers come from: a recording, else the GPU here (without one, a recording
    kept beside the space file, else the compile stage).

    Attributes:
        replay: a recording answering every evaluation instead of a GPU.
        replay_delay: simulated measurement time per replayed config (seconds).
        pipeline: on a GPU, the old pipeline or the new one (see :class:`Pipeline`).
    """

    replay: Path | None = None
    replay_delay: float = 0.0
    pipeline: Pipeline = Pipeline.OLD


@dataclass(frozen=True)
class SearchStrategy:
    """How to search, and for how long.

    Attributes:
        budget: when to stop; ``budget_given``: ``--budget`` was given (a study resumed or
            joined keeps its own otherwise).
        sampler, seed: the search strategy and its seed.
        enqueue: ``--enqueue`` items, the configs evaluated first.
        drift_every: on a GPU, re-time the run's first correct config every N (0: never).
        objective: what the search minimises: time, energy, or the energy-delay product.
    """

    budget: Budget = Budget(evaluations=DEFAULT_BUDGET)
    budget_given: bool = False
    sampler: str = DEFAULT_SAMPLER
    seed: int = 0
    enqueue: tuple[str, ...] | None = None
    drift_every: int = DEFAULT_EVERY
    objective: ObjectiveKind = ObjectiveKind.TIME


@dataclass(frozen=True)
class StudyChoice:
    """Which study, in which store.

    Attributes:
        name: the study's name (default: kernel | shape | device).
        fresh: a new study beside an existing one of that name.
        storage: the store's URL or SQLite path (None: the default store).
    """

    name: str | None = None
    fresh: bool = False
    storage: str | None = None


@dataclass(frozen=True)
class CompileStage:
    """How configs are compiled: the cache (a live tune's too) and, without a GPU and a
    recording, what the compile stage compiles and with how many processes.

    Attributes:
        all_configs: every valid config; else the default and ``sample`` others (None:
            NO_GPU_SAMPLE).
        jobs: compile processes (None or 0: one per core).
        cache_dir: the compile cache (None: the default).
    """

    all_configs: bool = False
    sample: int | None = None
    jobs: int | None = None
    cache_dir: Path | None = None

    @property
    def sample_size(self) -> int:
        """Configs the compile stage samples besides the default."""
        return NO_GPU_SAMPLE if self.sample is None else self.sample


@dataclass(frozen=True)
class TuneRequest:
    """One tune: what to search, where the numbers come from, how to search and for how long,
    in which study. Paths are absolute once in a spec."""

    target: TuneTarget = field(default_factory=TuneTarget)
    measuring: Measuring = field(default_factory=Measuring)
    strategy: SearchStrategy = field(default_factory=SearchStrategy)
    study: StudyChoice = field(default_factory=StudyChoice)
    coordination: Coordination = field(default_factory=Coordination)
    compile: CompileStage = field(default_factory=CompileStage)

    def check(self, *, shared: bool = False) -> None:
        """Refuse what the request's options cannot mean together (``shared``: a study on
        PostgreSQL), before anything is opened or written; the samplers and the ``--enqueue``
        items are checked where they are known (:func:`workbench.search.start.check_request`).

        Raises:
            WorkbenchError: nothing to tune, or options that do not go together.
        """
        if self.target.kernel is None and self.measuring.replay is None:
            raise ConfigError(
                "name a kernel, or give a recording as `replay` to tune a recorded space"
            )
        if self.compile.all_configs and self.compile.sample is not None:
            raise ConfigError(
                "`all_configs` compiles every valid config: it cannot go with `sample`"
            )
        if shared and self.study.fresh:  # every host runs the same command: each would make its own
            raise ConfigError(
                "`fresh` makes a study of this process's own; a shared study is joined by "
                "name: give a new one as `study`"
            )
        if shared and self.target.shapes is not None:
            raise ConfigError("a shared study tunes one shape: use `shape`, not `shapes`")

    # -- a shared study's spec ------------------------------------------------------------------
    def to_spec(self) -> dict[str, Any]:
        """What every worker of a shared study needs (JSON): the study's search, not this
        process's (its wall time, its compile stage, its own recording's path elsewhere)."""
        t, s, replay = self.target, self.strategy, self.measuring.replay
        return {
            "kernel": t.kernel,
            "replay": str(replay.absolute()) if replay is not None else None,
            "spaces": [str(p.absolute()) for p in t.spaces],
            "shape": list(t.shape) if t.shape is not None else None,
            "arch": t.arch,
            "device": t.device,
            "pin": list(t.pin) if t.pin is not None else None,
            "sampler": s.sampler,
            "seed": s.seed,
            "budget": s.budget.as_dict() | {"seconds": None},
            "drift_every": s.drift_every,
            "coordination": {
                "heartbeat_s": self.coordination.heartbeat_s,
                "grace_s": self.coordination.grace_s,
            },
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], *, seconds: float | None = None) -> TuneRequest:
        """The request a shared study's spec describes (a spec's missing keys take the
        defaults), with this process's wall-time budget ``seconds``.

        Raises:
            WorkbenchError: the study's budget has no limit and ``seconds`` is None.
        """
        target = TuneTarget(
            kernel=spec.get("kernel"),
            spaces=tuple(Path(p) for p in spec.get("spaces") or ()),
            shape=tuple(spec["shape"]) if spec.get("shape") is not None else None,
            arch=spec.get("arch"),
            device=spec.get("device"),
            pin=tuple(spec["pin"]) if spec.get("pin") is not None else None,
        )
        strategy = SearchStrategy(
            budget=_spec_budget(spec, seconds),
            budget_given=True,
            drift_every=spec.get("drift_every", DEFAULT_EVERY),
            **_study_search(spec, ("sampler", "seed")),
        )
        return cls(
            target=target,
            measuring=Measuring(replay=Path(spec["replay"]) if spec.get("replay") else None),
            strategy=strategy,
            coordination=Coordination().of_spec(spec),
        )

    def joining(self, spec: Mapping[str, Any]) -> tuple[TuneRequest, dict[str, Any]]:
        """This request joining the shared study whose spec is ``spec``: it keeps the study's
        sampler, seed and coordination (its other workers search that way), and its budget
        unless --budget was given. Returns the request and what it was asked otherwise (the
        study's values by spec key, for the user to be told).

        Raises:
            WorkbenchError: the study's budget has no limit and this request no wall time.
        """
        asked = self.to_spec()
        keys = [k for k in STUDY_KEEPS if k in spec]
        changed = {k: spec[k] for k in keys if asked[k] != spec[k]}
        strategy = dataclasses.replace(self.strategy, **_study_search(spec, keys))
        if not strategy.budget_given and spec.get("budget"):
            budget = _spec_budget(spec, strategy.budget.seconds)
            strategy = dataclasses.replace(strategy, budget=budget)
        coordination = self.coordination
        if "coordination" in keys:
            coordination = coordination.of_spec(spec)
        joined = dataclasses.replace(self, strategy=strategy, coordination=coordination)
        return joined, changed


def _spec_budget(spec: Mapping[str, Any], seconds: float | None) -> Budget:
    """A study's evaluation budget and patience (every worker's), with this process's time."""
    b = spec.get("budget") or {}
    return Budget(evaluations=b.get("evaluations"), seconds=seconds, patience=b.get("patience"))


def _study_search(spec: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The strategy's sampler and seed among the spec keys ``keys`` (missing: the defaults)."""
    defaults = {"sampler": DEFAULT_SAMPLER, "seed": 0}
    return {k: spec.get(k, defaults[k]) for k in keys if k in defaults}
