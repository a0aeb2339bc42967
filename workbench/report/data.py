"""What a report knows about a study: the store's rows, read once, as plain dataclasses.

A study is one (kernel, shape, device) search, named ``kernel | shape | device``; its
evaluations carry the measured (or replayed) values, its runs the sampler, budget and command,
and each run's environment the GPU, driver and toolkit. Nothing here runs or compiles anything.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select

from workbench.search.drift import DriftCheck
from workbench.store import Store, StoredEvaluation, StudyInfo
from workbench.store.best import ranked
from workbench.store.environments import EnvironmentInfo, environment_info
from workbench.store.kept_space import KeptSpace, kept_space
from workbench.store.models import Environment, Evaluation, Run
from workbench.store.study_space import space_file, study_space

if TYPE_CHECKING:
    from workbench.spaces.space import Space


@dataclass(frozen=True)
class RunFacts:
    """One ``workbench tune`` (or import) of a study."""

    id: int
    kind: str
    sampler: str | None
    seed: int | None
    budget: Mapping[str, object] | None
    command: str | None
    status: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    environment: EnvironmentInfo | None
    evaluations: int
    drift: tuple[DriftCheck, ...] = ()  #: re-timings of the run's reference config
    phases: Mapping[str, float] | None = None  #: seconds per phase of its wall time


@dataclass(frozen=True)
class StudyData:
    """A study with every evaluation (in commit order) and every run."""

    study: StudyInfo
    evaluations: tuple[StoredEvaluation, ...]
    runs: tuple[RunFacts, ...]
    #: the space file and source kept with the study (None: a recorded space, or a study
    #: stored before schema 7 whose files were gone when the store was upgraded)
    kept: KeptSpace | None = None

    @property
    def ok(self) -> list[StoredEvaluation]:
        """Correct evaluations, best first (:mod:`workbench.store.best`)."""
        return ranked(self.evaluations)

    @property
    def best(self) -> StoredEvaluation | None:
        ok = self.ok
        return ok[0] if ok else None

    @property
    def replay_sources(self) -> tuple[str, ...]:
        """Recordings any number of this study was read from (empty: all measured here)."""
        found = [e.measurement.replayed_from for e in self.evaluations]
        found.append(self.study.replay_source)
        return tuple(sorted({s for s in found if s}))

    @property
    def replayed_count(self) -> int:
        return sum(1 for e in self.evaluations if e.measurement.replayed_from)

    @property
    def devices(self) -> tuple[str, ...]:
        names = {r.environment.gpu_name for r in self.runs if r.environment is not None}
        return tuple(sorted(names)) or (self.study.device_key,)

    @functools.cached_property
    def space(self) -> tuple[Space | None, str | None]:
        """The study's space rebuilt from the store's copy of its files, else from its space
        file (once per report: every section that needs it reads this), or (None, why not);
        see ``study_space``."""
        return study_space(self.study, self.kept)

    @functools.cached_property
    def space_file(self) -> tuple[Space | None, str | None]:
        """The study's space from its space file as it is on this machine: what a compile here
        builds (a source kept by the store, which may come from anywhere, is not compiled)."""
        return space_file(self.study)

    @property
    def varying_parameters(self) -> list[str]:
        """Parameters that take more than one value among the evaluations."""
        names = [name for name, _ in self.study.parameters]
        return [n for n in names if len({str(e.config.get(n)) for e in self.evaluations}) > 1]


def kernel_matches(stored: str, wanted: str) -> bool:
    """``reduce`` matches ``reduce`` and its pinned variants (``reduce[OP=max]``)."""
    return stored == wanted or stored.startswith(wanted + "[")


def gather_studies(store: Store, kernel: str | None = None) -> list[StudyData]:
    """Every study of ``kernel`` (all studies when None), oldest first.

    A space-file path names the kernel by its file stem as well.

    Raises:
        StoreError: the database failed.
    """
    wanted = {kernel, Path(kernel).stem} if kernel is not None else set()
    out = []
    for study in store.studies():
        if kernel is not None and not any(kernel_matches(study.kernel, w) for w in wanted):
            continue
        out.append(gather_study(store, study))
    return out


def gather_study(store: Store, study: StudyInfo) -> StudyData:
    """One study's evaluations and runs.

    Raises:
        StoreError: the database failed.
    """
    evaluations = store.evaluations(study)
    with store.session() as s:
        rows = s.execute(
            select(Run, Environment)
            .outerjoin(Environment, Run.environment_id == Environment.id)
            .where(Run.study_id == study.id)
            .order_by(Run.id)
        ).all()
        per_run: dict[int, int] = {}
        for run_id in s.scalars(select(Evaluation.run_id).where(Evaluation.study_id == study.id)):
            per_run[run_id] = per_run.get(run_id, 0) + 1
        with store.reading("runs"):
            runs = tuple(_run_facts(run, env, per_run.get(run.id, 0)) for run, env in rows)
    return StudyData(study, tuple(evaluations), runs, kept_space(store, study))


def _run_facts(run: Run, env: Environment | None, evaluations: int) -> RunFacts:
    return RunFacts(
        id=run.id,
        kind=run.kind,
        sampler=run.sampler,
        seed=run.seed,
        budget=run.budget,
        command=run.command,
        status=run.status,
        started_at=run.started_at,
        finished_at=run.finished_at,
        environment=environment_info(env) if env is not None else None,
        evaluations=evaluations,
        drift=tuple(DriftCheck.from_json(c) for c in run.drift or ()),
        phases=run.phases,
    )
