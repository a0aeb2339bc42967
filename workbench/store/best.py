"""The best config in the store: one rule, asked of one study, of several, or of a list.

The rule (:func:`rank_key`), the same in SQL and in memory:

1. only a correct evaluation can be best: outcome ``ok`` with a value. Wrong, failed, timed
   out and infeasible evaluations never are;
2. measured before replayed: a value this workbench timed (warm-up, L2 flush, SM clock per
   sample) ranks before one read from a recording, whose tool may have timed otherwise (a
   Kernel Tuner cache without an L2 flush reads faster than the same kernel here); a replayed
   value is best only where nothing was measured;
3. the lowest value (the median time of one call);
4. among equal medians, the lowest upper bound of the confidence interval (the tighter claim
   to be that fast; an evaluation without an interval comes after those with one);
5. then the earliest committed (the lowest evaluation id; in a list, the first).

Which studies a question is about is each caller's choice, said by a :class:`StudySelection`:
the kernel and how its problem variants count (:class:`Variants`), and optionally the shape
and the device. Compile-only studies measured nothing and are never selected.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.sql import Select

from workbench.runners.base import RankKey, TrialOutcome
from workbench.spaces.model import base_kernel
from workbench.store.models import Evaluation
from workbench.store.records import StoredEvaluation, StudyInfo, stored_evaluation
from workbench.store.store import Store


class Variants(enum.Enum):
    """How a kernel name selects studies of its problem variants (``reduce[OP=max]``)."""

    #: the studies of exactly this name: ``reduce[OP=max]`` its own, ``reduce`` the plain one's
    EXACT = "exact"
    #: a pinned name takes its variant only; a plain name takes the kernel and every variant
    AS_NAMED = "as named"
    #: every study of the kernel's base, whatever variant either names (``reduce[OP=max]``
    #: takes ``reduce`` and ``reduce[OP=sum]`` too)
    FAMILY = "family"

    def matches(self, stored: str, kernel: str) -> bool:
        """Whether a study of ``stored`` answers a question about ``kernel``."""
        if self is Variants.EXACT or (self is Variants.AS_NAMED and "[" in kernel):
            return stored == kernel
        if self is Variants.AS_NAMED:
            return base_kernel(stored) == kernel
        return base_kernel(stored) == base_kernel(kernel)


@dataclass(frozen=True)
class StudySelection:
    """Which studies a "best" question is about: ``kernel`` under ``variants``, at
    ``shape_label`` and on ``device_key`` when given (None: any)."""

    kernel: str
    variants: Variants
    shape_label: str | None = None
    device_key: str | None = None

    def matches(self, study: StudyInfo) -> bool:
        return (
            not study.compile_only
            and self.variants.matches(study.kernel, self.kernel)
            and self.shape_label in (None, study.shape_label)
            and self.device_key in (None, study.device_key)
        )


def select_studies(store: Store, selection: StudySelection) -> list[StudyInfo]:
    """The measured studies ``selection`` names, oldest first.

    Raises:
        StoreError: the database failed.
    """
    return [s for s in store.studies() if selection.matches(s)]


def rank_key(ev: StoredEvaluation) -> RankKey:
    """The rule as a sort key for correct evaluations (a stable sort keeps the earliest first
    among equals): measured first, then median, then the CI's upper bound (the one key of
    runners/base.py, which a recording's optimum uses too)."""
    return ev.measurement.rank_key()


def is_candidate(ev: StoredEvaluation) -> bool:
    """Correct, with a value: the only evaluations that can be best."""
    return ev.measurement.correct


def ranked(evaluations: Iterable[StoredEvaluation]) -> list[StoredEvaluation]:
    """The correct ``evaluations``, best first (the rule; equals keep their order, so a list in
    commit order gives the earliest first)."""
    return sorted((e for e in evaluations if is_candidate(e)), key=rank_key)


def best_of(evaluations: Iterable[StoredEvaluation]) -> StoredEvaluation | None:
    """The best of ``evaluations`` under the rule, or None when none is correct."""
    found = ranked(evaluations)
    return found[0] if found else None


def _best_query(study_ids: Sequence[int]) -> Select:
    """The rule in SQL: correct evaluations of these studies, best first."""
    return (
        select(Evaluation)
        .where(
            Evaluation.study_id.in_(list(study_ids)),
            Evaluation.outcome == TrialOutcome.OK.value,
            Evaluation.value.is_not(None),
        )
        .order_by(
            Evaluation.replayed_from.is_not(None),
            Evaluation.value,
            Evaluation.ci_high.is_(None),
            Evaluation.ci_high,
            Evaluation.id,
        )
        .limit(1)
    )


def study_best(store: Store, study: StudyInfo) -> StoredEvaluation | None:
    """The best evaluation of one study (with its samples), or None when it has none correct:
    one query, not a read of the study.

    Raises:
        StoreError: the database failed.
    """
    found = best_across(store, [study])
    return found[1] if found else None


def best_across(
    store: Store, studies: Sequence[StudyInfo]
) -> tuple[StudyInfo, StoredEvaluation] | None:
    """The best evaluation of all ``studies`` together, and its study; None when none has a
    correct one.

    Raises:
        StoreError: the database failed.
    """
    if not studies:
        return None
    by_id = {s.id: s for s in studies}
    with store.reading("evaluations"), store.session() as s:
        ev = s.scalars(_best_query(list(by_id))).first()
        return None if ev is None else (by_id[ev.study_id], stored_evaluation(-1, ev, True))


def best_selected(
    store: Store, selection: StudySelection
) -> tuple[StudyInfo, StoredEvaluation] | None:
    """The best evaluation of the studies ``selection`` names, and its study (None: none has
    a correct evaluation).

    Raises:
        StoreError: the database failed.
    """
    return best_across(store, select_studies(store, selection))
