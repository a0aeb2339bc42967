"""``workbench compile --emit DIR`` (each config's PTX, SASS, CUBIN) and ``--diff`` (what a
config change did to the binary): real NVRTC/ptxas compiles, no GPU."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from cli_helpers import invoke

pytestmark = pytest.mark.usefixtures("private_dirs")

#: tune's "What tuning changed" hint names the space file by its temporary path, longer under
#: pytest-xdist (``popen-gw0/``): a width that keeps the command on one line, to be parsed
ONE_LINE_HINTS = {"COLUMNS": "400"}


def squeezed(text: str) -> str:
    """The output without table borders and runs of spaces (rich wraps to the terminal)."""
    return re.sub(r"\s+", " ", re.sub(r"[│┃┏┓┗┛┡┩└┘├┤┼━─┳┻╇╈╋┠┨┯┷┣┫]", " ", text))


def test_emit_writes_each_configs_ptx_sass_and_cubin_with_an_index(tmp_path: Path) -> None:
    out_dir = tmp_path / "emitted"
    args = ["compile", "stream_scale", "--arch", "sm_90", "-c", "HINT=cs", "-c", "HINT=nc"]
    code, out, err = invoke(*args, "--emit", str(out_dir))
    assert code == 0, out + err
    index = json.loads((out_dir / "index.json").read_text())
    assert sorted(e["config"]["HINT"] for e in index) == ["cs", "nc"]
    for e in index:
        assert e["ok"] and e["arch"] == "sm_90" and e["shape"] == {"n": 67108864}
        files = {k: out_dir / v for k, v in e["files"].items()}
        assert sorted(files) == ["cubin", "ptx", "sass"]
        assert files["cubin"].read_bytes()[:4] == b"\x7fELF"
        sass, ptx = files["sass"].read_text(), files["ptx"].read_text()
        assert sass.startswith(f"// workbench compile: stream_scale {e['label']}\n")
        assert re.search(r"^\.target\s+sm_\d+", ptx, re.M) and ".entry stream_scale" in ptx
        # each file is its own config's binary: the load's cache hint shows in the SASS
        hinted_load = "LDG.E.EF" if e["config"]["HINT"] == "cs" else "LDG.E.CONSTANT"
        assert hinted_load in sass and "stream_scale" in sass
    # a rerun adds to the index instead of replacing it, and the same config keeps its files
    before = {p.name: p.stat().st_mtime_ns for p in out_dir.iterdir()}
    code, _, _ = invoke("compile", "stream_scale", "--arch", "sm_90", "-c", "HINT=cs",
                        "-c", "HINT=cg", "--emit", str(out_dir))  # fmt: skip
    assert code == 0
    index = json.loads((out_dir / "index.json").read_text())
    assert sorted(e["config"]["HINT"] for e in index) == ["cg", "cs", "nc"]
    assert len(list(out_dir.iterdir())) == len(before) + 3


def test_configs_that_differ_only_in_launch_parameters_share_their_files(
    project: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "emitted"
    space = str(project / "spaces" / "tiny.yaml")
    code, out, err = invoke(
        "compile", space, "-c", "WAVES=1", "-c", "WAVES=2", "--emit", str(out_dir)
    )
    assert code == 0, out + err
    one, two = json.loads((out_dir / "index.json").read_text())
    assert (one["config"]["WAVES"], two["config"]["WAVES"]) == (1, 2)
    assert one["files"] == two["files"] and len(list(out_dir.iterdir())) == 4


def test_a_failed_compile_leaves_its_log(project: Path, tmp_path: Path) -> None:
    (project / "kernels" / "axpy.cu").write_text(
        'extern "C" __global__ void axpy(float* y) { y[0] = SCALE + undefined_name; }\n'
    )
    out_dir = tmp_path / "emitted"
    space = str(project / "spaces" / "tiny.yaml")
    code, out, err = invoke("compile", space, "--emit", str(out_dir))
    assert code == 1, out + err
    (entry,) = json.loads((out_dir / "index.json").read_text())
    assert not entry["ok"] and list(entry["files"]) == ["log"]
    assert "undefined_name" in (out_dir / entry["files"]["log"]).read_text()


def test_an_index_that_is_not_ours_is_refused_and_left_alone(tmp_path: Path) -> None:
    out_dir = tmp_path / "emitted"
    out_dir.mkdir()
    (out_dir / "index.json").write_text("my notes, not JSON")
    code, out, err = invoke("compile", "reduce", "-c", "BLOCK=128", "--emit", str(out_dir))
    assert code == 2 and "index.json there is not an index workbench wrote" in out + err
    assert [p.name for p in out_dir.iterdir()] == ["index.json"]
    assert (out_dir / "index.json").read_text() == "my notes, not JSON"
    afile = tmp_path / "a-file"
    afile.write_text("x")
    code, out, err = invoke("compile", "reduce", "-c", "BLOCK=128", "--emit", str(afile))
    assert code == 2 and "not a directory" in out + err


def test_diff_shows_what_two_more_pipeline_stages_cost() -> None:
    # (on sm_90, where the default is the mma path: sm_90a's is the wgmma path)
    args = ["compile", "gemm_int8", "--arch", "sm_90", "--diff", "-c", "STAGES=2", "-c", "STAGES=4"]
    code, out, err = invoke(*args)
    assert code == 0, out + err
    text = squeezed(out)
    assert "A: STAGES=2 -> B: STAGES=4 (sm_90)" in text
    # twice the stages: twice the pipeline's shared memory and twice the async copies
    # every changed row says by how much (the change cell was empty on resource rows)
    assert "shared memory 0 + 32768 dynamic 0 + 65536 dynamic +32768 B" in text
    assert "LDGSTS 16 32 +16" in text
    assert "LDGDEPBAR 2 4 +2" in text


def test_diff_names_the_memory_ops_a_cache_hint_changes() -> None:
    args = [
        "compile",
        "stream_scale",
        "--arch",
        "sm_90",
        "--diff",
        "-c",
        "HINT=cs",
        "-c",
        "HINT=nc",
    ]
    code, out, _ = invoke(*args)
    assert code == 0
    text = squeezed(out)
    assert "sm_90: HINT=cs -> HINT=nc: the same resources and opcode counts" in text
    assert "global memory ops only in HINT=cs: LDG.E.EF LDG.E.EF.128" in text
    assert "global memory ops only in HINT=nc: LDG.E.128.CONSTANT LDG.E.CONSTANT" in text


@pytest.mark.parametrize(
    "extra", [["-c", "BLOCK=128"], ["-c", "BLOCK=128", "-c", "BLOCK=256", "-c", "BLOCK=512"],
              ["--sample", "3"], ["--all"]],
)  # fmt: skip
def test_diff_needs_two_configs(extra: list[str]) -> None:
    code, out, err = invoke("compile", "reduce", "--diff", *extra)
    assert code == 2 and "--diff compares two configs" in out + err


def _tune_tiny(project: Path) -> str:
    """Tune the tiny space on a replay whose best config is BLOCK=256,SCALE=1,WAVES=1 (the
    default: BLOCK=128,SCALE=2,WAVES=1); tune's output."""
    from recording_helpers import record_space

    from workbench.spaces import Space, load_space

    space_file = project / "spaces" / "tiny.yaml"
    space = Space(load_space(space_file))
    # made-up times (a fixture): larger blocks and a smaller SCALE are faster
    times = [(c, 10 - c["BLOCK"] / 100 + c["SCALE"] + c["WAVES"] / 10) for c in space.iter_valid()]
    rec = record_space(space, project / "rec.json", times)
    code, out, err = invoke(
        "tune", str(space_file), "--replay", str(rec), "--budget", "30", env=ONE_LINE_HINTS
    )
    assert code == 0, out + err
    return out


def test_diff_of_the_default_and_the_tuned_best(project: Path) -> None:
    space_file = project / "spaces" / "tiny.yaml"
    out = _tune_tiny(project)
    # tune names the command, and the command it names works
    (hint,) = [line for line in out.splitlines() if line.startswith("What tuning changed")]
    command = shlex.split(hint.split(": ", 1)[1])
    assert command[:2] == ["workbench", "compile"] and "--diff" in command
    assert command[command.index("--study") + 1] == "tiny | n=1000 | Test GPU"
    code, out, err = invoke(*command[1:])
    assert code == 0, out + err
    text = squeezed(out)
    assert "the best config of study 'tiny | n=1000 | Test GPU': BLOCK=256,SCALE=1,WAVES=1" in text
    assert "A: BLOCK=128,SCALE=2 -> B: BLOCK=256,SCALE=1 (sm_90)" in text
    # the default against itself is said, not drawn
    code, out, _ = invoke("compile", str(space_file), "-c", "default", "-c", "BLOCK=128", "--diff")
    assert code == 0 and "no diff: both are BLOCK=128,SCALE=2,WAVES=1" in squeezed(out)


def test_the_report_shows_what_tuning_changed_in_the_binary(
    project: Path, private_dirs: Path, tmp_path: Path
) -> None:
    from workbench.report import ReportOptions, build_reports
    from workbench.store import Store

    hint = next(x for x in _tune_tiny(project).splitlines() if x.startswith("What tuning"))
    store = Store(f"sqlite:///{private_dirs}")
    for cached in (0, 2):  # the report compiles the two configs, then the cache answers
        result = build_reports(store, "tiny", ReportOptions(out_dir=tmp_path / "report"))
        (page,) = [p for p in result.pages if p.name.startswith("study-")]
        section = page.read_text().split("What tuning changed in the binary</h2>")[1]
        section = section.split("<h2")[0]
        assert (
            "Default (BLOCK=128,SCALE=2) against the tuned best (BLOCK=256,SCALE=1), compiled "
            f"for sm_90; {cached} of 2 from the compile cache"
        ) in section
        row = "<tr><td>threads per block</td><td class='num'>128</td><td class='num'>256</td>"
        assert row in section
        # the terminal command is the one tune named (which the test above runs)
        assert f"<code>{hint.split(': ', 1)[1]}</code>".replace("'", "&#x27;") in section
    store.close()


def test_best_without_a_tuned_study_is_a_clear_error(project: Path) -> None:
    space_file = str(project / "spaces" / "tiny.yaml")
    code, out, err = invoke("compile", space_file, "-c", "best")
    message = squeezed(out + err)
    assert (
        code == 2 and "--config best takes the tuned config from the store, but no store" in message
    )
    assert "tune tiny first, or give the store with --storage" in message


LINTED_KERNEL = """\
extern "C" __global__ void __launch_bounds__(128)
axpy(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
#if SCALE == 3
  float a[256];  // too large for registers, indexed at run time: local memory
  for (int j = 0; j < 256; ++j) a[j] = x[(i + j) % n];
  if (i < n) y[i] = a[(i * 7) & 255] + y[i];
#else
  if (i < n) y[i] = SCALE * x[i] + y[i];
#endif
}
"""


def test_fail_on_gates_on_the_lint_level(project: Path) -> None:
    (project / "kernels" / "axpy.cu").write_text(LINTED_KERNEL)
    space = str(project / "spaces" / "tiny.yaml")
    clean, local, too_wide = "BLOCK=128,SCALE=1", "BLOCK=128,SCALE=3", "BLOCK=256,SCALE=1"
    base = ["compile", space, "-c", clean, "-c", local]
    code, out, _ = invoke(*base)
    assert code == 0 and "warning: kernel uses local memory" in squeezed(out)
    code, out, _ = invoke(*base, "--fail-on", "error")
    assert code == 0, out
    code, out, _ = invoke(*base, "--fail-on", "warning")
    text = squeezed(out)
    assert code == 1 and "--fail-on warning: 1 of 2 configs:" in text
    assert f"{local},WAVES=1 (sm_90): warning: kernel uses local memory" in text
    assert clean + ",WAVES=1 (sm_90)" not in text.split("--fail-on warning")[1]
    code, out, _ = invoke("compile", space, "-c", clean, "-c", too_wide, "--fail-on", "error")
    text = squeezed(out)
    assert code == 1 and "--fail-on error: 1 of 2 configs:" in text
    assert f"{too_wide},WAVES=1 (sm_90): error: cannot launch: 256 threads per block" in text
    code, out, err = invoke("compile", space, "-c", clean, "--fail-on", "info")
    assert code == 2 and "--fail-on 'info': expected 'error' or 'warning'" in out + err


def test_a_records_lints_are_typed_and_export_as_their_text() -> None:
    """A record keeps its findings as Lint records (code, severity, message), not as text
    whose level is parsed back from a prefix; --json and --csv still write each one as
    ``level: message``."""
    from workbench.analysis import Lint, LintCode, Severity
    from workbench.static.sweep import StaticRecord

    r = StaticRecord(kernel="k", arch="sm_90", device="H200", config={}, label="", ok=True)
    r.add_lint(LintCode.CANNOT_LAUNCH, "cannot launch: 512 threads per block")
    r.lints.append(Lint("k", LintCode.SPILLS, Severity.WARNING, "spills: 8 bytes"))
    assert r.to_dict()["lints"] == [
        "error: cannot launch: 512 threads per block",
        "warning: spills: 8 bytes",
    ]
    assert [x.code for x in r.lints] == [LintCode.CANNOT_LAUNCH, LintCode.SPILLS]
    assert [x.at_least(Severity.WARNING) for x in r.lints] == [True, True]
    assert [x.at_least(Severity.ERROR) for x in r.lints] == [True, False]


@pytest.mark.slow
def test_a_problem_variant_keeps_its_pinned_value_in_the_default(
    private_dirs: Path, tmp_path: Path
) -> None:
    from recording_helpers import record_space

    from workbench.report import ReportOptions, build_reports
    from workbench.spaces import Space, load_kernel
    from workbench.store import Store

    space = Space(load_kernel("reduce"))
    configs = [c for op in ("max", "sum") for c in space.sample(60, seed=1, fixed={"OP": op})]
    # made-up times (a fixture): the streaming hint and small blocks are fastest
    times = [(c, 1 + c["BLOCK"] / 1000 + (c["HINT"] != "cs")) for c in configs]
    rec = record_space(space, tmp_path / "reduce.json", times)
    for op in ("sum", "max"):  # a study per variant; the OP=max one last
        code, out, err = invoke("tune", "reduce", "--set", f"OP={op}", "--replay", str(rec),
                                "--budget", "20", env=ONE_LINE_HINTS)  # fmt: skip
        assert code == 0, out + err
    # --config best: --set picks the variant's study; without it, two studies match
    code, best_out, err = invoke("compile", "reduce", "--set", "OP=max", "-c", "best")
    assert code == 0 and "the best config of study 'reduce[OP=max] |" in squeezed(best_out)
    code, both, err = invoke("compile", "reduce", "-c", "best")
    assert code == 2 and "several studies match" in squeezed(both + err)
    hint = next(x for x in out.splitlines() if x.startswith("What tuning"))
    command = shlex.split(hint.split(": ", 1)[1])
    assert command[command.index("-c") + 1] == "OP=max"  # not the default's OP=sum
    code, out, err = invoke(*command[1:])
    assert code == 0, out + err
    change = squeezed(out).split(" A: ", 1)[1].split("(sm_")[0]
    assert "OP=" not in change, change  # the search's choices only
    store = Store(f"sqlite:///{private_dirs}")
    result = build_reports(store, "reduce", ReportOptions(out_dir=tmp_path / "report"))
    (page,) = [p for p in result.pages if p.name.startswith("study-") and "OP-max" in p.name]
    section = page.read_text().split("What tuning changed in the binary</h2>")[1]
    section = section.split("<h2")[0]
    assert "Default (" in section and "2 of 2 from the compile cache" in section
    assert "OP=" not in section.split("against")[0] and "-c OP=max -c best" in section
    store.close()


def test_set_pins_a_problem_variant_in_every_compiled_config(tmp_path: Path) -> None:
    from workbench.store import Store

    db = tmp_path / "s.sqlite"
    code, out, err = invoke("compile", "reduce", "--set", "OP=max", "--sample", "2",
                            "--json", str(tmp_path / "r.json"), "--storage", str(db))  # fmt: skip
    assert code == 0, out + err
    records = json.loads((tmp_path / "r.json").read_text())
    assert len(records) == 3 and {r["config"]["OP"] for r in records} == {"max"}
    # the default is the variant's default, and the store's study is named as tune names it
    assert records[0]["config"]["FINISH"] == "atomic" and records[0]["config"]["BLOCK"] == 256
    store = Store(f"sqlite:///{db}")
    (study,) = store.studies()
    assert study.kernel.startswith("reduce[OP=max") and "compile only" in study.name
    store.close()
    # a config that contradicts the pin is named, not compiled
    code, out, err = invoke("compile", "reduce", "--set", "OP=max", "-c", "OP=sum")
    assert code == 2 and "is invalid: OP is set to 'max'" in squeezed(out + err)


def test_the_report_says_why_a_binary_diff_is_missing(
    project: Path, private_dirs: Path, tmp_path: Path
) -> None:
    from workbench.report import ReportOptions, build_reports
    from workbench.store import Store

    _tune_tiny(project)
    # the kernel was edited after tuning and no longer compiles: the page says so, and the
    # rest of the report is written
    (project / "kernels" / "axpy.cu").write_text("this is not CUDA\n")
    store = Store(f"sqlite:///{private_dirs}")
    result = build_reports(store, "tiny", ReportOptions(out_dir=tmp_path / "report"))
    (page,) = [p for p in result.pages if p.name.startswith("study-")]
    section = page.read_text().split("What tuning changed in the binary</h2>")[1]
    assert "No diff: no binary to read: BLOCK=128,SCALE=2,WAVES=1: compile failed" in section
    assert "Tuning history" in page.read_text()
    store.close()
