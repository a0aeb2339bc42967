"""Schema migrations: one function per step from version N to N + 1.

A store older than the oldest step this workbench knows is refused (intact) with a message;
stores are never modified except by a complete, transactional migration.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import text
from sqlalchemy.engine import Connection

from workbench.store.errors import StoreError
from workbench.store.models import SCHEMA_VERSION, ComparisonVariant, StudySpace


def _add_replay_note(conn: Connection) -> None:
    """1 -> 2: ``studies.replay_note`` (empty for the studies already there)."""
    conn.execute(text("ALTER TABLE studies ADD COLUMN replay_note TEXT"))


def _add_run_drift(conn: Connection) -> None:
    """2 -> 3: ``runs.drift`` (empty for the runs already there)."""
    conn.execute(text("ALTER TABLE runs ADD COLUMN drift JSON"))


def _add_run_process(conn: Connection) -> None:
    """3 -> 4: ``runs.host``, ``runs.pid``, ``runs.pid_scope`` (unknown for the runs already
    there: they are judged by the study's lock alone, see ``Store.abandon_gone_runs``)."""
    for column in ("host VARCHAR(200)", "pid INTEGER", "pid_scope VARCHAR(100)"):
        conn.execute(text(f"ALTER TABLE runs ADD COLUMN {column}"))


def _add_run_phases(conn: Connection) -> None:
    """4 -> 5: ``runs.phases`` (unknown for the runs already there)."""
    conn.execute(text("ALTER TABLE runs ADD COLUMN phases JSON"))


def _add_comparison_variants(conn: Connection) -> None:
    """5 -> 6: the ``comparison_variants`` table (each configuration a baseline timed, such as
    CUTLASS's operators; none for the comparisons already there)."""
    ComparisonVariant.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]


def _add_study_spaces(conn: Connection) -> None:
    """6 -> 7: the ``study_spaces`` table (each study's space file and kernel source), filled
    for the studies whose space file still loads here and hashes as the study's; the others
    keep none, and their pages read the file where it is, as before."""
    from workbench.store.kept_space import keep_loadable_spaces

    StudySpace.__table__.create(conn, checkfirst=True)  # type: ignore[attr-defined]
    keep_loadable_spaces(conn)


#: version -> function migrating a connection from that version to the next one
STEPS: dict[int, Callable[[Connection], None]] = {
    1: _add_replay_note,
    2: _add_run_drift,
    3: _add_run_process,
    4: _add_run_phases,
    5: _add_comparison_variants,
    6: _add_study_spaces,
}


def migrate(conn: Connection, version: int) -> None:
    """Bring a store from ``version`` to :data:`SCHEMA_VERSION` inside the caller's transaction.

    Raises:
        StoreError: no migration path from ``version``.
    """
    while version < SCHEMA_VERSION:
        step = STEPS.get(version)
        if step is None:
            raise StoreError(
                f"the store has schema version {version}; this workbench reads version "
                f"{SCHEMA_VERSION} and has no migration from {version}: export it with the "
                "workbench that wrote it, or start a new store (another `storage`)"
            )
        step(conn)
        version += 1
