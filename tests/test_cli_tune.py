"""``workbench tune`` end to end on recorded data (no GPU here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, needs_caches
from recording_helpers import record_space
from typer.testing import CliRunner

from workbench.runners.base import DeviceInfo, Measurement, TrialOutcome
from workbench.runners.recordings import write_recording
from workbench.spaces import Space, load_space
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("private_dirs")

runner = CliRunner()


@needs_caches
def test_replay_a_kernel_tuner_cache_with_json() -> None:
    code, out, err = invoke(
        "tune", "--replay", str(CACHES / "pnpoly_RTX_3090.json.gz"), "--budget", "30", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)  # stdout holds the JSON alone
    assert doc["evaluations"] == 30
    assert doc["objective"] == {"name": "time", "unit": "ms"}
    assert doc["best_value"] >= doc["recorded_optimum"] > 0
    assert set(doc["best_config"]) == {"block_size_x", "tile_size", "between_method", "use_method"}
    assert "RTX 3090" in doc["replayed_from"]
    assert "REPLAY" in err  # the banner goes to stderr with --json
    # the default sampler says which of its moves proposed what, and which improved the best
    moves = doc["moves"]
    assert set(moves) == {"random", "model", "crossover", "line", "pair", "walk", "exploit"}
    assert sum(m["proposed"] for m in moves.values()) == 30
    assert moves["random"]["proposed"] >= 10  # the random start
    assert 1 <= sum(m["improved"] for m in moves.values()) <= 30
    assert all(m["improved"] <= m["proposed"] for m in moves.values())


@needs_caches
def test_rerun_resumes_the_same_study() -> None:
    path = str(CACHES / "pnpoly_RTX_3090.json.gz")
    invoke("tune", "--replay", path, "--budget", "10", "--json")
    code, out, _ = invoke("tune", "--replay", path, "--budget", "25", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["evaluations"] == 25 and doc["new_evaluations"] == 15


@needs_caches
def test_replay_t4_file_table_output() -> None:
    code, out, _ = invoke(
        "tune",
        "--replay",
        str(CACHES / "convolution_milo_A100_T4.json.gz"),
        "--budget",
        "20",
        "--sampler",
        "random",
    )
    assert code == 0
    assert "REPLAY" in out and "top configs" in out and "20 configs evaluated" in out
    # the next step is named, with the store when it is not the default one
    kernel = json.loads(invoke("store", "list", "--json")[1])["studies"][0]["kernel"]
    assert f"For your build: workbench store header {kernel} -o {kernel}_tuned.h\n" in out


def recording_of(space: Space, path: Path) -> Path:
    """A workbench recording of a space (values made up from the config: a test fixture)."""
    configs = space.iter_valid()
    return record_space(
        space, path, [(c, 1.0 + c["BLOCK"] / 1000 + c["SCALE"] + c["WAVES"] / 100) for c in configs]
    )


def test_kernel_with_its_own_recording(project: Path) -> None:
    spec = load_space(project / "spaces" / "tiny.yaml")
    rec = recording_of(Space(spec), project / "rec.json")
    code, out, err = invoke(
        "tune", str(spec.path), "--replay", str(rec), "--budget", "50", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["best_config"] == {"BLOCK": 32, "SCALE": 1, "WAVES": 1}
    assert doc["evaluations"] == 22  # the whole valid space: stop "exhausted"
    assert doc["stop"] == "exhausted"
    assert doc["throughput"]["unit"] == "GB/s"
    assert "roofline" not in doc["throughput"]  # no datasheet of a "Test GPU"


def test_tuning_a_finished_study_again_says_it_is_done_and_how_to_go_on(project: Path) -> None:
    spec = load_space(project / "spaces" / "tiny.yaml")
    rec = str(recording_of(Space(spec), project / "rec.json"))
    tune = ("tune", str(spec.path), "--replay", rec)
    assert invoke(*tune, "--budget", "5")[0] == 0
    code, out, _ = invoke(*tune, "--budget", "5")
    assert code == 0
    assert "Already done: study 'tiny | n=1000 | Test GPU' holds 5 evaluations; best" in out
    assert "A larger --budget (more than 5) extends it; --fresh starts" in " ".join(out.split())
    assert "Search moves" not in out and "Time:" not in out
    assert invoke(*tune, "--budget", "100")[0] == 0  # every config: exhausted
    code, out, _ = invoke(*tune, "--budget", "100")
    assert "holds 22 evaluations" in out and "every config it can evaluate" in out


def test_without_gpu_a_recording_beside_the_space_is_replayed(project: Path) -> None:
    spec = load_space(project / "spaces" / "tiny.yaml")
    recording_of(Space(spec), project / "spaces" / "recordings" / "tiny" / "test-gpu.json.gz")
    code, out, err = invoke("tune", "tiny", "--spaces", str(project / "spaces"), "--budget", "5")
    assert code == 0, err
    assert "No CUDA GPU here" in out and "REPLAY" in out and "Test GPU" in out


def test_without_gpu_or_recording_the_compile_stage_runs() -> None:
    # (the library keeps an H200 recording of reduce at its default shape, not at this one)
    code, out, _ = invoke("tune", "reduce", "--shape", "n=4096", "--sample", "1")
    assert code == 3  # (compiled and inspected: nothing was tuned)
    assert "compile stage" in out and "2 configs, 2 compiled" in out and "--replay" in out


@needs_caches
@pytest.mark.parametrize(
    "args,message",
    [
        (["tune"], "name a kernel"),
        (["tune", "--replay", "/no/such/file.json"], "cannot read"),
        (
            ["tune", "--replay", str(CACHES / "pnpoly_RTX_3090.json.gz"), "--budget", "0"],
            "--budget 0: the budget must be at least 1",
        ),
        (
            ["tune", "--replay", str(CACHES / "pnpoly_RTX_3090.json.gz"), "--sampler", "magic"],
            "unknown sampler",
        ),
        (
            ["tune", "reduce", "--replay", str(CACHES / "pnpoly_RTX_3090.json.gz")],
            "not a recording of this space",
        ),
        (["tune", "reduce", "--shapes", "nope"], "no shape set"),
        (["tune", "reduce", "--shapes", "odd", "--shape", "n=5"], "--shape and --shapes"),
        (["tune", "stream_scale", "--all", "--sample", "2"], "cannot go with --sample"),
        (["tune", "reduce", "--enqueue", "bogus"], "--enqueue 'bogus': expected default, none"),
        (["tune", "reduce", "--sample", "-1"], "Invalid value for '--sample'"),
        (["tune", "reduce", "--seed", "-1"], "Invalid value for '--seed'"),
        (["tune", "reduce", "--replay-delay", "-1"], "Invalid value for '--replay-delay'"),
        (["compile", "reduce", "--jobs", "-2"], "Invalid value for '--jobs'"),
    ],
)
def test_bad_tune_input(args: list[str], message: str) -> None:
    code, out, err = invoke(*args)
    assert code == 2
    assert message in out + err
    assert "Traceback" not in out + err


@needs_caches
def test_a_sampler_whose_packages_are_missing_is_refused_before_anything(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("PyTorch is installed: the gp sampler can run")
    store = tmp_path / "s.sqlite"
    replay = str(CACHES / "pnpoly_RTX_3090.json.gz")
    code, out, err = invoke("tune", "--replay", replay, "--sampler", "gp", "--storage", str(store))
    assert code == 2
    assert "the gp sampler needs torch: pip install 'workbench[gp]'" in out + err
    assert "REPLAY" not in out + err  # refused before the banner
    assert not store.exists()  # no empty study left behind


def test_every_config_failing_exits_1(tmp_path: Path) -> None:
    entries = [
        ({"a": a}, Measurement.failure(TrialOutcome.LAUNCH_FAILED, "illegal address"))
        for a in (1, 2)
    ]
    path = write_recording(
        tmp_path / "bad.json",
        kernel="bad",
        device=DeviceInfo("GPU"),
        parameters=[("a", [1, 2])],
        entries=entries,
    )
    code, out, _ = invoke("tune", "--replay", str(path), "--budget", "5")
    assert code == 1
    assert "2 configs evaluated" in out and "2 failed" in out


def scale_as_a_problem_variant(project: Path) -> Path:
    """The project's tiny space with SCALE a problem variant (``tunable: false``, pinned)."""
    path = project / "spaces" / "tiny.yaml"
    path.write_text(
        path.read_text().replace(
            "SCALE: {values: [1, 2, 3], default: 2}",
            "SCALE: {values: [1, 2, 3], default: 2, tunable: false}",
        )
    )
    return path


def test_problem_variants_are_pinned_not_tuned(project: Path) -> None:
    path = scale_as_a_problem_variant(project)
    spec = load_space(path)
    rec = recording_of(Space(spec), project / "rec.json")
    code, out, err = invoke("tune", str(path), "--replay", str(rec), "--budget", "50", "--json")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["best_config"]["SCALE"] == 2 and doc["evaluations"] == 8  # 4 BLOCK x 2 WAVES
    assert "[SCALE=2]" in doc["study"]
    # the recorded optimum is this variant's (1 + 32/1000 + SCALE + 1/100), not SCALE=1's
    assert doc["recorded_optimum"] == pytest.approx(3.042) == doc["best_value"]
    code, out, err = invoke(
        "tune", str(path), "--replay", str(rec), "--budget", "50", "--json", "--set", "SCALE=3"
    )
    doc = json.loads(out)
    assert code == 0, err
    assert doc["best_config"]["SCALE"] == 3 and "[SCALE=3]" in doc["study"]
    assert doc["recorded_optimum"] == pytest.approx(4.042)
    assert doc["evaluations"] == 6  # BLOCK=256 with SCALE=3 breaks the constraint


@needs_caches
def test_gp_sampler_without_torch_says_what_to_install() -> None:
    try:
        import torch  # noqa: F401

        pytest.skip("PyTorch is installed")
    except ImportError:
        pass
    code, out, err = invoke(
        "tune",
        "--replay",
        str(CACHES / "pnpoly_RTX_3090.json.gz"),
        "--sampler",
        "gp",
        "--budget",
        "5",
    )
    assert code == 2 and "workbench[gp]" in out + err


def stored_configs(tmp_path: Path, study: str) -> list[dict]:
    """The configs a study of the test's store evaluated, in order."""
    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    (info,) = [s for s in store.studies() if s.name == study]
    return [e.config for e in store.evaluations(info)]


@needs_caches
def test_enqueue_best_starts_from_the_best_found_on_another_gpu(tmp_path: Path) -> None:
    code, out, err = invoke(
        "tune", "--replay", str(CACHES / "convolution_milo_A4000.json.gz"), "--budget", "15",
        "--json",
    )  # fmt: skip
    assert code == 0, err
    a4000 = json.loads(out)["best_config"]
    invoke("tune", "--replay", str(CACHES / "pnpoly_RTX_3090.json.gz"), "--budget", "2")
    a100 = str(CACHES / "convolution_milo_A100.json.gz")
    code, out, err = invoke(
        "tune", "--replay", a100, "--budget", "3", "--enqueue", "best", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert stored_configs(tmp_path, doc["study"])[0] == a4000  # evaluated first
    assert "--enqueue best: first" in err and "RTX A4000" in err
    assert "pnpoly" not in err  # another kernel's study is not a warm start
    # one study by id; one whose configs do not fit this space is refused, naming why
    code, out, err = invoke("tune", "--replay", a100, "--budget", "4", "--enqueue", "best:2")
    assert code == 2 and "best:2" in out + err and "it has no block_size_y" in out + err
    for item, message in [("best:nope", "no study matches"), ("best:", "takes a study")]:
        code, out, err = invoke("tune", "--replay", a100, "--enqueue", item)
        assert code == 2 and message in out + err and "Traceback" not in out + err


def test_enqueue_order_the_default_a_config_or_another_variants_best(project: Path) -> None:
    path = scale_as_a_problem_variant(project)
    rec = str(recording_of(Space(load_space(path)), project / "rec.json"))
    tune = ["tune", str(path), "--replay", rec, "--json"]
    # by default the space's default comes first
    code, out, err = invoke(*tune, "--budget", "1")
    doc = json.loads(out)
    assert code == 0 and doc["best_config"] == {"BLOCK": 128, "SCALE": 2, "WAVES": 1}, err
    # configs given on the command line, in order (a repeat: evaluated once), then the default
    # (evaluated by the first run: not again)
    a, b = "BLOCK=64,SCALE=2,WAVES=2", "BLOCK=32,SCALE=2,WAVES=2"
    code, out, err = invoke(
        *tune,
        "--budget",
        "3",
        *("--enqueue", a, "--enqueue", b, "--enqueue", a),
        "--enqueue",
        "default",
    )
    assert code == 0, err
    assert stored_configs(project, json.loads(out)["study"])[:3] == [
        {"BLOCK": 128, "SCALE": 2, "WAVES": 1},  # the first run's
        {"BLOCK": 64, "SCALE": 2, "WAVES": 2},
        {"BLOCK": 32, "SCALE": 2, "WAVES": 2},
    ]
    # an invalid config given on the command line is refused, with the reason
    code, out, err = invoke(*tune, "--enqueue", "BLOCK=256,SCALE=2,WAVES=3")
    assert code == 2 and "WAVES=3" in out + err  # not a value of WAVES
    code, out, err = invoke(*tune, "--enqueue", "BLOCK=64,SCALE=3,WAVES=1")
    assert code == 2 and "invalid here: SCALE is pinned to 2" in out + err
    # unnamed parameters take the --set values (then the defaults)
    code, out, err = invoke(
        *tune, "--budget", "1", "--set", "SCALE=3", "--enqueue", "BLOCK=64", "--study", "own"
    )
    assert code == 0 and json.loads(out)["best_config"] == {"BLOCK": 64, "SCALE": 3, "WAVES": 1}
    code, out, err = invoke(*tune, "--budget", "50")  # the whole variant: best BLOCK=32 WAVES=1
    # another problem variant (SCALE=3) starts from the SCALE=2 study's best, SCALE set to 3
    code, out, err = invoke(*tune, "--budget", "1", "--set", "SCALE=3", "--enqueue", "best")
    doc = json.loads(out)
    assert code == 0, err
    assert doc["best_config"] == {"BLOCK": 32, "SCALE": 3, "WAVES": 1}
    assert "first BLOCK=32,SCALE=3,WAVES=1" in err and "[SCALE=2]" in err


def test_the_share_of_the_roofline_bound_on_a_gpu_with_a_known_datasheet(project: Path) -> None:
    from workbench.devices import DEVICES

    spec = load_space(project / "spaces" / "tiny.yaml")
    space = Space(spec)
    rec = record_space(
        space,
        project / "h200.json",
        [(c, 0.001 * c["BLOCK"] / 32 + 0.0001 * c["SCALE"]) for c in space.iter_valid()],
        device="NVIDIA H200",
    )
    code, out, err = invoke(
        "tune", str(spec.path), "--replay", str(rec), "--budget", "30", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    roofline = doc["throughput"]["roofline"]
    bytes_per_s = 12 * 1000 / (doc["best_value"] * 1e-3)  # the space's work: 12 n bytes
    dram = DEVICES["h200"].dram_bandwidth_gbs * 1e9
    assert roofline["fraction"] == pytest.approx(bytes_per_s / dram)
    assert roofline["limit"] == "memory" and "H200" in roofline["ceilings"][-1]
    # the progress line and the table say it too, also when a rerun finds nothing left to do
    code, out, _ = invoke("tune", str(spec.path), "--replay", str(rec), "--budget", "31")
    assert code == 0 and "22/31 best 0.0011 ms (10.9 GB/s, 0.2% of the roofline bound)" in out
    assert "┃ roofline bound ┃" in out and "top configs: tiny [n=1000] on NVIDIA H200" in out


def test_enqueue_best_takes_at_most_three_studies(project: Path) -> None:
    from workbench.search.warm_start import MAX_WARM_STARTS

    spec = load_space(project / "spaces" / "tiny.yaml")
    rec = str(recording_of(Space(spec), project / "rec.json"))
    tune = ["tune", str(spec.path), "--replay", rec, "--json", "--budget"]
    for i in range(MAX_WARM_STARTS + 1):  # studies whose bests differ (one config each)
        config = f"BLOCK=32,SCALE={1 + i % 3},WAVES={1 + i // 3}"
        code, _, err = invoke(*tune, "1", "--study", f"earlier {i}", "--enqueue", config)
        assert code == 0, err
    code, _, err = invoke(*tune, "9", "--study", "now", "--enqueue", "best")
    assert code == 0, err
    assert err.count("--enqueue best: first") == MAX_WARM_STARTS == 3
    assert err.count("--enqueue best: not used (at most 3; best:STUDY picks one)") == 1
    assert "'earlier 3'" in err.split("not used")[1]  # the latest study is the one left out
    # a study whose best is a config already queued: said once, not queued again
    code, _, err = invoke(*tune, "1", "--study", "again", "--enqueue", "BLOCK=32,SCALE=1,WAVES=1")
    code, _, err = invoke(*tune, "10", "--study", "now", "--enqueue", "best")
    assert code == 0 and "--enqueue best: the same config as above, from" in err, err


def test_a_space_whose_every_config_is_invalid_is_refused_by_name(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workbench.errors import ConfigError
    from workbench.search import problem as problem_module

    tiny = project / "spaces" / "tiny.yaml"
    rec = str(recording_of(Space(load_space(tiny)), project / "rec.json"))
    empty = project / "spaces" / "empty.yaml"
    empty.write_text(tiny.read_text().replace("BLOCK * SCALE <= 512", "BLOCK * SCALE < 32"))
    code, out, err = invoke("tune", str(empty), "--replay", rec, "--budget", "5")
    assert code == 2 and "Traceback" not in out + err
    assert (
        "tiny [n=1000]: no config is valid (24 in the product of the parameters' values); the "
        "reasons, counted over all 24: violates BLOCK * SCALE < 32 (keeps the test space small)"
    ) in " ".join((out + err).split())
    # the no-GPU compile stage, and compile, say the same (not "the default is invalid")
    for args in (["tune", str(empty), "--sample", "3"], ["compile", str(empty), "--all"]):
        code, out, err = invoke(*args)
        assert code == 2 and "no config is valid (24 in the product" in out + err, args
    # a larger product is sampled to say why
    monkeypatch.setattr(problem_module, "EMPTY_SAMPLE", 5)
    sp = problem_module.SpaceProblem(Space(load_space(empty)))
    with pytest.raises(ConfigError, match=r"counted over 5 drawn at random: violates BLOCK"):
        sp.check_not_empty()


@needs_caches
def test_an_output_file_that_cannot_be_written_is_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    invoke("tune", "--replay", str(CACHES / "pnpoly_RTX_3090.json.gz"), "--budget", "2")
    (tmp_path / "a-file").write_text("")
    for name in ("x.csv", "x.parquet"):
        code, out, err = invoke("store", "export", "1", "-o", str(tmp_path / "a-file" / name))
        assert code == 2 and "error: " in err and "a-file" in err, out + err
        assert "Traceback" not in out + err


def test_a_space_with_a_single_config_is_tuned(project: Path) -> None:
    spec = load_space(project / "spaces" / "tiny.yaml")
    rec = str(recording_of(Space(spec), project / "rec.json"))
    pins = ("--set", "BLOCK=64", "--set", "SCALE=2", "--set", "WAVES=2")  # nothing left to vary
    code, out, err = invoke("tune", str(spec.path), "--replay", rec, *pins, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["best_config"] == {"BLOCK": 64, "SCALE": 2, "WAVES": 2}
    assert doc["evaluations"] == 1 and doc["stop"] == "exhausted"


@pytest.mark.slow
def test_without_a_gpu_the_compile_stage_takes_the_variant_shapes_archs_and_json() -> None:
    """No GPU and no recording of the kernel: what tune would search is compiled (the
    problem variant of --set, each shape of --shapes, each arch of --arch all), --json is one
    JSON document on stdout, and options no path can take are refused before anything runs."""
    from workbench.gpu import probe_gpu

    if probe_gpu().available:
        pytest.skip("a GPU is present: tune measures")
    code, out, err = invoke(
        "tune", "reduce", "--set", "OP=max", "--set", "FINISH=twopass", "--sample", "3", "--json"
    )
    assert code == 3, err
    doc = json.loads(out)
    assert doc["stage"] == "compile" and doc["best_config"] is None and doc["evaluations"] == 0
    configs = [r["config"] for r in doc["records"]]
    assert len(configs) == 4 and doc["compiled"] == 4
    assert all(c["OP"] == "max" and c["FINISH"] == "twopass" for c in configs)
    assert "reduce[OP=max,FINISH=twopass] |" in err  # the variant's compile-only study
    # each shape of a set: the records say which, and the table has a shape column
    code, out, err = invoke("tune", "reduce", "--shapes", "odd", "--sample", "1", "--json")
    assert code == 3, err
    shapes = [r["shape"] for r in json.loads(out)["records"]]
    assert shapes == [{"n": 1000003}] * 2 + [{"n": 4099}] * 2
    assert "shape" in next(line for line in err.splitlines() if "regs" in line)
    # without --set, the variants keep their defaults (as a search would); at a shape the
    # library's H200 recording of reduce does not hold
    code, out, err = invoke("tune", "reduce", "--shape", "n=4096", "--sample", "3", "--json")
    assert code == 3, err
    assert {r["config"]["OP"] for r in json.loads(out)["records"]} == {"sum"}
    # each shape of the set, each declared arch
    code, out, err = invoke("tune", "stream_scale", "--arch", "all", "--sample", "1", "--json")
    assert code == 3, err
    assert {r["arch"] for r in json.loads(out)["records"]} == {"sm_80", "sm_89", "sm_90"}
    code, out, err = invoke("tune", "gemm_int8", "--shapes", "odd", "--sample", "0", "--json")
    assert code == 3, err
    assert err.count("compile results kept in study 'gemm_int8 | M=") == 4
    assert "K=4096 |" not in err  # not the default shape
    # --enqueue NAME=VALUE: checked, and compiled first (over the --set values)
    code, out, err = invoke(
        "tune", "reduce", "--sample", "1", "--set", "OP=max", "--enqueue", "BLOCK=64", "--json"
    )
    assert code == 3, err
    first = json.loads(out)["records"][0]["config"]
    assert (first["BLOCK"], first["OP"]) == (64, "max")
    for bad, message in [
        (["--sampler", "bogus"], "unknown sampler 'bogus'"),
        (["--enqueue", "BLOCK=7"], "not in its domain"),
        (["--enqueue", "none", "--enqueue", "default"], "--enqueue none"),
        (["--set", "OP=max", "--enqueue", "OP=sum"], "OP is set to 'max'"),
    ]:
        code, out, err = invoke("tune", "reduce", "--sample", "1", *bad)
        assert code == 2 and message in out + err, (bad, out + err)


@needs_caches
def test_enqueue_a_config_of_a_bare_recording_naming_every_parameter() -> None:
    pnpoly = str(CACHES / "pnpoly_RTX_3090.json.gz")
    config = "between_method=3,block_size_x=64,tile_size=12,use_method=2"
    code, out, err = invoke(
        "tune", "--replay", pnpoly, "--budget", "1", "--enqueue", config, "--json"
    )
    assert code == 0, err
    assert json.loads(out)["best_config"] == {
        "between_method": 3, "block_size_x": 64, "tile_size": 12, "use_method": 2
    }  # fmt: skip
    for bad, message in [
        ("block_size_x=64", "name between_method, tile_size, use_method too"),
        ("foo=1", "unknown parameter 'foo'"),
        ("block_size_x=abc", "not in its domain"),
    ]:
        code, out, err = invoke("tune", "--replay", pnpoly, "--budget", "1", "--enqueue", bad)
        assert code == 2 and message in out + err, out + err


@needs_caches
def test_a_refused_tune_leaves_no_empty_study_behind(tmp_path: Path) -> None:
    pnpoly = str(CACHES / "pnpoly_RTX_3090.json.gz")
    for bad in ("foo=1", "best:nothing"):
        code, out, err = invoke("tune", "--replay", pnpoly, "--enqueue", bad)
        assert code == 2, out + err
        assert "cn_pnpoly" not in err.partition("studies:")[2]  # not the one just made
    assert Store(f"sqlite:///{tmp_path / 'store.sqlite'}").studies() == []


def test_without_gpu_the_compile_stage_compiles_the_enqueued_best_first(project: Path) -> None:
    """No GPU: ``--enqueue best:STUDY`` is resolved as a GPU tune would resolve it (the study
    must exist and its best fit the space), and that config is compiled with the others."""
    spec = load_space(project / "spaces" / "tiny.yaml")
    rec = str(recording_of(Space(spec), project / "rec.json"))
    code, _, err = invoke(
        "tune", str(spec.path), "--replay", rec, "--budget", "50", "--study", "other"
    )
    assert code == 0, err
    tune = ["tune", str(spec.path), "--sample", "1", "--json"]
    code, out, err = invoke(*tune, "--enqueue", "best:other")
    assert code == 3, err
    assert "--enqueue best: first BLOCK=32,SCALE=1,WAVES=1" in err
    compiled = [r["config"] for r in json.loads(out)["records"]]
    assert {"BLOCK": 32, "SCALE": 1, "WAVES": 1} in compiled
    studies = {s.name for s in Store(f"sqlite:///{project}/store.sqlite").studies()}
    for item, message in [("best:nosuch", "no study matches"), ("best:", "takes a study")]:
        code, out, err = invoke(*tune, "--enqueue", item)
        assert code == 2 and message in out + err, out + err
    # refused before compiling: no study left behind by the refusals
    assert {s.name for s in Store(f"sqlite:///{project}/store.sqlite").studies()} == studies


def test_a_kernel_or_shape_name_with_braces_is_shown_not_formatted(tmp_path: Path) -> None:
    """The progress bar's label is text: braces in a recorded kernel name or problem size
    used to be read as a format string (a KeyError inside rich, an empty study left)."""
    path = tmp_path / "brace.json"
    path.write_text(
        json.dumps(
            {
                "kernel_name": "k{0}",
                "problem_size": {"x": [1, 2]},
                "tune_params_keys": ["a"],
                "tune_params": {"a": [1, 2]},
                "cache": {"1": {"a": 1, "time": 1.0}, "2": {"a": 2, "time": 2.0}},
            }
        )
    )
    code, out, err = invoke("tune", "--replay", str(path), "--budget", "2")
    assert code == 0, err
    assert "k{0}" in out and "best found is 1.000x" in out


def test_a_recording_that_cannot_be_read_creates_no_store(tmp_path: Path) -> None:
    store = tmp_path / "new" / "s.sqlite"
    for kernel in ([], ["reduce"]):
        code, out, err = invoke(
            "tune", *kernel, "--replay", str(tmp_path / "missing.json"), "--storage", str(store)
        )
        assert code == 2 and "cannot read" in out + err
        assert not store.parent.exists()


@needs_caches
def test_a_resumed_study_is_announced_and_fresh_starts_an_independent_one() -> None:
    """A rerun with another seed resumes the study, whose stored evaluations the budget counts:
    said on stderr and in --json. --fresh searches a new study with the seed, the first kept."""
    path = str(CACHES / "pnpoly_RTX_3090.json.gz")
    tune = ["tune", "--replay", path, "--budget", "20", "--json"]
    code, out, _ = invoke(*tune, "--seed", "1")
    first = json.loads(out)
    assert code == 0 and first["resumed"] is None and first["new_evaluations"] == 20
    code, out, err = invoke(*tune, "--seed", "2")
    doc = json.loads(out)
    assert code == 0 and doc["study"] == first["study"] and doc["new_evaluations"] == 0
    assert doc["resumed"] == {
        "evaluations_before": 20,
        "runs": 1,
        "seeds": [1],
        "samplers": ["portfolio"],
        "seed": 2,
        "budget_left": 0,
    }
    said = " ".join(err.split())  # (rich wraps the note to the terminal)
    assert f"Resuming study {first['study']!r}: 20 evaluations already (seed 1)" in said
    assert "--budget 20 counts them: nothing left to evaluate; a larger --budget adds to it" in said
    assert "--seed 2 steers only the evaluations this run adds" in said
    # a larger budget adds to the study, and says how many it may add
    code, out, err = invoke(*tune[:-2], "25", "--json", "--seed", "2")
    doc = json.loads(out)
    assert code == 0 and doc["new_evaluations"] == 5 and doc["resumed"]["budget_left"] == 5
    assert "--budget 25 counts them: up to 5 more" in " ".join(err.split())
    # --fresh: an independent study under a new name; the resumed one is kept as it was
    code, out, err = invoke(*tune, "--seed", "2", "--fresh")
    fresh = json.loads(out)
    assert code == 0 and fresh["resumed"] is None and fresh["new_evaluations"] == 20
    assert fresh["study"] == f"{first['study']} #2"
    assert f"new study {fresh['study']!r}" in " ".join(err.split())
    listing = json.loads(invoke("store", "list", "--json")[1])
    held = {s["name"]: s["evaluations"] for s in listing["studies"]}
    assert held == {first["study"]: 25, fresh["study"]: 20}
    store = Store(listing["store"])
    seed_1, seed_2 = (
        {str(e.config) for e in store.evaluations(store.find_study(name))[:20]}
        for name in (first["study"], fresh["study"])
    )
    assert seed_1 != seed_2  # the seed was used: another path through the space


@needs_caches
def test_fresh_is_refused_for_a_shared_study() -> None:
    path = str(CACHES / "pnpoly_RTX_3090.json.gz")
    code, out, err = invoke(
        "tune", "--replay", path, "--storage", "postgresql://nobody@localhost:1/none", "--fresh"
    )
    assert code == 2 and "--fresh" in out + err and "--study" in out + err
