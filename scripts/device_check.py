"""The steps of the lent-GPU check (issue 8), run by scripts/device_check.sh after it installs the
carried wheels. Standard library only, so the plumbing runs anywhere (``--dry-run`` on a CPU).

Each step is one command with its own timeout; no step starts after the soft deadline, every
step's timeout is clipped to the hard deadline (both counted from the start of
device_check.sh, ``DEVICE_CHECK_T0``), and after every step the summary (``summary.json``,
``summary.txt``) and the packed results are rewritten under ``$OUT``, so whatever finished
comes back even if the call is cut off.

``estimate_s`` of a step is a wall time of the first H200 run (2026-12-04, run1: the whole
script, run2: three tunes run alone; their summary.json, as committed in ``H200_RUN``): the
step's own where it ran with the same command ("measured"), else the closest measured step's,
adjusted by what differs, e.g. seconds of search cut ("derived"); ``estimate_source`` says
which. The estimates of the steps a plain run starts must sum to at most ``STEP_BUDGET_S``
(tests/test_device_script.py): a new step pays for itself.

What comes back under $OUT (the device tool returns at most 8 files of 16 MiB, 2 folders deep):
  summary.json, summary.txt   steps: status, wall time, timeout, estimate, command
  device_check.log            the whole console log (device_check.sh tees it)
  results.tar.gz              env, ceilings, tune/compare/profile/run JSON, step logs, pytest
                              log, benchmarks/results/<gpu>-validation-<date>.json
                              (repo-relative)
  recordings.tar.gz           tuning_spaces/recordings/<kernel>/*.json.gz (repo-relative)
  store.sqlite.gz             the store (tune studies, comparisons, profiles), one file
  ncu.tar.gz                  ncu/*.ncu-rep
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gzip
import importlib
import importlib.metadata
import json
import math
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What one returned file may weigh (the device tool's limit is 16 MiB).
FILE_LIMIT = 15 * 2**20
#: The device tool call's timeout_s: 8 minutes (the machine's 15 minutes include its start).
CALL_TIMEOUT_S = 480
#: Default deadlines, seconds after device_check.sh started: no step starts after SOFT, every
#: step ends by HARD; the final steps and packing follow.
SOFT_S = 430
HARD_S = 450
#: How far past the hard deadline a final step (the recordings export) may run.
FINAL_GRACE_S = 20
#: What device_check.sh spends besides the steps: wheel install and packing after each step
#: (run1: 448.4 s elapsed for 445.0 s of steps, the wheels in 1 s).
OVERHEAD_S = 5
#: At most this many seconds of estimates in a plain run: the soft deadline less the overhead,
#: and a margin for steps that run longer than they did on 2026-12-04.
STEP_BUDGET_S = 420
#: The wall times behind the estimates: the first H200 run's validation entry (steps[].wall_s,
#: steps[].run), copied from run1/run2 summary.json of ../shared/device-runs/h200-2026-12-04.
H200_RUN = ROOT / "benchmarks" / "results" / "nvidia-h200-validation-2026-12-04.json"
#: Where the committed recordings are (the gemm_int8 and reduce tunes evaluate their best first).
RECORDINGS = ROOT / "tuning_spaces" / "recordings"

#: Seeds of the gemm_int8 searches (valid on sm_90a for every shape below; starting points, not
#: claims): wgmma tiles for the large shapes, split-K mma tiles for decode shapes.
GEMM_SEEDS = [
    "PATH=wgmma,BM=128,BN=256,BK=128,STAGES=4",
    "PATH=wgmma,BM=128,BN=128,BK=128,STAGES=4",
    "PATH=wgmma,BM=64,BN=128,BK=128,STAGES=4",
    "PATH=mma,BM=32,BN=128,BK=128,WM=32,WN=32,STAGES=4,SPLIT_K=2",
    "PATH=mma,BM=16,BN=64,BK=128,WM=16,WN=16,STAGES=4,SPLIT_K=4",
]


@dataclass
class Step:
    """One command of the check."""

    name: str
    what: str
    argv: list[str]
    timeout_s: int
    estimate_s: int  #: expected wall time (see the module docstring), for the deadline check
    estimate_source: str = ""  #: "measured: run1 NAME 9.3 s" or "derived: run1 NAME ... (why)"
    stdout: str | None = None  #: file under the results folder that gets stdout (JSON)
    gate: str | None = None  #: "ncu": skipped when the ncu probe found no counters
    final: bool = False  #: runs even past the deadlines (CPU-only, seconds): the export
    best_from: str | None = None  #: the tune step behind ``--config best`` (default if not ok)
    on_request: bool = False  #: runs only when named in --only (DEVICE_CHECK_ONLY)
    status: str = "pending"
    rc: int | None = None
    wall_s: float | None = None
    started_s: float | None = None
    note: str = ""
    log: str = ""


@dataclass
class Layout:
    """Where a run keeps its files."""

    out: Path
    work: Path
    results: Path = field(init=False)
    recordings_root: Path = field(init=False)
    ncu: Path = field(init=False)
    store: Path = field(init=False)
    cache: Path = field(init=False)

    def __post_init__(self) -> None:
        self.results = self.work / "results"
        self.recordings_root = self.work / "recordings_root"
        self.ncu = self.work / "ncu"
        self.store = self.work / "store.sqlite"
        self.cache = self.work / "cache"
        for d in (self.out, self.results / "logs", self.recordings_root, self.ncu, self.cache):
            d.mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class Walls:
    """The measured wall time of each step of the H200 run, and which run it comes from."""

    seconds: dict[str, tuple[float, int]]

    @classmethod
    def load(cls, path: Path = H200_RUN) -> Walls:
        steps = json.loads(path.read_text())["steps"]
        return cls({s["name"]: (s["wall_s"], s["run"]) for s in steps if s["wall_s"] is not None})

    def measured(self, name: str) -> tuple[int, str]:
        """``name``'s own wall time (the step runs the command it ran then)."""
        wall, run = self.seconds[name]
        return math.ceil(wall), f"measured: run{run} {name} {wall} s"

    def derived(self, base: str, plus_s: float, why: str) -> tuple[int, str]:
        """The wall time of the closest measured step ``base``, plus ``plus_s`` for ``why``."""
        wall, run = self.seconds[base]
        seconds = math.ceil(round(wall + plus_s, 1))  # (22.4 - 7.4 is 15, not 15.000...2)
        return seconds, f"derived: run{run} {base} {wall} s {plus_s:+g} s ({why})"


def recorded_best(kernel: str, shape: dict[str, int]) -> str | None:
    """The fastest correct config of the committed H200 recording of ``kernel`` at ``shape``,
    as NAME=VALUE,... (None without one)."""
    for path in sorted((RECORDINGS / kernel).glob("*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        if doc.get("shape") != shape or doc.get("device", {}).get("name") != "NVIDIA H200":
            continue
        ok = [e for e in doc["entries"] if e["outcome"] == "ok" and e["value"] is not None]
        if ok:
            best = min(ok, key=lambda e: e["value"])["config"]
            return ",".join(f"{k}={v}" for k, v in best.items())
    return None


def _shape_args(shape: dict[str, int]) -> list[str]:
    return [a for k, v in shape.items() for a in ("--shape", f"{k}={v}")]


def _pytest_step(
    py: str,
    lay: Layout,
    name: str,
    files: str,
    timeout_s: int,
    estimate: tuple[int, str],
    *,
    on_request: bool = False,
) -> Step:
    """The gpu-marked tests of ``files`` (space-separated), 40 s at most each."""
    return Step(
        name,
        f"the gpu-marked tests of {files}",
        [
            *(py, "-m", "pytest", "-v", "-m", "gpu", "-p", "no:cacheprovider", "--timeout", "40"),
            f"--junitxml={lay.results / (name + '.xml')}",
            *files.split(),
        ],
        timeout_s,
        *estimate,
        on_request=on_request,
    )


def _profile_step(
    wb: list[str], lay: Layout, kernel: str, cfg: str, mset: str, estimate: tuple[int, str]
) -> Step:
    """ncu on ``kernel`` at config ``cfg`` with the metric set ``mset``."""
    tag = cfg.split("=")[1].lower()
    argv = [*wb, "profile", kernel, "-c", cfg, "--set", mset, "--report-dir", str(lay.ncu)]
    argv += ["--timeout", "50", "--ceilings", str(lay.results / "ceilings.json"), "--json"]
    return Step(
        f"profile_{kernel}_{tag}",
        f"ncu on {kernel} {cfg} ({mset})",
        argv,
        60,
        *estimate,
        stdout=f"profiles/{kernel}_{tag}_{mset}.json",
        gate="ncu",
        # the run of 2026-12-04 made these reports (tests/data/ncu; gemm_int8's and reduce's
        # are kept with their recordings, tuning_spaces/recordings/K/ncu): again only when asked
        on_request=True,
    )


def _run_steps(wb: list[str], walls: Walls) -> list[Step]:
    """``workbench run K -c default`` for issue 40's fixes: three kernels that stopped before
    the launch on the H200 (inputs drawn from a config value) and gemm_int8's new sm_90a
    default at 8192^3. (``-c default`` is the form issue 40 makes legal; the parser takes it
    today, so check_cli passes; before that change run refuses it, as in run3.)"""
    # run3 printed no wall times: a run is a tune's fixed cost (process, worker, store,
    # reference) plus one evaluation, i.e. the tune's wall less its search, plus one evaluation
    small = walls.derived(
        "tune_quantize_int8", -15 + 1, "without its 15 s of search, plus 1 evaluation (~0.75 s)"
    )
    gemm = walls.derived(
        "tune_gemm_int8_8192",
        -40 + 3,
        "without its 40 s of search, plus 1 evaluation at 8192^3 (~2.5 s); it includes the "
        "tune's enumeration of the valid configs, which run does not do",
    )
    steps = [
        Step(
            f"run_{kernel}",
            f"workbench run {kernel} -c default: verify and time the default config",
            [*wb, "run", kernel, "-c", "default", "--json"],
            45,
            *small,
            stdout=f"runs/{kernel}.json",
        )
        for kernel in ("quantize_static", "dequantize_int8", "dequantize_fp8")
    ]
    steps.append(
        Step(
            "run_gemm_int8_8192",
            "workbench run gemm_int8 -c default at 8192^3: the sm_90a default (wgmma)",
            [*wb, "run", "gemm_int8", "-c", "default", "--shape", "M=8192,N=8192,K=8192", "--json"],
            75,
            *gemm,
            stdout="runs/gemm_int8_8192.json",
        )
    )
    return steps


#: What one operator of the CUTLASS Operator API costs at each compare shape (verified and timed
#: in the baseline worker): a tune evaluation at that shape on 2026-12-04 (run1: 40 s of search
#: over its evaluations; the tunes' NVRTC compile included, so an upper estimate), the
#: 2048x4096x11008 shape taken as 4096^3 (no tune there; 92 vs 69 GMAC)
CUTLASS_S_PER_OPERATOR = {
    "M=4096,N=4096,K=4096": 40 / 26,
    "M=8192,N=8192,K=8192": 40 / 14,
    "M=16,N=4096,K=4096": 40 / 44,
    "M=128,N=11008,K=4096": 40 / 51,
    "M=2048,N=4096,K=11008": 40 / 26,
}
#: Operators the API lists for 8-bit GEMMs on sm_90a (tile 64/128 x 64/128/256, cluster 1/2 x
#: 1/2), and the CuTe DSL's JIT compile of one (measured on the 2-core CPU VM: 1.0 to 1.4 s)
CUTLASS_OPERATORS = 24
CUTLASS_COMPILE_S = 1.4


def _cutlass_steps(wb: list[str], ceil: list[str], walls: Walls) -> list[Step]:
    """The CUTLASS baseline (issue 45) at the compare shapes, next to cuBLAS/cuBLASLt and the
    tuned config: every operator compiled, verified and timed, the fastest reported. Its wheels
    must be staged first (device_check.sh --stage-cutlass); on request, as the plain run has
    no room for ~265 s each."""
    per_op = sum(CUTLASS_S_PER_OPERATOR.values())
    plus = round(CUTLASS_OPERATORS * (per_op + CUTLASS_COMPILE_S), 1)
    cost = (
        f"{CUTLASS_OPERATORS} CUTLASS operators, each {per_op:.2f} s over the 5 shapes (a tune "
        f"evaluation there) and {CUTLASS_COMPILE_S} s of JIT compile"
    )
    steps = []
    for kernel, others, why in (
        ("gemm_int8", "cuBLAS/cuBLASLt", f"plus {cost}"),
        ("gemm_fp8", "cuBLASLt", f"the same 5 shapes, cuBLASLt for cuBLAS/cuBLASLt; plus {cost}"),
    ):
        steps.append(
            Step(
                f"compare_{kernel}_cutlass",
                f"tuned {kernel} vs {others} and the fastest CUTLASS operator, shape set 'compare'",
                [*wb, "compare", kernel, "--shapes", "compare", *ceil, "--json"],
                400,
                *walls.derived("compare_gemm_int8", plus, why),
                stdout=f"compare/{kernel}_cutlass.json",
                on_request=True,
            )
        )
    return steps


def _gemm_tune_steps(wb: list[str], walls: Walls) -> list[Step]:
    """Short re-validations of gemm_int8 at the compare shapes with an H200 recording: the
    recorded best first, then the seeds and the default, for a few seconds of search (the
    committed recordings hold the full searches of 2026-12-04). No 8192^3 tune: its recorded
    best is the new sm_90a default, which run_gemm_int8_8192 and the compare time."""
    steps = []
    for tag, shape, secs, was, extra in [
        ("4096", {"M": 4096, "N": 4096, "K": 4096}, 10, 25, []),
        ("m128_n11008", {"M": 128, "N": 11008, "K": 4096}, 6, 20, SKINNY_SEEDS),
        ("m16", {"M": 16, "N": 4096, "K": 4096}, 6, 15, SKINNY_SEEDS),
    ]:
        best = recorded_best("gemm_int8", shape)
        first = [best] if best else []
        seeds = [*first, *GEMM_SEEDS, *extra, "default"]
        enqueue = [a for c in seeds for a in ("--enqueue", c)]
        name = f"tune_gemm_int8_{tag}"
        steps.append(
            Step(
                name,
                f"re-validation of gemm_int8 at {shape}: the recorded best first ({secs} s)",
                [
                    *wb,
                    "tune",
                    "gemm_int8",
                    *_shape_args(shape),
                    "--time",
                    str(secs),
                    "--budget",
                    "60",
                    *enqueue,
                    "--json",
                ],
                secs + 60,
                *walls.derived(name, secs - was, f"--time {was} -> {secs}"),
                stdout=f"tune/gemm_int8_{tag}.json",
                on_request=True,  # (recorded on 2026-12-04; the TMA paths come first now)
            )
        )
    return steps


# -- issue 42: the warp-specialized TMA paths of gemm_int8 (tma_coop, tma_pingpong) ------------
#: Seeds of the TMA paths: the tiles the H200 run measured best on the wgmma path (128 x 256 x
#: 128, 4 stages, GROUP_M 8 at 4096^3 and 8192^3; 128 x 96, 5 stages, GROUP_M 1 at M=128) as
#: TMA tiles, and the ping-pong tiles (whole 128 x 128 or 64 x 256 tiles per warpgroup); then
#: issue 54's stream-K schedule of the first two (never run on a GPU: a tune verifies each
#: config it evaluates, bit-exact, before timing it).
TMA_SEEDS = [
    "PATH=tma_coop,BM=128,BN=256,BK=128,STAGES=4,GROUP_M=8",
    "PATH=tma_pingpong,BM=128,BN=128,BK=128,STAGES=5,GROUP_M=8",
    "PATH=tma_pingpong,BM=64,BN=256,BK=128,STAGES=4,GROUP_M=8",
    "PATH=tma_coop,BM=256,BN=128,BK=128,STAGES=3,GROUP_M=8",
    "PATH=tma_coop,BM=128,BN=96,BK=128,STAGES=5,GROUP_M=1",
    "PATH=tma_coop,BM=128,BN=256,BK=128,STAGES=4,GROUP_M=8,SCHED=streamk",
    "PATH=tma_pingpong,BM=128,BN=128,BK=128,STAGES=5,GROUP_M=8,SCHED=streamk,RASTER=n",
    # issue 54: the staged TMA-store epilogue, and the same tile storing directly (int32
    # staging tiles of 2 x 64 x 256 leave no room for 4 stages of 128 x 256), and staged after
    # stream-K's fixup
    "PATH=tma_coop,BM=128,BN=128,BK=128,STAGES=4,GROUP_M=8,EPILOGUE=tma",
    "PATH=tma_coop,BM=128,BN=128,BK=128,STAGES=4,GROUP_M=8",
    "PATH=tma_coop,BM=128,BN=128,BK=128,STAGES=4,GROUP_M=8,SCHED=streamk,EPILOGUE=tma",
    # issue 54: thread-block clusters with TMA multicast (2x1 shares B, 1x2 shares A) on the
    # first two tiles
    "PATH=tma_coop,BM=128,BN=256,BK=128,STAGES=4,GROUP_M=8,CLUSTER_M=2",
    "PATH=tma_pingpong,BM=128,BN=128,BK=128,STAGES=5,GROUP_M=8,CLUSTER_N=2,RASTER=n",
]
#: Seeds where the tiles do not fill the GPU (M=128, N=11008: 43 tiles of 128 x 256 for 132
#: SMs; M=16: 32 tiles of 64 x 128): stream-K and the split-K fixup of issue 54
SKINNY_SEEDS = [
    "PATH=tma_coop,BM=128,BN=256,BK=128,STAGES=4,GROUP_M=8,SCHED=streamk",
    "PATH=tma_pingpong,BM=64,BN=128,BK=128,STAGES=6,GROUP_M=8,SCHED=streamk",
    "PATH=tma_pingpong,BM=64,BN=128,BK=128,STAGES=6,GROUP_M=8,SPLIT_K=4",
]


def _tma_steps(py: str, lay: Layout, walls: Walls) -> list[Step]:
    """Issue 42's checks of the TMA paths (never run on a GPU): their gpu tests (the tensor-map
    argument end to end through tma_copy; the int8 TMA paths bit-exact at the odd and compare
    shapes, W8A8 and FP8 at the odd ones), then a short tune at 8192^3 seeded with the TMA tiles
    and the wgmma best (its study holds the best of both paths, which the compare then times)."""
    seeds = [a for s in (*TMA_SEEDS, GEMM_SEEDS[0]) for a in ("--enqueue", s)]
    shape = {"M": 8192, "N": 8192, "K": 8192}
    tune = [py, "-m", "workbench.cli.main", "tune", "gemm_int8", *_shape_args(shape)]
    tests = _pytest_step(
        py,
        lay,
        "pytest_tma",
        "tests/test_tensor_maps.py tests/test_kernels_gemm_tma_ws.py",
        240,
        walls.derived(
            "pytest_kernels",
            100,
            "21 tests against its 14, 7 of them at 8192^3 or 4096^3 with a CPU reference "
            "of up to 1.1 TFLOP in float64",
        ),
    )
    return [
        tests,
        Step(
            "tune_gemm_int8_tma_8192",
            f"short tune of gemm_int8 at {shape}, seeded with the TMA tiles (15 s of search)",
            [*tune, "--time", "15", "--budget", "40", *seeds, "--json"],
            100,
            *walls.derived("tune_gemm_int8_8192", -25, "--time 40 -> 15"),
            stdout="tune/gemm_int8_tma_8192.json",
        ),
    ]


# -- issue 55: gemm_w4a16 (never run on a GPU) ------------------------------------------------
#: Seeds of the W4A16 decode tunes (valid at M = 1 and M = 16 on sm_90): split-K and in-block
#: K splits that give a decode shape's few column tiles enough blocks and warps.
W4A16_DECODE_SEEDS = [
    "BN=64,WN=64,WARPS_K=4,SPLIT_K=2",
    "BN=128,WN=64,WARPS_K=2,SPLIT_K=4",
    "BN=64,WN=64,WARPS_K=2,SPLIT_K=4,HINT=evict_first",
    "BN=256,WN=64,WARPS_K=1,BK=64,STAGES=6,SPLIT_K=8",
    "BN=128,WN=64,WARPS_K=2,SCALE=group,SPLIT_K=2",
]
#: Seeds of the W4A16 prefill tune (M = 2048): larger tiles, grouped block order.
W4A16_PREFILL_SEEDS = [
    "BM=128,WM=32,BN=128,WN=64,WARPS_K=1,BK=64,STAGES=4,GROUP_M=8",
    "BM=64,WM=32,BN=256,WN=64,WARPS_K=1,BK=64,STAGES=4,GROUP_M=8",
    "BM=64,WM=16,BN=128,WN=64,WARPS_K=1,BK=128,STAGES=3,SCALE=group",
    "BM=128,WM=32,BN=128,WN=64,WARPS_K=1,BK=64,STAGES=4,HINT=evict_first",
]
#: The shapes of the W4A16 tunes: two decode shapes and one prefill shape, all in its compare set.
W4A16_TUNES = [
    ("m1", {"M": 1, "N": 4096, "K": 4096}, W4A16_DECODE_SEEDS),
    ("m16", {"M": 16, "N": 11008, "K": 4096}, W4A16_DECODE_SEEDS),
    ("m2048", {"M": 2048, "N": 4096, "K": 4096}, W4A16_PREFILL_SEEDS),
]
#: The wgmma path (sm_90a, never run): its tunes fix PATH=wgmma and its tile width (BN = 256,
#: WN = 64, a warpgroup's four weight units), so the search stays on the new path. Decode
#: seeds: K split across blocks and warpgroups (N / 256 column tiles alone are 16-43 blocks);
#: prefill: two warpgroups of 32 tokens, grouped order.
W4A16_WGMMA_FIXED = ["PATH=wgmma", "BN=256", "WN=64"]
W4A16_WGMMA_DECODE_SEEDS = [
    "WARPS_K=2,SPLIT_K=4",
    "WARPS_K=4,SPLIT_K=2",
    "WARPS_K=1,SPLIT_K=8,HINT=evict_first",
    "WARPS_K=2,BK=64,STAGES=6,SPLIT_K=4",
    "WARPS_K=1,SCALE=group,SPLIT_K=4",
]
W4A16_WGMMA_PREFILL_SEEDS = [
    "BM=64,WM=32,WARPS_K=1,BK=64,STAGES=4,GROUP_M=8",
    "BM=64,WM=32,WARPS_K=1,BK=128,STAGES=3,GROUP_M=8",
    "BM=32,WM=16,WARPS_K=1,BK=128,STAGES=4,GROUP_M=8",
]
W4A16_WGMMA_TUNES = [
    ("wgmma_m16", {"M": 16, "N": 11008, "K": 4096}, W4A16_WGMMA_DECODE_SEEDS),
    ("wgmma_m2048", {"M": 2048, "N": 4096, "K": 4096}, W4A16_WGMMA_PREFILL_SEEDS),
]


def _w4a16_steps(py: str, wb: list[str], lay: Layout, walls: Walls) -> list[Step]:
    """Issue 55's checks of gemm_w4a16, on request (the kernel has never run): its gpu tests
    (every knob's path against the reference at the odd and three decode shapes, fp16
    symmetric and bf16 with zero points; the wgmma path on sm_90a too), seeded 20 s tunes at
    two decode shapes and one prefill shape (both paths on sm_90a, the newest declared arch),
    seeded 20 s tunes of the wgmma path alone at one decode and one prefill shape, then the
    comparison with the torch baselines: fp16 (the tuned configs vs the dense matmul; tinygemm
    takes bf16 only) and bf16 with zero points (the default config vs both)."""
    ceil = ["--ceilings", str(lay.results / "ceilings.json")]
    steps = [
        _pytest_step(
            py,
            lay,
            "pytest_w4a16",
            "tests/test_kernels_gemm_w4a16.py",
            540,
            walls.derived(
                "pytest_kernels",
                400,
                "28 gpu tests (14 per path, mma and wgmma) of up to 11 configs each (compile, "
                "verify, 0.2 s of timing) against its 14 tests of 1-4 configs, CPU references "
                "up to 0.4 TFLOP",
            ),
            on_request=True,
        )
    ]
    wgmma = [(t, s, seeds, W4A16_WGMMA_FIXED) for t, s, seeds in W4A16_WGMMA_TUNES]
    for tag, shape, seeds, fixed in [(*t, []) for t in W4A16_TUNES] + wgmma:
        # (a tune that fixes the path has no "default" seed: the default config is PATH=mma)
        enqueue = [a for c in [*seeds, *([] if fixed else ["default"])] for a in ("--enqueue", c)]
        argv = [*wb, "tune", "gemm_w4a16", *_shape_args(shape), "--time", "20", "--budget", "60"]
        argv += [a for f in fixed for a in ("--set", f)]
        base, was = ("tune_gemm_int8_4096", 25) if shape["M"] > 64 else ("tune_gemm_int8_m16", 15)
        steps.append(
            Step(
                f"tune_gemm_w4a16_{tag}",
                f"seeded tune of gemm_w4a16 at {shape} (20 s of search)",
                [*argv, *enqueue, "--json"],
                90,
                *walls.derived(base, 20 - was, f"--time {was} -> 20, gemm_w4a16 at {shape}"),
                stdout=f"tune/gemm_w4a16_{tag}.json",
                on_request=True,
            )
        )
    for name, extra, what in (
        ("compare_gemm_w4a16", [], "tuned fp16 configs vs torch dense"),
        (
            "compare_gemm_w4a16_bf16",
            ["-c", "DTYPE=bfloat16,SYMMETRIC=false"],
            "bf16 with zero points (default config) vs torch dense and torch._weight_int4pack_mm",
        ),
    ):
        steps.append(
            Step(
                name,
                f"gemm_w4a16 {what}, shape set 'compare' (4)",
                [*wb, "compare", "gemm_w4a16", "--shapes", "compare", *extra, *ceil, "--json"],
                120,
                *walls.derived(
                    "compare_gemm_int8", 0, "4 shapes and 1-2 torch baselines against its 5 and 2"
                ),
                stdout=f"compare/{name}.json",
                on_request=True,
            )
        )
    return steps


# -- issue 56: attention_decode (never run on a GPU) -------------------------------------------
#: Seeds of the attention tunes (valid at both shapes on sm_90a, int8 cache): splits over S that
#: fill 132 SMs at B = 1 (8 KV heads) and at B = 32, the combine both ways, the load policies.
ATTENTION_SEEDS = [
    "SPLITS=16,COMBINE=kernel",
    "SPLITS=32,COMBINE=last,THREADS=256,KEYS=64",
    "SPLITS=2,POLICY=cs",
    "SPLITS=4,POLICY=evict_first,VEC=8,KEYS=16",
    "THREADS=256,KEYS=64,SPLITS=8,HEADS=q",
]
#: The shapes of the attention tunes: the issue's goal shapes (the GPU filled; one long sequence).
ATTENTION_TUNES = [
    ("b32", {"B": 32, "Hkv": 8, "S": 8192, "S_MIN": 8192}),
    ("b1", {"B": 1, "Hkv": 8, "S": 32768, "S_MIN": 32768}),
]


def _attention_steps(py: str, wb: list[str], lay: Layout, walls: Walls) -> list[Step]:
    """Issue 56's checks of attention_decode, on request (the kernel has never run): its gpu
    tests (every variant at the odd shapes, 4-7 knob settings each, both combines), seeded 20 s
    tunes of the int8 cache and of the fp16 variant at the two goal shapes, then one comparison
    of the int8 cache's tuned configs with torch SDPA on the fp16 cache and with the family's
    own fp16-cache variant (its tuned best) in the same table."""
    ceil = ["--ceilings", str(lay.results / "ceilings.json")]
    steps = [
        _pytest_step(
            py,
            lay,
            "pytest_attention",
            "tests/test_kernels_attention_decode.py",
            300,
            walls.derived(
                "pytest_kernels",
                170,
                "32 gpu tests of 4-7 configs each (compile, verify, 0.2 s of timing), CPU "
                "references of at most 5 x 4099 keys",
            ),
            on_request=True,
        )
    ]
    # the int8 cache's tunes, then the fp16 variant's (the same seeds are valid there): the
    # compare's row of the family's own fp16 cache runs its best at each tuned shape
    for kernel, what in (("attention_decode", "int8"), ("attention_decode_fp16", "fp16")):
        for tag, shape in ATTENTION_TUNES:
            enqueue = [a for c in [*ATTENTION_SEEDS, "default"] for a in ("--enqueue", c)]
            argv = [*wb, "tune", kernel, *_shape_args(shape), "--time", "20"]
            steps.append(
                Step(
                    f"tune_{kernel}_{tag}",
                    f"seeded tune of {kernel} ({what} cache) at {shape} (20 s of search)",
                    [*argv, "--budget", "60", *enqueue, "--json"],
                    90,
                    *walls.derived(
                        "tune_gemm_int8_m16", 5, f"--time 15 -> 20, attention at {shape}"
                    ),
                    stdout=f"tune/{kernel}_{tag}.json",
                    on_request=True,
                )
            )
    # one table: the int8 cache's tuned configs, torch SDPA on the fp16 cache and the family's
    # own fp16-cache variant (its tuned best at the two goal shapes, its default at the third)
    steps.append(
        Step(
            "compare_attention_decode",
            "int8 cache (tuned configs) vs torch SDPA on the fp16 cache and the fp16-cache "
            "variant (variant:attention_decode_fp16), shape set 'compare' (3)",
            [*wb, "compare", "attention_decode", "--shapes", "compare", *ceil, "--json"],
            180,
            *walls.derived("compare_gemm_int8", 0, "3 shapes, torch and the fp16 variant"),
            stdout="compare/compare_attention_decode.json",
            on_request=True,
        )
    )
    return steps


def _short_tunes(wb: list[str], walls: Walls) -> list[Step]:
    """Short tunes of the other kernels: the three that never ran (the deadline skipped them
    on 2026-12-04), then the three run2 measured, now on request (recordings committed)."""
    steps = []
    for kernel, secs in [("aos_soa", 8), ("stream_scale", 6), ("reduce_f16", 8)]:
        # the closest measured: tune_quantize_fp8, a --time-bound tune of a small kernel
        est = walls.derived("tune_quantize_fp8", secs - 10, f"its --time 10 -> {secs}")
        steps.append(_short_tune(wb, kernel, secs, est))
    for kernel, secs in [("cache_hints", 15), ("quantize_int8", 15), ("quantize_fp8", 10)]:
        step = _short_tune(wb, kernel, secs, walls.measured(f"tune_{kernel}"))
        step.on_request = True
        steps.append(step)
    return steps


def _short_tune(wb: list[str], kernel: str, secs: int, estimate: tuple[int, str]) -> Step:
    return Step(
        f"tune_{kernel}",
        f"short tune of {kernel} ({secs} s of search)",
        [*wb, "tune", kernel, "--time", str(secs), "--budget", "60", "--json"],
        secs + 40,
        *estimate,
        stdout=f"tune/{kernel}.json",
    )


def build_steps(py: str, lay: Layout) -> list[Step]:
    """Every step, in order of value (the on-request ones where they would run)."""
    walls = Walls.load()
    wb = [py, "-m", "workbench.cli.main"]
    ceil = ["--ceilings", str(lay.results / "ceilings.json")]
    libs = ["--baseline", "cublas", "--baseline", "cublaslt"]
    spaces_root = lay.recordings_root / "tuning_spaces"
    reduce_best = recorded_best("reduce", {"n": 16777216})
    reduce_first = ["--enqueue", reduce_best, "--enqueue", "default"] if reduce_best else []
    divergence_recording = (
        spaces_root / "recordings" / "divergence" / "divergence-nvidia-h200-all.json.gz"
    )
    steps = [
        Step(
            "env",
            "GPU, driver, clocks, toolchain, imports",
            [py, __file__, "--env-json", str(lay.results / "env.json")],
            45,
            *walls.measured("env"),
        ),
        Step(
            "ceilings",
            "copy bandwidth; int8 (cuBLAS, cuBLASLt), fp8 and fp16 matmul at 8192",
            [py, "scripts/ceilings.py", "--json", str(lay.results / "ceilings.json")],
            90,
            *walls.derived(
                "ceilings", 4, "plus cuBLAS int8 and fp8 matmuls at 8192 (CuPy import, warm-up)"
            ),
        ),
        # the runner's own gpu tests first, in a step of their own: they are the only check of
        # the out-of-bounds restart, the hang timeout, the >48 KiB opt-in and the cluster launch
        # (a killed pytest writes no junit file; one process would save ~1.3 s, run1's pytest
        # startup); compare and profile have their own steps below
        _pytest_step(
            py,
            lay,
            "pytest_runner",
            "tests/test_runner_cuda.py",
            75,
            walls.measured("pytest_runner"),
        ),
        _pytest_step(
            py,
            lay,
            "pytest_kernels",
            "tests/test_kernels_reduce.py tests/test_kernels_aos_soa.py "
            "tests/test_kernels_divergence.py",
            90,
            walls.measured("pytest_kernels"),
            on_request=True,  # 14/14 passed on 2026-12-04
        ),
        *_tma_steps(py, lay, walls),
        *_run_steps(wb, walls),
        *_gemm_tune_steps(wb, walls),
        Step(
            "tune_reduce",
            "re-validation of reduce (sum, n=16M fp32): the recorded best first, 40 configs",
            [*wb, "tune", "reduce", "--time", "20", "--budget", "40", *reduce_first, "--json"],
            60,
            *walls.derived(
                "tune_reduce", -7.4, "40 of its 80 evaluations, 0.185 s each in run1's store"
            ),
            stdout="tune/reduce.json",
            on_request=True,  # (recorded on 2026-12-04: reduce beat CUB 1.27x)
        ),
        Step(
            "gpu_throughput",
            "old vs new tune pipeline: evaluations/min, GPU busy, phases (gemm_int8 4096^3 and "
            "8192^3, reduce; 20 s each) and the GPU's verification against the host's",
            [
                *(py, "benchmarks/gpu_throughput.py", "--gpu", "--seconds", "20"),
                *("--json", str(lay.results / "gpu_throughput.json")),
            ],
            420,
            *walls.derived(
                "tune_gemm_int8_4096",
                242.5,
                "6 tunes of 20 s, each with run1's 23.5 s around its 25 s search, and ~30 s of "
                "verification checks",
            ),
            on_request=True,  # (no room in a plain run; DEVICE_CHECK_ONLY=gpu_throughput)
        ),
        Step(
            "recordings_main",
            "tune studies of gemm_int8/reduce -> recordings",
            [
                *(py, "scripts/study_recordings.py", "--store", str(lay.store)),
                *("--root", str(spaces_root), "--kernel", "gemm_int8", "--kernel", "reduce"),
            ],
            60,
            *walls.measured("recordings_main"),
            on_request=True,  # (recordings_all exports every study at the end)
        ),
        Step(
            "compare_gemm_int8",
            "tuned vs cuBLAS/cuBLASLt, shape set 'compare' (5)",
            # CUTLASS has steps of its own: with its wheels staged it would time 24 operators
            # per shape here, several times what this step measured (CUTLASS not installed)
            [*wb, "compare", "gemm_int8", "--shapes", "compare", *libs, *ceil, "--json"],
            150,
            *walls.measured("compare_gemm_int8"),
            stdout="compare/gemm_int8.json",
        ),
        *_cutlass_steps(wb, ceil, walls),
        *_w4a16_steps(py, wb, lay, walls),
        *_attention_steps(py, wb, lay, walls),
        _pytest_step(
            py,
            lay,
            "pytest_numba",
            "tests/test_numba_source.py",
            90,
            walls.derived(
                "pytest_kernels",
                10,
                "issue 47: the Numba kernels verified beside their CUDA C++ twins at 3 shapes "
                "(Numba's import and JIT on top)",
            ),
            on_request=True,  # never run on a GPU yet
        ),
        _pytest_step(
            py,
            lay,
            "pytest_tma_epilogue",
            "tests/test_kernels_gemm_ws_epilogue.py",
            240,
            walls.derived(
                "pytest_kernels",
                125,
                "issue 54: the TMA paths' staged epilogue (EPILOGUE=tma) against the reference "
                "at gemm_int8's and gemm_w8a8's odd and compare shapes and gemm_fp8's, 35 "
                "tests, about as many evaluations as pytest_tma, and a stream-K config each "
                "of gemm_int8 and gemm_fp8",
            ),
            on_request=True,  # never run on a GPU yet (no room in a plain run's budget)
        ),
        Step(
            "compare_rmsnorm",
            "issue 46: the README's example vs its own torch baseline and a copy",
            [*wb, "compare", "examples/rmsnorm/rmsnorm.yaml", *ceil, "--json"],
            90,
            *walls.derived("compare_reduce", 20, "PyTorch's import in the baseline worker"),
            stdout="compare/rmsnorm.json",
            on_request=True,  # never run on a GPU yet
        ),
        Step(
            "compare_reduce",
            "tuned reduce vs CUB and a device copy",
            [*wb, "compare", "reduce", *ceil, "--json"],
            60,
            *walls.measured("compare_reduce"),
            stdout="compare/reduce.json",
            on_request=True,
        ),
        Step(
            "profile_reduce",
            "ncu on reduce's best (roofline); the counter check",
            [
                *wb,
                "profile",
                "reduce",
                "--config",
                "best",
                "--set",
                "roofline",
                "--report-dir",
                str(lay.ncu),
                "--timeout",
                "80",
                *ceil,
                "--json",
            ],
            90,
            *walls.measured("profile_reduce"),
            stdout="profiles/reduce_best_roofline.json",
            best_from="tune_reduce",
            on_request=True,
        ),
        Step(
            "profile_gemm_int8",
            "ncu on gemm_int8's best at 8192^3 (full set): tensor pipe, DRAM and L2",
            [
                *wb,
                "profile",
                "gemm_int8",
                "--shape",
                "M=8192,N=8192,K=8192",
                "--config",
                "best",
                "--set",
                "full",
                "--report-dir",
                str(lay.ncu),
                "--timeout",
                "100",
                *ceil,
                "--json",
            ],
            110,
            *walls.measured("profile_gemm_int8"),
            stdout="profiles/gemm_int8_best_full.json",
            best_from="tune_gemm_int8_tma_8192",
            gate="ncu",
        ),
        Step(
            "record_divergence",
            "workbench record: every divergence config (72) -> a recording",
            [*wb, "record", "divergence", "--all", "-o", str(divergence_recording)],
            90,
            # the closest measured: 80 evaluations of reduce at the same n (16M), 72 here
            *walls.derived("tune_reduce", 0, "72 configs of a kernel at n=16M vs its 80"),
        ),
        *_short_tunes(wb, walls),
        *(
            _profile_step(wb, lay, kernel, cfg, mset, walls.measured(f"profile_{kernel}_{tag}"))
            for kernel, cfg, mset, tag in [
                ("divergence", "VARIANT=branchy", "divergence", "branchy"),
                ("divergence", "VARIANT=masked", "divergence", "masked"),
                ("aos_soa", "LAYOUT=aos", "memory", "aos"),
                ("aos_soa", "LAYOUT=soa", "memory", "soa"),
            ]
        ),
        Step(
            "recordings_all",
            "every measured study -> recordings",
            [
                py,
                "scripts/study_recordings.py",
                "--store",
                str(lay.store),
                "--root",
                str(spaces_root),
            ],
            60,
            *walls.measured("recordings_all"),
            final=True,
        ),
        Step(
            "store_list",
            "studies in the store",
            [*wb, "store", "list"],
            40,
            *walls.measured("store_list"),
            final=True,
        ),
    ]
    # the tuned configs as the C++ headers a build would include (store header)
    steps += [
        Step(
            f"header_{kernel}",
            f"tuned {kernel} configs as a C++ header",
            [*wb, "store", "header", kernel, "-o", str(lay.results / "headers" / f"{kernel}.h")],
            40,
            *walls.measured(f"header_{kernel}"),
            final=True,
            on_request=kernel == "reduce",  # (reduce is tuned on request only)
        )
        for kernel in ("gemm_int8", "reduce")
    ]
    return steps


def check_cli(steps: list[Step]) -> list[str]:
    """Parse every workbench command line of ``steps`` with the real CLI (options, types,
    choices; nothing runs); returns the problems."""
    import typer

    try:
        import click
    except ImportError:  # typer >= 0.2x vendors click
        import typer._click as click  # type: ignore[no-redef]

    from workbench.cli.main import app

    root = typer.main.get_command(app)
    problems = []
    for step in steps:
        if step.argv[1:3] != ["-m", "workbench.cli.main"]:
            continue
        args, cmd, path = list(step.argv[3:]), root, ["workbench"]
        while args and args[0] in getattr(cmd, "commands", {}):
            path.append(args[0])
            cmd = cmd.commands[args.pop(0)]
        try:
            cmd.make_context(" ".join(path), args)
        except click.ClickException as exc:
            problems.append(f"{step.name}: {exc.format_message()}")
    return problems


# -- environment (the "env" step runs this in a subprocess) ------------------------------------


def _cmd(argv: list[str], timeout: float = 20) -> str | None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    return (p.stdout + p.stderr).strip()


#: Without these no step can run (the env step fails, and the run stops after it).
REQUIRED_MODULES = (
    "workbench.cli.main",
    "optuna",
    "sqlalchemy",
    "pydantic",
    "numpy",
    "cuda.bindings",
)


def collect_env() -> dict[str, object]:
    """Everything about the machine worth keeping with the numbers; never raises."""
    env: dict[str, object] = {"date": dt.datetime.now(dt.timezone.utc).isoformat()}
    fields = (
        "name,uuid,driver_version,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,"
        "clocks.max.mem,power.draw,power.limit,temperature.gpu,persistence_mode,"
        "compute_mode,memory.total,memory.used"
    )
    text = _cmd(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"])
    if text and not text.startswith("error") and "," in text:
        env["nvidia_smi"] = dict(
            zip(
                fields.split(","),
                [v.strip() for v in text.splitlines()[0].split(",")],
                strict=False,
            )
        )
    else:
        env["nvidia_smi"] = text
    head = _cmd(["nvidia-smi"]) or ""
    m = re.search(r"CUDA Version:\s*([0-9.]+)", head)
    env["driver_cuda_version"] = m.group(1) if m else None
    env["python"] = sys.version.split()[0]
    imports: dict[str, str] = {}
    for mod in (
        "workbench.cli.main",
        "optuna",
        "sqlalchemy",
        "plotly",
        "pydantic",
        "nvtx",
        "elftools",
        "ruptures",
        "ncu_report",
        "torch",
        "cupy",
        "pynvml",
        "numpy",
        "cuda.bindings",
        "cuda.pathfinder",
    ):
        try:
            module = importlib.import_module(mod)
            imports[mod] = str(getattr(module, "__version__", "ok"))
        except Exception as exc:
            imports[mod] = f"MISSING: {type(exc).__name__}: {exc}"
    env["imports"] = imports
    try:
        from workbench.gpu import probe_gpu

        env["probe"] = asdict(probe_gpu())
    except Exception as exc:
        env["probe"] = f"error: {exc}"
    try:
        from workbench.toolchain import find_tool, nvrtc_version, tool_version

        env["nvrtc"] = str(nvrtc_version())
        env["tools"] = {
            t: f"{find_tool(t)} ({tool_version(t)})" for t in ("ptxas", "nvdisasm", "cuobjdump")
        }
    except Exception as exc:
        env["toolchain_error"] = str(exc)
    cutlass = {}
    for dist in ("nvidia-cutlass-operators", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-cu12"):
        try:  # (the versions only: importing the DSL takes seconds)
            cutlass[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            cutlass[dist] = "MISSING"
    env["cutlass"] = cutlass
    try:
        import torch

        env["torch"] = {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        }
    except Exception as exc:
        env["torch"] = f"error: {exc}"
    ncu = shutil.which("ncu")
    env["ncu"] = {"path": ncu, "version": _cmd([ncu, "--version"]) if ncu else None}
    return env


# -- running ------------------------------------------------------------------------------------


def _kill(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def live_argv(argv: list[str]) -> list[str]:
    """``argv`` without ``--ceilings FILE`` when the ceilings step wrote no FILE (the commands
    then use the datasheet, and say so)."""
    if "--ceilings" in argv:
        i = argv.index("--ceilings")
        doc = _load(Path(argv[i + 1])) if i + 1 < len(argv) else None
        sections = ("copy", "int8_matmul", "fp8_matmul", "fp16_matmul")  # scripts/ceilings.py
        if not doc or not any(k in doc for k in sections):
            return argv[:i] + argv[i + 2 :]
    return argv


def without_best(argv: list[str]) -> list[str]:
    """``argv`` without ``--config best``: the space's default config instead."""
    i = argv.index("--config") if "--config" in argv else -1
    return argv[:i] + argv[i + 2 :] if i >= 0 and argv[i + 1 : i + 2] == ["best"] else argv


def run_step(step: Step, lay: Layout, limit_s: float, dry_run: bool) -> None:
    argv = ["echo", "dry-run:", shlex.join(step.argv)] if dry_run else live_argv(step.argv)
    log = lay.results / "logs" / f"{step.name}.log"
    step.log = str(log.relative_to(lay.results))
    out_path = lay.results / step.stdout if step.stdout else None
    if out_path:
        out_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    with contextlib.ExitStack() as files:
        err = files.enter_context(open(log, "wb"))
        out = files.enter_context(open(out_path, "wb")) if out_path else err
        try:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            step.status, step.note, step.wall_s = "failed", f"cannot start: {exc}", 0.0
            return
        try:
            step.rc = proc.wait(timeout=limit_s)
            step.status = "dry-run" if dry_run else ("ok" if step.rc == 0 else "failed")
        except subprocess.TimeoutExpired:
            _kill(proc)
            step.rc = proc.returncode
            step.status, step.note = "timeout", f"killed after {limit_s:.0f} s"
    step.wall_s = round(time.monotonic() - start, 1)


def ncu_ok(lay: Layout) -> tuple[bool, str]:
    """Whether the probe profile read hardware counters (its JSON says source "ncu")."""
    path = lay.results / "profiles" / "reduce_best_roofline.json"
    text = path.read_text(errors="replace") if path.is_file() else ""
    if re.search(r'"source":\s*"ncu"', text):
        return True, ""
    m = re.search(r'"source":\s*"([a-z-]+)"', text)
    return False, f"ncu probe gave source {m.group(1)!r}" if m else "ncu probe gave no result"


def tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- results ------------------------------------------------------------------------------------


def _load(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def results_entry(lay: Layout, steps: list[Step], meta: dict[str, object]) -> Path | None:
    """benchmarks/results/<gpu>-validation-<date>.json: GPU, driver, toolkit, date, ceilings,
    comparison and tune headlines, copied from what the steps wrote (nothing when they wrote
    nothing)."""
    env = _load(lay.results / "env.json") or {}
    smi = env.get("nvidia_smi") if isinstance(env.get("nvidia_smi"), dict) else {}
    gpu = str(smi.get("name") or "unknown-gpu") if isinstance(smi, dict) else "unknown-gpu"
    date = dt.date.today().isoformat()
    entry: dict[str, object] = {
        "what": "issue 8: lent-GPU validation (scripts/device_check.sh)",
        "date": date,
        "gpu": gpu,
        "driver": smi.get("driver_version") if isinstance(smi, dict) else None,
        "driver_cuda_version": env.get("driver_cuda_version"),
        "toolkit": {
            "nvrtc": env.get("nvrtc"),
            "tools": env.get("tools"),
            "torch": env.get("torch"),
        },
        "clocks_at_start": {
            k: v
            for k, v in (smi.items() if isinstance(smi, dict) else [])
            if k.startswith(("clocks", "power", "temperature"))
        },
        "ceilings": _load(lay.results / "ceilings.json"),
        "steps": [{"name": s.name, "status": s.status, "wall_s": s.wall_s} for s in steps],
        "meta": meta,
    }
    compares = []
    for path in sorted((lay.results / "compare").glob("*.json")):
        data = _load(path)
        for shape in (data or {}).get("shapes", []):
            compares.append(
                {
                    "kernel": data.get("kernel"),
                    "shape": shape.get("label"),
                    "config": shape.get("config"),
                    "config_origin": shape.get("config_origin"),
                    "results": [
                        {
                            k: r.get(k)
                            for k in (
                                "name",
                                "status",
                                "median_ms",
                                "ci_ms",
                                "throughput",
                                "unit",
                                "bound_fraction",
                                "speedup",
                                "reason",
                            )
                        }
                        for r in shape.get("results", [])
                    ],
                }
            )
    entry["compare"] = compares
    tunes = {}
    for path in sorted((lay.results / "tune").glob("*.json")):
        data = _load(path)
        if data:
            tunes[path.stem] = {
                k: data.get(k)
                for k in (
                    "best_config",
                    "best_value",
                    "objective",
                    "evaluations",
                    "failed",
                    "stop",
                    "study",
                    "device",
                )
            }
    entry["tune"] = tunes
    if not (entry["ceilings"] or compares or tunes):
        return None
    folder = lay.results / "benchmarks" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{re.sub(r'[^a-z0-9]+', '-', gpu.lower()).strip('-')}-validation-{date}.json"
    path.write_text(json.dumps(entry, indent=1, default=str) + "\n")
    return path


def _tar(dest: Path, root: Path, members: list[Path]) -> None:
    tmp = dest.with_name(dest.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for m in members:
            tar.add(m, arcname=str(m.relative_to(root)))
    tmp.replace(dest)


def _fit(dest: Path, root: Path, files: list[Path], notes: list[str]) -> None:
    """Tar ``files``; while over the file limit, leave the largest out (and say so)."""
    files = sorted(files, key=lambda p: p.stat().st_size)
    while True:
        _tar(dest, root, files)
        if dest.stat().st_size <= FILE_LIMIT or not files:
            return
        dropped = files.pop()
        notes.append(f"{dest.name}: left out {dropped.relative_to(root)} (over 15 MiB packed)")


def pack(lay: Layout) -> list[str]:
    """Pack the results into $OUT (at most 4 files besides summary and log); returns notes."""
    notes: list[str] = []
    try:
        files = [p for p in lay.results.rglob("*") if p.is_file()]
        _fit(lay.out / "results.tar.gz", lay.results, files, notes)
        recs = [p for p in lay.recordings_root.rglob("*.json*") if p.is_file()]
        if recs:
            _fit(lay.out / "recordings.tar.gz", lay.recordings_root, recs, notes)
        reps = [p for p in lay.ncu.rglob("*.ncu-rep") if p.is_file()]
        if reps:
            _fit(lay.out / "ncu.tar.gz", lay.work, reps, notes)
        if lay.store.is_file():
            copy = lay.work / "store-copy.sqlite"
            copy.unlink(missing_ok=True)
            src, dst = sqlite3.connect(lay.store), sqlite3.connect(copy)
            with dst:
                src.backup(dst)  # one consistent file, WAL included
            src.close()
            dst.close()
            gz = lay.out / "store.sqlite.gz"
            with open(copy, "rb") as f, gzip.open(gz, "wb", compresslevel=6) as g:
                shutil.copyfileobj(f, g)
            if gz.stat().st_size > FILE_LIMIT:
                gz.unlink()
                notes.append("store.sqlite.gz left out: over 15 MiB packed")
    except Exception as exc:  # packing must never stop the run
        notes.append(f"packing failed: {type(exc).__name__}: {exc}")
    return notes


def write_summary(lay: Layout, steps: list[Step], meta: dict[str, object]) -> None:
    data = {
        **meta,
        "steps": [asdict(s) for s in steps],
        "out_files": sorted(p.name for p in lay.out.iterdir() if p.is_file()),
    }
    (lay.out / "summary.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    rows = [f"{'step':26} {'status':12} {'wall s':>7} {'limit':>6} {'est.':>6}  note"]
    for s in steps:
        wall = f"{s.wall_s:7.1f}" if s.wall_s is not None else f"{'-':>7}"
        est = f"{s.estimate_s:5d}{s.estimate_source[:1] or '?'}"
        rows.append(f"{s.name:26} {s.status:12} {wall} {s.timeout_s:6d} {est}  {s.note}")
    total = sum(s.wall_s or 0 for s in steps)
    rows.append(
        f"steps' wall time {total:.0f} s; est. = H200 wall time of 2026-12-04, m: this step's "
        "(measured), d: derived from the closest measured step (summary.json: estimate_source); "
        f"elapsed since device_check.sh started {meta.get('elapsed_s')} s"
    )
    for n in meta.get("notes", []) or []:
        rows.append(f"note: {n}")
    (lay.out / "summary.txt").write_text("\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the steps; the environment the steps get is set here and undone on return (the
    tests call this in their own process)."""
    saved = dict(os.environ)
    try:
        return _main(argv)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description="steps of the lent-GPU check (issue 8)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="run the plumbing only: every step echoes its command",
    )
    parser.add_argument("--env-json", type=Path, help="(the env step) write the environment")
    parser.add_argument("--list", action="store_true", help="print the steps and exit")
    parser.add_argument(
        "--check-cli", action="store_true", help="parse every workbench command line, run nothing"
    )
    parser.add_argument(
        "--only",
        default=os.environ.get("DEVICE_CHECK_ONLY", ""),
        help="comma-separated step names to run (a rerun)",
    )
    parser.add_argument("--skip", default=os.environ.get("DEVICE_CHECK_SKIP", ""))
    parser.add_argument(
        "--soft-s", type=float, default=float(os.environ.get("DEVICE_CHECK_SOFT_S", SOFT_S))
    )
    parser.add_argument(
        "--hard-s", type=float, default=float(os.environ.get("DEVICE_CHECK_HARD_S", HARD_S))
    )
    args = parser.parse_args(argv)
    if args.env_json:
        env = collect_env()
        args.env_json.write_text(json.dumps(env, indent=1, default=str) + "\n")
        print(json.dumps(env, indent=1, default=str))
        imports = env.get("imports") or {}
        missing = [
            m for m in REQUIRED_MODULES if str(imports.get(m, "MISSING")).startswith("MISSING")
        ]
        if missing:  # every later step would fail on an import: stop here, loudly
            print(f"required modules missing: {', '.join(missing)}", file=sys.stderr)
            return 3
        return 0
    t0 = float(os.environ.get("DEVICE_CHECK_T0", time.time()))
    elapsed: Callable[[], float] = lambda: time.time() - t0  # noqa: E731
    out = Path(os.environ.get("OUT") or "device-out").absolute()
    work = Path(os.environ.get("DEVICE_CHECK_WORK") or "/tmp/wb-device")
    lay = Layout(out, work)
    os.environ.update(
        {
            "WORKBENCH_CACHE_DIR": str(lay.cache),
            "WORKBENCH_STORE": str(lay.store),
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
            "COLUMNS": "160",
        }
    )
    steps = build_steps(os.environ.get("PYTHON") or sys.executable, lay)
    if args.list:
        for s in steps:
            when = " (on request)" if s.on_request else ""
            print(
                f"{s.name:26} timeout {s.timeout_s:4d} s  est. {s.estimate_s:4d} s  {s.what}{when}"
            )
            print(f"{'':26} est. {s.estimate_source}")
        return 0
    if args.check_cli:
        problems = check_cli(steps)
        print("\n".join(problems) or "every workbench command line parses")
        return 1 if problems else 0
    only = {n for n in args.only.split(",") if n}
    skip = {n for n in args.skip.split(",") if n}
    unknown = (only | skip) - {s.name for s in steps}
    if unknown:
        print(f"unknown step names: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    meta: dict[str, object] = {
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "dry_run": args.dry_run,
        "soft_deadline_s": args.soft_s,
        "hard_deadline_s": args.hard_s,
        "work": str(work),
        "estimates": "estimate_s: H200 wall time of 2026-12-04 (run1/run2 summary.json), the "
        "step's own (measured) or the closest measured step's (derived): see estimate_source",
    }
    env_failed = False
    for step in steps:
        now = elapsed()
        if (only and step.name not in only) or step.name in skip:
            step.status = "not-selected"
        elif step.on_request and step.name not in only:
            step.status, step.note = "not-selected", "on request (DEVICE_CHECK_ONLY)"
        elif env_failed and not step.final:
            step.status, step.note = "skipped", "the env step failed (see its log)"
        elif not step.final and (
            now > args.soft_s or now + min(step.estimate_s, step.timeout_s) > args.hard_s
        ):
            step.status, step.note = "skipped", f"deadline (at {now:.0f} s)"
        elif step.gate == "ncu" and not args.dry_run and not (ncu_gate := ncu_ok(lay))[0]:
            step.status, step.note = "skipped", ncu_gate[1]
        else:
            print(
                f"\n=== {dt.datetime.now(dt.timezone.utc):%H:%M:%S} [{now:5.0f} s] {step.name}:"
                f" {step.what}\n    {shlex.join(step.argv)}",
                flush=True,
            )
            by_name = {s.name: s for s in steps}
            if step.best_from and by_name[step.best_from].status != "ok" and not args.dry_run:
                step.argv = without_best(step.argv)
                step.note = f"default config ({step.best_from} did not finish ok) "
            limit = args.hard_s - now + (FINAL_GRACE_S if step.final else 0)
            step.started_s = round(now, 1)
            run_step(step, lay, max(1.0, min(step.timeout_s, limit)), args.dry_run)
            print(
                f"--- {step.name}: {step.status} in {step.wall_s} s (rc {step.rc}) {step.note}",
                flush=True,
            )
            if step.status not in ("ok", "dry-run"):
                print(tail(lay.results / step.log), flush=True)
            env_failed = env_failed or (
                step.name == "env" and step.status != "ok" and not args.dry_run
            )
        meta["elapsed_s"] = round(elapsed(), 1)
        if step.status in ("ok", "failed", "timeout", "dry-run"):
            results_entry(lay, steps, meta)
            meta["notes"] = pack(lay)
            write_summary(lay, steps, meta)
    meta["elapsed_s"] = round(elapsed(), 1)
    results_entry(lay, steps, meta)
    meta["notes"] = pack(lay)
    write_summary(lay, steps, meta)
    print("\n" + (lay.out / "summary.txt").read_text(), flush=True)
    failed = [s.name for s in steps if s.status in ("failed", "timeout")]
    if failed:
        print(f"device_check: these steps did not finish ok: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
