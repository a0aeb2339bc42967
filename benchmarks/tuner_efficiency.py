"""Search efficiency on recorded spaces: the workbench's samplers against Kernel Tuner's strategies.

For each recorded space (any Kernel Tuner cache file or T4 file), each sampler of ours and each
Kernel Tuner strategy (``simulation_mode``, same file) searches with budgets of unique
evaluations, repeated with different seeds; a run per budget, as both tools' strategies are told
their budget (Kernel Tuner's ``max_fevals``, the tuner's ``--budget``) and plan with it. Scores
follow the autotuning methodology (FACTS.md): ``P(t) = (S(t) - B(t)) / (f_opt - B(t))``, where
``S(t)`` is the mean best value found after ``t`` unique evaluations, ``B(t)`` the exact
expected best of random search without replacement after ``t`` evaluations, and ``f_opt`` the
recorded optimum: random search scores 0, finding the optimum scores 1. Each record also holds
every repeat's best value and a bootstrap 90% interval of the score over repeats
(``score_ci90``): at 40 repeats a cell's score can move by 0.1 or more with the seeds, so
compare intervals, not single scores; and the unique configs a run evaluated
(``evaluations_made``, median): a Kernel Tuner strategy may stop short of the budget, and is
scored at the budget all the same. A Kernel Tuner strategy that raises on a space is left out of
the results, with its error (``failed_cells``), and the run goes on.

Order invariance: ``--value-order reversed`` lists every parameter's values (and the recorded
configs) in the reverse order for both tools. A search strategy's merit should not depend on the
order in which a space happens to list its values; a strategy whose score changes with it has a
built-in bias toward one end of the space (Kernel Tuner's search space lists the largest values
first, and a strategy that repairs an invalid config with the first valid neighbour it finds
inherits that order).

Equal footing: both tools search the same space, the configurations the file holds, failed
ones included (a failed configuration costs one evaluation and yields no value; Kernel Tuner's
own ``tune_cache`` would drop failed configurations from its space, so this script passes a
restriction that keeps them). A run that finds no valid value scores with the worst recorded
value.

    python benchmarks/tuner_efficiency.py ../shared/datasets/tuning-caches/*.json.gz \\
        --budgets 50,100,200 --repeats 10 --json benchmarks/out/tuner_efficiency.json

Processes: ``--jobs N`` runs the (space, tool, strategy) cells in N processes side by side; a
cell's runs are seeded, so its records are the same as in one process (only the order in which
cells print changes). On the 2-core VM, ``--jobs 2`` ran two spaces x three strategies x 30
seeds in 18.9 s against 37.1 s with one.

Warm starts: ``--warm-start CACHE`` makes our samplers evaluate CACHE's fastest config first,
as ``workbench tune --enqueue best`` does after tuning that recording (another GPU's recording
of the same kernel); such runs are recorded as strategy ``SAMPLER+warm`` and stay out of the
goal table, which compares searches that start from nothing.

Pooling: runs on disjoint seed ranges (``--first-seed``) can be pooled into one record per
space, tool, strategy and budget: ``--merge A.json B.json ... --caches-dir DIR [--json OUT]``
rescores the pooled repeats (the score is affine in the mean best value, so it is exactly what one
run of all those seeds would score; the interval needs every repeat's best value, which records
written before those were kept lack; the evaluations-to-within medians are not kept per repeat,
so pooled records have none) and prints the goal table. Both modes end with it: per space and
budget, the default sampler against the best Kernel Tuner strategy run on the same seeds.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import functools
import gzip
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from efficiency_results import (  # noqa: F401 (goal_rows, merge_records: this module's API)
    goal_rows,
    merge_records,
    print_goal,
    print_table,
    write_json,
)

from workbench.errors import WorkbenchError
from workbench.runners.base import TrialOutcome
from workbench.runners.recordings import Recording, load_recording
from workbench.runners.replay import ReplayRunner
from workbench.search.problem import RecordingProblem
from workbench.search.samplers import SAMPLERS
from workbench.search.tuner import Budget, SearchSettings, Tuner
from workbench.search.warm_start import best_elsewhere
from workbench.spaces.model import Config
from workbench.store import Store, StudyInfo
from workbench.store.exchange import import_recording

#: Kernel Tuner strategies compared by default: every single-objective strategy that needs no
#: extra package (skopt needs scikit-optimize, pyatf_strategies needs pyATF; nsga2/nsga3 are
#: multi-objective; brute_force is not a search).
KT_STRATEGIES = (
    "random_sample",
    "genetic_algorithm",
    "greedy_ils",
    "greedy_mls",
    "ordered_greedy_mls",
    "mls",
    "dual_annealing",
    "simulated_annealing",
    "diff_evo",
    "pso",
    "firefly_algorithm",
    "basinhopping",
    "minimize",
    "bayes_opt",
    "hybrid_vndx",
    "adaptive_tabu_greywolf",
)
#: Our samplers compared by default (gp needs PyTorch; brute is not a search).
WB_SAMPLERS = tuple(s for s in SAMPLERS if s not in ("gp", "brute"))


@dataclass(frozen=True)
class Space:
    """A recorded space prepared for scoring."""

    name: str
    path: Path
    recording: Recording
    values: np.ndarray  #: objective of every recorded config, +inf for failed ones
    f_opt: float
    worst: float

    def random_baseline(self, t: int) -> float:
        """Exact expected best value of ``t`` random draws without replacement."""
        n = len(self.values)
        t = min(t, n)
        vals = np.sort(np.where(np.isfinite(self.values), self.values, self.worst))
        k = np.arange(1, n + 1)
        # P(min is the k-th smallest) = C(n - k, t - 1) / C(n, t)
        with np.errstate(invalid="ignore"):
            logp = _lcomb(n - k, t - 1) - _lcomb(n, t)
        p = np.where(n - k >= t - 1, np.exp(logp), 0.0)
        return float(np.sum(p * vals) / np.sum(p))

    def score(self, best: float, t: int) -> float:
        b = self.random_baseline(t)
        if math.isclose(b, self.f_opt):
            return 1.0 if math.isclose(best, self.f_opt) else 0.0  # degenerate: budget >= space
        return (b - best) / (b - self.f_opt)

    def score_interval(
        self, bests: Sequence[float], t: int, *, level: float = 0.9, resamples: int = 2000
    ) -> tuple[float, float]:
        """Bootstrap interval of the score over repeats (percentile method, fixed seed): how
        far another set of seeds could move it. The score is affine in the mean best value, so
        resampling the repeats' best values is enough."""
        rng = np.random.default_rng(0)
        arr = np.asarray(bests, dtype=float)
        means = arr[rng.integers(0, len(arr), size=(resamples, len(arr)))].mean(axis=1)
        lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
        a, b = self.score(float(hi), t), self.score(float(lo), t)  # a larger best scores lower
        return (min(a, b), max(a, b))


def _lcomb(n: np.ndarray | int, k: np.ndarray | int) -> np.ndarray:
    n = np.asarray(n, dtype=float)
    k = np.asarray(k, dtype=float)
    from scipy.special import gammaln

    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def load_space(path: Path, *, value_order: str = "as-recorded") -> Space:
    rec = load_recording(path)
    if value_order == "reversed":
        rec = dataclasses.replace(
            rec,
            parameters=tuple((name, tuple(reversed(vals))) for name, vals in rec.parameters),
            entries=dict(reversed(list(rec.entries.items()))),
        )
    values = np.array(
        [e.value if e.outcome is TrialOutcome.OK else np.inf for e in rec.entries.values()],
        dtype=float,
    )
    finite = values[np.isfinite(values)]
    return Space(
        path.name.split(".json")[0], path, rec, values, float(finite.min()), float(finite.max())
    )


# ---- runs: each returns the objective of every unique evaluation in order (None: failed) ----


def _study(store: Store, space: Space) -> StudyInfo:
    return store.study(
        kernel=space.name,
        shape_label="recorded",
        device_key="replay",
        parameters=space.recording.parameters,
    )


def run_workbench(
    space: Space, sampler: str, budget: int, seed: int, enqueue: Sequence[Config] = ()
) -> list[float | None]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/s.sqlite")
        problem = RecordingProblem(space.recording)
        runner = ReplayRunner(space.recording)
        study = _study(store, space)
        tuner = Tuner(
            problem,
            runner,
            store,
            study,
            SearchSettings(sampler=sampler, seed=seed, enqueue=enqueue),
        )
        result = tuner.run(Budget(evaluations=budget))
        store.close()
    return [e.measurement.value for e in result.history]


def warm_start(space: Space, source: Path) -> list[Config]:
    """What ``tune --enqueue best:SOURCE`` evaluates first on ``space``: the fastest config
    recorded in ``source`` (another GPU's recording of the same kernel), fitted to the space.

    Raises:
        SystemExit: the source's fastest config is not a config of the space.
    """
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/s.sqlite")
        other, _ = import_recording(store, source)
        problem = RecordingProblem(space.recording)
        (found,) = best_elsewhere(store, problem, _study(store, space), str(other.id))
        store.close()
    if found.config is None:
        raise SystemExit(f"--warm-start {source}: {found.describe()}")
    print(f"  warm start: {found.describe()}", flush=True)
    return [found.config]


@functools.cache
def _kt_header(plain_cache: Path) -> tuple[str, tuple]:
    """The kernel name and problem size of a Kernel Tuner cache file, parsed once per file
    (parsing the 16 MB gemm file took a sixth of each Kernel Tuner run)."""
    raw = json.loads(plain_cache.read_text())
    size = raw["problem_size"]
    return raw["kernel_name"], tuple(size) if isinstance(size, list) else (size,)


def run_kernel_tuner(
    space: Space, strategy: str, budget: int, seed: int, plain_cache: Path
) -> list[float | None]:
    import kernel_tuner

    rec = space.recording
    keys = list(rec.parameter_names)
    recorded = set(rec.entries)

    def in_recording(p: dict) -> bool:
        return tuple(p[k] for k in keys) in recorded

    kernel_name, size = _kt_header(plain_cache)
    # the value order the space lists (reversed or not: see the module docstring)
    tune_params = {name: list(values) for name, values in rec.parameters}
    random.seed(seed)  # Kernel Tuner ignores its seed argument: seed the generators it uses
    np.random.seed(seed)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache = Path(tmp) / "cache.json"
        cache.write_bytes(plain_cache.read_bytes())
        results, _env = kernel_tuner.tune_kernel(
            kernel_name,
            "",
            size,
            [],
            tune_params,
            cache=str(cache),
            restrictions=in_recording,
            simulation_mode=True,
            strategy=strategy,
            strategy_options={"max_fevals": budget},
            quiet=True,
            objective="time",
        )
    trace: list[float | None] = []
    seen: set[tuple] = set()
    for r in results:
        if not r:
            continue
        key = tuple(r[k] for k in keys)
        if key in seen:
            continue
        seen.add(key)
        value = r.get("time")
        ok = "__error__" not in r and isinstance(value, int | float)
        trace.append(float(value) if ok else None)
    return trace[:budget]


def best_after(trace: Sequence[float | None], t: int, worst: float) -> float:
    values = [v for v in trace[:t] if v is not None]
    return min(values) if values else worst


def evals_to_within(trace: Sequence[float | None], f_opt: float, frac: float) -> int | None:
    best = math.inf
    for i, v in enumerate(trace, 1):
        if v is not None and v < best:
            best = v
        if best <= f_opt * (1 + frac):
            return i
    return None


def median_or_none(values: list[int | None]) -> float | None:
    as_float = [math.inf if v is None else float(v) for v in values]
    m = statistics.median(as_float)
    return None if math.isinf(m) else m


@functools.cache
def cached_space(path: Path, value_order: str) -> Space:
    """``load_space``, once per process (a worker forked after the parent loaded it has it)."""
    return load_space(path, value_order=value_order)


@dataclass(frozen=True)
class Cell:
    """One space's searches by one tool's strategy over every seed and budget: the unit of
    work that ``--jobs`` spreads over processes."""

    path: Path
    value_order: str
    tool: str  #: "workbench" or "kernel_tuner"
    strategy: str  #: our sampler's name, or Kernel Tuner's strategy's
    budgets: tuple[int, ...]
    first_seed: int
    repeats: int
    plain: Path | None = None  #: the decompressed cache file Kernel Tuner reads
    enqueue: tuple[Config, ...] = ()  #: a warm start for our samplers
    warm_start: Path | None = None  #: the file the warm start came from


class CellResult(NamedTuple):
    """A cell's records (one per budget), the seconds it took, and why it failed (a Kernel
    Tuner strategy that raises on a space: the run goes on without it)."""

    records: list[dict]
    seconds: float
    error: str | None = None


def run_cell(cell: Cell) -> CellResult:
    """The cell's records, one per budget, and the seconds it took."""
    space = cached_space(cell.path, cell.value_order)
    budgets = cell.budgets
    suffix = "+warm" if cell.enqueue else ""  # (only our samplers' cells have a warm start)
    traces: dict[int, list[list[float | None]]] = {b: [] for b in budgets}
    t0 = time.perf_counter()
    for rep in range(cell.first_seed, cell.first_seed + cell.repeats):
        # a run per budget: Kernel Tuner's strategies plan with max_fevals, and ours with the
        # tuner's budget of evaluations (the default sampler exploits at the end of it)
        for b in budgets:
            if cell.tool == "kernel_tuner":
                assert cell.plain is not None
                try:
                    trace = run_kernel_tuner(space, cell.strategy, b, rep, cell.plain)
                except Exception as exc:  # its bug, not a reason to stop the whole run
                    why = f"seed {rep}, budget {b}: {type(exc).__name__}: {exc}"
                    return CellResult([], time.perf_counter() - t0, why)
            else:
                trace = run_workbench(space, cell.strategy, b, rep, cell.enqueue)
            traces[b].append(trace)
    records = []
    for b in budgets:
        bests = [best_after(tr, b, space.worst) for tr in traces[b]]
        records.append(
            {
                "space": space.name,
                "tool": cell.tool,
                "strategy": cell.strategy + suffix,
                "budget": b,
                "repeats": cell.repeats,
                "first_seed": cell.first_seed,
                "value_order": cell.value_order,
                "warm_start": cell.warm_start.name if cell.enqueue and cell.warm_start else None,
                "score": space.score(statistics.fmean(bests), b),
                "score_ci90": list(space.score_interval(bests, b)),
                "mean_best": statistics.fmean(bests),
                "best_by_repeat": bests,
                # unique configs a run evaluated (a Kernel Tuner strategy may stop short of the
                # budget; it is scored at the budget all the same)
                "evaluations_made": statistics.median(len(tr) for tr in traces[b]),
                "evals_to_within_5pct": median_or_none(
                    [evals_to_within(tr, space.f_opt, 0.05) for tr in traces[b]]
                ),
                "evals_to_within_1pct": median_or_none(
                    [evals_to_within(tr, space.f_opt, 0.01) for tr in traces[b]]
                ),
            }
        )
    return CellResult(records, time.perf_counter() - t0)


def run_cells(cells: Sequence[Cell], jobs: int) -> Iterator[tuple[int, CellResult]]:
    """Each cell's index and result, in order with one job, as they finish with more (each
    cell's runs are seeded, so its records do not depend on the process it ran in)."""
    if jobs <= 1:
        for i, cell in enumerate(cells):
            yield i, run_cell(cell)
        return
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_cell, cell): i for i, cell in enumerate(cells)}
        for future in concurrent.futures.as_completed(futures):
            yield futures[future], future.result()


def main() -> None:
    if "--merge" in sys.argv[1:]:
        merge_main()
        return
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Pooling runs on disjoint seeds: --merge A.json B.json ... --caches-dir DIR "
        "[--json OUT] (the spaces' recordings, for their optima).",
    )
    parser.add_argument("caches", nargs="+", type=Path)
    parser.add_argument("--budgets", default="50,100,200")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="repeat i uses seed FIRST_SEED + i (report on seeds the samplers were not tuned on)",
    )
    parser.add_argument("--samplers", default=",".join(WB_SAMPLERS))
    parser.add_argument("--kt-strategies", default=",".join(KT_STRATEGIES))
    parser.add_argument("--tools", default="workbench,kernel_tuner")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="processes that run (space, strategy) cells side by side (same records as one)",
    )
    parser.add_argument(
        "--warm-start",
        type=Path,
        default=None,
        metavar="CACHE",
        help="our samplers evaluate CACHE's fastest config first, as tune --enqueue best would "
        "after tuning that recording (another GPU's, same kernel); recorded as strategy "
        "SAMPLER+warm, outside the goal table",
    )
    parser.add_argument(
        "--value-order",
        choices=("as-recorded", "reversed"),
        default="as-recorded",
        help="order of each parameter's values given to both tools (see the module docstring)",
    )
    args = parser.parse_args()
    checked = _checked(parser, args)
    plains: list[Path] = []  # decompressed caches for Kernel Tuner: removed however the run ends
    try:
        run(args, *checked, plains)
    except (WorkbenchError, OSError, ValueError) as exc:  # bad input: one line, exit 2
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    finally:
        for plain in plains:
            plain.unlink(missing_ok=True)


def _checked(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple:
    """The budgets, tools, our samplers and Kernel Tuner's strategies, after refusing (exit 2,
    with usage) what cannot run."""
    try:
        budgets = tuple(sorted(int(b) for b in args.budgets.split(",")))
    except ValueError:
        parser.error(f"--budgets {args.budgets!r}: expected integers, e.g. 50,100,200")
    if min(budgets) < 1:
        parser.error("--budgets: each budget must be at least 1 evaluation")
    if args.repeats < 1 or args.jobs < 1:
        parser.error("--repeats and --jobs must be at least 1")
    tools = [t for t in args.tools.split(",") if t]
    if not tools or set(tools) - {"workbench", "kernel_tuner"}:
        parser.error(f"--tools {args.tools!r}: expected workbench, kernel_tuner or both")
    samplers = [x for x in args.samplers.split(",") if x]
    if unknown := [x for x in samplers if x not in SAMPLERS]:
        parser.error(f"--samplers: unknown {', '.join(unknown)}; ours: {', '.join(SAMPLERS)}")
    strategies = [x for x in args.kt_strategies.split(",") if x]
    if "kernel_tuner" in tools:
        try:
            from kernel_tuner.interface import strategy_map
        except ImportError:
            parser.error("--tools kernel_tuner needs Kernel Tuner: pip install kernel-tuner")
        if unknown := [x for x in strategies if x not in strategy_map]:
            parser.error(
                f"--kt-strategies: unknown {', '.join(unknown)}; Kernel Tuner's: "
                + ", ".join(sorted(strategy_map))
            )
    return budgets, tools, samplers, strategies


def _plain_cache(path: Path, plains: list[Path]) -> Path:
    """A decompressed copy of a Kernel Tuner cache file, for Kernel Tuner to read; listed in
    ``plains`` so that it is removed however the run ends."""
    fd, name = tempfile.mkstemp(suffix=".json")
    plain = Path(name)
    plains.append(plain)
    raw = path.read_bytes()
    with os.fdopen(fd, "wb") as fh:
        fh.write(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    return plain


def space_cells(
    args: argparse.Namespace,
    path: Path,
    budgets: tuple[int, ...],
    tools: list[str],
    samplers: list[str],
    strategies: list[str],
    plains: list[Path],
) -> list[Cell]:
    """One recorded space's cells, one per sampler and strategy of the tools asked for, after
    printing what the space is."""
    space = cached_space(path, args.value_order)
    print(
        f"{space.name}: {len(space.values)} recorded configs on "
        f"{space.recording.device.name}, optimum {space.f_opt:.5g}"
        + (", values in reversed order" if args.value_order == "reversed" else ""),
        flush=True,
    )
    plain = None
    if "kernel_tuner" in tools and space.recording.format != "kt-cache":
        print(f"  Kernel Tuner reads only its own cache files: {path.name} is not one")
    if "kernel_tuner" in tools and space.recording.format == "kt-cache":
        plain = _plain_cache(path, plains)
    enqueue = tuple(warm_start(space, args.warm_start)) if args.warm_start else ()
    common = dict(
        path=path,
        value_order=args.value_order,
        budgets=budgets,
        first_seed=args.first_seed,
        repeats=args.repeats,
    )
    cells: list[Cell] = []
    if "workbench" in tools:
        cells += [
            Cell(
                tool="workbench",
                strategy=s,
                enqueue=enqueue,
                warm_start=args.warm_start,
                **common,
            )
            for s in samplers
        ]
    if plain is not None:
        cells += [Cell(tool="kernel_tuner", strategy=s, plain=plain, **common) for s in strategies]
    return cells


def run_and_print(
    cells: list[Cell], jobs: int, json_path: Path | None, started: float
) -> tuple[list[dict], list[dict]]:
    """Run the cells, printing each one's scores as it finishes (and rewriting the JSON, when
    asked for, after each); the records in cell order, and the cells that failed."""
    done: dict[int, list[dict]] = {}  # each finished cell's records, by the cell's index
    failed: list[dict] = []  # cells whose (Kernel Tuner) strategy raised, left out
    width = max([26, *(len(cached_space(c.path, c.value_order).name) for c in cells)])

    def in_cell_order() -> list[dict]:
        return [r for i in sorted(done) for r in done[i]]

    for i, result in run_cells(cells, jobs):
        cell = cells[i]
        name = cached_space(cell.path, cell.value_order).name
        where = f"  {name:<{width}} {cell.tool:<13}{cell.strategy:<24}"
        if result.error is not None:
            failed.append({"space": name, "tool": cell.tool, "strategy": cell.strategy,
                           "error": result.error})  # fmt: skip
            print(f"{where}failed, left out: {result.error}", flush=True)
            continue
        done[i] = result.records
        line = "  ".join(f"{r['score']:6.3f}" for r in result.records)
        print(f"{where}{line}   ({result.seconds:.1f}s)", flush=True)
        if json_path:
            write_json(json_path, in_cell_order(), started, failed)
    return in_cell_order(), failed


def run(
    args: argparse.Namespace,
    budgets: tuple[int, ...],
    tools: list[str],
    samplers: list[str],
    strategies: list[str],
    plains: list[Path],
) -> None:
    """Run every (space, tool, strategy) cell, print the tables, write the JSON."""
    started = time.perf_counter()
    cells = [
        cell
        for path in args.caches
        for cell in space_cells(args, path, budgets, tools, samplers, strategies, plains)
    ]
    records, failed = run_and_print(cells, args.jobs, args.json, started)
    print_table(records, list(budgets))
    print_goal(records)
    if failed:
        print(f"\n{len(failed)} cell(s) failed and are left out (their errors above)")
    if args.json:
        write_json(args.json, records, started, failed)
        print(f"wrote {args.json}")


def merge_main() -> None:
    parser = argparse.ArgumentParser(description="Pool runs on disjoint seeds and rescore them.")
    parser.add_argument("--merge", nargs="+", type=Path, required=True, metavar="JSON")
    parser.add_argument("--caches-dir", type=Path, required=True, help="where the spaces are")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    records = [r for path in args.merge for r in json.loads(path.read_text())["records"]]
    # a score depends on the recorded values only, not on the order a run listed them in, so
    # each space is loaded once whatever value orders its records ran with
    spaces: dict[str, Space] = {}
    for name in {r["space"] for r in records}:
        matches = sorted(args.caches_dir.glob(f"{name}.json*"))
        if not matches:
            sys.exit(f"error: no recorded space {name!r} in {args.caches_dir}")
        spaces[name] = load_space(matches[0])
    try:
        merged = merge_records(records, spaces)
    except ValueError as exc:
        sys.exit(f"error: {exc}")
    print_table(merged, sorted({r["budget"] for r in merged}))
    print_goal(merged)
    if args.json:
        write_json(args.json, merged, time.perf_counter())
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
