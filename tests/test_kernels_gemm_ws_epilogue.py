"""The epilogue of the warp-specialized TMA paths (kernels_cu/gemm_ws_epilogue.cuh, issue 54) of
gemm_int8 (raw int32), gemm_w8a8 (float16, bfloat16, float32) and gemm_fp8, compiled for sm_90a
and inspected without a GPU: a W8A8 thread loads its row scales and column scales once per
tile, so its global loads are bounded by the rows plus the columns of its accumulator fragment,
not by its outputs (before: two scale loads per output, 576 LDG for a 128 x 256 cooperative
tile); no spills.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from workbench.compiler import CompileCache, compile_job, make_job
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config
from workbench.static.sweep import sass_of, static_sweep
from workbench.toolchain import Arch

SM90A = Arch.parse("sm_90a")
PATHS = ("tma_coop", "tma_pingpong")
#: the knobs that shape a TMA path's code (GROUP_M only changes a constant)
TILE_KNOBS = ("PATH", "BM", "BN", "BK", "STAGES")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> CompileCache:
    return CompileCache(tmp_path_factory.mktemp("cache"))


def point(kernel: str, **knobs: object) -> tuple[Space, Config]:
    spec = load_kernel(kernel)
    return Space(spec, arch=SM90A), dict(spec.default_config(), **knobs)


def wg_rows(config: Config) -> int:
    """Rows of the tile one consumer warpgroup holds (and stages)."""
    return config["BM"] // 2 if config["PATH"] == "tma_coop" else config["BM"]


def tile_points(kernel: str, **fixed: object) -> list[Config]:
    """Every valid point of the TMA paths over the knobs of TILE_KNOBS."""
    spec = load_kernel(kernel)
    space = Space(spec, arch=SM90A)
    domains = [PATHS if k == "PATH" else spec.parameter(k).values for k in TILE_KNOBS]
    configs = (
        dict(spec.default_config(), **fixed, **dict(zip(TILE_KNOBS, v, strict=True)))
        for v in itertools.product(*domains)
    )
    return [c for c in configs if space.is_valid(c)]


def opcodes(space: Space, config: Config, cache: CompileCache) -> Counter[str]:
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.entry is not None, result.log[-1500:]
    return Counter(i.opcode for i in sass_of(result, cache)[result.entry])


# -- 1. W8A8: each thread loads its scales once per tile ---------------------------------------
COOP_WIDE = {"PATH": "tma_coop", "BM": 128, "BN": 256, "BK": 128}
W8A8_POINTS = [
    # the example: 576 LDG per thread before, for 2 rows x 64 columns
    {**COOP_WIDE, "STAGES": 4, "OUT": "float16"},
    {
        "PATH": "tma_pingpong",
        "BM": 128,
        "BN": 128,
        "BK": 128,
        "STAGES": 5,
        "OUT": "bfloat16",
    },
    {
        "PATH": "tma_coop",
        "BM": 256,
        "BN": 128,
        "BK": 128,
        "STAGES": 3,
        "OUT": "float32",
    },
    {"PATH": "tma_pingpong", "BM": 64, "BN": 96, "BK": 128, "STAGES": 4},
    {"PATH": "tma_pingpong", "BM": 64, "BN": 16, "BK": 128, "STAGES": 4},
]


def w8a8_sample() -> list[Config]:
    """Six more valid W8A8 points of the TMA paths, two per output type, drawn with a fixed
    seed."""
    rng = random.Random(54)
    return [
        c
        for out in ("float16", "bfloat16", "float32")
        for c in rng.sample(tile_points("gemm_w8a8", OUT=out), 2)
    ]


@pytest.mark.parametrize(
    "knobs",
    [*W8A8_POINTS, *w8a8_sample()],
    ids=lambda k: "-".join(str(k.get(n, "")) for n in ("PATH", "BM", "BN", "OUT")),
)
def test_w8a8_loads_each_scale_once_per_tile(knobs: dict, cache: CompileCache) -> None:
    """The LDGs of a W8A8 TMA kernel are its scale loads: at most one per row and one per
    column of the thread's fragment (2 rows per m64 block, BN / 4 columns), and no spills."""
    space, config = point("gemm_w8a8", **knobs)
    assert space.is_valid(config), space.explain(config)
    (record,) = static_sweep(space, [config], cache=cache)
    assert record.ok and record.lints == [], (record.lints, record.log[-1500:])
    assert record.spill_stores == 0 and record.stack_frame == 0, config
    ops = opcodes(space, config, cache)
    loads = sum(n for op, n in ops.items() if op.startswith("LDG"))
    rows, cols = 2 * (wg_rows(config) // 64), config["BN"] // 4
    assert 0 < loads <= rows + cols, (config, loads, rows, cols)


def test_raw_and_fp8_epilogues_load_nothing_per_output(cache: CompileCache) -> None:
    """Without per-row or per-column scales: no LDG in gemm_int8's TMA kernel, and gemm_fp8's
    two are its tensor-wise scales."""
    for kernel, knobs, expected in [
        ("gemm_int8", {**COOP_WIDE, "STAGES": 4}, 0),
        ("gemm_fp8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128}, 2),
    ]:
        space, config = point(kernel, **knobs)
        assert space.is_valid(config), space.explain(config)
        ops = opcodes(space, config, cache)
        assert sum(n for op, n in ops.items() if op.startswith("LDG")) == expected, config
