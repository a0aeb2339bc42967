"""The command line: useful output, JSON/CSV files, and bad input as one line with exit 2."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import invoke, sigint_as_at_a_terminal
from dataset_paths import CACHES, needs_caches
from typer.testing import CliRunner

from workbench.cli.main import app

runner = CliRunner()
REDUCE_SPACE = Path(__file__).resolve().parents[1] / "tuning_spaces" / "reduce.yaml"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.output


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))


def test_help_at_every_level() -> None:
    code, out = run("--help")
    assert code == 0
    for command in ("kernels", "space", "compile", "tune"):
        assert command in out
        code, sub = run(command, "--help")
        assert code == 0 and "Usage" in sub


def test_kernels_lists_the_library_and_user_spaces(project: Path) -> None:
    code, out = run("kernels", "--json")
    assert code == 0
    names = {row["name"] for row in json.loads(out)}
    assert {"reduce", "stream_scale"} <= names
    code, out = run("kernels", "--json", "--spaces", str(project / "spaces"))
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["tiny"]["builtin"] is False and rows["reduce"]["builtin"] is True
    code, out = run("kernels", env={"WORKBENCH_SPACES": str(project / "spaces")})
    assert code == 0 and "tiny" in out
    # listed by the name commands find it by (the file's), a different name: inside said
    (project / "spaces" / "other.yaml").write_text(
        (project / "spaces" / "tiny.yaml").read_text().replace("name: tiny", "name: elsewhere")
    )
    code, out = run("kernels", "--json", "--spaces", str(project / "spaces"))
    row = {r["name"]: r for r in json.loads(out)}["other"]
    assert row["name_in_file"] == "elsewhere" and "found as 'other'" in row["warning"]
    assert rows["tiny"]["warning"] is None
    # a file whose arch has no device preset is one row with its error, not the end of the list
    (project / "spaces" / "new.yaml").write_text(
        (project / "spaces" / "tiny.yaml").read_text().replace("[sm_80, sm_90]", "[sm_80, sm_120]")
    )
    code, out = run("kernels", "--json", "--spaces", str(project / "spaces"))
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and "sm_120" in rows["new"]["error"] and "reduce" in rows
    assert run("space", "other", "--spaces", str(project / "spaces"))[0] == 0


def test_space_shows_size_count_sample_and_why() -> None:
    code, out = run("space", "reduce", "--sample", "3")
    assert code == 0
    # (float32 and float16 inputs: 72,000 points each before the fold, 2 x 6/5 of them now)
    assert "cartesian size: 172,800" in out and "valid configs:" in out
    assert out.count("sample:") == 3
    # what the kernel is called with, and what checks it
    assert "args (x, total, partials, state, n:int64)" in out
    assert "reference workbench.references.reduce:reduce_all" in out
    code, out = run("space", "reduce", "--why", "ITEMS=2", "--why", "VEC=4")
    assert code == 1
    assert "invalid" in out and "ITEMS % VEC == 0" in out
    code, out = run("space", "reduce", "--why", "ITEMS=8")
    assert code == 0 and "valid" in out
    code, out = run("space", "reduce", "--why", "ITEMS=2,VEC=4")  # as -c takes it
    assert code == 1 and "ITEMS % VEC == 0" in out


def test_space_by_path_with_shape(project: Path) -> None:
    code, out = run("space", str(project / "spaces" / "tiny.yaml"), "--shape", "n=64")
    assert code == 0 and "'n': 64" in out


def test_a_space_too_sparse_to_sample_still_prints_its_summary(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a decode shape gemm_int8's valid points are under 1e-5 of its product: where no
    sample is found in time (draws and a count; here the time allowed is cut), the summary
    still prints, with one line instead of the samples, and the command succeeds."""
    from workbench.spaces import space as space_module

    monkeypatch.setattr(space_module, "REJECTION_DRAWS", 0)
    monkeypatch.setattr(space_module, "WALK_SECONDS", 0.0)
    code, out = run("space", "gemm_int8", "--shape", "M=16,N=256,K=512")
    assert code == 0, out
    assert "shape {'M': 16, 'N': 256, 'K': 512}" in out and "cartesian size:" in out
    assert "sample: none" in out and "too sparse to sample" in out
    assert "  sample: PATH=" not in out


@pytest.mark.slow
def test_a_shape_as_a_comma_separated_list() -> None:
    code, out = run("space", "gemm_int8", "--shape", "M=16,N=256", "--shape", "K=512")
    assert code == 0 and "shape {'M': 16, 'N': 256, 'K': 512}" in out
    code, out = run("space", "gemm_int8", "--shape", "M=16,N=-4")
    assert code == 2 and "--shape 'N=-4': sizes must be positive" in out


def test_compile_writes_json_and_csv(tmp_path: Path) -> None:
    code, out = run(
        "compile",
        "stream_scale",
        "--arch",
        "sm_90",
        "-c",
        "HINT=cs,STORE=cs",
        "-c",
        "HINT=nc",
        "--json",
        str(tmp_path / "r.json"),
        "--csv",
        str(tmp_path / "r.csv"),
    )
    assert code == 0, out
    records = json.loads((tmp_path / "r.json").read_text())
    assert [r["config"]["HINT"] for r in records] == ["cs", "nc"]
    assert all(r["ok"] and r["registers"] > 0 for r in records)
    assert any("EF" in op for op in records[0]["global_memory_ops"])  # ld.global.cs: evict-first
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert rows[0]["cfg.HINT"] == "cs" and rows[1]["cfg.HINT"] == "nc"
    assert records[0]["shape"] == {"n": 67108864} and rows[0]["shape"] == "n=67108864"


def test_compile_json_to_stdout() -> None:
    result = CliRunner().invoke(app, ["compile", "reduce", "-c", "BLOCK=128", "--json", "-"])
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)  # the JSON alone: the table went to stderr
    assert record["config"]["BLOCK"] == 128 and record["ok"]
    assert not Path("-").exists()


def test_compile_json_to_stdout_stays_json_with_csv_and_a_store(tmp_path: Path) -> None:
    """The notes of --csv and --storage go to stderr with the table, not into the JSON."""
    csv_path, store = tmp_path / "r.csv", tmp_path / "s.sqlite"
    args = ["compile", "reduce", "-c", "BLOCK=128", "--json", "-", "--csv", str(csv_path)]
    result = CliRunner().invoke(app, [*args, "--storage", str(store)])
    assert result.exit_code == 0, result.output
    (record,) = json.loads(result.stdout)
    assert record["ok"] and csv_path.is_file()
    notes = "".join(result.stderr.split())  # rich may wrap a long path
    assert f"wrote{csv_path}" in notes and "compileresultskept" in notes


def test_compile_table_shows_differing_parameters_and_the_rest_once() -> None:
    code, out = run("compile", "stream_scale", "--arch", "sm_90", "-c", "HINT=cs", "-c", "HINT=nc")
    assert code == 0, out
    header = next(line for line in out.splitlines() if "regs" in line)
    assert "HINT" in header and "STORE" not in header  # STORE is the same in both rows
    assert "in every row:" in out and "STORE=" in out


def test_compile_all_for_every_declared_arch(tmp_path: Path) -> None:
    code, out = run(
        "compile",
        "stream_scale",
        "--arch",
        "all",
        "-c",
        "HINT=lu",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert code == 0, out
    records = json.loads((tmp_path / "r.json").read_text())
    assert [r["arch"] for r in records] == ["sm_80", "sm_89", "sm_90"]


def test_compile_failure_is_reported_with_exit_1(project: Path) -> None:
    (project / "kernels" / "axpy.cu").write_text("not CUDA at all;\n")
    code, out = run("compile", str(project / "spaces" / "tiny.yaml"))
    assert code == 1 and "failed; `workbench compile ... --log` shows why" in out
    code, out = run("compile", str(project / "spaces" / "tiny.yaml"), "--log")
    assert code == 1
    assert "failed" in out and "error" in out


def test_tune_without_gpu_runs_the_compile_stage() -> None:
    # (at a shape the library's H200 recording of reduce does not hold)
    code, out = run("tune", "reduce", "--shape", "n=4096", "--sample", "2")
    assert code == 3, out  # (compiled and inspected: nothing was tuned)
    assert "No CUDA GPU here" in out
    assert "3 configs, 3 compiled, 0 failed" in out


BAD_INPUT = [
    (["space", "no_such_kernel"], "unknown kernel 'no_such_kernel'"),
    (["compile", "reduce", "--arch", "sm_75"], "not among them"),
    (["compile", "reduce", "--arch", "banana"], "not a CUDA architecture"),
    (["compile", "reduce", "-c", "BLOCK=100"], "not in its domain"),
    (["compile", "reduce", "-c", "ITEMS=2,VEC=4"], "ITEMS % VEC == 0"),
    (["compile", "reduce", "-c", "BLOCK=256,BLOCK=64"], "BLOCK set more than once"),
    (["compile", "reduce", "-c", "BLOCK=256", "--all"], "cannot go with --all or --sample"),
    (["compile", "reduce", "--all", "--sample", "3"], "cannot go with --sample"),
    (["space", "reduce", "--shape", "n=99999999999999999999"], "larger than a 64-bit size"),
    (["kernels", "--spaces", str(REDUCE_SPACE)], "is a file: --spaces takes a directory"),
    (["compile", "reduce", "--arch", ""], "names no arch"),
    (["compile", "reduce", "--arch", ","], "names no arch"),
    (["space", "reduce", "--arch", ""], "names no arch"),
    (["tune", "reduce", "--arch", ""], "names no arch"),
    (["space", "reduce", "--shape", "m=3"], "expected NAME=INT"),
    (["space", "reduce", "--device", "voodoo5"], "unknown device"),
    (["space", "reduce", "--device", "t4"], "sm_90 binaries do not run on Tesla T4"),
    (["compile", "gemm_int8", "--shape", "K=100", "--sample", "1"], "violates K % 16 == 0"),
    (["compare", "gemm_int8", "--shape", "K=100"], "the default config is invalid at this shape"),
    (["kernels", "--spaces", "/nonexistent/dir"], "does not exist"),
    (["space", "nope:zzz:"], "nope:zzz:"),  # a user's text, not an emoji code
    (["store", "list", "--storage", ""], "--storage is empty"),
    (["store", "list", "--storage", str(REDUCE_SPACE.parent)], "is a directory: give a SQLite"),
    # a URL reads ? and # as a query and a fragment: another file than the one named
    (["store", "list", "--storage", "/tmp/q?x.sqlite"], "with ? in it is not supported"),
    (["store", "list", "--storage", "/tmp/run#1.sqlite"], "with # in it is not supported"),
]


@pytest.mark.parametrize("args,message", BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_clear_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_an_arch_nvrtc_cannot_target_names_the_space_file(write_space) -> None:
    from conftest import TINY_SPACE

    path = write_space(TINY_SPACE.replace("[sm_80, sm_90]", "[sm_80, sm_99]"))
    code, out = run("space", str(path))
    line = TINY_SPACE.splitlines().index("arches: [sm_80, sm_90]") + 1
    assert code == 2 and f"{path.name}:{line} [arches]: NVRTC" in out
    assert "cannot target sm_99" in out


def test_space_with_no_valid_config_says_why_with_exit_2(write_space) -> None:
    from conftest import TINY_SPACE

    path = write_space(TINY_SPACE.replace("BLOCK * SCALE <= 512", "BLOCK > 10000"))
    code, out = run("space", str(path))
    assert code == 2 and "valid configs:  0" in out
    assert "no config is valid" in out and "violates BLOCK > 10000" in out


def test_malformed_space_file_names_file_line_and_key(write_space) -> None:
    from conftest import TINY_SPACE

    path = write_space(TINY_SPACE.replace("BLOCK * SCALE <= 512", "BLOCK * BK <= 512"))
    code, out = run("space", str(path))
    assert code == 2
    assert f"{path}:" in out.replace("\n", "") and "[constraints[0].expr]" in out
    assert "BK" in out


def test_console_script_has_no_traceback_on_bad_input() -> None:
    exe = Path(sys.executable).with_name("workbench")
    proc = subprocess.run([str(exe), "space", "nope"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.strip().startswith("error:")


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_with_the_documented_status() -> None:
    """`workbench ... | head -1`: exit 141 (128 + SIGPIPE, docs/tuning.md's exit statuses), quietly,
    not 1 (the status of a failed check)."""
    exe = Path(sys.executable).with_name("workbench")
    proc = subprocess.Popen(
        [str(exe), "space", "reduce", "--sample", "3000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err
    # --help, which typer prints through a console of its own
    proc = subprocess.Popen([str(exe), "tune", "--help"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    proc.stdout.close()  # gone before the help is written: no write can succeed
    assert proc.wait(timeout=60) == 141


@pytest.mark.parametrize(
    "args",
    [
        ["run", "reduce"],
        ["record", "reduce", "-o", "/tmp/r.json"],
        # input shapes that use config values (scales per channel, per token, per group)
        ["run", "quantize_static"],
        ["run", "dequantize_int8", "-c", "GRANULARITY=group,SYMMETRIC=false"],
        ["run", "dequantize_fp8", "-c", "GRANULARITY=mx"],
    ],
)
def test_gpu_commands_say_there_is_no_gpu(args: list[str]) -> None:
    from workbench.gpu import probe_gpu

    if probe_gpu().available:
        pytest.skip("a GPU is present")
    result = runner.invoke(app, args)
    assert result.exit_code == 3  # one status for "this needs a GPU"
    assert "needs a GPU: no CUDA GPU" in result.output


def test_run_stops_on_inputs_that_cannot_be_laid_out_before_looking_for_a_gpu(
    project: Path,
) -> None:
    x = "  x: {dtype: float32, shape: [n]}\n"
    weights = x + "  w: {dtype: float32, shape: [n * (SCALE - 2)]}\n"  # none at SCALE=2
    text = (project / "spaces" / "tiny.yaml").read_text().replace("name: tiny", "name: weights")
    path = project / "spaces" / "weights.yaml"
    path.write_text(text.replace(x, weights))
    code, out = run("run", str(path), "-c", "SCALE=2")
    assert code == 2 and "input w: shape `n * (SCALE - 2)` gave 0, not a size >= 1" in out
    assert "no CUDA GPU" not in out


def test_run_merges_config_options_and_refuses_a_name_set_twice() -> None:
    # validity is checked before the GPU is looked for: the merged config is judged as one
    code, out = run("run", "reduce", "-c", "VEC=4", "-c", "ITEMS=2")
    assert code == 2 and "ITEMS=2" in out and "VEC=4" in out and "ITEMS % VEC" in out
    code, out = run("run", "reduce", "-c", "VEC=4", "-c", "VEC=2")
    assert code == 2 and "VEC set more than once" in out


def test_worker_gpus_takes_all_only_and_each_spawn_drops_it() -> None:
    from workbench.cli.scale_cmds import without_option

    code, out = run("worker", "--gpus", "some", "--storage", "postgresql://u@h/db", "--study", "s")
    assert code == 2 and "--gpus some: expected 'all'" in out
    result = CliRunner().invoke(
        app,
        ["worker", "--json", "--gpus", "some", "--storage", "postgresql://u@h/db", "--study", "s"],
    )
    assert result.exit_code == 2 and "expected 'all'" in json.loads(result.stdout)["error"]
    # the per-GPU workers get the same command line without --gpus, in either spelling
    args = ["worker", "--gpus=all", "--study", "s", "--gpus", "all", "--storage", "u"]
    assert without_option(args, "--gpus") == ["worker", "--study", "s", "--storage", "u"]


def test_one_arch_commands_refuse_arch_all() -> None:
    code, out = run("space", "reduce", "--arch", "all")
    assert code == 2 and "--arch all: this command builds for one arch; name one of sm_80" in out
    code, out = run("profile", "reduce", "--dry-run", "--arch", "all")
    assert code == 2 and "builds for one arch" in out


@pytest.mark.parametrize(
    "args",
    [
        ["tune", "nosuch", "--json"],
        ["store", "list", "--json", "--storage", "/nonexistent/s.sqlite"],
        ["regress", "runs", "--json", "--storage", "/nonexistent/s.sqlite"],
        ["profile", "reduce", "--dry-run", "--arch", "all", "--json"],
    ],
)
def test_with_json_an_error_is_a_json_document_too(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert doc["exit_status"] == 2 and doc["error"]


def test_command_lists_show_each_summary_as_one_paragraph_without_rst_markup() -> None:
    """The command lists of --help (workbench, store, regress) wrap each summary as one
    paragraph: the docstrings' line breaks used to break the list's lines at random words."""
    from workbench.cli.main import app as main_app
    from workbench.cli.regress_cmds import app as regress_app
    from workbench.cli.store_cmds import app as store_app

    for group in (main_app, store_app, regress_app):
        for info in group.registered_commands:
            assert info.short_help, info.name
            assert "\n" not in info.short_help and "``" not in info.short_help, info.short_help
    listing = CliRunner().invoke(main_app, ["--help"]).output
    assert "`tune --replay` (and the no-GPU path of `tune`) can answer from" in " ".join(
        line.strip("│ ") for line in listing.splitlines()
    )


#: every command that takes a --config, with what it needs besides to run here without a GPU
CONFIG_COMMANDS = [
    ["compile", "reduce"],
    ["run", "reduce"],
    ["profile", "reduce", "--dry-run"],
    ["compare", "reduce"],
]


@pytest.mark.parametrize("command", CONFIG_COMMANDS, ids=[c[0] for c in CONFIG_COMMANDS])
def test_every_config_option_takes_default_best_and_name_value(
    command: list[str], tmp_path: Path
) -> None:
    """One syntax for every -c: `run K -c default` used to say "'default': expected
    NAME=VALUE" while compile took it; a word that is none of the forms gets one sentence."""
    from workbench.gpu import probe_gpu
    from workbench.store import Store

    db = tmp_path / "empty.sqlite"
    Store(f"sqlite:///{db}").close()
    code, out = run(*command, "-c", "banana", "--storage", str(db))
    assert code == 2 and "'banana' is not 'default', 'best' or NAME=VALUE" in out, out
    code, out = run(*command, "-c", "best", "--storage", str(db))
    assert code == 2 and "--config best: the store has no study of reduce at n=" in out, out
    code, out = run(*command, "-c", "best,BLOCK=128", "--storage", str(db))
    assert code == 2 and "'best' names a whole config" in out, out
    if probe_gpu().available and command[0] in ("run", "compare"):
        return  # (the rest would time kernels)
    for config in ("default", "DEFAULT", "BLOCK=128"):
        code, out = run(*command, "-c", config, "--storage", str(db))
        assert "expected NAME=VALUE" not in out and "is not 'default'" not in out, out
        needs_gpu = command[0] in ("run", "compare")  # (compare shows its plan, then exits 3)
        assert code == (3 if needs_gpu else 0), out


def test_one_config_commands_merge_their_config_options(tmp_path: Path) -> None:
    """run, profile and compare take one config: -c BLOCK=128 -c ITEMS=4 is BLOCK=128,ITEMS=4
    (compare used to keep the last option only)."""
    db = str(tmp_path / "s.sqlite")
    code, out, err = invoke("compare", "reduce", "-c", "BLOCK=128", "-c", "ITEMS=4", "--json",
                            "--storage", db)  # fmt: skip
    assert code == 3, out + err  # (no GPU: the plan, nothing compared)
    (shape,) = json.loads(out)["shapes"]
    assert shape["config"]["BLOCK"] == 128 and shape["config"]["ITEMS"] == 4
    assert shape["config_origin"] == "given on the command line"
    code, out, err = invoke("profile", "reduce", "--dry-run", "-c", "BLOCK=128", "-c", "ITEMS=4")
    assert code == 0 and "BLOCK=128,ITEMS=4" in squeeze(out), out + err
    code, out, err = invoke("compare", "reduce", "-c", "default", "-c", "BLOCK=64")
    assert code == 2 and "--config default names a whole config" in err


def test_a_partial_config_is_completed_and_the_output_says_with_what() -> None:
    """`-c PATH=wgmma` over gemm_w8a8's mma default broke BK % SWIZZLE; now SWIZZLE moves to
    64, the one line says so, and the config compiles."""
    code, out, err = invoke("compile", "gemm_w8a8", "--arch", "sm_90a", "-c", "PATH=wgmma",
                            "--json", "-")  # fmt: skip
    assert code == 0, out + err
    (record,) = json.loads(out)
    assert record["ok"] and record["config"]["PATH"] == "wgmma"
    assert record["config"]["SWIZZLE"] == 64 and record["config"]["BK"] == 64
    (line,) = [x for x in squeeze(err).splitlines() if "filled in" in x]
    assert line.startswith("sm_90a: PATH=wgmma: filled in BM=128,BN=128,BK=64,")
    assert "moved to be valid: SWIZZLE=64 (not 128)" in line and "BK % SWIZZLE" in line
    # values that cannot be valid together: one line naming the constraint, for every command
    for command in (["compile"], ["run"], ["profile", "--dry-run"]):
        code, out, err = invoke(*command, "gemm_int8", "--arch", "sm_90", "-c", "PATH=wgmma")
        assert code == 2, out + err
        assert err.startswith("error: PATH=wgmma cannot be valid (sm_90, H200,") and (
            "violates PATH != 'wgmma' or arch.specific" in squeeze(err)
        ), err


def squeeze(text: str) -> str:
    """rich's wrapped lines joined again (the wrapping depends on the terminal width)."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def test_count_of_a_space_too_large_to_walk_says_how_far_it_got(
    write_space, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``space --count`` on 20^12 points (as on the 9.8e17 of a real report): the count stops
    at its deadline and says what it found, labelled as a lower bound, instead of running on."""
    from test_space import needle_space_text

    from workbench.spaces import space as space_module

    monkeypatch.setattr(space_module, "WALK_SECONDS", 1.0)
    path = write_space(needle_space_text(project))
    code, out = run("space", str(path), "--count", "--sample", "0")
    assert code == 0, out
    said = " ".join(out.split())
    assert "cartesian size: 49,152,000,000,000,000" in said  # (BLOCK x SCALE x 20^12)
    assert "or more (not counted to the end: the count stopped after 1 s, having checked" in said


def test_ctrl_c_while_the_command_line_loads_ends_with_one_line() -> None:
    """SIGINT in the first second or so (the imports) ends with exit 130 and one line, as in
    a command, not a 22-line KeyboardInterrupt traceback. Runs the console script as
    pyproject.toml declares it."""
    import re

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    (module, func) = re.findall(r'^workbench = "([\w.]+):(\w+)"$', pyproject, re.MULTILINE)[0]
    # the Ctrl-C comes 50 ms after the script starts: inside main()'s import of the command
    # line (0.3 s and more), however fast or loaded the machine (a sleep here raced it)
    ctrl_c = "threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()"
    script = (
        f"import os, signal, sys, threading; {ctrl_c}; "
        f"from {module} import {func}; sys.exit({func}())"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "space", "reduce"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_at_a_terminal,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted" and out == ""


@needs_caches
@pytest.mark.parametrize("how", ["env", "url"])
def test_a_directory_given_as_the_store_is_named_as_one(tmp_path: Path, how: str) -> None:
    """$WORKBENCH_STORE or a sqlite URL naming a directory: said, for a command that reads
    the store (it said "no store at") and one that writes it."""
    folder = tmp_path / "stores"
    folder.mkdir()
    env = {"WORKBENCH_STORE": str(folder)} if how == "env" else None
    where = [] if how == "env" else ["--storage", f"sqlite:///{folder}"]
    pnpoly = CACHES / "pnpoly_RTX_3090.json.gz"
    for args in (["store", "list", *where], ["store", "import", str(pnpoly), *where]):
        code, out = run(*args, env=env)
        assert code == 2, out
        assert f"{folder} is a directory: a store is a SQLite file" in " ".join(out.split())


def test_a_space_too_large_to_count_says_how_and_shows_the_counts_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above AUTO_COUNT_LIMIT points ``space`` does not walk the space (gemm_int8: 6.7e10 points,
    a minute): it says how to count, shows the count of the problem a tune searches once a
    tune has listed it, and the count of a ``--count`` ever after (the valid-set cache)."""
    import re

    from workbench.cli import space_cmds
    from workbench.devices import device_for
    from workbench.search.problem import SpaceProblem
    from workbench.spaces import Space, load_kernel
    from workbench.spaces.targets import one_arch

    monkeypatch.setattr(space_cmds, "AUTO_COUNT_LIMIT", 1000)  # (reduce: 172,800 points)
    args = ("space", "reduce", "--sample", "0")
    code, out = run(*args)
    assert code == 0, out
    assert "valid configs: not counted (over 1,000 points: --count walks them" in squeeze(out)
    assert "as tune searches it" not in out
    # a tune lists the valid set of its problem (the variants pinned to their defaults)
    spec = load_kernel("reduce", [])
    arch = one_arch(spec, None)
    problem = SpaceProblem(Space(spec, arch=arch, device=device_for(arch, None)))
    assert problem.valid_configs() and problem.valid_total
    code, out = run(*args)
    pins = " ".join(f"{k}={v}" for k, v in problem.pinned.items())
    assert pins.startswith("DTYPE=float32")
    listed = f"with {pins}, as tune searches it: {problem.valid_total:,} (listed by an earlier"
    assert code == 0 and listed in squeeze(out), out
    code, out = run(*args, "--count")
    (counted,) = re.findall(r"valid configs:  ([\d,]+)\n", out)
    assert code == 0 and int(counted.replace(",", "")) > problem.valid_total
    code, out = run(*args)
    assert f"valid configs:  {counted} (counted by an earlier `space --count`)" in out
