"""``workbench regress`` end to end on replayed recordings with real GPU timing noise (no GPU)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, needs_caches
from recording_helpers import record_space

from workbench.gpu import probe_gpu
from workbench.regress.noise import SampleSet, draw_run
from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.spaces import Space, load_space
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("private_dirs")

H200 = DeviceInfo(name="NVIDIA H200", cc=90, driver="550.54.15", cuda="12.4", toolkit="nvrtc 13.0")


def recording(
    project: Path,
    name: str,
    one_percent_noise: list[SampleSet],
    *,
    device: DeviceInfo = H200,
    slower: float = 1.0,
    seed: int = 0,
) -> Path:
    """A recording of the tiny space: every config's samples are a real config's samples,
    resampled and scaled to a config-dependent median, times ``slower``."""
    rng = np.random.default_rng(seed)
    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    entries = []
    for i, c in enumerate(space.iter_valid()):
        real = one_percent_noise[i % len(one_percent_noise)].samples
        target = 1.0 + c["BLOCK"] / 1000 + c["SCALE"] + c["WAVES"] / 100
        factor = target / float(np.median(real)) * slower
        samples = draw_run(real, rng, n=64, factor=factor)
        entries.append(
            (
                c,
                Measurement(
                    TrialOutcome.OK,
                    value=float(np.median(samples)),
                    samples=tuple(float(x) for x in samples),
                ),
            )
        )
    return record_space(space, project / name, entries, device=device)


def record(project: Path, rec: Path, *extra: str) -> dict:
    code, out, err = invoke(
        "regress",
        "record",
        "tiny",
        "--spaces",
        str(project / "spaces"),
        "--replay",
        str(rec),
        "--json",
        *extra,
    )
    assert code == 0, err
    return json.loads(out)


def check_json(*extra: str) -> tuple[int, dict, str]:
    code, out, err = invoke("regress", "check", "--json", *extra)
    return code, (json.loads(out) if out.strip() else {}), err


def test_identical_replays_are_the_same_and_exit_0(
    project: Path, one_percent_noise: list[SampleSet]
) -> None:
    first = record(project, recording(project, "a.json", one_percent_noise), "--label", "base")
    assert first["replayed_from"] and "NVIDIA H200" in first["replayed_from"]
    (m,) = first["measurements"]
    assert m["origin"] == "default" and m["samples"] == 64  # no tune study yet: the default
    record(project, recording(project, "b.json", one_percent_noise, seed=1))
    code, doc, _ = check_json()
    assert code == 0
    assert doc["exit_status"] == 0 and doc["regressions"] == 0
    assert doc["baseline"]["label"] == "base" and doc["candidate"]["id"] == 2
    (row,) = doc["rows"]
    assert row["verdict"] == "same" and row["samples"] == [64, 64]
    assert row["ci"][0] <= row["ratio"] <= row["ci"][1] and row["threshold"] >= 0.02
    assert doc["rule"]["alpha"] == 0.002 and doc["rule"]["floor"] == 0.02


def test_a_slowdown_after_a_driver_upgrade_exits_1_and_suggests_retuning(
    project: Path, one_percent_noise: list[SampleSet]
) -> None:
    code, out, err = invoke(
        "tune",
        "tiny",
        "--spaces",
        str(project / "spaces"),
        "--replay",
        str(recording(project, "a.json", one_percent_noise)),
        "--budget",
        "30",
    )
    assert code == 0, err
    base = record(project, project / "a.json", "--label", "base")
    assert [(m["config"], m["origin"]) for m in base["measurements"]] == [
        ("BLOCK=32,SCALE=1,WAVES=1", "best")  # the tune study's best
    ]
    upgraded = DeviceInfo(
        name="NVIDIA H200", cc=90, driver="560.35.03", cuda="12.6", toolkit="nvrtc 13.0"
    )
    rec_b = recording(project, "b.json", one_percent_noise, device=upgraded, slower=1.06, seed=1)
    record(project, rec_b, "--label", "driver-560")
    code, out, _ = invoke("regress", "check", "--baseline", "base", "--candidate", "driver-560")
    assert code == 1
    assert "slower" in out and "re-tune" in out.lower() and "560.35.03" in out
    code, doc, _ = check_json("--baseline", "label:base")
    assert code == 1 and doc["exit_status"] == 1 and doc["regressions"] == 1
    (row,) = doc["rows"]
    assert row["verdict"] == "slower" and row["ratio"] == pytest.approx(1.06, abs=0.015)
    assert row["p_value"] < 0.002 and row["ci"][0] > 1.02
    fields = {c["field"] for c in doc["environment_changes"]}
    assert {"driver", "cuda"} <= fields
    # the candidate was replayed: the hint searches its recording (any recording can be)
    assert "workbench tune --replay b.json" in doc["hint"]


def test_previous_configs_are_kept_after_a_retune(
    project: Path, one_percent_noise: list[SampleSet]
) -> None:
    rec = recording(project, "a.json", one_percent_noise)
    record(project, rec)  # no study: the default config
    invoke(
        "tune", "tiny", "--spaces", str(project / "spaces"), "--replay", str(rec), "--budget", "30"
    )
    second = record(project, rec)
    origins = {m["config"]: m["origin"] for m in second["measurements"]}
    assert origins == {"BLOCK=32,SCALE=1,WAVES=1": "best", "BLOCK=128,SCALE=2,WAVES=1": "previous"}
    code, doc, _ = check_json()
    verdicts = {r["config"]: (r["verdict"], r["note"]) for r in doc["rows"]}
    assert code == 0
    assert verdicts["BLOCK=128,SCALE=2,WAVES=1"][0] == "same"
    assert verdicts["BLOCK=32,SCALE=1,WAVES=1"] == (
        "not comparable",
        "not measured in the baseline",
    )


def test_different_gpus_are_not_comparable_never_a_regression(
    project: Path, one_percent_noise: list[SampleSet]
) -> None:
    record(project, recording(project, "a.json", one_percent_noise), "--label", "h200")
    a100 = DeviceInfo(name="NVIDIA A100-PCIE-40GB", cc=80, driver="550.54.15")
    record(project, recording(project, "b.json", one_percent_noise, device=a100, slower=2.0))
    code, doc, _ = check_json("--baseline", "h200")
    assert code == 0 and doc["comparable"] is False
    assert {r["verdict"] for r in doc["rows"]} == {"not comparable"}
    assert "different GPUs" in doc["rows"][0]["note"]
    assert "GPU changed" in doc["hint"]
    # "previous" prefers a run on the same GPU, and there is none: it takes the other GPU's
    code, doc, _ = check_json()
    assert code == 0 and doc["baseline"]["label"] == "h200"


def test_missing_baseline(project: Path, one_percent_noise: list[SampleSet]) -> None:
    code, _, err = invoke("regress", "check")
    assert code == 2 and "no store at" in err  # (and none is created)
    Store(f"sqlite:///{project / 'store.sqlite'}").close()  # an empty store
    code, _, err = invoke("regress", "check")
    assert code == 2 and "no regression run" in err
    record(project, recording(project, "a.json", one_percent_noise))
    code, _, err = invoke("regress", "check")
    assert code == 2 and "no baseline" in err and "first regression run" in err
    code, out, err = invoke("regress", "check", "--missing-ok", "--json")
    assert code == 0 and json.loads(out)["rows"] == [] and "no baseline" in err
    for spec, message in (
        ("99", "no regression run with id 99"),
        ("label:nope", "labelled 'nope'"),
        ("run:x", "expected previous"),
    ):
        code, _, err = invoke("regress", "check", "--baseline", spec)
        assert code == 2 and message in err, err
    # CI's first run of `regress check --baseline nightly`: no earlier run has the label yet,
    # a missing baseline that --missing-ok lets pass
    record(project, recording(project, "b.json", one_percent_noise), "--label", "nightly")
    code, out, err = invoke("regress", "check", "--baseline", "nightly", "--missing-ok", "--json")
    assert code == 0 and json.loads(out)["rows"] == [], err
    assert "no earlier run of the candidate's kernel is labelled 'nightly'" in err
    assert "(run 2, the candidate, is itself: record a new run" in err
    code, out, err = invoke("regress", "check", "--baseline", "nightly", "--json")
    assert code == 2 and "labelled 'nightly'" in err
    assert json.loads(out)["exit_status"] == 2 and "nightly" in json.loads(out)["error"]
    # a label with a colon in it is a label
    record(project, recording(project, "c.json", one_percent_noise), "--label", ":zzz:")
    record(project, recording(project, "d.json", one_percent_noise))
    code, out, err = invoke("regress", "check", "--baseline", ":zzz:", "--json")
    assert code in (0, 1) and json.loads(out)["baseline"]["label"] == ":zzz:", err


def test_a_corrupted_store_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    for args in (["check"], ["history", "tiny"], ["runs"]):
        code, _, err = invoke("regress", *args, "--storage", str(bad))
        assert code == 2 and "error:" in err and "not a database" in err


def test_a_damaged_row_is_a_clear_error(
    project: Path, one_percent_noise: list[SampleSet], tmp_path: Path
) -> None:
    rec = recording(project, "a.json", one_percent_noise)
    record(project, rec)
    record(project, rec)
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        db.execute("UPDATE regress_measurements SET samples = '[1.0, \"x\"' WHERE id = 2")
    code, _, err = invoke("regress", "check")
    assert code == 2 and "regress_measurements" in err and "damaged" in err
    # the report says so too, rather than leaving the timeline out
    code, _, err = invoke("report", "--out", str(tmp_path / "site"))
    assert code == 2 and "regress_measurements is damaged" in err, err
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        db.execute("UPDATE regress_measurements SET samples = '[1.0, \"x\"]' WHERE id = 2")
    code, _, err = invoke("regress", "history", "tiny")
    assert code == 2 and "samples is not a list of numbers" in err


def test_a_broken_candidate_exits_1_and_a_fixed_one_0(
    project: Path, one_percent_noise: list[SampleSet], tmp_path: Path
) -> None:
    rec = recording(project, "a.json", one_percent_noise)
    record(project, rec)
    record(project, rec)
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        db.execute(
            "UPDATE regress_measurements SET outcome = 'wrong', median = NULL, samples = NULL, "
            "reason = 'max error 3.0' WHERE id = 2"
        )
    code, doc, _ = check_json()
    assert code == 1 and doc["rows"][0]["verdict"] == "broken"
    assert "max error 3.0" in doc["rows"][0]["note"]
    record(project, rec)  # the broken run as the baseline of a working one: fixed
    code, doc, _ = check_json("--baseline", "2", "--candidate", "3")
    assert code == 0 and doc["rows"][0]["verdict"] == "fixed", doc
    assert doc["rows"][0]["note"] == "baseline wrong: max error 3.0; the candidate ran"


def test_history_json_and_html(
    project: Path, one_percent_noise: list[SampleSet], tmp_path: Path
) -> None:
    for i in range(6):
        record(
            project,
            recording(
                project, f"r{i}.json", one_percent_noise, slower=1.1 if i >= 3 else 1.0, seed=i
            ),
        )
    record(project, recording(project, "r6.json", one_percent_noise, slower=1.1, seed=6))
    with sqlite3.connect(tmp_path / "store.sqlite") as db:  # the last run broke
        db.execute(
            "UPDATE regress_measurements SET outcome = 'wrong', median = NULL, samples = NULL, "
            "reason = 'max error 3.0' WHERE id = (SELECT max(id) FROM regress_measurements)"
        )
    out_html = tmp_path / "timeline.html"
    code, out, err = invoke("regress", "history", "tiny", "--json", "--html", str(out_html))
    assert code == 0, err
    doc = json.loads(out)
    (series,) = doc["series"]
    assert len(series["runs"]) == 6 and series["gpu"] == "NVIDIA H200"
    assert [c["index"] for c in series["change_points"]] == [3]
    assert series["change_points"][0]["ratio"] == pytest.approx(1.1, abs=0.02)
    (broken,) = series["broken"]
    assert (broken["run_id"], broken["outcome"], broken["reason"]) == (7, "wrong", "max error 3.0")
    page = out_html.read_text(encoding="utf-8")
    assert "REPLAY" in page and "r3.json" in page  # replayed runs are labelled on the page
    assert "<h2>Broken runs</h2>" in page and "wrong: max error 3.0" in page
    code, out, _ = invoke("regress", "history", "tiny")
    assert code == 0 and "+10." in out and "wrong: max error" in out
    code, out, _ = invoke("regress", "runs", "tiny")
    assert code == 0 and "replayed from" in out
    code, out, _ = invoke("regress", "runs", "tiny", "--json")
    runs = json.loads(out)["runs"]
    assert code == 0 and len(runs) == 7 and all(r["kernel"] == "tiny" for r in runs)
    assert runs[0]["replayed_from"] and runs[0]["environment"]["gpu"] == "NVIDIA H200"


@needs_caches
def test_a_bare_recording_is_recorded_as_replayed() -> None:
    path = CACHES / "pnpoly_RTX_3090.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    code, out, err = invoke("regress", "record", "--replay", str(path), "--label", "kt", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kernel"] == "cn_pnpoly" and "RTX 3090" in doc["replayed_from"]
    assert doc["measurements"][0]["origin"] == "recorded-best"
    assert "REPLAY" in err


@pytest.mark.skipif(probe_gpu().available, reason="this machine has a GPU")
def test_live_record_without_a_gpu_or_a_kept_recording_exits_3(project: Path) -> None:
    code, out, err = invoke(
        "regress", "record", "tiny", "--spaces", str(project / "spaces"), "--json"
    )
    assert code == 3 and "needs a GPU: no CUDA GPU" in err and "--replay" in err
    assert json.loads(out)["exit_status"] == 3


@pytest.mark.skipif(probe_gpu().available, reason="this machine has a GPU")
def test_the_readme_tour_records_and_checks_without_a_gpu() -> None:
    """regress record replays the H200 recording kept for gemm_int8, as tune does; the tour's
    record, record, check then says the same and exits 0."""
    code, out, err = invoke("regress", "record", "gemm_int8", "--label", "nightly", "--json")
    assert code == 0, err
    assert "REPLAY" in err and "NVIDIA H200" in json.loads(out)["replayed_from"]
    code, _, err = invoke("regress", "check", "--baseline", "nightly")
    assert code == 2 and "run 1, the candidate, is itself" in err
    assert "`workbench regress record gemm_int8`" in err
    assert invoke("regress", "record", "gemm_int8")[0] == 0
    code, report, _ = check_json("--baseline", "nightly")
    assert code == 0 and [r["verdict"] for r in report["rows"]] == ["same"]


@needs_caches
def test_bad_record_input(project: Path) -> None:
    code, _, err = invoke("regress", "record")
    assert code == 2 and "name a kernel" in err
    code, _, err = invoke(
        "regress", "record", "tiny", "--spaces", str(project / "spaces"), "--shapes", "nope"
    )
    assert code == 2 and "no shape set" in err
    code, _, err = invoke(
        "regress", "record", "reduce", "--replay", str(CACHES / "pnpoly_RTX_3090.json.gz")
    )
    assert code == 2 and "not a recording of this space" in err


def damage_samples(db_path: Path, row_id: int, bad: float, count: int) -> None:
    """Replace the first ``count`` samples of a stored measurement with ``bad`` (JSON's NaN
    where ``bad`` is one, as Python's json writes it)."""
    with sqlite3.connect(db_path) as db:
        (text,) = db.execute(
            "SELECT samples FROM regress_measurements WHERE id = ?", (row_id,)
        ).fetchone()
        samples = json.loads(text)
        samples[:count] = [bad] * count
        db.execute(
            "UPDATE regress_measurements SET samples = ? WHERE id = ?",
            (json.dumps(samples), row_id),
        )


@pytest.mark.parametrize("bad", [float("nan"), 0.0, -1.0])
def test_a_damaged_sample_is_dropped_with_a_warning_and_too_many_exit_2(
    project: Path, one_percent_noise: list[SampleSet], tmp_path: Path, bad: float
) -> None:
    record(project, recording(project, "a.json", one_percent_noise), "--label", "base")
    record(project, recording(project, "b.json", one_percent_noise, slower=1.93, seed=1))
    damage_samples(tmp_path / "store.sqlite", 2, bad, 1)
    code, out, err = invoke("regress", "check")
    assert code == 1 and "slower" in out, out + err
    assert "warning" in err and "candidate run 2" in err and "1 of 64 samples" in err
    code, doc, err = check_json()
    assert code == 1 and doc["rows"][0]["verdict"] == "slower"
    assert doc["rows"][0]["dropped_samples"] == [0, 1] and "candidate run 2" in err
    # 60 of 64 damaged: what is left cannot be compared, and the gate fails (never a pass)
    damage_samples(tmp_path / "store.sqlite", 2, bad, 60)
    code, out, err = invoke("regress", "check")
    assert code == 2 and "damaged" in out and "candidate run 2" in out + err, out + err
    code, doc, _ = check_json()
    assert code == 2 and doc["exit_status"] == 2 and doc["rows"][0]["verdict"] == "damaged"
