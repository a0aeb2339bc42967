"""Stored rows to records and back by field name (workbench.store.mapping): every record read
back from the store maps through it, and a field without a column is refused, not dropped."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from sqlalchemy import select

from workbench.compare.storage import ComparisonRecord
from workbench.errors import InternalError
from workbench.profile.storage import ProfileRecord, load_profiles, save_profile
from workbench.runners.base import DeviceInfo
from workbench.store import Store, StudyInfo
from workbench.store.environments import EnvironmentInfo, environment_info
from workbench.store.mapping import record_from_row, row_from_record
from workbench.store.models import Comparison, Environment, Profile, Study


@pytest.mark.parametrize(
    ("record", "model"),
    [
        (ProfileRecord, Profile),
        (ComparisonRecord, Comparison),
        (EnvironmentInfo, Environment),
        (StudyInfo, Study),
    ],
)
def test_every_field_of_a_stored_record_has_its_column(record: type, model: type) -> None:
    columns = {c.key for c in model.__table__.columns}
    assert {f.name for f in dataclasses.fields(record)} <= columns


def test_a_profile_round_trips_with_its_empty_and_absent_values(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    given = ProfileRecord(
        kernel="gemm_int8",
        source="ncu",
        metric_set="roofline",
        metrics={"gpu__time_duration.sum": 1200.0, "dram__bytes.sum": float("nan")},
        params={},  # a kernel with no parameters: {} stays {}
        missing=("l1tex__t_bytes.sum",),
    )
    saved = save_profile(store, given)
    with store.session() as s:
        row = s.scalars(select(Profile).where(Profile.id == saved)).one()
        assert row.strings is None and row.notes is None  # empty containers stored as NULL
        assert row.params == {} and row.metrics["dram__bytes.sum"] is None  # NaN: no JSON
    (back,) = load_profiles(store, kernel="gemm_int8")
    assert back.id == saved and back.created_at is not None
    assert back.strings == {} and back.notes == () and back.missing == ("l1tex__t_bytes.sum",)
    assert back.params == {} and back.config_key is None
    assert back.metrics == {"gpu__time_duration.sum": 1200.0, "dram__bytes.sum": None}


def test_an_environment_reads_back_by_field_name(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    env = store.environment(DeviceInfo("NVIDIA H200", cc=90, driver="580.95"), git_commit="a" * 40)
    with store.session() as s:
        info = environment_info(s.get(Environment, env))  # type: ignore[arg-type]
    assert (info.id, info.gpu_name, info.cc, info.driver) == (env, "NVIDIA H200", 90, "580.95")
    assert info.git_commit == "a" * 40 and info.replay_source is None


def test_a_field_without_a_column_is_refused_not_dropped() -> None:
    @dataclasses.dataclass(frozen=True)
    class Wider:
        gpu_name: str
        fan_speed: int | None = None  # no such column

    row = Environment(fingerprint="f", gpu_name="NVIDIA H200")
    with pytest.raises(InternalError, match=r"Wider.fan_speed has no column in Environment"):
        record_from_row(Wider, row)
    assert record_from_row(Wider, row, fan_speed=3) == Wider("NVIDIA H200", 3)
    with pytest.raises(InternalError, match=r"Wider.fan_speed has no column in Environment"):
        row_from_record(Environment, Wider("NVIDIA H200", 3))
    made = row_from_record(Environment, Wider("NVIDIA H200"), skip=("fan_speed",), fingerprint="f")
    assert (made.gpu_name, made.fingerprint) == ("NVIDIA H200", "f")
