"""The store's schema (SQLAlchemy ORM): the same tables on SQLite and PostgreSQL.

Bump :data:`SCHEMA_VERSION` with every change and add a step to
:mod:`workbench.store.migrations`; a store from an older version is migrated by a writing open
(or ``workbench store upgrade``, which backs it up first), one from a newer version is refused.
"""

from __future__ import annotations

import datetime as dt
import enum
from typing import cast

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: 2: ``studies.replay_note`` (why a replayed recording is tuned on another objective, or that
#: it was cut short)
#: 3: ``runs.drift`` (the re-timings of a run's reference config, :mod:`workbench.search.drift`)
#: 4: ``runs.host``, ``runs.pid``, ``runs.pid_scope`` (the process a run is in, so that one killed
#: is found abandoned)
#: 5: ``runs.phases`` (where a run's wall time went: compile, verification, timing, idle...)
#: 6: ``comparison_variants`` (every configuration a baseline timed: CUTLASS operators)
#: 7: ``study_spaces`` (the space file and kernel source a study was made from, so that its
#: pages need neither: a store copied to another machine reports in full)
SCHEMA_VERSION = 7


class RunStatus(enum.Enum):
    """What became of a run (``runs.status``)."""

    RUNNING = "running"  #: started, not finished (or its process was killed)
    FINISHED = "finished"  #: its loop ended: budget, time, patience, exhausted space
    INTERRUPTED = "interrupted"  #: Ctrl-C or SIGTERM
    FAILED = "failed"  #: an error ended it (the store, the runner, the database)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    pass


def table_of(model: type[Base]) -> Table:
    """A mapped class's table (typed: ``__table__`` is a FromClause to the type checker)."""
    return cast(Table, model.__table__)


class Meta(Base):
    """Key/value facts about the store itself (``schema_version``)."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Environment(Base):
    """A machine state measurements come from: GPU, driver, toolkit, clocks, commit."""

    __tablename__ = "environments"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    gpu_name: Mapped[str] = mapped_column(String(200))
    gpu_uuid: Mapped[str | None] = mapped_column(String(100))
    cc: Mapped[int | None] = mapped_column(Integer)
    driver: Mapped[str | None] = mapped_column(String(50))
    cuda: Mapped[str | None] = mapped_column(String(50))
    toolkit: Mapped[str | None] = mapped_column(String(50))
    sm_clock_max_mhz: Mapped[int | None] = mapped_column(Integer)
    memory_clock_mhz: Mapped[int | None] = mapped_column(Integer)
    hostname: Mapped[str | None] = mapped_column(String(200))
    git_commit: Mapped[str | None] = mapped_column(String(64))
    git_dirty: Mapped[bool | None] = mapped_column(Boolean)
    replay_source: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Study(Base):
    """One search: a kernel (space), a problem shape, a device class."""

    __tablename__ = "studies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(400), unique=True)
    kernel: Mapped[str] = mapped_column(String(200))
    shape_label: Mapped[str] = mapped_column(String(200))
    device_key: Mapped[str] = mapped_column(String(200))
    arch: Mapped[str | None] = mapped_column(String(20))
    space_path: Mapped[str | None] = mapped_column(Text)
    space_sha256: Mapped[str | None] = mapped_column(String(64))
    parameters: Mapped[list] = mapped_column(JSON)  #: [[name, [values...]], ...]
    objective: Mapped[str] = mapped_column(String(50), default="time")
    unit: Mapped[str] = mapped_column(String(20), default="ms")
    replay_source: Mapped[str | None] = mapped_column(Text)
    #: what the recording's reader said about it (another objective, a truncated file)
    replay_note: Mapped[str | None] = mapped_column(Text)
    recorded_optimum: Mapped[float | None] = mapped_column(Float)
    work: Mapped[dict | None] = mapped_column(JSON)  #: {"flops": x, "bytes": y, "unit": "GB/s"}
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    runs: Mapped[list[Run]] = relationship(back_populates="study")


class StudySpace(Base):
    """The space file and kernel source a study was made from, as they were then (``workbench
    store upgrade`` keeps them for older studies whose files still hash as the study's).

    What the study's pages read before the files at ``space_path`` and ``source_path``: the
    work model (throughput, roofline), launch geometry and the macros of the build header
    come from here wherever the store is. ``space_sha256`` is the study's hash of the two.
    """

    __tablename__ = "study_spaces"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), unique=True)
    space_path: Mapped[str] = mapped_column(Text)  #: where the space file was
    space_text: Mapped[str] = mapped_column(Text)
    source_path: Mapped[str] = mapped_column(Text)  #: where the kernel source was
    source: Mapped[bytes] = mapped_column(LargeBinary)
    space_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Run(Base):
    """One invocation of ``workbench tune`` (or record, or run) on a study.

    ``status``: running, finished, interrupted, failed, or abandoned (its process was killed
    without saying how it ended: found so when the study is next opened, see
    :meth:`workbench.store.Store.abandon_gone_runs`).
    """

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environments.id"))
    kind: Mapped[str] = mapped_column(String(20), default="tune")
    label: Mapped[str | None] = mapped_column(String(200))
    sampler: Mapped[str | None] = mapped_column(String(50))
    seed: Mapped[int | None] = mapped_column(Integer)
    budget: Mapped[dict | None] = mapped_column(JSON)
    command: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default=RunStatus.RUNNING.value)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    #: re-timings of the run's reference config: [{after, config, verdict, ratio, ...}]
    drift: Mapped[list | None] = mapped_column(JSON)
    #: the process running it: host name, pid, and where that pid names one process (this boot
    #: of the kernel and this pid namespace, see :func:`workbench.store.processes.process_scope`)
    host: Mapped[str | None] = mapped_column(String(200))
    pid: Mapped[int | None] = mapped_column(Integer)
    pid_scope: Mapped[str | None] = mapped_column(String(100))
    #: seconds per phase of the run's wall time ({"compile": 1.2, "timing": 0.4, ...}),
    #: :class:`workbench.runners.phases.PhaseTimes`
    phases: Mapped[dict | None] = mapped_column(JSON)
    study: Mapped[Study] = relationship(back_populates="runs")


class Evaluation(Base):
    """The measurement of one config in one study (answered from here on repeats).

    Raw samples are kept whole, as JSON arrays beside the summary: one row per evaluation
    keeps the per-trial write to a single insert.
    """

    __tablename__ = "evaluations"
    __table_args__ = (
        UniqueConstraint("study_id", "config_key"),
        Index("ix_evaluations_study_value", "study_id", "value"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    config_key: Mapped[str] = mapped_column(String(1000))  #: ``BLOCK=256,ITEMS=4``
    params: Mapped[dict] = mapped_column(JSON)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environments.id"))
    outcome: Mapped[str] = mapped_column(String(20))
    value: Mapped[float | None] = mapped_column(Float)
    ci_low: Mapped[float | None] = mapped_column(Float)
    ci_high: Mapped[float | None] = mapped_column(Float)
    n_samples: Mapped[int] = mapped_column(Integer, default=0)
    samples: Mapped[list | None] = mapped_column(JSON)  #: every timing sample (ms)
    sm_clock_mhz: Mapped[list | None] = mapped_column(JSON)  #: SM clock per sample
    throttled: Mapped[list | None] = mapped_column(JSON)  #: throttling flag per sample
    reason: Mapped[str] = mapped_column(Text, default="")
    compile_seconds: Mapped[float | None] = mapped_column(Float)
    verify_max_error: Mapped[float | None] = mapped_column(Float)
    replayed_from: Mapped[str | None] = mapped_column(Text)
    metrics: Mapped[dict | None] = mapped_column(JSON)
    elapsed_s: Mapped[float | None] = mapped_column(Float)  #: wall time since the run started
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CompileRecord(Base):
    """What the compiler said about a config: resources and the log (failures included)."""

    __tablename__ = "compile_results"
    __table_args__ = (UniqueConstraint("study_id", "config_key", "arch"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"))
    config_key: Mapped[str] = mapped_column(String(1000))
    arch: Mapped[str] = mapped_column(String(20))
    cache_key: Mapped[str | None] = mapped_column(String(64))
    ok: Mapped[bool] = mapped_column(Boolean)
    registers: Mapped[int | None] = mapped_column(Integer)
    static_smem: Mapped[int | None] = mapped_column(Integer)
    stack_frame: Mapped[int | None] = mapped_column(Integer)
    spill_stores: Mapped[int | None] = mapped_column(Integer)
    spill_loads: Mapped[int | None] = mapped_column(Integer)
    occupancy: Mapped[float | None] = mapped_column(Float)
    seconds: Mapped[float | None] = mapped_column(Float)
    log: Mapped[str] = mapped_column(Text, default="")


class Profile(Base):
    """Hardware-counter metrics of one kernel launch (``workbench profile``), or the
    event-timing fallback when Nsight Compute could not read counters.

    ``metrics`` maps full Nsight Compute metric names to numbers (None where the report held
    NaN); ``missing`` lists the names the set asked for and the profile lacks. Added without a
    schema-version bump: a new table needs no migration (``create_all`` adds it to an older
    store, and an older workbench ignores it).
    """

    __tablename__ = "profiles"
    __table_args__ = (Index("ix_profiles_kernel_config", "kernel", "config_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"))
    kernel: Mapped[str] = mapped_column(String(200))  #: workbench kernel, or the report's name
    config_key: Mapped[str | None] = mapped_column(String(1000))
    params: Mapped[dict | None] = mapped_column(JSON)
    shape_label: Mapped[str | None] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(20))  #: ncu, import, event-timing
    source_file: Mapped[str | None] = mapped_column(Text)
    source_sha256: Mapped[str | None] = mapped_column(String(64))
    report_index: Mapped[int | None] = mapped_column(Integer)  #: kernel position in the report
    function_name: Mapped[str | None] = mapped_column(Text)
    demangled_name: Mapped[str | None] = mapped_column(Text)
    mangled_name: Mapped[str | None] = mapped_column(Text)
    device: Mapped[str | None] = mapped_column(String(200))
    chip: Mapped[str | None] = mapped_column(String(20))
    cc: Mapped[int | None] = mapped_column(Integer)
    metric_set: Mapped[str] = mapped_column(String(20))
    metrics: Mapped[dict] = mapped_column(JSON)
    strings: Mapped[dict | None] = mapped_column(JSON)
    missing: Mapped[list | None] = mapped_column(JSON)
    notes: Mapped[list | None] = mapped_column(JSON)
    command: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RegressRun(Base):
    """One ``workbench regress record``: a kernel's tracked configs measured (or replayed) once.

    Owned by :mod:`workbench.regress`; ``replayed_from`` names the recording when the samples
    were not measured by that command. Added without a schema-version bump: new tables need no
    migration (``create_all`` adds them to an older store).
    """

    __tablename__ = "regress_runs"
    __table_args__ = (Index("ix_regress_runs_kernel", "kernel", "created_at"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kernel: Mapped[str] = mapped_column(String(200))
    label: Mapped[str | None] = mapped_column(String(200))
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environments.id"))
    shape_set: Mapped[str | None] = mapped_column(String(200))
    replayed_from: Mapped[str | None] = mapped_column(Text)
    command: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RegressMeasurement(Base):
    """One config on one shape in a regression run, with every raw sample and SM clock."""

    __tablename__ = "regress_measurements"
    __table_args__ = (UniqueConstraint("run_id", "shape_label", "config_key"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("regress_runs.id"))
    shape_label: Mapped[str] = mapped_column(String(200))
    shape: Mapped[dict | None] = mapped_column(JSON)
    config_key: Mapped[str] = mapped_column(String(1000))
    params: Mapped[dict] = mapped_column(JSON)
    origin: Mapped[str] = mapped_column(String(20))  #: why it was measured: best, default, ...
    outcome: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    median: Mapped[float | None] = mapped_column(Float)
    ci_low: Mapped[float | None] = mapped_column(Float)
    ci_high: Mapped[float | None] = mapped_column(Float)
    n_samples: Mapped[int] = mapped_column(Integer, default=0)
    samples: Mapped[list | None] = mapped_column(JSON)  #: every timing sample (ms)
    sm_clock_mhz: Mapped[list | None] = mapped_column(JSON)  #: SM clock per sample
    throttled: Mapped[list | None] = mapped_column(JSON)  #: throttling flag per sample
    replayed_from: Mapped[str | None] = mapped_column(Text)


class Comparison(Base):
    """One contender on one shape in one ``workbench compare``: the tuned config
    (``contender = 'tuned'``) or a library baseline (``cublas``, ``cublaslt``, ``cub``, ...).

    Owned by :mod:`workbench.compare`. Rows of one command share ``batch``; ``status`` is ok,
    wrong, failed or skipped (``reason`` says why). ``speedup`` is the baseline's median over the
    tuned config's (None on the tuned row and unless both are ok); ``bound_fraction`` is achieved
    over attainable under the ceilings named in ``ceilings``. Added without a schema-version
    bump: a new table needs no migration (``create_all`` adds it to an older store).
    """

    __tablename__ = "comparisons"
    __table_args__ = (Index("ix_comparisons_kernel", "kernel", "created_at"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    batch: Mapped[str] = mapped_column(String(40))
    kernel: Mapped[str] = mapped_column(String(200))
    study_id: Mapped[int | None] = mapped_column(ForeignKey("studies.id"))
    device: Mapped[str | None] = mapped_column(String(200))
    shape_label: Mapped[str] = mapped_column(String(200))
    shape: Mapped[dict] = mapped_column(JSON)
    config_key: Mapped[str] = mapped_column(String(1000))
    params: Mapped[dict] = mapped_column(JSON)
    config_origin: Mapped[str] = mapped_column(Text)
    contender: Mapped[str] = mapped_column(String(50))
    title: Mapped[str] = mapped_column(Text)
    library: Mapped[str | None] = mapped_column(Text)  #: library and version that ran
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    median_ms: Mapped[float | None] = mapped_column(Float)
    ci_low_ms: Mapped[float | None] = mapped_column(Float)
    ci_high_ms: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[list | None] = mapped_column(JSON)  #: every timing sample (ms)
    sm_clock_mhz: Mapped[list | None] = mapped_column(JSON)
    throttled: Mapped[list | None] = mapped_column(JSON)
    throughput: Mapped[float | None] = mapped_column(Float)
    unit: Mapped[str | None] = mapped_column(String(20))  #: of ``throughput``: TOPS, GB/s, ...
    bound_fraction: Mapped[float | None] = mapped_column(Float)
    bound: Mapped[str | None] = mapped_column(String(20))  #: compute or memory
    ceilings: Mapped[list | None] = mapped_column(JSON)  #: labels of the roofs used
    speedup: Mapped[float | None] = mapped_column(Float)
    verify_max_error: Mapped[float | None] = mapped_column(Float)
    command: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ComparisonVariant(Base):
    """One configuration of a baseline that offers several (a CUTLASS operator: tile, cluster)
    on one shape in one ``workbench compare``; the baseline's ``comparisons`` row (same
    ``batch``, ``shape_label``, ``device`` and ``contender``) is the fastest correct one
    (``chosen``).

    Owned by :mod:`workbench.compare`. ``compile_s`` is what the library spent compiling it
    before it ran (``compile_note``: JIT, loaded from the cache, compiled earlier in this run).
    Added without a schema-version bump: a new table needs no migration.
    """

    __tablename__ = "comparison_variants"
    __table_args__ = (Index("ix_comparison_variants_batch", "batch", "shape_label"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    batch: Mapped[str] = mapped_column(String(40))
    kernel: Mapped[str] = mapped_column(String(200))
    device: Mapped[str | None] = mapped_column(String(200))
    shape_label: Mapped[str] = mapped_column(String(200))
    contender: Mapped[str] = mapped_column(String(50))
    variant: Mapped[str] = mapped_column(Text)  #: the library's name of the configuration
    label: Mapped[str] = mapped_column(Text)  #: short: ``tile 128x256x64, cluster 2x1x1``
    config: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    median_ms: Mapped[float | None] = mapped_column(Float)
    ci_low_ms: Mapped[float | None] = mapped_column(Float)
    ci_high_ms: Mapped[float | None] = mapped_column(Float)
    samples: Mapped[list | None] = mapped_column(JSON)  #: every timing sample (ms)
    compile_s: Mapped[float | None] = mapped_column(Float)
    compile_note: Mapped[str] = mapped_column(Text, default="")
    chosen: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
