"""The store: every study, run, configuration, measurement and raw sample, in one database.

An embedded SQLite file (WAL) by default; any SQLAlchemy URL works (``postgresql://...``).
Every :meth:`Store.record` commits before it returns, so a crash or Ctrl-C loses nothing that
finished. Reports and exports read from here only.

What :class:`Store` is made of: the database it opens (:mod:`~workbench.store.database`), the
schema it brings it to (:mod:`~workbench.store.schema`), the records it gives back
(:mod:`~workbench.store.records`), the rows it writes per trial
(:mod:`~workbench.store.evaluation_rows`) and whether a run's process lives
(:mod:`~workbench.store.processes`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import socket
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from typing import TypeVar

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import Select

from workbench.errors import ConfigError
from workbench.runners.base import DeviceInfo, Measurement
from workbench.spaces.model import Config, Value, config_label
from workbench.store.database import (
    default_store_url,
    explain,
    make_engine,
    opening_errors,
    shown_url,
    sqlalchemy_url,
    sqlite_file,
)
from workbench.store.errors import StoreError
from workbench.store.evaluation_rows import (
    INSERT_EVALUATION,
    SQLITE_INSERT,
    evaluation_row,
    sqlite_values,
)
from workbench.store.models import (
    Comparison,
    CompileRecord,
    Environment,
    Evaluation,
    Profile,
    Run,
    RunStatus,
    Study,
    StudySpace,
    utcnow,
)
from workbench.store.processes import process_gone, process_scope
from workbench.store.records import (
    RunSummary,
    StoredEvaluation,
    StudyInfo,
    stored_evaluation,
    study_info,
    study_name,
)
from workbench.store.schema import prepare_schema

_Row = TypeVar("_Row")


class Store:
    """Open (creating or migrating) the store at ``url``; ``read_only``: open an existing
    store without writing to it (a file the user may only read, e.g. to list or export).

    Raises:
        StoreError: the database cannot be opened, is not a workbench store, is damaged, or was
            written by a newer workbench; read-only: there is no store, or its schema is older
            (migrating writes).
    """

    def __init__(
        self, url: str | None = None, *, lock_timeout_s: float = 10.0, read_only: bool = False
    ) -> None:
        self.url = sqlalchemy_url(url or default_store_url())
        self.read_only = read_only
        #: DB-API connection for the per-trial insert on SQLite
        self._raw: PoolProxiedConnection | None = None
        with opening_errors(self.shown_url):
            self.engine = make_engine(self.url, lock_timeout_s, read_only)
            self._session = sessionmaker(self.engine, expire_on_commit=False)
            self._prepare()

    @property
    def shown_url(self) -> str:
        """The URL as messages and reports show it (see :func:`shown_url`)."""
        return shown_url(self.url)

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None
        self.engine.dispose()

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success; database errors become :class:`StoreError`."""
        s = self._session()
        try:
            yield s
            s.commit()
        except (OperationalError, DatabaseError) as exc:
            s.rollback()
            raise StoreError(f"store {self.shown_url}: {explain(exc)}") from exc
        finally:
            s.close()

    @contextmanager
    def reading(self, table: str) -> Iterator[None]:
        """Rows of ``table`` that cannot be read back (bad JSON, wrong types: a damaged or
        hand-edited store) become a :class:`StoreError` naming the table."""
        try:
            yield
        except StoreError:
            raise
        except (SQLAlchemyError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StoreError(
                f"store {self.shown_url}: table {table} is damaged ({type(exc).__name__}: {exc})"
            ) from exc

    def _prepare(self) -> None:
        with self.engine.begin() as conn:
            prepare_schema(conn, self.shown_url, read_only=self.read_only)

    # -- environments, studies, runs -----------------------------------------------------
    def environment(
        self,
        device: DeviceInfo,
        *,
        replay_source: str | None = None,
        git_commit: str | None = None,
        git_dirty: bool | None = None,
    ) -> int:
        """The id of this environment (created on first use)."""
        fields = {
            **asdict(device),
            "replay_source": replay_source,
            "git_commit": git_commit,
            "git_dirty": git_dirty,
            "hostname": socket.gethostname(),
        }
        fingerprint = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
        with self.session() as s:
            env = _get_or_create(
                s,
                select(Environment).where(Environment.fingerprint == fingerprint),
                lambda: Environment(
                    fingerprint=fingerprint,
                    gpu_name=device.name,
                    gpu_uuid=device.uuid,
                    cc=device.cc,
                    driver=device.driver,
                    cuda=device.cuda,
                    toolkit=device.toolkit,
                    sm_clock_max_mhz=device.sm_clock_max_mhz,
                    memory_clock_mhz=device.memory_clock_mhz,
                    hostname=fields["hostname"],
                    git_commit=git_commit,
                    git_dirty=git_dirty,
                    replay_source=replay_source,
                ),
            )
            return env.id

    def study(
        self,
        *,
        kernel: str,
        shape_label: str,
        device_key: str,
        parameters: Sequence[tuple[str, Sequence[Value]]],
        arch: str | None = None,
        space_path: str | None = None,
        space_sha256: str | None = None,
        objective: str = "time",
        unit: str = "ms",
        replay_source: str | None = None,
        recorded_optimum: float | None = None,
        work: Mapping[str, object] | None = None,
        name: str | None = None,
        replay_note: str | None = None,
        fresh: bool = False,
    ) -> StudyInfo:
        """Get or create the study for (kernel, shape, device); ``fresh``: always create one,
        named ``NAME #2`` (``#3``, ...) when NAME is taken (the existing study is kept).

        Raises:
            StoreError: a study of that name exists with different parameters.
        """
        name = name or study_name(kernel, shape_label, device_key)
        params = [[n, list(v)] for n, v in parameters]
        with self.session() as s:
            if fresh:
                name = _unused_name(s, name)
            row = _get_or_create(
                s,
                select(Study).where(Study.name == name),
                lambda: Study(
                    name=name,
                    kernel=kernel,
                    shape_label=shape_label,
                    device_key=device_key,
                    arch=arch,
                    space_path=space_path,
                    space_sha256=space_sha256,
                    parameters=params,
                    objective=objective,
                    unit=unit,
                    replay_source=replay_source,
                    replay_note=replay_note,
                    recorded_optimum=recorded_optimum,
                    work=dict(work) if work else None,
                ),
            )
            _check_same_parameters(row, params)
            info = study_info(row)
        self.abandon_gone_runs(info)
        return info

    def studies(self) -> list[StudyInfo]:
        with self.reading("studies"), self.session() as s:
            return [study_info(r) for r in s.scalars(select(Study).order_by(Study.id))]

    def find_study(self, name: str, *, unlisted: int | None = None) -> StudyInfo:
        """A study by exact name, by id, or by a unique part of its name; the error names
        the studies there are (but the ``unlisted`` one: the study asking).

        Raises:
            ConfigError: no study or several match.
        """
        studies = self.studies()
        for s in studies:
            if s.name == name or str(s.id) == name:
                return s
        matches = [s for s in studies if name in s.name]
        if len(matches) == 1:
            return matches[0]
        shown = [s for s in matches or studies if s.id != unlisted]
        known = "; ".join(f"{s.id}: {s.name}" for s in shown) or "none"
        what = "several studies match" if matches else "no study matches"
        raise ConfigError(f"{what} {name!r}; studies: {known}")

    def discard_if_unused(self, study: StudyInfo) -> bool:
        """Delete a study that nothing refers to yet (no run, evaluation, compile result,
        profile or comparison): what a refused command created. Returns whether it did."""
        users = (Run, Evaluation, CompileRecord, Profile, Comparison)
        with self.session() as s:
            if any(s.scalar(select(m.id).where(m.study_id == study.id).limit(1)) for m in users):
                return False
            # (its kept space file is the study's own, not a use of it)
            s.execute(delete(StudySpace).where(StudySpace.study_id == study.id))
            s.execute(delete(Study).where(Study.id == study.id))
            return True

    def start_run(
        self,
        study: StudyInfo,
        environment_id: int | None,
        *,
        kind: str = "tune",
        sampler: str | None = None,
        seed: int | None = None,
        budget: Mapping[str, object] | None = None,
        command: str | None = None,
        label: str | None = None,
    ) -> int:
        with self.session() as s:
            run = Run(
                study_id=study.id,
                environment_id=environment_id,
                kind=kind,
                sampler=sampler,
                seed=seed,
                budget=dict(budget) if budget else None,
                command=command,
                label=label,
                host=socket.gethostname(),
                pid=os.getpid(),
                pid_scope=process_scope(),
            )
            s.add(run)
            s.flush()
            return run.id

    def abandon_gone_runs(self, study: StudyInfo, *, none_alive: bool = False) -> int:
        """Mark ``abandoned`` the study's running runs whose process is gone (one killed with
        ``kill -9`` never said how its run ended): those of this host (this process scope)
        whose pid has ended, or, with ``none_alive``, every one but this process's (the caller
        holds the study's SQLite lock, which every run of the study holds while it lives).
        Runs of other hosts are left alone (a PostgreSQL worker elsewhere may be alive).
        Returns how many. A read-only store is not changed (0)."""
        if self.read_only:
            return 0
        scope = process_scope()
        with self.session() as s:
            running = s.execute(
                select(Run.id, Run.pid, Run.pid_scope).where(
                    Run.study_id == study.id, Run.status == RUNNING
                )
            ).all()
            if none_alive:
                gone = [r.id for r in running if (r.pid, r.pid_scope) != (os.getpid(), scope)]
            else:
                here = [r for r in running if scope is not None and r.pid_scope == scope]
                gone = [r.id for r in here if r.pid is not None and process_gone(r.pid)]
            if gone:  # (only while still running: a run that ended meanwhile keeps its status)
                s.execute(
                    update(Run)
                    .where(Run.id.in_(gone), Run.status == RUNNING)
                    .values(status=ABANDONED)
                )
            return len(gone)

    def record_drift(self, run_id: int, checks: Sequence[Mapping[str, object]]) -> None:
        """Store the run's drift checks so far (every one, replacing the previous list)."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is not None:
                run.drift = [dict(c) for c in checks]

    def record_phases(self, run_id: int, phases: Mapping[str, float]) -> None:
        """Store where the run's wall time went (``{phase: seconds}``, replacing any before)."""
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is not None:
                run.phases = {str(k): float(v) for k, v in phases.items()}

    def finish_run(self, run_id: int, status: RunStatus) -> None:
        with self.session() as s:
            run = s.get(Run, run_id)
            if run is not None:
                run.status = status.value
                run.finished_at = utcnow()

    # -- evaluations ---------------------------------------------------------------------
    def record(
        self,
        study: StudyInfo,
        run_id: int,
        environment_id: int | None,
        config: Config,
        m: Measurement,
        *,
        elapsed_s: float | None = None,
    ) -> int:
        """Store one evaluation with its samples and commit; returns the evaluation's id.

        Runs once per trial, so it is one prebuilt Core insert and a commit (the ORM version
        of this cost about 10 ms per trial).

        Raises:
            StoreError: the config already has an evaluation in this study, or the database
                failed.
        """
        row = evaluation_row(study.id, run_id, environment_id, config, m, elapsed_s, utcnow())
        if self.engine.dialect.name == "sqlite":
            return self._record_sqlite(study, row)
        try:
            with self.engine.begin() as conn:
                key = conn.execute(INSERT_EVALUATION, row).inserted_primary_key
                assert key is not None  # (a single-row insert has its key)
                return int(key[0])
        except IntegrityError:
            raise StoreError(f"{study.name}: {row['config_key']} is already evaluated") from None
        except (OperationalError, DatabaseError) as exc:
            raise StoreError(f"store {self.shown_url}: {explain(exc)}") from exc

    def _record_sqlite(self, study: StudyInfo, row: dict[str, object]) -> int:
        """The per-trial insert on SQLite through the DB-API connection (SQLAlchemy's statement
        handling cost about as much as the commit): same columns, same encodings."""
        if self._raw is None:
            self._raw = self.engine.raw_connection()
        values = sqlite_values(row)
        try:
            cur = self._raw.cursor()
            cur.execute(SQLITE_INSERT, values)
            self._raw.commit()
            return int(cur.lastrowid)
        except sqlite3.IntegrityError:
            self._raw.rollback()
            raise StoreError(f"{study.name}: {row['config_key']} is already evaluated") from None
        except sqlite3.DatabaseError as exc:
            self._raw.rollback()
            raise StoreError(f"store {self.shown_url}: {explain(exc)}") from exc

    def record_many(
        self,
        study: StudyInfo,
        run_id: int,
        environment_id: int | None,
        items: Sequence[tuple[Config, Measurement, float | None]],
    ) -> int:
        """Store several evaluations in one transaction (imports); returns how many.

        Raises:
            StoreError: one of the configs is already evaluated (nothing is stored), or the
                database failed.
        """
        now = utcnow()
        rows = [evaluation_row(study.id, run_id, environment_id, c, m, e, now) for c, m, e in items]
        try:
            if rows:
                with self.engine.begin() as conn:
                    conn.execute(INSERT_EVALUATION, rows)
            return len(rows)
        except IntegrityError:
            keys = ", ".join(str(r["config_key"]) for r in rows[:3])
            raise StoreError(f"{study.name}: already evaluated (among {keys})") from None
        except (OperationalError, DatabaseError) as exc:
            raise StoreError(f"store {self.shown_url}: {explain(exc)}") from exc

    def evaluations(self, study: StudyInfo, *, with_samples: bool = True) -> list[StoredEvaluation]:
        """Every evaluation of a study, in the order they were committed."""
        with self.reading("evaluations"), self.session() as s:
            rows = s.scalars(
                select(Evaluation).where(Evaluation.study_id == study.id).order_by(Evaluation.id)
            ).all()
            return [stored_evaluation(i, ev, with_samples) for i, ev in enumerate(rows)]

    def best(self, study: StudyInfo) -> StoredEvaluation | None:
        """The study's best evaluation under the store's one rule (:mod:`workbench.store.best`:
        measured before replayed, lowest median, tightest interval, earliest), with its
        samples; None when it has no correct one."""
        from workbench.store.best import study_best

        return study_best(self, study)

    def lookup(self, study: StudyInfo, config: Config) -> StoredEvaluation | None:
        """The evaluation of ``config`` in ``study``, if there is one (with its samples)."""
        key = config_label(config)
        with self.reading("evaluations"), self.session() as s:
            ev = s.scalar(
                select(Evaluation).where(
                    Evaluation.study_id == study.id, Evaluation.config_key == key
                )
            )
            return None if ev is None else stored_evaluation(-1, ev, True)

    @contextmanager
    def exclusive(self, study: StudyInfo) -> Iterator[None]:
        """Hold ``study`` for this process while a single-process tune runs on it.

        On a SQLite file, a second process tuning the same study is refused with a message
        pointing to PostgreSQL (SQLite has no row locks for sharing a study safely); other
        studies of the same file stay usable. The lock is an OS byte-range lock on
        ``<file>.lock``, so a killed process releases it. Other databases: no-op (shared
        studies on PostgreSQL are coordinated by ``workbench worker``).

        Taking the lock marks the runs of the study left ``running`` by killed processes
        ``abandoned`` (none can be alive: each held the lock).

        Raises:
            StoreError: another process holds the study.
        """
        path = self._sqlite_path()
        if path is None:
            yield
            return
        import fcntl

        # beside the file itself, so that a symlink or another spelling of the path takes the
        # same lock
        fd = os.open(f"{os.path.realpath(path)}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, study.id)
            except OSError:
                raise StoreError(
                    f"study {study.name!r} in {path} is being tuned by another process; a SQLite "
                    "store serves one process per study. To tune one study from several "
                    "processes, GPUs or hosts, use PostgreSQL: a `storage` URL "
                    "postgresql://USER@HOST/DB and one `study` for every worker "
                    "(docs/scale-out.md)"
                ) from None
            self.abandon_gone_runs(study, none_alive=True)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _sqlite_path(self) -> str | None:
        path = sqlite_file(self.url)
        return None if path is None else str(path)

    def runs(self, study: StudyInfo) -> list[RunSummary]:
        """The study's runs in the order they started, with the evaluations each stored."""
        with self.reading("runs"), self.session() as s:
            stored = dict(
                s.execute(
                    select(Evaluation.run_id, func.count(Evaluation.id))
                    .where(Evaluation.study_id == study.id)
                    .group_by(Evaluation.run_id)
                ).all()
            )
            rows = s.scalars(select(Run).where(Run.study_id == study.id).order_by(Run.id))
            return [
                RunSummary(r.id, r.kind, r.sampler, r.seed, r.status, stored.get(r.id, 0), r.phases)
                for r in rows
            ]

    def count_evaluations(self, study: StudyInfo) -> int:
        with self.session() as s:
            return (
                s.scalar(select(func.count(Evaluation.id)).where(Evaluation.study_id == study.id))
                or 0
            )


#: Run statuses the store itself sets (the others: finished, interrupted, failed).
RUNNING = "running"
ABANDONED = "abandoned"


def _get_or_create(s: Session, query: Select, make: Callable[[], _Row]) -> _Row:
    """The row ``query`` finds, else ``make()`` inserted. Processes getting the same row at
    once (two studies on one machine: one environment) both find none and insert: the
    loser's insert breaks a unique key, and it reads the winner's row instead of failing.
    ``s`` must hold nothing else yet (a lost race rolls it back).

    Raises:
        IntegrityError: the insert broke a constraint, and still no row is found.
    """
    found = s.scalar(query)
    if found is not None:
        return found
    row = make()
    s.add(row)
    try:
        s.flush()
        return row
    except IntegrityError:
        s.rollback()  # another process inserted the same key first: read its row
        found = s.scalar(query)
        if found is None:
            raise
        return found


def _unused_name(s: Session, name: str) -> str:
    """``name``, or ``name #2`` (``#3``, ...) when a study holds it."""
    if s.scalar(select(Study.id).where(Study.name == name)) is None:
        return name
    like = Study.name.startswith(name, autoescape=True)
    taken = set(s.scalars(select(Study.name).where(like)))
    return next(n for k in itertools.count(2) if (n := f"{name} #{k}") not in taken)


def _check_same_parameters(row: Study, params: Sequence[Sequence[object]]) -> None:
    """A study found by name is one of the space's parameters (in order).

    Raises:
        StoreError: it holds other parameters.
    """
    if [p[0] for p in row.parameters] != [p[0] for p in params]:
        raise StoreError(
            f"study {row.name!r} exists with parameters {[p[0] for p in row.parameters]}; "
            f"the space now has {[p[0] for p in params]}: use another `study` name or "
            "`fresh` to start a new one"
        )
