"""Tuner overhead: wall time per trial spent outside the measurement, against Kernel Tuner.

Replays a large recorded space for N unique evaluations (default 1,000) with the default
sampler and the default store (SQLite file, one commit per trial), and measures, per
evaluation, the wall time between two consecutive evaluations minus the time the runner spent
answering (a replay lookup): that is sampling, repeat/validity checks, store writes and
bookkeeping. Kernel Tuner is run on the same file in simulation mode with the same number of
unique evaluations; its own per-configuration ``framework_time + strategy_time`` (ms, as it
records them) is the comparison.

    python benchmarks/tuner_overhead.py [CACHE] [--trials 1000] [--kt-strategy genetic_algorithm]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import random
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from workbench.runners.base import DeviceInfo, Measurement, Runner
from workbench.runners.recordings import load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordingProblem
from workbench.search.samplers import DEFAULT_SAMPLER
from workbench.search.tuner import Budget, Tuner
from workbench.spaces.model import Config
from workbench.store import Store

DEFAULT_CACHE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "datasets"
    / "tuning-caches"
    / "gemm_RTX_3090.json.gz"
)


class TimedReplay(Runner):
    """A replay runner that keeps the time spent inside each evaluation."""

    def __init__(self, inner: ReplayRunner) -> None:
        self.inner = inner
        self.objective = inner.objective
        self.inside: list[float] = []

    @property
    def device(self) -> DeviceInfo:
        return self.inner.device

    def evaluate(self, config: Config) -> Measurement:
        start = time.perf_counter()
        m = self.inner.evaluate(config)
        self.inside.append(time.perf_counter() - start)
        return m


def workbench_overhead(cache: Path, trials: int, sampler: str, seed: int) -> dict[str, float]:
    recording = load_recording(cache)
    runner = TimedReplay(ReplayRunner(recording))
    stamps: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/store.sqlite")
        problem = RecordingProblem(recording)
        study = store.study(
            kernel=recording.kernel,
            shape_label=problem.shape_label,
            device_key=recording.device.key(),
            parameters=recording.parameters,
        )
        tuner = Tuner(
            problem,
            runner,
            store,
            study,
            sampler=sampler,
            seed=seed,
            on_evaluation=lambda *_: stamps.append(time.perf_counter()),
        )
        start = time.perf_counter()
        result = tuner.run(Budget(evaluations=trials))
        total = time.perf_counter() - start
        store.close()
    # the runner is called for every new evaluation: pair each gap with its lookup time
    gaps = np.diff([start, *stamps])
    inside = np.array(runner.inside[: len(gaps)])
    per_trial_ms = (gaps - inside) * 1e3
    return {
        "evaluations": result.evaluations,
        "proposals": result.proposals,
        "median_ms": float(np.median(per_trial_ms)),
        "mean_ms": float(np.mean(per_trial_ms)),
        "p90_ms": float(np.percentile(per_trial_ms, 90)),
        "total_s": total,
    }


def kernel_tuner_overhead(cache: Path, trials: int, strategy: str, seed: int) -> dict[str, float]:
    import kernel_tuner

    raw_bytes = cache.read_bytes()
    raw = json.loads(gzip.decompress(raw_bytes) if raw_bytes[:2] == b"\x1f\x8b" else raw_bytes)
    keys = raw["tune_params_keys"]
    recorded = {tuple(v[k] for k in keys) for v in raw["cache"].values()}
    size = raw["problem_size"]
    size = tuple(size) if isinstance(size, list) else (size,)

    def in_recording(p: dict) -> bool:  # a def, not a lambda: Kernel Tuner parses lambdas' source
        return tuple(p[k] for k in keys) in recorded

    random.seed(seed)
    np.random.seed(seed)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = Path(tmp) / "cache.json"
        path.write_text(json.dumps(raw))
        start = time.perf_counter()
        results, _ = kernel_tuner.tune_kernel(
            raw["kernel_name"],
            "",
            size,
            [],
            raw["tune_params"],
            cache=str(path),
            restrictions=in_recording,
            simulation_mode=True,
            strategy=strategy,
            strategy_options={"max_fevals": trials},
            quiet=True,
        )
        total = time.perf_counter() - start
    per = [r.get("framework_time", 0.0) + r.get("strategy_time", 0.0) for r in results if r]
    return {
        "median_ms": float(np.median(per)),
        "mean_ms": float(np.mean(per)),
        "configs": len(per),
        "total_s": total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache", nargs="?", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--sampler", default=DEFAULT_SAMPLER)
    parser.add_argument("--kt-strategy", default="genetic_algorithm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/out/tuner_overhead.json"))
    args = parser.parse_args()
    ours = workbench_overhead(args.cache, args.trials, args.sampler, args.seed)
    print(f"{args.cache.name}: {args.trials} unique evaluations")
    print(f"{'':<34}{'median ms':>11}{'mean ms':>10}{'total s':>9}")
    print(
        f"{'workbench (' + args.sampler + ', SQLite store)':<34}{ours['median_ms']:>11.3f}"
        f"{ours['mean_ms']:>10.3f}{ours['total_s']:>9.1f}"
    )
    theirs = None
    try:
        theirs = kernel_tuner_overhead(args.cache, args.trials, args.kt_strategy, args.seed)
        print(
            f"{'kernel_tuner (' + args.kt_strategy + ')':<34}{theirs['median_ms']:>11.3f}"
            f"{theirs['mean_ms']:>10.3f}{theirs['total_s']:>9.1f}"
        )
        print(
            f"ratio of medians (Kernel Tuner / workbench): "
            f"{theirs['median_ms'] / ours['median_ms']:.1f}x"
        )
    except ImportError:
        print("kernel_tuner is not installed: pip install kernel-tuner")
    print(f"goal: workbench median < 2 ms: {'met' if ours['median_ms'] < 2 else 'NOT met'}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "benchmark": "tuner_overhead",
                "cache": args.cache.name,
                "trials": args.trials,
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
                "workbench": {"sampler": args.sampler, **ours},
                "kernel_tuner": None
                if theirs is None
                else {"strategy": args.kt_strategy, **theirs},
                "median_of_per_trial": statistics.median([ours["median_ms"]]),
            },
            indent=1,
        )
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
