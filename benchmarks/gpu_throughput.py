"""Evaluations per GPU minute: the old pipeline against the new one.

Where the time went on the H200 (2026-12-04, ``../shared/device-runs/h200-2026-12-04/run2/
store.sqlite.gz``; per evaluation: the gap between consecutive ``elapsed_s``, NVRTC's
``compile_seconds`` as stored, ``metrics.timing_seconds`` = warm-up + timed samples; medians;
``--breakdown`` prints this table from the store):

    study                     evals  wall s  per eval s  compile s  timing s  rest s  GPU busy
    gemm_int8 8192^3             14    40.5        2.69       0.27      0.09    2.18     3.7 %
    gemm_int8 4096^3             26    25.7        0.89       0.33      0.04    0.58     4.2 %
    gemm_int8 128x11008x4096     51    20.2        0.38       0.31      0.05    0.06    11.7 %
    reduce 16M                   80    14.4        0.18       0.11      0.06    0.01    32.5 %

(GPU busy here: warm-up and timed samples over the search's wall time; the issue's lower
figures count the kernel time inside the samples only.) The "rest" (wall less NVRTC and the
timing stage) grows with the output: 256 MiB of int32 at 8192^2 (2.2 s), 64 MiB at 4096^2
(0.58 s), 5.4 MiB at 128x11008 (0.06 s), 4 bytes for reduce (0.01 s); 2.2/0.58 = 3.8 for 4x
the bytes. The host verification path was timed on this 2-core CPU at those sizes (fill,
copy back, ``write_raw``, ``read_raw`` + ``compare_output``): 8192^2 int32: write 0.46 s,
read and compare 1.38 s (1.84 s of host work); 4096^2: 0.15 + 0.76 s. So the unaccounted
~2 s at 8192^3 is the verification's copy, file and NumPy comparison of the output, per
config. The first evaluation of each study also pays the reference (8192^3 int8 GEMM in float64
BLAS: the 5.5 s before the first result). Before the search: listing gemm_int8's valid
configs took 18.9 s on this CPU (now kept on disk: 0.95 s on later tunes).

What the new pipeline changes (``workbench tune --pipeline new``): the next proposals compile
on every core while one is timed, and outputs are compared on the GPU (56 bytes come back).

Two modes:

* on a GPU (``--gpu``): tunes gemm_int8 at 4096^3 and 8192^3 and reduce for a fixed wall time
  with each pipeline, in fresh studies of one temporary store, and prints evaluations/minute,
  GPU busy, the phases and the best value reached; then runs the GPU's and the host's
  verification on the same outputs of a few configs and says whether they agree.
* on a CPU (default without a GPU): SIMULATED. The real search loop (sampler, store, the
  pipeline's proposals ahead) runs over the H200 recordings, with a simulated runner whose
  costs per config come from the H200 run: NVRTC seconds and the timing stage's seconds as
  recorded with each config, the rest of an evaluation (the store's median "rest" of that
  study) for the old pipeline; for the new one, compiles on ``--cores`` simulated cores and,
  in place of the host verification, reduce's median rest (the per-evaluation overhead with
  no output to copy) plus one launch of the kernel and the compare kernel's bytes at the H200's
  measured copy bandwidth. The loop's own time on this CPU is added as measured. Every number
  it prints is a simulation: the GPU mode is the measurement. On 2026-12-04's costs, 16 cores
  (all recorded configs of each study, portfolio sampler, seed 0; ``benchmarks/results/``):
  gemm_int8 4096^3 58 -> 378 evaluations/min (6.5x, GPU busy 4 -> 26 %: compile-bound, five
  proposals in flight), 8192^3 23 -> 314 (13.8x, 4 -> 56 %), reduce 334 -> 815 (2.4x, 33 ->
  79 %). The first evaluation's reference and the one-time upload of its outputs are not in
  it; neither is a verification kernel slower than its bytes.

Racing (``--racing``; estimated, not built): abandon a config when the fastest of its first 3
samples is above 1.1x the incumbent's median. Replayed on every recorded H200 config's samples
(8 recordings, 20 random orders each): 3,154 of 4,780 configs would have been abandoned, none
of them within 1 % of the incumbent or better (0 false abandons: below 0.1 % at 95 %, by the
rule of three), saving 19-84 % of the sampled kernel time. Its gain is bounded by the timed
share of the wall time: 2-5 % in the old pipeline, the most of it in the new one.

    python benchmarks/gpu_throughput.py [--breakdown] [--racing] [--gpu] [--seconds 60]
        [--cores 16] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import itertools
import json
import math
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
H200_STORE = REPO.parent / "shared/device-runs/h200-2026-12-04/run2/store.sqlite.gz"
RECORDINGS = REPO / "tuning_spaces/recordings"
#: H200 device-to-device copy bandwidth, read + written (FACTS.md, 2026-12-04)
COPY_BYTES_PER_S = 4.27e12
#: The compile cores of the lent H200 machine (its description: 16 CPU cores).
H200_CORES = 16

#: (label, kernel, shape, study name in the H200 store, recording)
STUDIES = (
    (
        "gemm_int8 4096^3",
        "gemm_int8",
        {"M": 4096, "N": 4096, "K": 4096},
        "gemm_int8 | M=4096,N=4096,K=4096 | NVIDIA H200",
        "gemm_int8/gemm_int8-nvidia-h200-M4096_N4096_K4096.json.gz",
    ),
    (
        "gemm_int8 8192^3",
        "gemm_int8",
        {"M": 8192, "N": 8192, "K": 8192},
        "gemm_int8 | M=8192,N=8192,K=8192 | NVIDIA H200",
        "gemm_int8/gemm_int8-nvidia-h200-M8192_N8192_K8192.json.gz",
    ),
    (
        "reduce 16M",
        "reduce",
        {"n": 16777216},
        "reduce[OP=sum] | n=16777216 | NVIDIA H200",
        "reduce/reduce-OP-sum-nvidia-h200-n16777216.json.gz",
    ),
)
BREAKDOWN = (
    *((label, study) for label, _, _, study, _ in STUDIES[1::-1]),
    ("gemm_int8 128x11008x4096", "gemm_int8 | M=128,N=11008,K=4096 | NVIDIA H200"),
    (STUDIES[2][0], STUDIES[2][3]),
)


# -- the H200 run's costs ----------------------------------------------------------------------
@dataclass(frozen=True)
class StudyCosts:
    """One H200 study's evaluations, as its store recorded them (medians per evaluation)."""

    label: str
    evaluations: int
    wall_s: float
    per_eval_s: float
    compile_s: float
    timing_s: float
    rest_s: float
    gpu_busy: float  #: warm-up and timed samples over the search's wall time


def open_h200_store(path: Path = H200_STORE) -> sqlite3.Connection:
    """The H200 store, decompressed into a temporary file (the original stays untouched)."""
    if not path.is_file():
        raise SystemExit(f"the H200 store is not at {path}")
    tmp = Path(tempfile.mkdtemp(prefix="h200-store-")) / "store.sqlite"
    with gzip.open(path) as src, tmp.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return sqlite3.connect(tmp)


def study_costs(db: sqlite3.Connection, label: str, study: str) -> StudyCosts:
    rows = db.execute(
        "SELECT e.elapsed_s, e.compile_seconds, e.metrics FROM evaluations e "
        "JOIN studies s ON s.id = e.study_id WHERE s.name = ? ORDER BY e.id",
        (study,),
    ).fetchall()
    elapsed = [r[0] for r in rows]
    gaps = [b - a for a, b in itertools.pairwise(elapsed)]
    compiles = [r[1] or 0.0 for r in rows][1:]
    timings = [json.loads(r[2] or "{}").get("timing_seconds", 0.0) for r in rows]
    rest = [g - c - t for g, c, t in zip(gaps, compiles, timings[1:], strict=True)]
    return StudyCosts(
        label,
        len(rows),
        elapsed[-1],
        statistics.median(gaps),
        statistics.median(compiles),
        statistics.median(timings[1:]),
        statistics.median(rest),
        sum(timings) / elapsed[-1],
    )


def breakdown_table(costs: list[StudyCosts]) -> str:
    lines = [
        f"{'study':26}{'evals':>6}{'wall s':>8}{'per eval s':>12}{'compile s':>11}"
        f"{'timing s':>10}{'rest s':>8}{'GPU busy':>10}"
    ]
    for c in costs:
        lines.append(
            f"{c.label:26}{c.evaluations:6d}{c.wall_s:8.1f}{c.per_eval_s:12.2f}{c.compile_s:11.2f}"
            f"{c.timing_s:10.2f}{c.rest_s:8.2f}{100 * c.gpu_busy:9.1f} %"
        )
    return "\n".join(lines)


# -- the simulated runner ----------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigCosts:
    """One config's costs in the H200 run: NVRTC, and the timing stage (warm-up included)."""

    compile_s: float
    timing_s: float
    warmup_launches: float


def config_costs(db: sqlite3.Connection, study: str) -> dict[str, ConfigCosts]:
    """Per config (:func:`config_key`) of an H200 study, as its store recorded them."""
    rows = db.execute(
        "SELECT e.params, e.compile_seconds, e.metrics FROM evaluations e "
        "JOIN studies s ON s.id = e.study_id WHERE s.name = ?",
        (study,),
    ).fetchall()
    out = {}
    for params, compile_s, metrics in rows:
        m = json.loads(metrics or "{}")
        out[config_key(json.loads(params))] = ConfigCosts(
            compile_s or 0.0, m.get("timing_seconds", 0.0), m.get("warmup_launches", 0.0)
        )
    return out


def config_key(config: dict) -> str:
    return repr(sorted(config.items()))


@dataclass
class SimCosts:
    """What the simulated runner charges per config (seconds of the H200 run)."""

    rest_old_s: float  #: the study's median rest per evaluation (old pipeline)
    rest_new_s: float  #: reduce's median rest: the per-evaluation overhead without a copy
    output_bytes: int  #: bytes of the config's compared outputs
    cores: int
    configs: dict[str, ConfigCosts] = field(default_factory=dict)


def charged_seconds(
    sim: SimCosts, costs: ConfigCosts, value_ms: float, new: bool, wait: float | None
) -> tuple[float, float, float, float]:
    """What one evaluation of a config costs on the simulated clock, in seconds of compile,
    verification, warm-up and timing. ``wait``: how long the new pipeline still waits for a
    compile started ahead (None: the compile runs now, all of it)."""
    compile_s = costs.compile_s if wait is None else wait
    timing_s = costs.timing_s
    warmup_s = min(timing_s, costs.warmup_launches * value_ms / 1e3)
    if new:  # one launch, the compare kernel's bytes, the fixed overhead
        bytes_moved = sim.output_bytes * (1 + 1 + 2)  # fill, read, expected
        verify = sim.rest_new_s + value_ms / 1e3 + bytes_moved / COPY_BYTES_PER_S
    else:
        verify = sim.rest_old_s
    return compile_s, verify, warmup_s, timing_s - warmup_s


class SimClock:
    """The simulated time of a search over an H200 recording: the loop's own time as measured
    here, plus each evaluation charged the H200 run's costs; compiles started ahead run on the
    first free of ``costs.cores`` simulated cores."""

    def __init__(self, recording, costs: SimCosts, new: bool) -> None:  # type: ignore[no-untyped-def]
        from workbench.runners.phases import PhaseTimes

        self.recording = recording
        self.costs = costs
        self.new = new
        self.clock = 0.0  #: simulated seconds
        self.cores = [0.0] * costs.cores  #: when each compile core is free
        self.compiles: dict[str, float] = {}  #: key -> when its compile is done
        self.phases = PhaseTimes()
        self.best: list[tuple[float, float]] = []  #: (simulated s, best value)
        self._last_real: float | None = None

    def prepare(self, config) -> None:  # type: ignore[no-untyped-def]
        """Start ``config``'s compile on the first free core (once)."""
        key = config_key(config)
        if self.recording.lookup(config) is None or key in self.compiles:
            return
        core = min(range(len(self.cores)), key=lambda i: self.cores[i])
        start = max(self.clock, self.cores[core])
        self.cores[core] = self.compiles[key] = start + self.costs.configs[key].compile_s

    def loop_time(self) -> None:
        """Add the loop's own time since the last evaluation, as measured here."""
        from workbench.runners.phases import Phase

        now = time.perf_counter()
        if self._last_real is not None:
            loop = now - self._last_real
            self.clock += loop
            self.phases.add(Phase.SEARCH, loop)

    def evaluated(self, config, value: float | None) -> None:  # type: ignore[no-untyped-def]
        """Charge ``config``'s evaluation (measured ``value``) and keep the best so far."""
        entry = self.recording.lookup(config)
        if entry is not None:
            self._charge(config, entry)
            if value is not None:
                best = min([value, *(b for _, b in self.best[-1:])])
                self.best.append((self.clock, best))
        self._last_real = time.perf_counter()

    def _charge(self, config, entry) -> None:  # type: ignore[no-untyped-def]
        from workbench.runners.phases import Phase

        key = config_key(config)
        ready = self.compiles.pop(key) if self.new and key in self.compiles else None
        wait = None if ready is None else max(0.0, ready - self.clock)
        charged = charged_seconds(
            self.costs, self.costs.configs[key], entry.value or 0.0, self.new, wait
        )
        phases = (Phase.COMPILE, Phase.VERIFICATION, Phase.WARMUP, Phase.TIMING)
        for phase, seconds in zip(phases, charged, strict=True):
            self.phases.add(phase, seconds)
            self.clock += seconds


class SimulatedRunner:
    """A runner over an H200 recording whose evaluations advance a :class:`SimClock`;
    ``prepare`` schedules the compile ahead. Built lazily, so that the GPU mode imports
    nothing of it."""

    def __new__(cls, recording, costs: SimCosts, new: bool, space):  # type: ignore[no-untyped-def]
        from workbench.runners.base import Runner
        from workbench.runners.replay import ReplayRunner

        class _Simulated(Runner):
            def __init__(self) -> None:
                self.inner = ReplayRunner(recording)
                self.space = space
                self.sim = SimClock(recording, costs, new)

            @property
            def device(self):  # type: ignore[no-untyped-def]
                return self.inner.device

            def phase_times(self):  # type: ignore[no-untyped-def]
                return None  # simulated seconds are kept apart from the loop's wall time

            def prepare(self, config) -> None:  # type: ignore[no-untyped-def]
                self.sim.prepare(config)

            def evaluate(self, config):  # type: ignore[no-untyped-def]
                self.sim.loop_time()
                m = self.inner.evaluate(config)
                self.sim.evaluated(config, m.value)
                return m

        return _Simulated()


@dataclass
class PipelineResult:
    label: str
    pipeline: str
    evaluations: int
    seconds: float  #: simulated (CPU mode) or measured (GPU mode) search wall time
    phases: dict[str, float]
    gpu_busy: float | None
    best: float | None
    best_curve: list[tuple[float, float]] = field(default_factory=list)

    @property
    def per_minute(self) -> float:
        return 60 * self.evaluations / self.seconds if self.seconds > 0 else math.nan

    def best_at(self, seconds: float) -> float | None:
        """The best value reached by ``seconds`` of the search (None: nothing yet)."""
        reached = [b for t, b in self.best_curve if t <= seconds]
        return reached[-1] if reached else None


def output_bytes(kernel: str, shape: dict[str, int], config: dict) -> int:
    from workbench.runners.buffers import output_buffers
    from workbench.spaces import Space, load_kernel

    space = Space(load_kernel(kernel), shape=shape)
    return sum(
        o.nbytes for o in output_buffers(space, {**space.default_config(), **config}) if o.compared
    )


def simulate(
    label: str, kernel: str, shape: dict[str, int], recording_path: Path, costs: SimCosts, new: bool
) -> PipelineResult:
    """The real search loop over the recording, charged the H200's costs (see the module)."""
    from workbench.runners.phases import PhaseTimes
    from workbench.runners.recordings import load_recording
    from workbench.search.problem import RecordingProblem
    from workbench.search.request import Pipeline
    from workbench.search.tuner import Budget, SearchSettings, Tuner
    from workbench.store import Store

    recording = load_recording(recording_path)
    problem = RecordingProblem(recording)
    runner = SimulatedRunner(recording, costs, new, None)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/s.sqlite")
        study = store.study(
            kernel=recording.kernel,
            shape_label=problem.shape_label,
            device_key=recording.device.key(),
            parameters=recording.parameters,
        )
        ahead = (Pipeline.NEW if new else Pipeline.OLD).ahead
        n = len(recording.entries)
        result = Tuner(
            problem, runner, store, study, SearchSettings(sampler="portfolio", seed=0, ahead=ahead)
        ).run(Budget(evaluations=n))
        store.close()
    phases: PhaseTimes = runner.sim.phases
    total = runner.sim.clock
    return PipelineResult(
        label,
        "new" if new else "old",
        result.new_evaluations,
        total,
        phases.to_json(),
        phases.gpu_busy,
        result.best.measurement.value if result.best else None,
        runner.sim.best,
    )


def run_simulated(cores: int) -> list[PipelineResult]:
    db = open_h200_store()
    reduce_rest = study_costs(db, STUDIES[2][0], STUDIES[2][3]).rest_s
    out = []
    for label, kernel, shape, study, rec in STUDIES:
        costs = study_costs(db, label, study)
        sim = SimCosts(
            costs.rest_s,
            max(reduce_rest, 0.0),
            output_bytes(kernel, shape, {}),
            cores,
            config_costs(db, study),
        )
        for new in (False, True):
            out.append(simulate(label, kernel, shape, RECORDINGS / rec, sim, new))
    return out


# -- the GPU mode ------------------------------------------------------------------------------
def run_gpu(seconds: float, workdir: Path) -> list[PipelineResult]:
    """Real tunes: each study with each pipeline for ``seconds``, fresh studies, one store."""
    storage = f"sqlite:///{workdir / 'throughput.sqlite'}"
    out = []
    for label, kernel, shape, _, _ in STUDIES:
        shape_args = [a for k, v in shape.items() for a in ("--shape", f"{k}={v}")]
        for pipeline in ("old", "new"):
            argv = [
                sys.executable, "-m", "workbench.cli.main", "tune", kernel, *shape_args,
                "--time", str(seconds), "--budget", "10000", "--pipeline", pipeline,
                "--fresh", "--enqueue", "none", "--json", "--storage", storage,
            ]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode not in (0, 1):
                raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
            doc = json.loads(done.stdout)
            phases = doc.get("phases") or {}
            out.append(
                PipelineResult(
                    label,
                    pipeline,
                    doc["new_evaluations"],
                    sum(phases.values()),
                    phases,
                    doc.get("gpu_busy"),
                    doc.get("best_value"),
                )
            )
    return out


def gpu_verification_agrees(configs: int = 4) -> dict[str, object]:
    """On a GPU: both verifications of the same launches (gemm_int8 4096^3, reduce), the GPU's
    counts against the host's, config by config."""
    from workbench.compiler import CompileCache
    from workbench.runners.buffers import named_scalars
    from workbench.runners.cuda.runner import CudaRunner
    from workbench.runners.kernel_jobs import kernel_job
    from workbench.search.problem import SpaceProblem
    from workbench.spaces import Space, load_kernel

    checks = []
    problems = (("gemm_int8", {"M": 4096, "N": 4096, "K": 4096}), ("reduce", {"n": 1 << 24}))
    for kernel, shape in problems:
        space = Space(load_kernel(kernel), shape=shape)
        runner = CudaRunner(space, CompileCache(), device_verify=True)
        try:
            valid = SpaceProblem(space).valid_configs() or []
            picked = valid[:: max(1, len(valid) // configs)][:configs]
            for config in [space.default_config(), *picked]:
                compiled = runner.compiled(config)
                if not compiled.ok:
                    continue
                job = kernel_job(runner.space, config, compiled)
                inputs = runner._inputs.get(config)
                assert inputs.expected is not None
                expected = inputs.expected.get(config, named_scalars(job.args), job.outputs)
                on_gpu = runner._verify_on_device(config, job, inputs, expected)
                on_host = runner._verify_on_host(config, job, inputs)
                same = on_gpu is not None and [
                    (c.wrong, c.untouched, c.nonfinite) for c in on_gpu.checks
                ] == [(c.wrong, c.untouched, c.nonfinite) for c in on_host.checks]
                checks.append({"kernel": kernel, "config": config, "agree": same})
        finally:
            runner.close()
    return {"agree": all(c["agree"] for c in checks), "checks": checks}


# -- racing: a rule, and its false-abandon rate on the recorded samples ---------------------
#: The rule estimated (not built): after RACE_AFTER samples, a config whose fastest sample is
#: above (1 + RACE_MARGIN) x the incumbent's median is abandoned. A false abandon: one whose
#: median over all its samples is within RACE_CLOSE of the incumbent's, or better.
RACE_AFTER = 3
RACE_MARGIN = 0.10
RACE_CLOSE = 0.01


@dataclass(frozen=True)
class RacingEstimate:
    recording: str
    evaluated: int  #: configs compared with an incumbent (every order, every seed)
    abandoned: int
    false_abandons: int
    samples_saved: float  #: share of the sampled kernel time the abandons would have saved


def racing_estimate(path: Path, orders: int = 20) -> RacingEstimate:
    """The rule above replayed on a recording's samples, in ``orders`` random orders (the
    incumbent is the best median seen before each config)."""
    import random

    from workbench.runners.recordings import load_recording

    recording = load_recording(path)
    entries = [e for e in recording.entries.values() if len(e.samples) > RACE_AFTER]
    evaluated = abandoned = false = 0
    saved = total = 0.0
    for seed in range(orders):
        order = entries[:]
        random.Random(seed).shuffle(order)
        best = math.inf
        for e in order:
            median = statistics.median(e.samples)
            total += sum(e.samples)
            if math.isfinite(best):
                evaluated += 1
                if min(e.samples[:RACE_AFTER]) > (1 + RACE_MARGIN) * best:
                    abandoned += 1
                    false += median <= (1 + RACE_CLOSE) * best
                    saved += sum(e.samples[RACE_AFTER:])
            best = min(best, median)
    return RacingEstimate(path.name, evaluated, abandoned, false, saved / total if total else 0.0)


# -- output ------------------------------------------------------------------------------------
def report(results: list[PipelineResult], simulated: bool) -> str:
    what = "SIMULATED from the H200 run's costs (not measured)" if simulated else "measured"
    lines = [f"evaluations per minute, old vs new pipeline ({what}):"]
    if simulated:
        lines.append(
            "  ('verification' holds the H200 run's rest of each evaluation: the host "
            "verification, worker round trips, store and search there)"
        )
    for label in dict.fromkeys(r.label for r in results):
        old, new = [r for r in results if r.label == label]
        t = new.seconds if simulated else min(old.seconds, new.seconds)
        lines.append(
            f"  {label:18} old {old.per_minute:7.1f}/min (GPU busy {pct(old.gpu_busy)}), "
            f"new {new.per_minute:7.1f}/min (GPU busy {pct(new.gpu_busy)}): "
            f"{new.per_minute / old.per_minute:.1f}x"
        )
        if simulated:
            lines.append(
                f"  {'':18} best at {t:.1f} s: old {fmt(old.best_at(t))}, new {fmt(new.best_at(t))}"
                f" ms; all {new.evaluations} recorded configs: old {old.seconds:.1f} s, "
                f"new {new.seconds:.1f} s"
            )
        for r in (old, new):
            phases = ", ".join(f"{k} {v:.2f}" for k, v in r.phases.items())
            lines.append(f"  {'':18} {r.pipeline}: {phases}")
    return "\n".join(lines)


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--breakdown", action="store_true", help="the H200 store's breakdown")
    parser.add_argument("--gpu", action="store_true", help="measure on this GPU (real tunes)")
    parser.add_argument("--seconds", type=float, default=60.0, help="GPU mode: per tune")
    parser.add_argument("--cores", type=int, default=H200_CORES, help="simulated compile cores")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--racing", action="store_true", help="the racing rule's estimate")
    args = parser.parse_args(argv)
    doc: dict[str, object] = {"date": time.strftime("%Y-%m-%d")}
    if args.breakdown or not args.gpu:
        db = open_h200_store()
        costs = [study_costs(db, label, study) for label, study in BREAKDOWN]
        print(f"H200 run 2026-12-04 ({H200_STORE.name}), medians per evaluation:")
        print(breakdown_table(costs))
        doc["h200_breakdown"] = [dataclasses.asdict(c) for c in costs]
        if args.breakdown:
            return write(doc, args.json)
    if args.racing:
        estimates = [racing_estimate(p) for p in sorted(RECORDINGS.glob("*/*.json.gz"))]
        for r in estimates:
            print(
                f"{r.recording:70} {r.abandoned:5d}/{r.evaluated:5d} abandoned, "
                f"{r.false_abandons} false, {100 * r.samples_saved:.0f} % of sample time saved"
            )
        doc["racing"] = [dataclasses.asdict(r) for r in estimates]
        return write(doc, args.json)
    if args.gpu:
        with tempfile.TemporaryDirectory() as tmp:
            results = run_gpu(args.seconds, Path(tmp))
        doc["mode"] = "gpu (measured)"
        doc["verification"] = gpu_verification_agrees()
        print(f"GPU and host verification agree: {doc['verification']['agree']}")  # type: ignore[index]
    else:
        results = run_simulated(args.cores)
        doc["mode"] = "cpu (SIMULATED from the H200 run's costs)"
    print(report(results, simulated=not args.gpu))
    doc["results"] = [dataclasses.asdict(r) | {"per_minute": r.per_minute} for r in results]
    return write(doc, args.json)


def write(doc: dict[str, object], path: Path | None) -> int:
    if path is not None:
        path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
