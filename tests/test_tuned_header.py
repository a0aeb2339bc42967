"""``workbench store header``: the tuned configs as a C++ header, checked by compiling it.

Each check compiles with NVRTC (no GPU): the kernel built through the header's target must be
the kernel the workbench built for the best config (same PTX), and the run-time table must hold
the stored values (static_asserts that NVRTC evaluates).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from pathlib import Path

import pytest
from cli_helpers import invoke
from dataset_paths import CACHES, needs_caches
from recording_helpers import record_space

from workbench.compiler.jobs import make_job
from workbench.compiler.nvrtc import compile_cuda
from workbench.compiler.options import CompileOptions
from workbench.spaces import Space, load_space
from workbench.spaces.model import Config
from workbench.spaces.registry import load_kernel
from workbench.store import Store
from workbench.store.header import collect, target_lines
from workbench.toolchain import Arch

pytestmark = pytest.mark.usefixtures("private_dirs")


def recording(space: Space, path: Path, configs: list[Config], times: list[float]) -> Path:
    """A recording of ``configs`` with made-up times (a test fixture: the header is about
    which config is best, not about how fast it is)."""
    return record_space(space, path, zip(configs, times, strict=False))


def tune_replay(space_file: str, rec: Path, *extra: str) -> dict:
    code, out, err = invoke("tune", space_file, "--replay", str(rec), "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def no_lineinfo(options: CompileOptions, **changes: object) -> CompileOptions:
    # line info names the source file, which differs between the two builds
    return dataclasses.replace(options, lineinfo=False, **changes)  # type: ignore[arg-type]


def ptx_through_header(header: Path, target: str, space: Space, config: Config) -> tuple[str, str]:
    """(PTX built by the workbench for ``config``, PTX built from a source that selects
    ``target`` in ``header`` and includes the kernel, with no -D flags)."""
    job = make_job(space, config)
    exprs = (job.name_expression,) if job.name_expression else ()
    direct = compile_cuda(
        job.source, no_lineinfo(job.options), filename=job.filename, name_expressions=exprs
    )
    # the kernel's text after the header, as a user's file would put them
    wrapper = f'#define {target}\n#include "{header.name}"\n{job.source}'
    options = no_lineinfo(
        job.options, defines=(), include_dirs=(str(header.parent), *job.options.include_dirs)
    )
    # (under the kernel's file name: internal symbols are named after the program's)
    via = compile_cuda(wrapper, options, filename=job.filename, name_expressions=exprs)
    assert direct.ok and via.ok, via.log
    assert direct.ptx and via.ptx
    return direct.ptx, via.ptx


def nvrtc_accepts(source: str, header: Path, *defines: tuple[str, str]) -> tuple[bool, str]:
    options = CompileOptions(
        arch=Arch.parse("sm_90"), defines=defines, include_dirs=(str(header.parent),)
    )
    out = compile_cuda(source, options, filename="check.cu")
    return out.ok, out.log


def test_the_target_builds_the_tuned_kernel_and_the_table_holds_the_tuned_values(
    project: Path, tmp_path: Path
) -> None:
    tiny = project / "spaces" / "tiny.yaml"
    spaces = [Space(load_space(tiny), shape={"n": n}) for n in (1000, 4096)]
    # one per shape (WAVES, a launch parameter, 1 in both)
    bests = ({"BLOCK": 64, "SCALE": 2, "WAVES": 1}, {"BLOCK": 256, "SCALE": 1, "WAVES": 1})
    for space, best in zip(spaces, bests, strict=True):
        configs = list(space.iter_valid())
        times = [1.0 if all(c[k] == v for k, v in best.items()) else 2.0 for c in configs]
        rec = recording(space, tmp_path / f"rec-{space.shape['n']}.json", configs, times)
        n = str(space.shape["n"])
        doc = tune_replay(str(tiny), rec, "--shape", f"n={n}", "--budget", "50")
        assert doc["best_value"] == 1.0
    header = tmp_path / "inc" / "tuned.h"
    code, out, err = invoke("store", "header", "tiny", "-o", str(header))
    assert code == 0, err
    targets = ["WORKBENCH_TINY_N_1000_TEST_GPU", "WORKBENCH_TINY_N_4096_TEST_GPU"]
    assert all(t in out for t in targets)
    text = header.read_text()
    assert invoke("store", "header", "tiny")[1] == text  # the same store, the same text
    assert "#define BLOCK 64\n#define SCALE 2\n" in text
    assert "WAVES=1 (launch)" in text  # a launch parameter is named, not defined
    # the kernel compiled through each target is the kernel the workbench compiled
    for space, target, best in zip(spaces, targets, bests, strict=True):
        direct, via = ptx_through_header(header, target, space, best)
        assert direct == via
    # the run-time table: typed values, shape, launch geometry
    check = (
        '#include "tuned.h"\n'
        "namespace t = workbench_tuned::tiny;\n"
        "static_assert(t::entry_count == 2);\n"
        "static_assert(t::entries[0].shape.n == 1000 && t::entries[1].shape.n == 4096);\n"
        "static_assert(t::entries[0].params.BLOCK == 64 && t::entries[0].params.SCALE == 2);\n"
        "static_assert(t::entries[1].params.BLOCK == 256 && t::entries[1].params.WAVES == 1);\n"
        "static_assert(t::entries[0].value == 1.0 && t::entries[0].launch_known);\n"
        "static_assert(t::entries[0].block[0] == 64 && t::entries[0].grid[0] == 16);\n"
    )
    ok, log = nvrtc_accepts(check, header)
    assert ok, log
    ok, log = nvrtc_accepts(check.replace("BLOCK == 64 &&", "BLOCK == 65 &&"), header)
    assert not ok  # the check can fail
    # the report shows the same lines on each study's page
    code, _, err = invoke("report", "tiny", "--out", str(tmp_path / "site"))
    assert code == 0, err
    pages = [p.read_text() for p in (tmp_path / "site").glob("*.html")]
    page = next(p for p in pages if "n=1000" in p and "For your build" in p)
    assert f"define {targets[0]} before including" in page
    assert "#define BLOCK 64\n#define SCALE 2" in page and "WAVES=1 (launch)" in page
    # a macro of a field's name would rename the field: refused by name, not mangled
    ok, log = nvrtc_accepts(check, header, ("BLOCK", "999"))
    assert not ok and "macro BLOCK is defined here" in log
    # a selected target defines the kernel's macros and leaves the table out
    selected = (
        f'#define {targets[1]}\n#include "tuned.h"\n'
        "static_assert(BLOCK == 256 && SCALE == 1);\n"
        f"constexpr const char *chosen = WORKBENCH_TINY_TARGET;\n"
        "namespace workbench_tuned { namespace tiny { struct Entry {}; } }  // not defined above\n"
    )
    ok, log = nvrtc_accepts(selected, header)
    assert ok, log
    # the kernel's unprefixed macros are taken back after its source, ENTRY/TARGET kept
    undone = (
        f'#define {targets[1]}\n#include "tuned.h"\nstatic_assert(BLOCK == 256);\n'
        '#define WORKBENCH_TINY_UNDEF\n#include "tuned.h"\n'
        "#if defined(BLOCK) || defined(SCALE) || defined(WORKBENCH_TINY_UNDEF)\n"
        '#error "a macro of the kernel is still defined"\n#endif\n'
        "constexpr const char *chosen = WORKBENCH_TINY_TARGET;\n"
    )
    ok, log = nvrtc_accepts(undone, header)
    assert ok, log
    # two targets at once: refused by the preprocessor
    two = "".join(f"#define {t}\n" for t in targets) + '#include "tuned.h"\n'
    ok, log = nvrtc_accepts(two, header)
    assert not ok and "define at most one tiny target" in log


@pytest.mark.slow
def test_a_library_kernel_with_text_values_builds_the_same_through_the_header(
    tmp_path: Path,
) -> None:
    """gemm_int8: text values (PATH=mma also defines PATH_mma=1), many macros, sm_90a."""
    spec = load_kernel("gemm_int8")
    space = Space(spec)
    default = spec.default_config()
    configs = [default, *space.sample(5, seed=1)]
    rec = recording(space, tmp_path / "gemm.json", configs, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    doc = tune_replay("gemm_int8", rec, "--budget", "6")
    assert doc["best_config"] == default
    header = tmp_path / "tuned.h"
    code, _, err = invoke("store", "header", "gemm_int8", "-o", str(header))
    assert code == 0, err
    target = "WORKBENCH_GEMM_INT8_M_4096_N_4096_K_4096_TEST_GPU"
    text = header.read_text()
    assert f"#if defined({target})" in text and "#define PATH_mma 1" in text
    direct, via = ptx_through_header(header, target, space, default)
    assert direct == via


@needs_caches
def test_a_recorded_space_gives_its_parameters_as_kernel_tuner_passes_them(
    tmp_path: Path,
) -> None:
    doc = tune_replay_file(CACHES / "pnpoly_RTX_3090.json.gz")
    code, out, err = invoke("store", "header", doc["kernel"])
    assert code == 0, err
    assert "a recorded space: its parameters as Kernel Tuner passes them" in out
    for name, value in doc["best_config"].items():
        assert f"#define {name} {value}\n" in out
    header = tmp_path / "tuned.h"
    header.write_text(out)  # (stdout holds the header alone)
    best = doc["best_config"]
    check = '#include "tuned.h"\n' + "".join(
        f"static_assert(workbench_tuned::{doc['kernel']}::entries[0].params.{k} == {v});\n"
        for k, v in best.items()
    )
    ok, log = nvrtc_accepts(check, header)
    assert ok, log


def tune_replay_file(cache: Path) -> dict:
    code, out, err = invoke("tune", "--replay", str(cache), "--budget", "20", "--json")
    assert code == 0, err
    return json.loads(out)


@needs_caches
@pytest.mark.parametrize(
    "args,message",
    [
        (["store", "header", "nosuchkernel"], "has no measured study of nosuchkernel"),
        (["store", "header", "pnpoly", "--study", "nosuch"], "nosuch"),
    ],
)
def test_bad_header_requests_are_named(args: list[str], message: str) -> None:
    tune_replay_file(CACHES / "pnpoly_RTX_3090.json.gz")
    code, out, err = invoke(*args)
    assert code == 2 and message in " ".join(err.split()) and "Traceback" not in out + err


def test_a_kernel_changed_since_tuning_is_said(project: Path, tmp_path: Path) -> None:
    tiny = project / "spaces" / "tiny.yaml"
    space = Space(load_space(tiny))
    configs = list(space.iter_valid())
    rec = recording(space, tmp_path / "rec.json", configs, [1.0 + i for i in range(len(configs))])
    tune_replay(str(tiny), rec, "--budget", "50")
    code, out, err = invoke("store", "header", "tiny")
    assert code == 0 and "changed since" not in out + err
    kernel = project / "kernels" / "axpy.cu"
    kernel.write_text(kernel.read_text() + "// edited after tuning\n")
    code, out, err = invoke("store", "header", "tiny")
    assert code == 0, err
    said = " ".join(err.split())
    assert "or its kernel changed since this was tuned" in said
    assert "// note: " in out and "changed since this was tuned" in out
    assert "the macros are those it was tuned with (the store's copy)" in said
    # a space whose constraints now rule the tuned config out: said, the config still written
    tiny.write_text(tiny.read_text().replace("BLOCK * SCALE <= 512", "BLOCK >= 64"))
    code, out, err = invoke("store", "header", "tiny")
    assert code == 0 and "not valid in the space file now: violates BLOCK >= 64" in " ".join(
        err.split()
    )
    assert "#define BLOCK 32\n" in out


def test_a_ptx_kernel_gets_its_ptxas_flags_and_its_text_parameters_named(
    tmp_path: Path,
) -> None:
    """A PTX kernel cannot include a header: its text parameters (substituted into the PTX)
    are named as not set, the flags are ptxas's, and the table says which compiler."""
    space = Space(load_kernel("stream_scale"))
    configs = list(space.iter_valid())
    times = [1.0 if c == space.spec.default_config() else 2.0 for c in configs]
    tune_replay("stream_scale", recording(space, tmp_path / "r.json", configs, times))
    header = tmp_path / "tuned.h"
    code, _, err = invoke("store", "header", "stream_scale", "-o", str(header))
    assert code == 0, err
    text = header.read_text()
    assert "// ptxas flags: -arch=sm_90" in text and "-Xptxas" not in text
    assert "HINT=ca (substituted in the PTX)" in text and "BLOCKS_PER_SM=4 (launch)" in text
    check = (
        '#include "tuned.h"\n'
        "__host__ __device__ constexpr bool same(const char *a, const char *b) {\n"
        "  return *a == *b && (*a == 0 || same(a + 1, b + 1));\n"
        "}\n"
        "namespace t = workbench_tuned::stream_scale;\n"
        'static_assert(same(t::entries[0].compiler, "ptxas"));\n'
        'static_assert(same(t::entries[0].params.HINT, "ca"));\n'
        "static_assert(t::entries[0].params.BLOCK == 256);\n"
        'static_assert(same(t::entries[0].entry, "stream_scale"));\n'
    )
    ok, log = nvrtc_accepts(check, header)
    assert ok, log


def _pnpoly_slice(path: Path, kernel: str, rename: tuple[str, str] | None = None, **values) -> Path:
    """200 entries of the real pnpoly cache as kernel ``kernel``: a parameter renamed
    (``rename``: old, new), or one value replaced (``values``: NAME=(old, new))."""
    with gzip.open(CACHES / "pnpoly_RTX_3090.json.gz") as f:
        doc = json.loads(f.read())
    keys = doc["tune_params_keys"]
    entries = [dict(e) for e in list(doc["cache"].values())[:200]]
    for name, (old, new) in values.items():
        doc["tune_params"][name] = [new if v == old else v for v in doc["tune_params"][name]]
        for e in entries:
            e[name] = new if e[name] == old else e[name]
    if rename is not None:
        old, new = rename
        keys[keys.index(old)] = new
        doc["tune_params"][new] = doc["tune_params"].pop(old)
        for e in entries:
            e[new] = e.pop(old)
    doc["cache"] = {",".join(str(e[k]) for k in keys): e for e in entries}
    doc["kernel_name"] = kernel
    path.write_text(json.dumps(doc))
    return path


@needs_caches
@pytest.mark.parametrize(
    "kernel,change,refused",
    [
        # a newline in a name would put an #include of its own into users' builds
        (
            "pn_newline",
            {"rename": ("tile_size", 'tile_size 1\n#include "/etc/passwd"\n#define x')},
            "is not a C identifier",
        ),
        ("pn_markup", {"rename": ("tile_size", "<script>")}, "'<script>' is not a C identifier"),
        ("pn_keyword", {"rename": ("tile_size", "int")}, "'int' is a C++ keyword"),
        (
            "pn_value",
            {"use_method": (0, '0\n#include "/etc/passwd"')},
            "is not a number or an identifier",
        ),
        ("pn_comment", {"use_method": (0, "0 /* x")}, "is not a number or an identifier"),
    ],
)
def test_names_and_values_a_header_cannot_define_are_refused(
    tmp_path: Path, kernel: str, change: dict, refused: str
) -> None:
    rec = _pnpoly_slice(tmp_path / "rec.json", kernel, **change)
    code, _, err = invoke("tune", "--replay", str(rec), "--budget", "200", "--json")
    assert code == 0, err
    code, out, err = invoke("store", "header", kernel)
    assert code == 2 and "#include" not in out and "<script>" not in out
    said = " ".join(err.split())
    assert f"no study of {kernel} has a config to write" in said and refused in said


def test_a_comment_ending_in_a_backslash_does_not_swallow_the_next_define(
    project: Path, tmp_path: Path
) -> None:
    """A note (a store's text) that ends in a backslash: C++ would continue the comment over
    the next line, a #define."""
    tiny = project / "spaces" / "tiny.yaml"
    space = Space(load_space(tiny))
    configs = list(space.iter_valid())
    rec = recording(space, tmp_path / "rec.json", configs, [1.0 + i for i in range(len(configs))])
    tune_replay(str(tiny), rec, "--budget", "50")
    store = Store(f"sqlite:///{os.environ['WORKBENCH_STORE']}")
    (entry,) = collect(store, "tiny").entries
    lines = target_lines(dataclasses.replace(entry, notes=("from C:\\tuned\\",)))
    header = tmp_path / "t.h"
    header.write_text("\n".join(lines) + "\n")
    block = dict(entry.defines)["BLOCK"]
    ok, log = nvrtc_accepts(f'#include "t.h"\nstatic_assert(BLOCK == {block});\n', header)
    assert ok, log
