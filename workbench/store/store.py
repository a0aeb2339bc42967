"""The store: every study, run, configuration, measurement and raw sample, in one database.

An embedded SQLite file (WAL) by default; any SQLAlchemy URL works (``postgresql://...``).
Every :meth:`Store.record` commits before it returns, so a crash or Ctrl-C loses nothing that
finished. Reports and exports read from here only.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import itertools
import json
import os
import shlex
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar, cast

from sqlalchemy import (
    Table,
    create_engine,
    delete,
    event,
    func,
    inspect,
    make_url,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import (
    ArgumentError,
    DatabaseError,
    IntegrityError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import PoolProxiedConnection
from sqlalchemy.sql import Select

from workbench.errors import ConfigError, WorkbenchError
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.spaces.model import Config, Value, config_label
from workbench.store import models
from workbench.store.mapping import record_from_row
from workbench.store.models import (
    SCHEMA_VERSION,
    Comparison,
    CompileRecord,
    Environment,
    Evaluation,
    Meta,
    Profile,
    Run,
    RunStatus,
    Study,
    StudySpace,
    utcnow,
)

_Row = TypeVar("_Row")

STORE_ENV = "WORKBENCH_STORE"
DEFAULT_STORE = Path(".workbench") / "store.sqlite"


class StoreError(WorkbenchError):
    """The store cannot be opened, is locked, damaged, or from a newer workbench."""


def default_store_url() -> str:
    """``$WORKBENCH_STORE`` (a URL or a path), else ``.workbench/store.sqlite`` here."""
    value = os.environ.get(STORE_ENV) or str(DEFAULT_STORE)
    return value if "://" in value else f"sqlite:///{Path(value).absolute()}"


#: Device key of studies that hold compile results only (``workbench compile --storage``,
#: ``tune`` without a GPU): ``compile only (sm_90)``.
COMPILE_ONLY = "compile only"


@dataclass(frozen=True)
class StudyInfo:
    """A study as the tuner and the reports see it."""

    id: int
    name: str
    kernel: str
    shape_label: str
    device_key: str
    arch: str | None
    parameters: tuple[tuple[str, tuple[Value, ...]], ...]
    objective: str
    unit: str
    replay_source: str | None
    recorded_optimum: float | None
    work: Mapping[str, object] | None
    replay_note: str | None = None  #: the recording reader's note (another objective, cut short)
    space_path: str | None = None  #: the space file searched (None: a recorded space)
    space_sha256: str | None = None  #: its hash (with the kernel source's) when tuned

    @property
    def compile_only(self) -> bool:
        """Compile results only: nothing of the study ran (no time, no best config)."""
        return self.device_key.startswith(COMPILE_ONLY)


@dataclass(frozen=True)
class StoredEvaluation:
    """An evaluation read back from the store."""

    sequence: int
    config: Config
    measurement: Measurement
    run_id: int
    elapsed_s: float | None
    #: when it was stored (a replayed value was measured earlier: see ``replayed_from``)
    created_at: dt.datetime | None = None


@dataclass(frozen=True)
class RunSummary:
    """One run of a study (a tune, a worker, an import) and how many evaluations it stored."""

    id: int
    kind: str
    sampler: str | None
    seed: int | None
    status: str
    evaluations: int
    #: seconds per phase of its wall time (None: not recorded, e.g. a run before schema 5)
    phases: dict[str, float] | None = None


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
        with _opening(self.shown_url):
            self.engine = _make_engine(self.url, lock_timeout_s, read_only)
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
            raise StoreError(f"store {self.shown_url}: {_explain(exc)}") from exc
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

    # -- schema --------------------------------------------------------------------------
    def _prepare(self) -> None:
        from workbench.store.migrations import migrate

        with self.engine.begin() as conn:
            # processes opening a store together create (or migrate) its tables once: the first
            # one holds the lock until its tables are committed, the others then find them
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PREPARE_LOCK})
            elif conn.dialect.name == "sqlite" and not self.read_only:
                # the write lock up front (waiting up to the lock timeout), and the DDL inside
                # the transaction: Python's sqlite3 runs CREATE TABLE outside one otherwise
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            tables, version = _read_version(conn, self.shown_url)
            if version is not None and version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.shown_url} has schema version {version}, newer than this workbench's "
                    f"{SCHEMA_VERSION}: upgrade the workbench"
                )
            if self.read_only:
                if version is None:
                    raise StoreError(f"{self.shown_url} is empty: not a workbench store yet")
                if version != SCHEMA_VERSION:
                    raise StoreError(
                        f"{self.shown_url} is schema version {version}; reading it needs "
                        f"version {SCHEMA_VERSION}: run workbench store upgrade"
                        f"{storage_option(self.shown_url)} (it backs the store up first)"
                    )
                self._check_layout(conn, tables, creating=False)
                return
            if version is not None and version < SCHEMA_VERSION:
                migrate(conn, version)
            elif version is not None:
                self._check_layout(conn, tables, creating=True)
            models.Base.metadata.create_all(conn)
            if version is None:
                conn.execute(
                    _table(Meta).insert().values(key="schema_version", value=str(SCHEMA_VERSION))
                )
            conn.execute(
                _table(Meta)
                .update()
                .where(Meta.key == "schema_version")
                .values(value=str(SCHEMA_VERSION))
            )

    def _check_layout(self, conn: Connection, tables: set[str], *, creating: bool) -> None:
        """Refuse a store whose tables lack columns this schema version has (written by a
        development build with the same version number) instead of failing later with "no such
        column" halfway through a command. Missing tables are created by a writing open; a
        read-only one cannot, and says so."""
        inspector = inspect(conn)
        columns: list[str] = []
        absent: list[str] = []
        for name, table in models.Base.metadata.tables.items():
            if name not in tables:
                absent.append(name)
                continue
            present = {c["name"] for c in inspector.get_columns(name)}
            columns += [f"{name}.{c.name}" for c in table.columns if c.name not in present]
        if columns:
            raise StoreError(
                f"{self.shown_url} says schema version {SCHEMA_VERSION} but lacks the columns "
                f"{', '.join(columns)}: it was written by a development build of the workbench "
                "with the same version number; start a new store (another `storage`) or export "
                "it with the build that wrote it"
            )
        if absent and not creating:
            raise StoreError(
                f"{self.shown_url} lacks the tables {', '.join(absent)}, which this workbench "
                f"adds: run workbench store upgrade{storage_option(self.shown_url)}, or copy it "
                "where it may be written"
            )

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
            if fresh and s.scalar(select(Study.id).where(Study.name == name)) is not None:
                like = Study.name.startswith(name, autoescape=True)
                taken = set(s.scalars(select(Study.name).where(like)))
                name = next(n for k in itertools.count(2) if (n := f"{name} #{k}") not in taken)
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
            if [p[0] for p in row.parameters] != [p[0] for p in params]:
                raise StoreError(
                    f"study {name!r} exists with parameters {[p[0] for p in row.parameters]}; "
                    f"the space now has {[p[0] for p in params]}: use another `study` name or "
                    "`fresh` to start a new one"
                )
            info = _study_info(row)
        self.abandon_gone_runs(info)
        return info

    def studies(self) -> list[StudyInfo]:
        with self.reading("studies"), self.session() as s:
            return [_study_info(r) for r in s.scalars(select(Study).order_by(Study.id))]

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
                gone = [r.id for r in here if r.pid is not None and _process_gone(r.pid)]
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
        row = _row(study.id, run_id, environment_id, config, m, elapsed_s, utcnow())
        if self.engine.dialect.name == "sqlite":
            return self._record_sqlite(study, row)
        try:
            with self.engine.begin() as conn:
                key = conn.execute(_INSERT_EVALUATION, row).inserted_primary_key
                assert key is not None  # (a single-row insert has its key)
                return int(key[0])
        except IntegrityError:
            raise StoreError(f"{study.name}: {row['config_key']} is already evaluated") from None
        except (OperationalError, DatabaseError) as exc:
            raise StoreError(f"store {self.shown_url}: {_explain(exc)}") from exc

    def _record_sqlite(self, study: StudyInfo, row: dict[str, object]) -> int:
        """The per-trial insert on SQLite through the DB-API connection (SQLAlchemy's statement
        handling cost about as much as the commit): same columns, same encodings."""
        if self._raw is None:
            self._raw = self.engine.raw_connection()
        values = [_SQLITE_ENCODE.get(col, _same)(row[col]) for col in _COLUMNS]
        try:
            cur = self._raw.cursor()
            cur.execute(_SQLITE_INSERT, values)
            self._raw.commit()
            return int(cur.lastrowid)
        except sqlite3.IntegrityError:
            self._raw.rollback()
            raise StoreError(f"{study.name}: {row['config_key']} is already evaluated") from None
        except sqlite3.DatabaseError as exc:
            self._raw.rollback()
            raise StoreError(f"store {self.shown_url}: {_explain(exc)}") from exc

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
        rows = [_row(study.id, run_id, environment_id, c, m, e, now) for c, m, e in items]
        try:
            if rows:
                with self.engine.begin() as conn:
                    conn.execute(_INSERT_EVALUATION, rows)
            return len(rows)
        except IntegrityError:
            keys = ", ".join(str(r["config_key"]) for r in rows[:3])
            raise StoreError(f"{study.name}: already evaluated (among {keys})") from None
        except (OperationalError, DatabaseError) as exc:
            raise StoreError(f"store {self.shown_url}: {_explain(exc)}") from exc

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


def _table(model: type[object]) -> Table:
    """A mapped class's table (typed: ``__table__`` is a FromClause to the type checker)."""
    return cast(Table, model.__table__)  # type: ignore[attr-defined]


_INSERT_EVALUATION = _table(Evaluation).insert()


_COLUMNS = (
    "study_id",
    "config_key",
    "params",
    "run_id",
    "environment_id",
    "outcome",
    "value",
    "ci_low",
    "ci_high",
    "n_samples",
    "samples",
    "sm_clock_mhz",
    "throttled",
    "reason",
    "compile_seconds",
    "verify_max_error",
    "replayed_from",
    "metrics",
    "elapsed_s",
    "created_at",
)
_SQLITE_INSERT = (
    f"INSERT INTO evaluations ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
)


def _same(value: object) -> object:
    return value


def _json_or_null(value: object) -> str | None:
    return None if value is None else json.dumps(value)


#: How SQLAlchemy's JSON and DateTime types store values on SQLite (read back by SQLAlchemy).
_SQLITE_ENCODE = {
    "params": _json_or_null,
    "samples": _json_or_null,
    "sm_clock_mhz": _json_or_null,
    "throttled": _json_or_null,
    "metrics": _json_or_null,
    "created_at": lambda t: t.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
}


def _row(
    study_id: int,
    run_id: int,
    environment_id: int | None,
    config: Config,
    m: Measurement,
    elapsed_s: float | None,
    now: object,
) -> dict[str, object]:
    return {
        "study_id": study_id,
        "config_key": config_label(config),
        "params": dict(config),
        "run_id": run_id,
        "environment_id": environment_id,
        "outcome": m.outcome.value,
        "value": m.value,
        "ci_low": m.ci_low,
        "ci_high": m.ci_high,
        "n_samples": len(m.samples),
        "samples": list(m.samples) or None,
        "sm_clock_mhz": list(m.sm_clock_mhz) or None,
        "throttled": list(m.throttled) or None,
        "reason": m.reason,
        "compile_seconds": m.compile_seconds,
        "verify_max_error": m.verify_max_error,
        "replayed_from": m.replayed_from,
        "metrics": dict(m.metrics) or None,
        "elapsed_s": elapsed_s,
        "created_at": now,
    }


def study_name(kernel: str, shape_label: str, device_key: str) -> str:
    """The default study name: one study per (kernel, shape, device)."""
    return f"{kernel} | {shape_label} | {device_key}"


def stored_evaluation(sequence: int, ev: Evaluation, with_samples: bool) -> StoredEvaluation:
    m = Measurement(
        outcome=TrialOutcome(ev.outcome),
        value=ev.value,
        samples=tuple(ev.samples or ()) if with_samples else (),
        ci_low=ev.ci_low,
        ci_high=ev.ci_high,
        reason=ev.reason,
        sm_clock_mhz=tuple(ev.sm_clock_mhz or ()) if with_samples else (),
        throttled=tuple(ev.throttled or ()) if with_samples else (),
        compile_seconds=ev.compile_seconds,
        verify_max_error=ev.verify_max_error,
        replayed_from=ev.replayed_from,
        metrics=ev.metrics or {},
    )
    return StoredEvaluation(
        sequence, dict(ev.params), m, ev.run_id, ev.elapsed_s, _aware(ev.created_at)
    )


def _aware(when: dt.datetime | None) -> dt.datetime | None:
    """SQLite gives naive datetimes back; every stored time is UTC."""
    return when.replace(tzinfo=dt.timezone.utc) if when and when.tzinfo is None else when


def _study_info(row: Study) -> StudyInfo:
    parameters = tuple((n, tuple(v)) for n, v in row.parameters)
    return record_from_row(StudyInfo, row, parameters=parameters)


#: Run statuses the store itself sets (the others: finished, interrupted, failed).
RUNNING = "running"
ABANDONED = "abandoned"


@functools.cache
def process_scope() -> str | None:
    """Where a pid names one process: this boot of the kernel and this pid namespace (a
    container has its own, and may share another's host name). None where that cannot be read
    (not Linux): no run is then judged by its pid."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def _process_gone(pid: int) -> bool:
    """Whether process ``pid`` of this scope has ended: no such process, or a zombie (killed,
    not yet reaped by its parent). Another user's process exists (the signal is refused)."""
    if pid <= 0 or pid == os.getpid():  # (0 and negative pids name process groups)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


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


def _read_version(conn: Connection, shown: str) -> tuple[set[str], int | None]:
    """The database's tables and its schema version (None: an empty database).

    Raises:
        StoreError: a database of other tables, or a meta table without a readable version.
    """
    tables = set(conn.dialect.get_table_names(conn))
    if tables and "meta" not in tables:
        raise StoreError(
            f"{shown} is a database, but not a workbench store "
            f"(tables: {', '.join(sorted(tables))})"
        )
    if "meta" not in tables:
        return tables, None
    row = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).first()
    if row is None:  # (created with its row in one transaction: one lost since)
        raise StoreError(
            f"{shown}: its meta table has no schema version, so which workbench wrote its "
            "tables cannot be told: the meta table is damaged (nothing was changed)"
        )
    try:
        return tables, int(row[0])
    except (TypeError, ValueError):
        raise StoreError(
            f"{shown}: its schema version reads {row[0]!r}, not a number: the meta table is damaged"
        ) from None


def schema_version(url: str) -> int | None:
    """The schema version of the store at ``url`` as it stands (None: an empty database), read
    without migrating, writing or creating anything (``store upgrade`` and ``store copy`` ask
    before they choose how to open it).

    Raises:
        StoreError: no store there, not a workbench store, a damaged meta table, or the
            database cannot be reached.
    """
    url = sqlalchemy_url(url)
    with _opening(shown_url(url)):
        engine = _make_engine(url, 10.0, read_only=True)
        try:
            with engine.connect() as conn:
                return _read_version(conn, shown_url(url))[1]
        finally:
            engine.dispose()


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None: another database, or SQLite in memory)."""
    if not sqlalchemy_url(url).startswith("sqlite"):
        return None
    path = url.split(":///", 1)[-1]
    return None if not path or path == ":memory:" else Path(path)


@contextmanager
def _opening(shown: str) -> Iterator[None]:
    """Errors of opening the store ``shown`` as one :class:`StoreError` naming it."""
    try:
        yield
    except StoreError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        raise StoreError(f"cannot open the store {shown}: {_explain(exc)}") from exc
    except ImportError as exc:  # a URL whose database driver is not installed
        raise StoreError(
            f"cannot open the store {shown}: its database driver is not installed ({exc}); the "
            "workbench ships the drivers of SQLite and PostgreSQL (psycopg)"
        ) from exc


#: Advisory lock key serialising schema creation/migration on PostgreSQL ("wbschema").
_PREPARE_LOCK = 0x7762736368656D61


def sqlalchemy_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` URLs go through psycopg 3 (SQLAlchemy's default
    PostgreSQL driver is psycopg2, which the workbench does not depend on)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def storage_option(shown: str) -> str:
    """`` --storage URL`` for a command line that has to reach the store shown as ``shown``
    (empty for the default store, which needs no option)."""
    return "" if shown == shown_url(default_store_url()) else f" --storage {shlex.quote(shown)}"


def shown_url(url: str) -> str:
    """A store's URL as messages and reports show it: the password masked, SQLAlchemy's
    driver tag left out (``postgresql://tuner:***@host/db``), so a log or a report page never
    holds a password."""
    try:
        parsed = make_url(url)
    except ArgumentError:  # not a URL SQLAlchemy can parse: keep what follows any credentials
        return url.split("@")[-1]
    if parsed.drivername.startswith("postgresql"):
        parsed = parsed.set(drivername="postgresql")
    return parsed.render_as_string(hide_password=True)


def _make_engine(url: str, lock_timeout_s: float, read_only: bool = False) -> Engine:
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        on_disk = bool(path) and path != ":memory:"
        if on_disk and Path(path).is_dir():  # ($WORKBENCH_STORE or a URL naming a directory)
            example = Path(path) / "store.sqlite"
            raise StoreError(f"{path} is a directory: a store is a SQLite file, e.g. {example}")
        if read_only and on_disk:
            if not Path(path).is_file():
                raise StoreError(f"no store at {path}")
            url = f"sqlite:///file:{path}?mode=ro&uri=true"  # SQLite itself refuses writes
            if not os.access(Path(path).parent, os.W_OK) and not Path(f"{path}-wal").exists():
                # reading a WAL-mode file needs a -shm file beside it, which a directory the
                # user may not write cannot take: with no WAL left to read, the file is all
                # there is, and SQLite reads it as it stands
                url += "&immutable=1"
        elif on_disk:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # wait this long for another writer's lock before failing with "database is locked"
        engine = create_engine(url, connect_args={"timeout": lock_timeout_s})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            if not read_only:  # (a store is written in WAL mode: reading it needs no change)
                _wal_mode(cur, lock_timeout_s)  # readers never block the writer
                cur.execute("PRAGMA synchronous=NORMAL")  # durable at every WAL checkpoint
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True)


def _wal_mode(cur: sqlite3.Cursor, lock_timeout_s: float) -> None:
    """Put the file in WAL mode. Switching a new file takes a lock SQLite does not wait for
    (it answered "database is locked" at once to 1 of 180 processes opening a new store
    together): retried until the lock timeout; on a file already in WAL mode it is a no-op."""
    deadline = time.monotonic() + lock_timeout_s
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def _explain(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc)
    if "locked" in text:
        return f"{text} (another process holds a write lock; for parallel workers use PostgreSQL)"
    if "file is not a database" in text or "malformed" in text:
        return f"{text} (the file is damaged or not a SQLite database)"
    return text
