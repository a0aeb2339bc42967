"""Tuner overhead: wall time per trial spent outside the measurement, against Kernel Tuner.

Replays a large recorded space for N unique evaluations (default 1,000) with the default
sampler and the default store (SQLite file, one commit per trial), and measures, per
evaluation, the wall time between two consecutive evaluations minus the time the runner spent
answering (a replay lookup): that is sampling, repeat/validity checks, store writes and
bookkeeping. The first evaluation's share includes the setup (history read, sampler built);
the per-unique totals also count closing the store (its last WAL checkpoint).

Kernel Tuner is run on the same file in simulation mode with ``max_fevals`` N, once per
strategy; its own ``framework_time + strategy_time`` (ms, as it records them per result) is
the comparison. Its results repeat configs (a population revisits them) and it spreads a
batch's time over the batch's results, so a per-result median says little: both tools are
compared by their total overhead per *unique* evaluation, ours over the same number of unique
evaluations that the strategy reached (several stop short of N).

Same strategy: Kernel Tuner's random sampling is compared with our ``random`` sampler too (run
beside the default, interleaved), so that the framework's share (loop, bookkeeping, store) is
told apart from the default sampler's model.

Like for like: Kernel Tuner's framework time starts before it reads the cache file (its
``util.process_cache``: parsing the JSON, about 0.5 s for the 16 MB gemm file), while ours
starts after ``load_recording`` has read the same file. Reading the recording is the replay's
stand-in for measuring, so the goal compares both *without* it: Kernel Tuner's time minus its
``process_cache`` (timed here by wrapping it) against ours. Kernel Tuner's own total, and ours
with the recording's load added, are printed too.

    python benchmarks/tuner_overhead.py [CACHE] [--trials 1000] [--kt-strategies a,b,...]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import random
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from workbench.errors import WorkbenchError
from workbench.runners.base import DeviceInfo, Measurement, Runner
from workbench.runners.recordings import load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search import portfolio  # noqa: F401  imported before timing, as Kernel Tuner is
from workbench.search.problem import RecordingProblem
from workbench.search.request import DEFAULT_SAMPLER
from workbench.search.samplers import SAMPLERS
from workbench.search.tuner import Budget, SearchSettings, Tuner
from workbench.spaces.model import Config
from workbench.store import Store

DEFAULT_CACHE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "datasets"
    / "tuning-caches"
    / "gemm_RTX_3090.json.gz"
)


T = TypeVar("T")


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


def timed(function: Callable[..., T], spent: list[float]) -> Callable[..., T]:
    """``function``, appending the seconds each call takes to ``spent``."""

    def call(*args: object, **kwargs: object) -> T:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    return call


def workbench_overhead(cache: Path, trials: int, sampler: str, seed: int) -> dict[str, float]:
    loading = time.perf_counter()
    recording = load_recording(cache)
    load_ms = (time.perf_counter() - loading) * 1e3
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
        # the store's share (insert and commit of every evaluation), which Kernel Tuner's
        # simulation mode has no counterpart of
        in_store: list[float] = []
        store.record = timed(store.record, in_store)  # type: ignore[method-assign]
        tuner = Tuner(
            problem,
            runner,
            store,
            study,
            SearchSettings(
                sampler=sampler,
                seed=seed,
                on_evaluation=lambda *_: stamps.append(time.perf_counter()),
            ),
        )
        start = time.perf_counter()
        result = tuner.run(Budget(evaluations=trials))
        total = time.perf_counter() - start
        # closing checkpoints what the WAL still holds: part of the run's overhead too
        closing = time.perf_counter()
        store.close()
        close_ms = (time.perf_counter() - closing) * 1e3
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
        "first_ms": float(per_trial_ms[0]),
        # each evaluation past the first (whose share holds the set-up): the marginal cost
        "marginal_ms": float(np.mean(per_trial_ms[1:])) if len(per_trial_ms) > 1 else 0.0,
        "store_mean_ms": float(np.sum(in_store) * 1e3 / len(per_trial_ms)),
        "close_ms": close_ms,
        "load_ms": load_ms,
        "total_s": total,
        "per_trial_ms": per_trial_ms.tolist(),
    }


def ours_per_unique(per_trial_ms: np.ndarray, close_ms: float, n: int) -> float:
    """Our overhead per unique evaluation over the first ``n`` evaluations: the set-up (in the
    first one's share) and the store's closing included."""
    return float((per_trial_ms[:n].sum() + close_ms) / n) if n else float("nan")


def per_unique(results: list[dict], keys: list[str]) -> dict[str, float]:
    """Kernel Tuner's overhead from its results: total ``framework_time + strategy_time``
    (ms) over the unique configs it evaluated, and the per-result median."""
    per = [r.get("framework_time", 0.0) + r.get("strategy_time", 0.0) for r in results if r]
    unique = len({tuple(r[k] for k in keys) for r in results if r})
    return {
        "unique": unique,
        "results": len(per),
        "total_ms": float(np.sum(per)),
        "per_unique_ms": float(np.sum(per) / unique) if unique else float("nan"),
        "median_per_result_ms": float(np.median(per)) if per else float("nan"),
    }


def read_kt_cache(cache: Path) -> dict:
    """A Kernel Tuner cache file's contents, gzipped or not."""
    raw_bytes = cache.read_bytes()
    return json.loads(gzip.decompress(raw_bytes) if raw_bytes[:2] == b"\x1f\x8b" else raw_bytes)


def kernel_tuner_overhead(cache: Path, trials: int, strategy: str, seed: int) -> dict[str, float]:
    import kernel_tuner

    raw = read_kt_cache(cache)
    keys = raw["tune_params_keys"]
    recorded = {tuple(v[k] for k in keys) for v in raw["cache"].values()}
    size = raw["problem_size"]
    size = tuple(size) if isinstance(size, list) else (size,)

    def in_recording(p: dict) -> bool:  # a def, not a lambda: Kernel Tuner parses lambdas' source
        return tuple(p[k] for k in keys) in recorded

    # time Kernel Tuner's reading of the cache file (inside its framework time; see above) and
    # its building of the search space (also inside: the restriction above, called on every
    # config of the cartesian product), which are its fixed costs, not a per-evaluation one
    reading: list[float] = []
    building: list[float] = []
    process_cache = kernel_tuner.util.process_cache
    searchspace = kernel_tuner.interface.Searchspace
    random.seed(seed)
    np.random.seed(seed)
    kernel_tuner.util.process_cache = timed(process_cache, reading)
    kernel_tuner.interface.Searchspace = timed(searchspace, building)
    try:
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
    finally:  # Kernel Tuner's own functions back, also when the run fails
        kernel_tuner.util.process_cache = process_cache
        kernel_tuner.interface.Searchspace = searchspace
    return kt_overhead_figures(results, keys, reading, building, total)


def kt_overhead_figures(
    results: list[dict], keys: list[str], reading: list[float], building: list[float], total: float
) -> dict[str, float]:
    """A Kernel Tuner run's costs per unique evaluation: all of them, without its reading of
    the cache file, and the marginal one (without building the space too).

    Raises:
        RuntimeError: Kernel Tuner read its cache or built its space other than through the
            functions timed.
    """
    if not reading:
        raise RuntimeError("Kernel Tuner no longer reads its cache through util.process_cache")
    if not building:
        raise RuntimeError("Kernel Tuner no longer builds its space through interface.Searchspace")
    counts = per_unique(results, keys)
    read_ms = float(np.sum(reading) * 1e3)
    build_ms = float(np.sum(building) * 1e3)
    unique = counts["unique"]
    without = (counts["total_ms"] - read_ms) / unique if unique else np.nan
    # what is left once the fixed costs are out: the strategy's and the loop's share of each
    # evaluation (the marginal cost of one more)
    marginal = (counts["total_ms"] - read_ms - build_ms) / unique if unique else np.nan
    return {
        **counts,
        "read_cache_ms": read_ms,
        "build_space_ms": build_ms,
        "per_unique_ms_unread": without,
        "per_unique_ms_marginal": marginal,
        "total_s": total,
    }


#: Kernel Tuner strategies that one of our samplers implements too: compared like for like,
#: strategy against the same strategy, beside the comparison with our default sampler.
SAME_STRATEGY = {"random_sample": "random"}

#: Strategies compared by default: those that led a cell of tuner_efficiency's comparison,
#: the genetic algorithm, and random sampling (the cheapest possible strategy).
KT_DEFAULT = (
    "genetic_algorithm",
    "pso",
    "firefly_algorithm",
    "hybrid_vndx",
    "adaptive_tabu_greywolf",
    "simulated_annealing",
    "greedy_ils",
    "random_sample",
)


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cache", nargs="?", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--sampler", default=DEFAULT_SAMPLER)
    parser.add_argument("--kt-strategies", default=",".join(KT_DEFAULT))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each tool, interleaved (seed, seed+1...)"
    )
    parser.add_argument("--json", type=Path, default=Path("benchmarks/out/tuner_overhead.json"))
    args = parser.parse_args()
    if args.trials < 1 or args.repeats < 1:
        parser.error("--trials and --repeats must be at least 1")
    if args.sampler not in SAMPLERS:
        parser.error(f"--sampler {args.sampler!r}: ours are {', '.join(SAMPLERS)}")
    strategies = [s for s in args.kt_strategies.split(",") if s]
    try:
        from kernel_tuner.interface import strategy_map
    except ImportError:
        print("kernel_tuner is not installed (pip install kernel-tuner): workbench only")
        strategies = []
    else:
        if unknown := [s for s in strategies if s not in strategy_map]:
            parser.error(f"--kt-strategies: unknown {', '.join(unknown)}")
    try:
        run(args, strategies)
    except (WorkbenchError, OSError, ValueError) as exc:  # bad input: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def measure(
    args: argparse.Namespace, strategies: list[str], same: dict[str, str]
) -> tuple[list[dict[str, float]], dict[str, list[dict[str, float]]], dict[str, list[float]]]:
    """Both tools' runs, interleaved so that a busy spell hits both: our runs of the default
    sampler, each Kernel Tuner strategy's runs (with ours over as many unique evaluations), and
    our runs of the samplers that match one of theirs (per unique evaluation, the store's
    closing included)."""
    ours: list[dict[str, float]] = []
    theirs: dict[str, list[dict[str, float]]] = {s: [] for s in strategies}
    ours_same: dict[str, list[float]] = {s: [] for s in same}
    for r in range(args.repeats):  # interleaved, so that a busy spell hits both tools
        mine = workbench_overhead(args.cache, args.trials, args.sampler, args.seed + r)
        per_trial = np.array(mine.pop("per_trial_ms"))
        ours.append(mine)
        for strategy, sampler in same.items():
            twin = workbench_overhead(args.cache, args.trials, sampler, args.seed + r)
            ours_same[strategy].append(
                ours_per_unique(
                    np.array(twin["per_trial_ms"]), twin["close_ms"], twin["evaluations"]
                )
            )
        for strategy in strategies:
            kt = kernel_tuner_overhead(args.cache, args.trials, strategy, args.seed + r)
            n = int(kt["unique"])
            # ours over as many unique evaluations as the strategy reached
            kt["workbench_per_unique_ms"] = ours_per_unique(per_trial, mine["close_ms"], n)
            kt["workbench_loaded_per_unique_ms"] = kt["workbench_per_unique_ms"] + (
                mine["load_ms"] / n if n else float("nan")
            )
            theirs[strategy].append(kt)
    return ours, theirs, ours_same


def print_ours(args: argparse.Namespace, unique: int, ours: list[dict[str, float]]) -> float:
    """The run's heading and our sampler's costs; our median ms per trial."""
    print(
        f"{args.cache.name}: {unique} unique evaluations, "
        f"{os.cpu_count()} CPUs, median of {args.repeats} runs per tool"
    )
    median_ms = _median([m["median_ms"] for m in ours])
    print(
        f"workbench ({args.sampler}, SQLite store): median {median_ms:.3f} ms, mean "
        f"{_median([m['mean_ms'] for m in ours]):.3f} ms per trial (the first, with the setup: "
        f"{_median([m['first_ms'] for m in ours]):.0f} ms), of which the store's writes "
        f"{_median([m['store_mean_ms'] for m in ours]):.3f} ms; closing the store "
        f"{_median([m['close_ms'] for m in ours]):.0f} ms; reading the recording (not counted) "
        f"{_median([m['load_ms'] for m in ours]):.0f} ms"
    )
    return median_ms


def print_kt_heading(theirs: dict[str, list[dict[str, float]]]) -> None:
    """Kernel Tuner's fixed costs, and the heading of the table of strategies."""
    reads = [k["read_cache_ms"] for runs in theirs.values() for k in runs]
    builds = [k["build_space_ms"] for runs in theirs.values() for k in runs]
    print(
        f"Kernel Tuner reads the cache file inside its framework time: {_median(reads):.0f} ms"
        f"; it builds its search space there too: {_median(builds):.0f} ms (the recorded "
        "configs' restriction called on every config of the cartesian product)"
        "\n\nms per unique evaluation (KT: its framework_time + strategy_time; 'unread': "
        "without reading the cache file, like ours)"
        f"\n{'Kernel Tuner strategy':<24}{'unique':>7}{'KT':>9}{'KT unread':>11}{'ours':>8}"
        f"{'ours + read':>13}{'ours/KT unread':>16}{'KT marginal':>13}"
    )


def strategy_row(strategy: str, runs: list[dict[str, float]]) -> dict:
    """A strategy's medians over its runs (and the runs), printed as a row of the table."""
    row = {
        "strategy": strategy,
        "unique": _median([k["unique"] for k in runs]),
        "per_unique_ms": _median([k["per_unique_ms"] for k in runs]),
        "per_unique_ms_unread": _median([k["per_unique_ms_unread"] for k in runs]),
        "per_unique_ms_marginal": _median([k["per_unique_ms_marginal"] for k in runs]),
        "workbench_per_unique_ms": _median([k["workbench_per_unique_ms"] for k in runs]),
        "workbench_loaded_per_unique_ms": _median(
            [k["workbench_loaded_per_unique_ms"] for k in runs]
        ),
        "runs": runs,
    }
    print(
        f"{strategy:<24}{row['unique']:>7.0f}{row['per_unique_ms']:>9.3f}"
        f"{row['per_unique_ms_unread']:>11.3f}{row['workbench_per_unique_ms']:>8.3f}"
        f"{row['workbench_loaded_per_unique_ms']:>13.3f}"
        f"{row['workbench_per_unique_ms'] / row['per_unique_ms_unread']:>16.2f}"
        f"{row['per_unique_ms_marginal']:>13.3f}"
    )
    return row


def add_same_strategy(
    summary: list[dict], same: dict[str, str], ours_same: dict[str, list[float]]
) -> None:
    """Each row of a strategy that one of our samplers implements too gets (and prints) that
    sampler's cost beside it."""
    for row in summary:
        if row["strategy"] in same:
            row["same_strategy"] = same[row["strategy"]]
            row["same_strategy_per_unique_ms"] = _median(ours_same[row["strategy"]])
            print(
                f"same strategy: Kernel Tuner's {row['strategy']} {row['per_unique_ms_unread']:.3f}"
                f" ms (unread) against our {row['same_strategy']} sampler "
                f"{row['same_strategy_per_unique_ms']:.3f} ms per unique evaluation: "
                f"{row['same_strategy_per_unique_ms'] / row['per_unique_ms_unread']:.2f}x"
            )


def print_goals(median_ms: float, summary: list[dict]) -> None:
    """Whether each goal is met: under 2 ms a trial, and below Kernel Tuner's overhead."""
    print(f"\ngoal: workbench median < 2 ms: {'met' if median_ms < 2 else 'NOT met'}")
    for label, ours_key, theirs_key in (
        (
            "like for like (neither reading the recording)",
            "workbench_per_unique_ms",
            "per_unique_ms_unread",
        ),
        (
            "Kernel Tuner's own total (its reading of the file included, ours not)",
            "workbench_per_unique_ms",
            "per_unique_ms",
        ),
    ):
        if not summary:
            break
        above = [r["strategy"] for r in summary if r[ours_key] >= r[theirs_key]]
        print(
            f"goal: overhead per unique evaluation below Kernel Tuner's, {label}: "
            + ("met for every strategy" if not above else "NOT met against " + ", ".join(above))
        )
    matched = [r for r in summary if "same_strategy" in r]
    if matched:
        above = [
            r["strategy"]
            for r in matched
            if r["same_strategy_per_unique_ms"] >= r["per_unique_ms_unread"]
        ]
        print(
            "goal: overhead per unique evaluation below Kernel Tuner's, same strategy, like for "
            "like: "
            + (
                "met for " + ", ".join(r["strategy"] for r in matched)
                if not above
                else "NOT met against " + ", ".join(above)
            )
        )


def write_json(
    args: argparse.Namespace,
    ours: list[dict[str, float]],
    ours_same: dict[str, list[float]],
    summary: list[dict],
) -> None:
    """The runs of both tools and the strategies' rows, to ``--json``."""
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "benchmark": "tuner_overhead",
                "cache": args.cache.name,
                "trials": args.trials,
                "repeats": args.repeats,
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
                "workbench": {
                    "sampler": args.sampler,
                    "runs": ours,
                    # ms per unique evaluation of our sampler that matches each strategy
                    "same_strategy_per_unique_ms": ours_same,
                },
                "kernel_tuner": summary,
            },
            indent=1,
        )
    )
    print(f"wrote {args.json}")


def run(args: argparse.Namespace, strategies: list[str]) -> None:
    """Both tools' runs, interleaved; the tables and the goals; the JSON."""
    recording = load_recording(args.cache)  # refused here, with the reason, if it cannot be read
    if strategies and recording.format != "kt-cache":
        raise ValueError(
            f"{args.cache}: Kernel Tuner reads only its own cache files (--kt-strategies '')"
        )
    same = {s: SAME_STRATEGY[s] for s in strategies if s in SAME_STRATEGY}
    ours, theirs, ours_same = measure(args, strategies, same)
    median_ms = print_ours(args, min(args.trials, len(recording.entries)), ours)
    if strategies:
        print_kt_heading(theirs)
    summary = [strategy_row(strategy, runs) for strategy, runs in theirs.items()]
    add_same_strategy(summary, same, ours_same)
    if summary:
        print(
            "marginal: per evaluation without the fixed costs (KT: its reading of the file and "
            "building of the space; ours: the first evaluation's set-up and the store's closing): "
            f"ours {_median([m['marginal_ms'] for m in ours]):.3f} ms"
        )
    print_goals(median_ms, summary)
    write_json(args, ours, ours_same, summary)


if __name__ == "__main__":
    main()
