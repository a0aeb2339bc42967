"""The CUTLASS baseline without a GPU (issue 45): the selection and its skip messages with the
install hint, the choice of the fastest operator, its store rows and report table; and, with
the extra installed (``pip install 'workbench[cutlass]'``), what the CUTLASS Operator API does
on a CPU: it imports, lists the sm_90a operators for int8 and FP8 at the compare shapes, takes
the adapter's arguments, compiles an operator (CuTe DSL JIT) to an sm_90a cubin of wgmma and
TMA, and the compile cache serves it to a later run. Those tests skip, saying so, without the
extra; CI runs this file in a venv that has it (.ci/run)."""

from __future__ import annotations

import importlib.metadata
import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.cli.main import app
from workbench.compare.baselines import (
    REGISTRY,
    Baseline,
    BaselineUnsupported,
    BaselineVariant,
    Choice,
    missing_here,
    select,
)
from workbench.compare.cutlass_baseline import (
    CompiledOperators,
    find_operators,
    gemm_arguments,
    gemm_limits,
    meta_arguments,
    operator_variant,
    target_sm,
)
from workbench.compare.problems import BaselineProblem, classify
from workbench.compare.run import fastest_variant, variants_note
from workbench.compare.storage import load_variants, save_comparisons
from workbench.compare.table import ContenderEntry, ShapeComparison, Status
from workbench.devices import device_for
from workbench.gpu import probe_gpu
from workbench.report.baselines import gather_baselines
from workbench.report.overview import _baselines
from workbench.report.page import PageSection
from workbench.spaces import Space, load_kernel
from workbench.spaces.targets import resolve_arches
from workbench.store import Store

MISSING = missing_here("cutlass")  # (registers the baselines)
CUTLASS = REGISTRY["cutlass"]
needs_extra = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the CUTLASS extra is not installed ({', '.join(MISSING)}): "
    "pip install 'workbench[cutlass]'",
)
no_gpu = pytest.mark.skipif(probe_gpu().available, reason="a GPU is present")
#: gemm_int8's compare shapes (gemm_fp8 has the same set)
COMPARE = [(4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096), (128, 11008, 4096),
           (2048, 4096, 11008)]  # fmt: skip


def _space(kernel: str, **shape: int) -> Space:
    spec = load_kernel(kernel, [])
    arch = resolve_arches(spec, None)[0]
    return Space(spec, shape={**spec.default_shape, **shape}, arch=arch, device=device_for(arch))


def _problem(kernel: str, **shape: int) -> BaselineProblem:
    space = _space(kernel, **shape)
    return classify(space, space.spec.default_config())


def _installed(b: Baseline, p: BaselineProblem, cc: int | None) -> str | None:
    """Baseline.check where every library is installed (the lent GPU's image with the extra)."""
    saved = type(b).modules, type(b).distributions
    try:
        type(b).modules, type(b).distributions = (), ()
        return b.check(p, cc)
    finally:
        type(b).modules, type(b).distributions = saved


def _absent(monkeypatch: pytest.MonkeyPatch, *dists: str) -> None:
    """This machine without the pip packages ``dists``."""
    real = importlib.metadata.distribution

    def distribution(name: str):  # type: ignore[no-untyped-def]
        if name in dists:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)


# -- selection, limits and the skip messages (no extra needed) -------------------------------
@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8", "gemm_fp8_e5m2"])
def test_cutlass_runs_for_the_int8_and_fp8_gemms_on_hopper_and_not_before(kernel: str) -> None:
    spec = _space(kernel).spec
    by = {s.name: s for s in select(spec.baselines, _problem(kernel), 90, check=_installed)[0]}
    assert by["cutlass"].choice is Choice.RUN, by["cutlass"].reason
    ada = {s.name: s for s in select(spec.baselines, _problem(kernel), 89, check=_installed)[0]}
    assert ada["cutlass"].reason == "needs compute capability 9.0+, the GPU has 8.9"


def test_the_alignment_the_api_needs_is_checked_before_running() -> None:
    assert gemm_limits(_problem("gemm_int8", M=16, N=4096, K=4096)) is None
    assert gemm_limits(_problem("gemm_int8", M=1000, N=1000, K=1008)) is None
    odd_k = gemm_limits(_problem("gemm_int8", M=77, N=200, K=1000))
    assert odd_k == "the CUTLASS Operator API's 8-bit GEMMs need K a multiple of 16 (K = 1000)"
    odd_n = gemm_limits(_problem("gemm_fp8", M=77, N=4098, K=4096))
    assert odd_n is not None and "N a multiple of 4 (N = 4098)" in odd_n
    w8a8 = select(_space("gemm_w8a8").spec.baselines, _problem("gemm_w8a8"), 90)[0]
    assert next(s.reason for s in w8a8 if s.name == "cutlass") == (
        "no cutlass baseline for the gemm_w8a8 family"
    )


def test_without_the_extra_the_row_names_each_missing_package_and_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _absent(monkeypatch, "nvidia-cutlass-operators", "nvidia-cutlass-dsl", "torch")
    assert CUTLASS.check(_problem("gemm_int8"), 90) == (
        "not installed: nvidia-cutlass-operators, nvidia-cutlass-dsl, torch "
        "(pip install 'workbench[cutlass]')"
    )


@needs_extra
def test_one_missing_package_is_named_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    _absent(monkeypatch, "nvidia-cutlass-dsl")
    reason = CUTLASS.check(_problem("gemm_fp8"), 90)
    assert reason == "not installed: nvidia-cutlass-dsl (pip install 'workbench[cutlass]')"


@no_gpu
def test_without_a_gpu_the_row_says_which_of_the_two_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "s.sqlite")
    args = ["compare", "gemm_int8", "--baseline", "cutlass", "--storage", store]
    _absent(monkeypatch)  # this machine as it is
    out = CliRunner().invoke(app, args).output
    if MISSING:
        assert "skip (not installed: " in out and "pip install 'workbench[cutlass]'" in out
        assert "no GPU here either" in out
    else:
        assert "cutlass: CUTLASS Operator API (CuTe DSL): run; missing here: a GPU" in out
    _absent(monkeypatch, "nvidia-cutlass-operators")
    result = CliRunner().invoke(app, [*args, "--json"])
    (row,) = json.loads(result.stdout)["shapes"][0]["baselines"]
    assert row["would_run"] is False and row["missing"][0] == "nvidia-cutlass-operators"
    assert row["missing"][-1] == "a GPU" and "workbench[cutlass]" in row["reason"]


@no_gpu
def test_without_a_gpu_the_worker_cannot_list_operators_and_the_row_says_so() -> None:
    """compare's path to the operators goes through the baseline worker, which holds the GPU:
    here it cannot start, and the CUTLASS row is a failure with that reason, no variants."""
    from workbench.compare.baselines import BaselineSelection
    from workbench.compare.run import CompareOptions, _BaselineWorker
    from workbench.runners.buffers import make_inputs

    space = _space("gemm_int8", M=64, N=64, K=64)
    config = space.spec.default_config()
    problem = classify(space, config)
    sel = BaselineSelection("cutlass", "cutlass", CUTLASS.title, Choice.RUN)
    lines: list[str] = []
    with _BaselineWorker(CompareOptions(call_timeout_s=60)) as worker:
        inputs = make_inputs(space, seed=0, config=config)
        e = worker.run(sel, problem, inputs, space, config, lambda: None, lines.append)
    assert e.status is Status.FAILED and "did not start" in e.reason
    assert e.variants == () and e.median_ms is None and lines == []
    assert e.ops == problem.ops and e.nbytes == problem.min_bytes


# -- the fastest operator, the store and the report (no extra needed) ------------------------
def _variants() -> list[tuple[BaselineVariant, ContenderEntry]]:
    p = _problem("gemm_int8")

    def entry(
        status: Status, ms: float | None, compile_s: float, reason: str = ""
    ) -> ContenderEntry:
        samples = (ms, ms) if ms else ()
        return ContenderEntry(
            "cutlass", "CUTLASS", status, reason, ms, ms, ms, samples,
            ops=p.ops, nbytes=p.min_bytes, compile_s=compile_s, compile_note="JIT",
        )  # fmt: skip

    def variant(tile: str, cluster: str) -> BaselineVariant:
        config = {"operator": "Sm90StaticPersistentGemm", "tile": tile, "cluster": cluster}
        return BaselineVariant(f"op_{tile}_{cluster}", f"tile {tile}, cluster {cluster}", config)

    return [
        (variant("64x64x64", "1x1x1"), entry(Status.OK, 0.30, 1.0)),
        (variant("128x256x64", "2x1x1"), entry(Status.OK, 0.11, 1.25)),
        (variant("128x128x64", "1x1x1"), entry(Status.WRONG, 0.05, 1.0, "C differs at (0, 1)")),
        (variant("128x128x64", "2x2x1"), entry(Status.FAILED, None, 0.75, "launch failed")),
    ]


def test_the_row_is_the_fastest_correct_operator_with_its_configuration() -> None:
    base = ContenderEntry("cutlass", "CUTLASS Operator API (CuTe DSL)", Status.SKIPPED)
    row = fastest_variant(base, _variants())
    assert row.status is Status.OK and row.median_ms == 0.11  # the wrong 0.05 never wins
    assert row.title == (
        "CUTLASS Operator API (CuTe DSL): tile 128x256x64, cluster 2x1x1, the fastest of 4 "
        "(2 correct)"
    )
    assert row.compile_s == pytest.approx(4.0)
    assert [v.chosen for v in row.variants] == [False, True, False, False]
    assert [v.status for v in row.variants][2:] == [Status.WRONG, Status.FAILED]
    assert variants_note(row) == (
        "cutlass: 2 of 4 variants correct, the fastest is tile 128x256x64, cluster 2x1x1; "
        "compiling: 4.0 s (4 JIT)"
    )


def test_without_a_correct_operator_the_row_says_why() -> None:
    base = ContenderEntry("cutlass", "CUTLASS Operator API (CuTe DSL)", Status.SKIPPED)
    row = fastest_variant(base, _variants()[2:])
    assert row.status is Status.WRONG and row.median_ms is None
    assert row.reason == (
        "none of its 2 variants ran correctly (1 wrong, 1 failed); first: C differs at (0, 1)"
    )
    assert len(row.variants) == 2 and not any(v.chosen for v in row.variants)


def test_every_operator_is_stored_and_the_report_shows_them_under_the_chart(
    tmp_path: Path,
) -> None:
    p = _problem("gemm_int8")
    tuned = ContenderEntry(
        "tuned", "gemm_int8", Status.OK, median_ms=0.1, ops=p.ops, nbytes=p.min_bytes
    )
    row = fastest_variant(ContenderEntry("cutlass", "CUTLASS", Status.SKIPPED), _variants())
    c = ShapeComparison(p, "tensor_int8", {"PATH": "mma"}, "given", tuned, (row,))
    store = Store(f"sqlite:///{tmp_path / 's.sqlite'}")
    batch = save_comparisons(store, [c], device="NVIDIA H200")
    stored = load_variants(store, [batch])
    assert [(v.label, v.status, v.chosen) for v in stored] == [
        (v.label, v.status.value, v.chosen) for v in row.variants
    ]
    assert stored[1].samples == (0.11, 0.11) and stored[1].compile_s == 1.25
    assert stored[1].config["tile"] == "128x256x64" and stored[1].compile_note == "JIT"
    assert c.to_json()["results"][1]["variants"][1]["chosen"] is True
    b = gather_baselines(store, "gemm_int8")
    assert len(b.variants) == 4 and b.variants[1].contender == "CUTLASS"
    sec = PageSection("compare", "compare")
    _baselines(sec, b)
    html = "".join(part for part in sec.parts if isinstance(part, str))
    assert "CUTLASS: every configuration timed" in html
    assert ">0.11 *</td>" in html  # the chosen one, marked
    assert "title='C differs at (0, 1)'>wrong</td>" in html
    assert html.index("every configuration timed") > html.index("<table class='compare'>")


# -- the CUTLASS Operator API on this CPU (the extra installed) ------------------------------
@needs_extra
@pytest.mark.parametrize(("m", "n", "k"), COMPARE)
@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8", "gemm_fp8_e5m2"])
def test_the_api_lists_24_hopper_operators_at_each_compare_shape(
    kernel: str, m: int, n: int, k: int
) -> None:
    ops = find_operators(_problem(kernel, M=m, N=n, K=k), 90)  # meta tensors: no memory
    variants = [operator_variant(op) for op in ops]
    assert len(variants) == 24 and len({v.name for v in variants}) == 24
    assert {v.config["operator"] for v in variants} == {"Sm90StaticPersistentGemm"}
    assert {v.config["tile"] for v in variants} == {
        f"{a}x{b}x64" for a in (64, 128) for b in (64, 128, 256)
    }
    assert {v.config["cluster"] for v in variants} == {"1x1x1", "1x2x1", "2x1x1", "2x2x1"}
    assert all("_tnt_" in v.name for v in variants)  # A K-major, B K-major, C row-major


@needs_extra
def test_the_arguments_are_the_kernels_layouts_and_sm_90_lists_nothing() -> None:
    import cutlass
    import cutlass.operators as ops
    import torch

    p = _problem("gemm_int8", M=128, N=256, K=512)
    a = torch.zeros((128, 512), dtype=torch.int8)
    b = torch.zeros((256, 512), dtype=torch.int8)  # [N, K], as the kernels take it
    c = torch.zeros((128, 256), dtype=torch.int32)
    args = gemm_arguments(p, a, b, c)
    assert tuple(args.problem_size) == (128, 256, 512, 1)
    assert tuple(args.B.stride) == (1, 512)  # B's [K, N] column-major view: K-major
    assert args.accumulator_type is cutlass.Int32
    fp8 = meta_arguments(_problem("gemm_fp8", M=128, N=256, K=512))
    assert fp8.accumulator_type is cutlass.Float32 and fp8.out.dtype is cutlass.Float32
    assert target_sm(90) == "90a"
    assert len(ops.get_operators(args, target_sm="90a")) == 24
    assert ops.get_operators(args, target_sm="90") == []  # portable sm_90: no wgmma, no TMA


@needs_extra
def test_a_shape_the_api_refuses_is_said_why() -> None:
    with pytest.raises(BaselineUnsupported, match="divisible by 16"):
        find_operators(_problem("gemm_int8", M=77, N=200, K=1000), 90)
    with pytest.raises(BaselineUnsupported, match=r"out.*divisible by 4"):
        find_operators(_problem("gemm_int8", M=16, N=4098, K=4096), 90)


def _embedded_cubin(obj: bytes) -> bytes:
    """The device ELF inside a host object file: the second ELF image, cut at its last byte
    (the furthest of its program headers, section headers and section contents)."""
    off = obj.index(b"\x7fELF", 1)
    phoff, shoff = struct.unpack_from("<QQ", obj, off + 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", obj, off + 0x36)
    end = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    for i in range(shnum):
        header = off + shoff + i * shentsize
        (kind,) = struct.unpack_from("<I", obj, header + 4)
        start, size = struct.unpack_from("<QQ", obj, header + 0x18)
        if kind != 8:  # SHT_NOBITS takes no bytes in the file
            end = max(end, start + size)
    return obj[off : off + end]


@needs_extra
def test_an_operator_compiles_for_sm_90a_here_and_a_later_run_loads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cutlass.operators.providers.cutedsl.gemm import sm90_static_persistent

    from workbench.analysis.sass import disassemble, has_opcode

    # The compile asks the GPU how many clusters fit at once; there is none here: answer as
    # an H200 of 132 SMs would for clusters of one CTA
    monkeypatch.setattr(sm90_static_persistent, "get_max_active_clusters", lambda shape: 132)
    p = _problem("gemm_int8", M=4096, N=4096, K=4096)
    op = next(
        o for o in find_operators(p, 90) if operator_variant(o).label.endswith("cluster 1x1x1")
    )
    root = tmp_path / "cutlass-operators"
    first = CompiledOperators(clusters=lambda op: 132)
    artifact, compiled = first.get(op, meta_arguments(p), "90a", root)
    assert compiled.how == "JIT" and compiled.seconds > 0
    assert first.get(op, meta_arguments(p), "90a", root)[1].how == "compiled earlier in this run"
    (obj,) = root.rglob("*.o")
    sass = disassemble(_embedded_cubin(obj.read_bytes()))
    (kernel,) = sass.values()
    assert has_opcode(kernel, "IGMMA") and has_opcode(kernel, "UTMALDG")  # wgmma fed by TMA
    later = CompiledOperators(clusters=lambda op: 132)  # a new process: the disk has it
    loaded, how = later.get(op, meta_arguments(p), "90a", root)
    assert how.how == "loaded from the cache" and how.seconds < compiled.seconds
    assert callable(loaded.compiled_obj) and loaded.operator_obj is op
    other = CompiledOperators(clusters=lambda op: 66)  # another GPU: another key
    assert other.get(op, meta_arguments(p), "90a", root)[1].how == "JIT"
    assert len(list(root.rglob("*.o"))) == 2
    assert artifact is not loaded
