"""Registers of the warp-specialized TMA paths (PATH=tma_coop / tma_pingpong of gemm_int8,
gemm_w8a8 and gemm_fp8 on sm_90a), without a GPU.

The producer warpgroup gives registers back with setmaxnreg.dec (to 40) and the two consumer
warpgroups take them with setmaxnreg.inc (to 232): 40 + 2 x 232 = 3 x 168, which balances only
if the launch allocates exactly 168 registers per thread. The kernel exports that budget
(``workbench_setmaxnreg_budget``); a binary allocated any other count is refused before its
launch, where setmaxnreg.inc would wait forever. The space's rules keep every point that would
spill, or can only be slow, out of the space, and the whole TMA sub-space is compiled to show
that what remains compiles clean with the budget's register count."""

from __future__ import annotations

import dataclasses
import functools
import os
import random
import re
from pathlib import Path

import pytest
from host_device import host_executor

from workbench.analysis import read_cubin
from workbench.analysis.register_budget import BUDGET_SYMBOL, budget_mismatch, register_budget
from workbench.compiler import CompileCache, CompileResult, compile_job, make_job
from workbench.compiler.jobs import CompileJob
from workbench.errors import LaunchRefusedError
from workbench.runners.base import TrialOutcome
from workbench.runners.worker_runner import WorkerRunner
from workbench.search.configs import select_configs
from workbench.spaces import Space, config_label, load_kernel
from workbench.spaces.model import Config
from workbench.static.register_budget import register_budget_problem, require_register_budget
from workbench.static.sweep import StaticRecord, inspect_resources, static_sweep
from workbench.toolchain import Arch

SM90A = Arch.parse("sm_90a")
KERNELS_CU = Path(__file__).resolve().parents[1] / "kernels_cu"
#: what __launch_bounds__(384, 1) gives (65536 / 384, in units of 8) and the kernel exports
LAUNCH_REGISTERS = 168
INT8_COOPERATIVE = {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "STAGES": 4}
FP8_PINGPONG = {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 128, "STAGES": 4}


def point(
    kernel: str, shape: dict[str, int] | None = None, **knobs: object
) -> tuple[Space, Config]:
    spec = load_kernel(kernel)
    space = Space(spec, shape=shape, arch=SM90A)
    config = dict(space.default_config(), **knobs)
    assert space.is_valid(config), space.explain(config)
    return space, config


def compiled(space: Space, config: Config, cache: CompileCache) -> CompileResult:
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.cubin is not None and result.entry, result.log[-1500:]
    return result


# -- the budget the kernel exports, and the refusal of any other count ------------------------


@pytest.mark.parametrize(
    ("kernel", "knobs"), [("gemm_int8", INT8_COOPERATIVE), ("gemm_fp8", FP8_PINGPONG)]
)
def test_the_kernel_exports_the_launch_budget_of_its_setmaxnreg_counts(
    kernel: str, knobs: dict, cache: CompileCache
) -> None:
    space, config = point(kernel, **knobs)
    result = compiled(space, config, cache)
    assert result.cubin is not None and result.entry is not None
    info = read_cubin(result.cubin)
    assert info.int32_objects[BUDGET_SYMBOL] == register_budget(result.cubin) == LAUNCH_REGISTERS
    assert info.kernels[result.entry].registers == LAUNCH_REGISTERS
    assert budget_mismatch(result.cubin, result.entry) is None
    assert register_budget_problem(space, config, result) is None
    # a path without setmaxnreg exports no budget: nothing to compare
    plain = compiled(space, space.default_config(), cache)
    assert plain.cubin is not None and register_budget(plain.cubin) is None


def forced_registers(space: Space, config: Config, registers: int, cache: CompileCache):
    """``config``'s binary with another register count at launch: its PTX without the launch
    bounds (``.maxntid``, ``.minnctapersm``, which override ``--maxrregcount``), assembled by
    ptxas with ``--maxrregcount=registers``."""
    ptx = compiled(space, config, cache).ptx
    assert ptx is not None
    unbounded, n = re.subn(r"^\s*\.(maxntid|minnctapersm)\b.*$", "", ptx, flags=re.MULTILINE)
    assert n == 2, "the kernel's PTX carries __launch_bounds__(384, 1)"
    options = dataclasses.replace(
        make_job(space, config).options, maxrregcount=registers, include_dirs=()
    )
    job = CompileJob("ptx", unbounded, "forced.ptx", options, None, space.spec.entry_kernel)
    result = compile_job(job, cache)
    assert result.ok and result.cubin is not None and result.entry, result.log[-1500:]
    return result


def test_a_binary_allocated_another_register_count_is_refused_before_its_launch(
    cache: CompileCache, tmp_path: Path
) -> None:
    """ptxas gives the TMA kernel 160 registers when its PTX lacks the launch bounds and
    --maxrregcount says 160: the runner refuses it with one line that points at the budget's
    definition and names the config, the cubin's count and the budget; nothing is launched."""
    space, config = point("gemm_int8", {"M": 77, "N": 300, "K": 160}, **INT8_COOPERATIVE)
    forced = forced_registers(space, config, 160, cache)
    assert forced.cubin is not None and forced.entry is not None
    assert read_cubin(forced.cubin).kernels[forced.entry].registers == 160
    assert register_budget(forced.cubin) == LAUNCH_REGISTERS
    problem = register_budget_problem(space, config, forced)
    assert problem is not None and "\n" not in problem
    where, _ = problem.split(": ", 1)
    path, line = where.rsplit(":", 1)
    assert Path(path) == KERNELS_CU / "gemm_tma_ws.cuh"
    assert BUDGET_SYMBOL in Path(path).read_text().splitlines()[int(line) - 1]
    assert f"gemm_int8 {config_label(config)}: " in problem
    assert "allocates 160 registers per thread at launch" in problem
    assert f"setmaxnreg budget ({BUDGET_SYMBOL}) is 168" in problem
    assert "would wait forever" in problem and problem.endswith("refusing to launch it")

    launches = tmp_path / "launches.jsonl"
    with WorkerRunner(
        space,
        CompileCache(tmp_path / "cache"),
        executor_factory=functools.partial(host_executor, str(launches)),
        workdir=tmp_path,
    ) as runner:
        runner.compiled = lambda _config: forced  # type: ignore[method-assign]
        refused = runner.evaluate(config)
        assert refused.outcome is TrialOutcome.LAUNCH_FAILED and refused.reason == problem
        assert not launches.exists()  # nothing was launched
        runner.compiled = functools.partial(compiled, space, cache=cache)  # type: ignore[method-assign]
        ran = runner.evaluate(config)  # the real binary goes on to its launch (on host memory)
        assert ran.outcome is TrialOutcome.WRONG and "untouched" in ran.reason, ran.reason
    assert launches.exists()

    # the profiler's pre-launch check, and the static sweep's lint (workbench compile)
    with pytest.raises(LaunchRefusedError) as refusal:
        require_register_budget(space, config, forced)
    assert str(refusal.value) == problem
    record = StaticRecord("gemm_int8", "sm_90a", space.device.name, config, "", ok=False)
    assert inspect_resources(space, record, forced)
    assert [lint.message for lint in record.lints] == [f"cannot launch: {problem}"]


# -- the rules that keep out points that spill or can only be slow ----------------------------
#: (kernel, knobs, the one constraint they break, the kernel's static_assert that stops them)
BACKSTOPS = [
    (
        "gemm_int8",
        {**INT8_COOPERATIVE, "STAGES": 2},
        "not ws or STAGES >= 3",
        "STAGES: a stage is released one k-tile late",
    ),
    (
        "gemm_fp8",
        {**FP8_PINGPONG, "STAGES": 2},
        "PATH == 'mma' or STAGES >= 3",
        "STAGES: a stage is released one k-tile late",
    ),
    ("gemm_fp8", {**FP8_PINGPONG, "SWIZZLE": 64}, "not ws or SWIZZLE == 128", "128-byte boxes"),
    (
        "gemm_fp8",
        {**FP8_PINGPONG, "BK": 64, "SWIZZLE": 32},
        "not ws or SWIZZLE == 128",
        "128-byte boxes",
    ),
]


@pytest.mark.parametrize(("kernel", "knobs", "constraint", "message"), BACKSTOPS)
def test_each_rule_has_a_reason_and_the_kernel_backs_it_up(
    kernel: str, knobs: dict, constraint: str, message: str, cache: CompileCache
) -> None:
    space = Space(load_kernel(kernel), arch=SM90A)
    config = dict(space.default_config(), **knobs)
    broken = [v.constraint for v in space.explain(config) if v.constraint is not None]
    assert [c.expr.text for c in broken] == [constraint] and broken[0].reason
    result = compile_job(make_job(space, config), cache)
    assert not result.ok and message in result.log, result.log[-1500:]


# -- the whole TMA sub-space: clean at the launch budget --------------------------------------
WS_PATHS = ("tma_coop", "tma_pingpong")
#: every problem variant of the two space files (a sweep each: the epilogue changes registers)
VARIANTS = [
    ("gemm_int8", {"EPI": "raw", "OUT": "int32"}),
    ("gemm_int8", {"EPI": "w8a8", "OUT": "float16"}),
    ("gemm_int8", {"EPI": "w8a8", "OUT": "bfloat16"}),
    ("gemm_int8", {"EPI": "w8a8", "OUT": "float32"}),
    ("gemm_fp8", {"FORMAT": "e4m3", "OUT": "bfloat16"}),
    ("gemm_fp8", {"FORMAT": "e4m3", "OUT": "float16"}),
    ("gemm_fp8", {"FORMAT": "e5m2", "OUT": "bfloat16"}),
    ("gemm_fp8", {"FORMAT": "e5m2", "OUT": "float16"}),
]


@functools.cache
def tma_subspace(kernel: str) -> tuple[Config, ...]:
    """Every valid config of the kernel's TMA paths on sm_90a, all problem variants."""
    space = Space(load_kernel(kernel), arch=SM90A)  # (a walk of each path: seconds, not minutes)
    return tuple(
        c for p in WS_PATHS for c in select_configs(space, all_configs=True, fixed={"PATH": p})
    )


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8"])
def test_the_sweeps_cover_every_variant_of_the_tma_paths(kernel: str) -> None:
    listed = [v for k, v in VARIANTS if k == kernel]
    names = sorted(listed[0])
    seen = {tuple(c[n] for n in names) for c in tma_subspace(kernel)}
    assert seen == {tuple(v[n] for n in names) for v in listed}


def unclean_at_the_budget(space: Space, configs: list[Config], cache: CompileCache) -> list[str]:
    """The configs that compile with a spill, local memory or a lint, or whose cubin's register
    count is not the setmaxnreg budget it exports (168), one line each."""
    budgets: dict[str, int | None] = {}

    def keep_budget(result: CompileResult) -> None:
        budgets[result.key] = register_budget(result.cubin) if result.cubin else None

    failures = []
    for r in static_sweep(space, configs, cache=cache, on_compiled=keep_budget):
        budget = budgets.get(r.cache_key or "")
        clean = r.ok and not r.lints and r.spill_stores == r.spill_loads == r.stack_frame == 0
        if not clean or r.registers != budget or budget != LAUNCH_REGISTERS:
            failures.append(
                f"{r.label}: {r.registers} registers (budget {budget}), spill stores "
                f"{r.spill_stores}, loads {r.spill_loads}, stack {r.stack_frame}, "
                f"{[x.text for x in r.lints] or r.error}"
            )
    return failures


def register_group(config: Config) -> tuple:
    """What sets a consumer's registers, as the compiles of docs/tma-registers.md found: the
    schedule and its rows, the accumulators' precision, the workspace fixup (none, static
    split-K, stream-K), the epilogue and the cluster; not STAGES, BK, RASTER or GROUP_M."""
    fixup = "streamk" if config["SCHED"] == "streamk" else "split" if config["SPLIT_K"] > 1 else ""
    clustered = config["CLUSTER_M"] * config["CLUSTER_N"] > 1
    return (
        config["PATH"],
        config["BM"],
        config.get("PROMOTE"),
        fixup,
        config["EPILOGUE"],
        clustered,
    )


def widest_points(kernel: str, variant: dict) -> list[Config]:
    """Per register group of the variant, its point with the most accumulators (the widest BN),
    then the most stages: where a group would spill first."""
    widest: dict[tuple, Config] = {}
    for c in tma_subspace(kernel):
        if all(c[n] == v for n, v in variant.items()):
            g = register_group(c)
            if g not in widest or (c["BN"], c["STAGES"]) > (widest[g]["BN"], widest[g]["STAGES"]):
                widest[g] = c
    # static split-K's workspace must fit L2, which the default shape's tiles do not: its groups
    # come from the widest whole-tile points at a decode shape (the registers do not depend on
    # the shape, an argument of the kernel)
    decode = Space(load_kernel(kernel), shape={"M": 128, "N": 4096, "K": 4096}, arch=SM90A)
    split = [
        dict(c, SPLIT_K=2)
        for g, c in widest.items()
        if g[3:] == ("", "direct", False) and decode.is_valid(dict(c, SPLIT_K=2))
    ]
    return [*widest.values(), *split]


#: the variants with the most epilogue code (the W8A8 scales and a 16-bit conversion; fp8's
#: format changes only the wgmma's type)
WIDEST_VARIANTS = [
    ("gemm_int8", {"EPI": "w8a8", "OUT": "float16"}),
    ("gemm_fp8", {"FORMAT": "e4m3", "OUT": "bfloat16"}),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kernel", "variant"), WIDEST_VARIANTS, ids=[k for k, _ in WIDEST_VARIANTS]
)
def test_the_widest_point_of_every_register_group_compiles_clean(
    kernel: str, variant: dict, cache: CompileCache
) -> None:
    """The space's register rule (accumulators + 40 <= 232, with or without the workspace
    fixup, the staged epilogue or a cluster) holds where it is tightest: each group's widest
    point compiles for sm_90a without spills or local memory at the budget's register count.
    (Every group of every variant, one point each, and the whole sub-space are the tests below
    the WORKBENCH_EXHAUSTIVE switch.)"""
    space = Space(load_kernel(kernel), arch=SM90A)
    configs = widest_points(kernel, variant)
    assert len({register_group(c)[3:] for c in configs}) >= 6  # every fixup, epilogue, cluster
    failures = unclean_at_the_budget(space, configs, cache)
    assert not failures, f"{len(failures)} of {len(configs)}:\n" + "\n".join(failures)


#: compiles by the hour on a 2-core machine: run by hand (WORKBENCH_EXHAUSTIVE=1) after a change
#: to the kernels' register use or to the rules, not in CI
exhaustive = pytest.mark.skipif(
    os.environ.get("WORKBENCH_EXHAUSTIVE") != "1",
    reason="tens of thousands of compiles: WORKBENCH_EXHAUSTIVE=1 runs it",
)


@exhaustive
@pytest.mark.slow
@pytest.mark.timeout(12 * 3600)
@pytest.mark.parametrize(
    ("kernel", "variant"), VARIANTS, ids=["-".join(map(str, v.values())) for _, v in VARIANTS]
)
def test_one_point_of_every_register_group_compiles_clean(
    kernel: str, variant: dict, cache: CompileCache
) -> None:
    """Every register group of every variant, at its most stages (812 compiles for the spaces
    before clusters, all clean on 2026-12-05: docs/tma-registers.md)."""
    space = Space(load_kernel(kernel), arch=SM90A)
    groups: dict[tuple, Config] = {}
    for c in tma_subspace(kernel):
        if all(c[n] == v for n, v in variant.items()):
            g = (*register_group(c), c["BN"])
            if g not in groups or c["STAGES"] > groups[g]["STAGES"]:
                groups[g] = c
    failures = unclean_at_the_budget(space, list(groups.values()), cache)
    assert not failures, f"{len(failures)} of {len(groups)}:\n" + "\n".join(failures)


@exhaustive
@pytest.mark.slow
@pytest.mark.timeout(48 * 3600)
@pytest.mark.parametrize(
    ("kernel", "variant"), VARIANTS, ids=["-".join(map(str, v.values())) for _, v in VARIANTS]
)
def test_the_whole_tma_subspace_compiles_clean_at_the_launch_budget(
    kernel: str, variant: dict, cache: CompileCache
) -> None:
    """Every valid TMA point of the variant compiles for sm_90a without spills or local memory,
    with no lint, and with the register count the kernel's setmaxnreg budget (read from each
    cubin) was balanced for: the space's register, stage and swizzle rules are what ptxas does."""
    space = Space(load_kernel(kernel), arch=SM90A)
    configs = [c for c in tma_subspace(kernel) if all(c[n] == v for n, v in variant.items())]
    assert len(configs) >= 100
    failures = unclean_at_the_budget(space, configs, cache)
    assert not failures, f"{len(failures)} of {len(configs)}:\n" + "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8"])
def test_cluster_points_compile_clean_at_the_launch_budget(
    kernel: str, cache: CompileCache
) -> None:
    """A seeded sample of the TMA points in 2x1 and 1x2 clusters (every problem variant of the
    space file): the multicast loads, remote releases and the producer's exit wait cost no
    spill, and the cubin's register count is still the budget it exports."""
    space = Space(load_kernel(kernel), arch=SM90A)
    clustered = [c for c in tma_subspace(kernel) if c["CLUSTER_M"] * c["CLUSTER_N"] > 1]
    assert {(c["CLUSTER_M"], c["CLUSTER_N"]) for c in clustered} == {(2, 1), (1, 2)}
    configs = random.Random(54).sample(clustered, 16)
    budgets: dict[str, int | None] = {}

    def keep_budget(result: CompileResult) -> None:
        budgets[result.key] = register_budget(result.cubin) if result.cubin else None

    for r in static_sweep(space, configs, cache=cache, on_compiled=keep_budget):
        assert r.ok and not r.lints, (r.label, r.lints, r.error)
        assert r.spill_stores == r.spill_loads == r.stack_frame == 0, r.label
        assert r.registers == budgets.get(r.cache_key or "") == LAUNCH_REGISTERS, r.label
