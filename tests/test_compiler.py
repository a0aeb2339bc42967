"""NVRTC and ptxas compiles of the real kernels, the content cache, and parallel compiles."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workbench import toolchain
from workbench.compiler import CompileAhead, CompileCache, compile_job, compile_jobs, make_job
from workbench.compiler.jobs import substitute_ptx
from workbench.compiler.options import CompileOptions
from workbench.errors import ArchError, CompileError, ToolchainError
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.targets import resolve_arches
from workbench.toolchain import Arch

ARCHES = ["sm_80", "sm_89", "sm_90"]


def sample_jobs(kernel: str, arch: str, n: int, seed: int = 0) -> list:
    spec = load_kernel(kernel)
    space = Space(spec, arch=Arch.parse(arch))
    configs = [spec.default_config(), *space.sample(n, seed=seed)]
    return [make_job(space, c) for c in configs]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("kernel", ["reduce", "stream_scale"])
def test_sampled_configs_compile(kernel: str, arch: str, cache_dir: Path) -> None:
    jobs = sample_jobs(kernel, arch, 4, seed=hash(arch) % 100)
    results = compile_jobs(jobs, CompileCache(cache_dir), workers=2)
    for job, result in zip(jobs, results, strict=True):
        assert result.ok, result.log
        assert result.arch == arch
        assert result.cubin and result.cubin[:4] == b"\x7fELF"
        assert result.entry is not None and result.entry.encode() in result.cubin
        assert "Used" in result.log and "registers" in result.log  # -Xptxas -v
        if kernel == "reduce":
            assert result.entry.startswith("_Z10reduce_all")
            assert job.name_expression and result.lowered_names[job.name_expression] == result.entry


def test_template_and_define_roles() -> None:
    spec = load_kernel("reduce")
    space = Space(spec, arch=Arch.parse("sm_90"))
    job = make_job(space, {**spec.default_config(), "BLOCK": 128, "dlcm": "cg"})
    assert job.name_expression == (
        "reduce_all<float, Op::sum, Finish::atomic, Hint::plain, 128, 8, 4, 1>"
    )
    assert "-dlcm=cg" in job.options.to_nvrtc_flags()
    # launch-only knobs do not change the binary
    other = make_job(
        space, {**spec.default_config(), "BLOCK": 128, "dlcm": "cg", "BLOCKS_PER_SM": 16}
    )
    assert other.key() == job.key()


def test_option_flags_are_normalised() -> None:
    arch = Arch.parse("sm_90a")
    a = CompileOptions.build(arch, {"B": 1, "A": True}, {"fast_math": 1, "maxrregcount": "64"})
    b = CompileOptions.build(arch, {"A": 1, "B": "1"}, {"maxrregcount": 64, "fast_math": True})
    assert a.to_nvrtc_flags() == b.to_nvrtc_flags()
    flags = a.to_nvrtc_flags()
    assert flags[0] == "-arch=sm_90a"
    assert "--use_fast_math" in flags and "--maxrregcount=64" in flags
    assert "-DA=1" in flags and "-DB=1" in flags


def test_cache_hit_is_a_lookup(cache_dir: Path) -> None:
    job = sample_jobs("reduce", "sm_90", 0)[0]
    cache = CompileCache(cache_dir)
    start = time.perf_counter()
    cold = compile_job(job, cache)
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    warm = compile_job(job, cache)
    warm_s = time.perf_counter() - start
    assert not cold.cached and warm.cached
    assert warm.cubin == cold.cubin and warm.log == cold.log and warm.entry == cold.entry
    assert warm_s < cold_s / 5


def test_cache_key_changes_with_every_ingredient(project: Path, cache_dir: Path) -> None:
    spec = load_space(project / "spaces" / "tiny.yaml")
    space = Space(spec, arch=Arch.parse("sm_80"))
    base = make_job(space, spec.default_config())
    assert make_job(space, spec.default_config()).key() == base.key()
    assert make_job(space, {**spec.default_config(), "SCALE": 3}).key() != base.key()
    assert (
        make_job(Space(spec, arch=Arch.parse("sm_90")), spec.default_config()).key() != base.key()
    )
    src = project / "kernels" / "axpy.cu"
    src.write_text(src.read_text() + "\n// edited\n")
    assert make_job(space, spec.default_config()).key() != base.key()


def test_included_header_is_part_of_the_key(project: Path) -> None:
    (project / "kernels" / "common.cuh").write_text("#define TWICE(x) (2 * (x))\n")
    src = project / "kernels" / "axpy.cu"
    src.write_text(
        '#include "common.cuh"\n' + src.read_text().replace("SCALE * x[i]", "TWICE(SCALE) * x[i]")
    )
    spec = load_space(project / "spaces" / "tiny.yaml")
    space = Space(spec, arch=Arch.parse("sm_80"))
    first = make_job(space, spec.default_config())
    assert compile_job(first).ok
    (project / "kernels" / "common.cuh").write_text("#define TWICE(x) ((x) + (x))\n")
    assert make_job(space, spec.default_config()).key() != first.key()


def test_angle_bracket_project_headers_are_part_of_the_key(project: Path) -> None:
    """``#include <name>`` found in the source's directory or an include directory is a project
    header (NVRTC searches those before the toolkit): editing it, or one it includes, changes
    the key. A toolkit header such as <cuda_fp16.h> is left to the toolchain version."""
    (project / "kernels" / "twice.cuh").write_text('#include "inner.cuh"\n')
    (project / "kernels" / "inner.cuh").write_text("#define TWICE(x) (2 * (x))\n")
    src = project / "kernels" / "axpy.cu"
    src.write_text(
        "#include <cuda_fp16.h>\n#include <twice.cuh>\n"
        + src.read_text().replace("SCALE * x[i]", "TWICE(SCALE) * x[i]")
    )
    spec = load_space(project / "spaces" / "tiny.yaml")
    space = Space(spec, arch=Arch.parse("sm_80"))
    first = make_job(space, spec.default_config())
    assert [name for name, _ in first.header_digests] == ["<twice.cuh>", "inner.cuh"]
    assert compile_job(first).ok  # NVRTC finds it the same way
    (project / "kernels" / "inner.cuh").write_text("#define TWICE(x) ((x) + (x))\n")
    assert make_job(space, spec.default_config()).key() != first.key()


@pytest.mark.slow
def test_parallel_gives_the_same_bytes_as_serial(tmp_path: Path) -> None:
    jobs = sample_jobs("reduce", "sm_89", 5, seed=7) + sample_jobs("stream_scale", "sm_89", 3)
    serial = compile_jobs(jobs, CompileCache(tmp_path / "a"), workers=1)
    parallel = compile_jobs(jobs, CompileCache(tmp_path / "b"), workers=2)
    assert [r.cubin for r in serial] == [r.cubin for r in parallel]
    assert all(r.ok for r in parallel)


def test_compile_error_is_a_result_and_the_sweep_goes_on(project: Path, cache_dir: Path) -> None:
    spec = load_space(project / "spaces" / "tiny.yaml")
    space = Space(spec, arch=Arch.parse("sm_80"))
    good = make_job(space, spec.default_config())
    (project / "kernels" / "axpy.cu").write_text("this is not CUDA;\n")
    bad = make_job(space, spec.default_config())
    results = compile_jobs([bad, good], CompileCache(cache_dir), workers=2)
    assert not results[0].ok and results[0].cubin is None and "error" in results[0].log
    assert results[1].ok
    again = compile_job(bad, CompileCache(cache_dir))
    assert again.cached and not again.ok and again.log == results[0].log


def test_ptx_assembler_error_is_a_result() -> None:
    spec = load_kernel("stream_scale")
    space = Space(spec, arch=Arch.parse("sm_80"))
    job = make_job(space, {**spec.default_config(), "HINT": "ca"})
    broken = type(job)(
        job.language,
        job.source.replace("ld.global.ca.v4", "ld.global.zz.v4"),
        job.filename,
        job.options,
        None,
        job.entry_kernel,
    )
    result = compile_job(broken)
    assert not result.ok and "ptxas" in result.log


def test_ptx_placeholders() -> None:
    assert (
        substitute_ptx("ld.global.${HINT}.f32 $L__BB0_1;", {"HINT": "cs"}, "k.ptx")
        == "ld.global.cs.f32 $L__BB0_1;"
    )
    with pytest.raises(CompileError, match="MISSING"):
        substitute_ptx("${MISSING}", {}, "k.ptx")


def test_unknown_and_undeclared_arches() -> None:
    spec = load_kernel("reduce")
    with pytest.raises(ArchError, match="not a CUDA architecture"):
        Arch.parse("gfx90a")
    with pytest.raises(ArchError, match="cannot target"):
        Arch.parse("sm_50").check_supported()
    with pytest.raises(ArchError, match="not among them"):
        resolve_arches(spec, "sm_75")
    assert [a.sm for a in resolve_arches(spec, "all")] == ARCHES
    assert [a.sm for a in resolve_arches(spec, None)] == ["sm_90"]


def test_sm_90a_is_a_target() -> None:
    arch = Arch.parse("sm_90a")
    assert arch.check_supported().cc == 90 and arch.suffix == "a"
    src = (
        'extern "C" __global__ void k(int* p) { asm volatile("setmaxnreg.inc.sync.aligned.u32 '
        '240;"); p[0] = 1; }'
    )
    from workbench.compiler.nvrtc import compile_cuda

    assert compile_cuda(src, CompileOptions.build(arch)).ok  # sm_90a-only instruction
    assert not compile_cuda(src, CompileOptions.build(Arch.parse("sm_90"))).ok


def test_missing_tool_names_the_wheel(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda import pathfinder

    monkeypatch.setattr(pathfinder, "find_nvidia_binary_utility", lambda name: None)
    with pytest.raises(ToolchainError, match="pip install nvidia-cuda-nvdisasm"):
        toolchain.find_tool("nvdisasm")


def test_missing_nvrtc_is_a_toolchain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda.bindings import nvrtc
    from cuda.pathfinder import DynamicLibNotFoundError

    def missing() -> None:
        raise DynamicLibNotFoundError("libnvrtc.so.13 not found")

    monkeypatch.setattr(nvrtc, "nvrtcVersion", missing)
    with pytest.raises(ToolchainError, match="nvidia-cuda-nvrtc"):
        toolchain.nvrtc_module()


def test_text_defines_also_define_a_flag_macro(project: Path) -> None:
    src = project / "kernels" / "axpy.cu"
    src.write_text(
        "#if !MODE_fast && !MODE_safe\n#error no mode\n#endif\n"
        "#if MODE_fast\n#define FACTOR 2\n#else\n#define FACTOR 1\n#endif\n"
        + src.read_text().replace("SCALE * x[i]", "FACTOR * SCALE * x[i]")
    )
    space_file = project / "spaces" / "tiny.yaml"
    space_file.write_text(
        space_file.read_text().replace("  WAVES:", "  MODE: {values: [fast, safe]}\n  WAVES:")
    )
    spec = load_space(space_file)
    space = Space(spec, arch=Arch.parse("sm_80"))
    job = make_job(space, {**spec.default_config(), "MODE": "safe"})
    assert ("MODE", "safe") in job.options.defines and ("MODE_safe", "1") in job.options.defines
    assert compile_job(job).ok


# -- a cache folder that cannot be written (issue 52) -----------------------------------------
def _writes(folder: Path) -> bool:
    """Whether a file can really be made in ``folder`` (root's can be, whatever the mode)."""
    try:
        (folder / ".probe").write_bytes(b"")
    except OSError:
        return False
    (folder / ".probe").unlink()
    return True


@pytest.fixture(params=["read_only_folder", "parent_is_a_file"])
def unwritable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A compile cache folder no put can write: mode 0o555 (a shared, read-only cache; skipped
    where the tests run as root, who writes there anyway), or a path under a regular file,
    which not even root can make."""
    if request.param == "parent_is_a_file":
        (tmp_path / "a-file").write_text("")
        yield tmp_path / "a-file" / "cache"
        return
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if _writes(folder):
            pytest.skip("this user writes into a 0o555 folder (root)")
        yield folder
    finally:
        folder.chmod(0o755)


def _warnings(err: str, root: Path) -> list[str]:
    return [line for line in err.splitlines() if str(root) in line]


def test_an_unwritable_cache_compiles_without_caching_and_says_so_once(
    project: Path, unwritable: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Every config failed ("compile failed": an internal error in each compile process) when
    the cache folder could not be written. Each compile path now compiles uncached; the
    folder is named once in the process, on stderr, whichever paths meet it."""
    spec = load_space(project / "spaces" / "tiny.yaml")
    space = Space(spec, arch=Arch.parse("sm_80"))
    jobs = [make_job(space, {**spec.default_config(), "BLOCK": b}) for b in (32, 64, 128, 256)]
    cache = CompileCache(unwritable)

    one = compile_job(jobs[0], cache)
    many = compile_jobs(jobs[1:3], cache, workers=2)
    ahead = CompileAhead(cache, workers=1)
    try:
        ahead.submit(jobs[3])
        later = ahead.result(jobs[3])
    finally:
        ahead.close()
    results = [one, *many, later]
    assert all(r.ok and not r.cached for r in results), [r.log for r in results]
    assert all(r.cubin and r.cubin[:4] == b"\x7fELF" for r in results)
    assert compile_job(jobs[0], CompileCache(unwritable)).ok  # (a second cache object)
    (said,) = _warnings(capfd.readouterr().err, unwritable)
    assert "cannot be written" in said and "without caching" in said


def test_a_read_only_cache_still_answers_its_hits(
    project: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A cache filled earlier, then shared read-only: its entries are hits, and the SASS text
    a sweep keeps beside an entry is made again rather than failing the sweep."""
    from workbench.static.sweep import sass_text

    spec = load_space(project / "spaces" / "tiny.yaml")
    space = Space(spec, arch=Arch.parse("sm_80"))
    job = make_job(space, spec.default_config())
    root = tmp_path / "shared"
    first = compile_job(job, CompileCache(root))
    folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
    for folder in folders:
        folder.chmod(0o555)
    try:
        if _writes(root):
            pytest.skip("this user writes into a 0o555 folder (root)")
        hit = compile_job(job, CompileCache(root))
        assert hit.cached and hit.cubin == first.cubin
        assert "EXIT" in sass_text(hit, CompileCache(root))
    finally:
        for folder in folders:
            folder.chmod(0o755)
    assert len(_warnings(capfd.readouterr().err, root)) == 1


def test_compile_command_with_an_unwritable_cache(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``workbench compile`` with $WORKBENCH_CACHE_DIR where nothing can be written (under a
    regular file: root included): every config compiles, and the folder is named once."""
    from cli_helpers import invoke

    (tmp_path / "a-file").write_text("")
    root = tmp_path / "a-file" / "cache"
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(root))
    code, out, err = invoke(
        "compile", str(project / "spaces" / "tiny.yaml"), "--arch", "sm_80", "--sample", "3"
    )
    assert code == 0 and "0 failed" in out, out + err
    (said,) = _warnings(err, root)
    assert said.startswith("warning: ") and "without caching" in said
