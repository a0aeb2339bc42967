"""Nsight Compute profiles a GPU run kept beside a kernel's recordings, imported by the replay
of that run.

``workbench profile K --json`` on a GPU prints each profiled launch: kernel, config, shape,
device, metric set and the ``.ncu-rep`` file. Kept in ``recordings/K/profiles/``, with the
reports it names in ``recordings/K/ncu/``, it is what a replayed tune of K imports into the
store, as ``workbench profile --import`` does, at the shape and config the listing names and
linked to the replayed study of that shape (the report holds no shape). Each stored profile's
``command`` names the report it was read from (``replayed from``, as a replayed comparison's
does) and a note says that it was replayed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workbench.compare.replayed import REPLAYED_FROM
from workbench.errors import WorkbenchError
from workbench.profile.importing import import_report
from workbench.profile.metrics import MetricSet
from workbench.profile.storage import ProfileRecord, find_import, save_profile
from workbench.spaces.model import base_kernel
from workbench.store import Store, StudyInfo

#: The folder of a kernel's recordings that holds the kept ``workbench profile --json`` files.
KEPT_FOLDER = "profiles"
#: The folder beside it that holds the ``.ncu-rep`` files they name.
REPORTS_FOLDER = "ncu"


class KeptProfileError(WorkbenchError):
    """A kept profile listing cannot be read, or names a report that is not kept."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


@dataclass(frozen=True)
class KeptProfile:
    """One launch a GPU run profiled, as its ``workbench profile --json`` listing names it."""

    listing: Path
    report: Path  #: the kept ``.ncu-rep`` file
    kernel: str
    config_key: str
    shape_label: str
    device: str
    metric_set: MetricSet

    @property
    def source(self) -> str:
        """Device and report file, as a replayed evaluation names its recording."""
        return f"{self.device} ({self.report.name})"


def kept_profiles(recordings: Path) -> list[KeptProfile]:
    """The launches listed in ``recordings/profiles/*.json`` (none when there is no folder).

    Raises:
        KeptProfileError: a listing is damaged, or names a report not kept in ``ncu/``.
    """
    folder = recordings / KEPT_FOLDER
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [p for path in paths for p in _listing(path, recordings / REPORTS_FOLDER)]


def _listing(path: Path, reports: Path) -> list[KeptProfile]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return [_kept(path, reports, entry) for entry in doc["profiles"]]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KeptProfileError(path, f"cannot read it as JSON ({exc})") from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise KeptProfileError(
            path,
            f"not a listing of profiles (profile's JSON document; {type(exc).__name__}: {exc})",
        ) from exc


def _kept(path: Path, reports: Path, entry: dict[str, Any]) -> KeptProfile:
    report = reports / Path(str(entry["source_file"])).name  # (the run's own path: elsewhere)
    if not report.is_file():
        raise KeptProfileError(path, f"names {report.name}, which is not kept in {reports}")
    return KeptProfile(
        listing=path,
        report=report,
        kernel=str(entry["kernel"]),
        config_key=str(entry["config"]),
        shape_label=str(entry["shape"]),
        device=str(entry["device"]),
        metric_set=MetricSet(entry["metric_set"]),
    )


def study_of(kept: KeptProfile, studies: list[StudyInfo]) -> StudyInfo | None:
    """The study among ``studies`` of the launch's kernel (or a variant of it), shape and
    device, or None."""
    for st in studies:
        if (
            base_kernel(st.kernel) == base_kernel(kept.kernel)
            and st.shape_label == kept.shape_label
            and st.device_key == kept.device
        ):
            return st
    return None


def import_kept_profile(store: Store, kept: KeptProfile, study: StudyInfo) -> ProfileRecord | None:
    """Import the kept launch into the store, linked to ``study``; None when it is already
    there (a second replay stores nothing).

    Raises:
        ReportError: the report cannot be read.
        KeptProfileError: the report holds no launch of the listed config.
        StoreError: the database failed.
    """
    _, records = import_report(kept.report, metric_set=kept.metric_set)
    found = [r for r in records if r.kernel == kept.kernel and r.config_key == kept.config_key]
    if not found:
        raise KeptProfileError(
            kept.listing, f"{kept.report.name} holds no launch of {kept.kernel} {kept.config_key}"
        )
    record = replace(
        found[0],
        shape_label=kept.shape_label,
        study_id=study.id,
        command=f"{REPLAYED_FROM}{kept.source}",
        notes=(
            *found[0].notes,
            f"replayed: profiled with Nsight Compute on {kept.device} and kept with the run's "
            f"recordings ({kept.listing.name}); nothing ran on this machine",
        ),
    )
    if find_import(store, record) is not None:
        return None
    return replace(record, id=save_profile(store, record))
