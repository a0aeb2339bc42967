"""What a tune is asked to do: :class:`TuneRequest`, the one home of tune's defaults.

``workbench tune`` builds one from its options; a shared study keeps the part every worker
needs as its spec (:meth:`TuneRequest.to_spec`), which ``workbench worker`` reads back
(:meth:`TuneRequest.from_spec`). :func:`workbench.search.planning.plan_tune` turns a request into
the plans of its studies.

Light to import (``workbench tune --help`` shows these defaults): the tune loop, the store and
Optuna are imported when a request is checked or its budget made.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError
from workbench.runners.objective_kind import ObjectiveKind
from workbench.search.drift import DEFAULT_EVERY
from workbench.search.samplers import DEFAULT_SAMPLER, check_sampler

if TYPE_CHECKING:
    from workbench.search.loop import Budget

#: Unique configs a tune evaluates when neither --budget, --time nor --patience is given.
DEFAULT_BUDGET = 100
#: Shared studies: seconds between a trial's heartbeats, and without one before the trial is
#: re-queued (longer than the database outages to ride out).
DEFAULT_HEARTBEAT_S = 10
DEFAULT_GRACE_S = 60
#: Configs the no-GPU compile stage compiles besides the default (seconds, not minutes).
NO_GPU_SAMPLE = 8
#: What a worker joining a shared study keeps of the study's spec, whatever it was asked.
STUDY_KEEPS = ("sampler", "seed", "coordination")
#: The new pipeline's proposals compiled ahead of the one measured. On the H200 a config's
#: compile took 0.13-0.88 s and its timed samples 0.04-0.27 s: four compiles in flight keep
#: one ready for each measurement once verification no longer dominates.
PIPELINE_AHEAD = 4


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


def requested_budget(
    evaluations: int | None, seconds: float | None, patience: int | None
) -> Budget:
    """``--budget``, ``--time``, ``--patience``: DEFAULT_BUDGET evaluations when none is given.

    Raises:
        WorkbenchError: a budget below 1, or a time that is not positive.
    """
    if evaluations is None and not seconds and not patience:
        evaluations = DEFAULT_BUDGET
    return _budget(evaluations, seconds, patience)


def _budget(evaluations: int | None, seconds: float | None, patience: int | None) -> Budget:
    """A :class:`~workbench.search.loop.Budget` (imported here: the loop brings the store).

    Raises:
        WorkbenchError: as Budget.
    """
    from workbench.search.loop import Budget

    return Budget(evaluations=evaluations, seconds=seconds, patience=patience)


@dataclass(frozen=True)
class TuneRequest:
    """One tune: what to search (a kernel's space, a recording), where the numbers come from,
    how to search and for how long. Paths are absolute once in a spec.

    Attributes:
        kernel: a kernel name or space file; None tunes the space recorded in ``replay``.
        replay: a recording answering every evaluation instead of a GPU.
        spaces: folders of the user's space files.
        shape: ``--shape`` items (NAME=INT), over the space's default shape.
        shapes: a named shape set of the space (each of its shapes in turn).
        arch: ``--arch`` (``all``: every declared arch, compile stage only).
        device: a device preset whose limits the constraints see.
        pin: ``--set`` items (NAME=VALUE): the problem variant searched.
        budget: when to stop; ``budget_given``: ``--budget`` was given (a study resumed or
            joined keeps its own otherwise).
        sampler, seed: the search strategy and its seed.
        drift_every: on a GPU, re-time the run's first correct config every N (0: never).
        study: the study's name (default: kernel | shape | device); ``fresh``: a new one.
        enqueue: ``--enqueue`` items, the configs evaluated first.
        heartbeat_s, grace_s: a shared study's trial heartbeat and grace period.
        replay_delay: simulated measurement time per replayed config (seconds).
        all_configs, sample, jobs: what the no-GPU compile stage compiles, with how many
            processes (``sample`` None: NO_GPU_SAMPLE).
        cache_dir: the compile cache.
        pipeline: on a GPU, the old pipeline or the new one (see :class:`Pipeline`).
        objective: what the search minimises: time, energy, or the energy-delay product.
    """

    kernel: str | None = None
    replay: Path | None = None
    spaces: tuple[Path, ...] = ()
    shape: tuple[str, ...] | None = None
    shapes: str | None = None
    arch: str | None = None
    device: str | None = None
    pin: tuple[str, ...] | None = None
    budget: Budget = field(default_factory=lambda: _budget(DEFAULT_BUDGET, None, None))
    budget_given: bool = False
    sampler: str = DEFAULT_SAMPLER
    seed: int = 0
    drift_every: int = DEFAULT_EVERY
    study: str | None = None
    fresh: bool = False
    enqueue: tuple[str, ...] | None = None
    heartbeat_s: int = DEFAULT_HEARTBEAT_S
    grace_s: int = DEFAULT_GRACE_S
    replay_delay: float = 0.0
    all_configs: bool = False
    sample: int | None = None
    jobs: int | None = None
    cache_dir: Path | None = None
    pipeline: Pipeline = Pipeline.OLD
    objective: ObjectiveKind = ObjectiveKind.TIME

    @classmethod
    def from_options(
        cls,
        *,
        evaluations: int | None,
        seconds: float | None,
        patience: int | None,
        shared: bool = False,
        **fields: Any,
    ) -> TuneRequest:
        """The request tune's options make, checked (:meth:`check`), with the budget of
        ``--budget``, ``--time`` and ``--patience`` (:func:`requested_budget`).

        Raises:
            WorkbenchError: as :meth:`check` and :func:`requested_budget`.
        """
        request = cls(**fields)
        request.check(shared=shared)
        budget = requested_budget(evaluations, seconds, patience)
        return dataclasses.replace(request, budget=budget, budget_given=evaluations is not None)

    @property
    def compile_sample(self) -> int:
        """Configs the compile stage samples besides the default."""
        return NO_GPU_SAMPLE if self.sample is None else self.sample

    def check(self, *, shared: bool = False) -> None:
        """Refuse what no path of tune can take (``shared``: a study on PostgreSQL), before
        anything is opened or written.

        Raises:
            WorkbenchError: nothing to tune, an unknown sampler, a malformed --enqueue, or
                options that do not go together.
        """
        if self.kernel is None and self.replay is None:
            raise ConfigError(
                "name a kernel, or give a recording as `replay` to tune a recorded space"
            )
        from workbench.search.enqueue import check_enqueue  # (it brings the store, Optuna)

        check_sampler(self.sampler)
        check_enqueue(self.enqueue)
        if self.all_configs and self.sample is not None:
            raise ConfigError(
                "`all_configs` compiles every valid config: it cannot go with `sample`"
            )
        if shared and self.fresh:  # every host runs the same command: each would make its own
            raise ConfigError(
                "`fresh` makes a study of this process's own; a shared study is joined by "
                "name: give a new one as `study`"
            )
        if shared and self.shapes is not None:
            raise ConfigError("a shared study tunes one shape: use `shape`, not `shapes`")

    # -- a shared study's spec ------------------------------------------------------------------
    def to_spec(self) -> dict[str, Any]:
        """What every worker of a shared study needs (JSON): the study's search, not this
        process's (its wall time, its compile stage, its own recording's path elsewhere)."""
        return {
            "kernel": self.kernel,
            "replay": str(self.replay.absolute()) if self.replay is not None else None,
            "spaces": [str(p.absolute()) for p in self.spaces],
            "shape": list(self.shape) if self.shape is not None else None,
            "arch": self.arch,
            "device": self.device,
            "pin": list(self.pin) if self.pin is not None else None,
            "sampler": self.sampler,
            "seed": self.seed,
            "budget": self.budget.as_dict() | {"seconds": None},
            "drift_every": self.drift_every,
            "coordination": {"heartbeat_s": self.heartbeat_s, "grace_s": self.grace_s},
        }

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], *, seconds: float | None = None) -> TuneRequest:
        """The request a shared study's spec describes (a spec's missing keys take the
        defaults), with this process's wall-time budget ``seconds``.

        Raises:
            WorkbenchError: the study's budget has no limit and ``seconds`` is None.
        """
        return cls(
            kernel=spec.get("kernel"),
            replay=Path(spec["replay"]) if spec.get("replay") else None,
            spaces=tuple(Path(p) for p in spec.get("spaces") or ()),
            shape=tuple(spec["shape"]) if spec.get("shape") is not None else None,
            arch=spec.get("arch"),
            device=spec.get("device"),
            pin=tuple(spec["pin"]) if spec.get("pin") is not None else None,
            budget=_spec_budget(spec, seconds),
            budget_given=True,
            drift_every=spec.get("drift_every", DEFAULT_EVERY),
            **_study_search(spec, STUDY_KEEPS),
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
        kept: dict[str, Any] = _study_search(spec, keys)
        if not self.budget_given and spec.get("budget"):
            kept["budget"] = _spec_budget(spec, self.budget.seconds)
        return dataclasses.replace(self, **kept), changed


def spec_timing(spec: Mapping[str, Any]) -> tuple[int, int]:
    """A shared study's heartbeat and grace period (seconds), as its spec keeps them."""
    timing = _study_search(spec, ["coordination"])
    return timing["heartbeat_s"], timing["grace_s"]


def _spec_budget(spec: Mapping[str, Any], seconds: float | None) -> Budget:
    """A study's evaluation budget and patience (every worker's), with this process's time."""
    b = spec.get("budget") or {}
    return _budget(b.get("evaluations"), seconds, b.get("patience"))


def _study_search(spec: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The request's fields for the spec keys ``keys`` of STUDY_KEEPS (missing: the defaults)."""
    timing = spec.get("coordination") or {}
    fields = {
        "sampler": {"sampler": spec.get("sampler", DEFAULT_SAMPLER)},
        "seed": {"seed": spec.get("seed", 0)},
        "coordination": {
            "heartbeat_s": timing.get("heartbeat_s", DEFAULT_HEARTBEAT_S),
            "grace_s": timing.get("grace_s", DEFAULT_GRACE_S),
        },
    }
    return {name: value for k in keys for name, value in fields[k].items()}
