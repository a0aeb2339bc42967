"""The space file and kernel source a study was made from, kept in the store with it
(``study_spaces``, schema 7).

A study's pages need its space: the work model (throughput, the roofline), the launch
geometry and the macros of the build header. The space file lives at an absolute path on the
machine that tuned; a store copied elsewhere (a lease's store brought home) would lose all of
that. So the store keeps the file's text and the source's bytes when the study is made, and
the pages rebuild the space from them (:func:`~workbench.spaces.loader.load_kept_space`)
before they look for the file. Nothing kept is ever run: a Numba kernel's Python is compiled
only from its own file.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from workbench.errors import WorkbenchError
from workbench.spaces.model import SpaceSpec, space_sha256
from workbench.store.models import Study, StudySpace
from workbench.store.records import StudyInfo
from workbench.store.store import Store, _get_or_create


@dataclass(frozen=True)
class KeptSpace:
    """A study's space file and kernel source as they were when the study was made."""

    space_path: str
    space_text: str
    source_path: str
    source: bytes
    space_sha256: str  #: of the two, as :func:`~workbench.spaces.model.space_sha256` hashes

    def spec(self) -> SpaceSpec:
        """The space rebuilt from the kept text (no file is read).

        Raises:
            SpaceFileError: this workbench no longer reads the text as a space file.
        """
        from workbench.spaces.loader import load_kept_space

        return load_kept_space(
            self.space_path, self.space_text, Path(self.source_path), self.source
        )

    def row(self, study_id: int) -> dict[str, object]:
        return {
            "study_id": study_id,
            "space_path": self.space_path,
            "space_text": self.space_text,
            "source_path": self.source_path,
            "source": self.source,
            "space_sha256": self.space_sha256,
        }


def kept_space_of(spec: SpaceSpec) -> KeptSpace | None:
    """What a store keeps of ``spec``: the text it was parsed from and its source as read now
    (None: the source cannot be read)."""
    try:
        source = spec.source_bytes()
    except OSError:
        return None
    # hashed from the bytes kept, not from the file read again (it may be saved meanwhile)
    digest = space_sha256(replace(spec, kept_source=source))
    return KeptSpace(str(spec.path), spec.text, str(spec.source), source, digest)


def keep_space(store: Store, study: StudyInfo, kept: KeptSpace | None) -> bool:
    """Keep ``kept`` with ``study``, unless the study has its space already or ``kept`` is not
    the space it was made from (another hash: the file changed since). Returns whether the
    study has ``kept`` now."""
    if kept is None or study.space_sha256 not in (None, kept.space_sha256):
        return False
    with store.session() as s:
        row = _get_or_create(
            s,
            select(StudySpace).where(StudySpace.study_id == study.id),
            lambda: StudySpace(**kept.row(study.id)),
        )
        return row.space_sha256 == kept.space_sha256


def kept_space(store: Store, study: StudyInfo) -> KeptSpace | None:
    """The space kept with ``study`` (None: none was, e.g. a recorded space, or a study stored
    before schema 7 whose files were gone by ``store upgrade``).

    Raises:
        StoreError: the table is damaged.
    """
    with store.reading("study_spaces"), store.session() as s:
        row = s.scalar(select(StudySpace).where(StudySpace.study_id == study.id))
        if row is None:
            return None
        return KeptSpace(
            row.space_path,
            row.space_text,
            row.source_path,
            bytes(row.source),
            row.space_sha256,
        )


def keep_loadable_spaces(conn: Connection) -> int:
    """Keep the space of every study that has none, where its space file loads now and hashes
    as the study's (a file changed since is not what was tuned: that study keeps none, and its
    pages read the file as before). Returns how many were kept. Run by the migration to schema
    7, inside its transaction."""
    from workbench.spaces.loader import load_space

    have = set(conn.scalars(select(StudySpace.study_id)))
    rows = conn.execute(select(Study.id, Study.space_path, Study.space_sha256)).all()
    kept = 0
    for study_id, path, digest in rows:
        if study_id in have or not path:
            continue
        try:
            found = kept_space_of(load_space(path))
        except (WorkbenchError, OSError, ValueError):
            continue  # gone, unreadable, or no longer a space file to this workbench
        if found is None or digest not in (None, found.space_sha256):
            continue
        conn.execute(insert(StudySpace).values(**found.row(study_id)))
        kept += 1
    return kept
