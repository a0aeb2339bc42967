"""Power of the regression rule: false-positive and detection rates vs shift size and noise.

Real GPU timing noise: every trial takes one recorded config of the Kernel Tuner caches in
``../shared/datasets/tuning-caches`` (32 repeated measurements of a real kernel on a real GPU),
rescales its deviations from the median to the noise level under test, a relative standard
deviation (the shape of the real distribution, skew, outliers and modes, is kept), and draws
a baseline run and a candidate run of ``--samples`` samples by resampling; the candidate is
``1 + shift`` times slower.

Rules compared, on the same draws:

- ``ours``: :mod:`workbench.stats.rule` (Mann-Whitney U p < 0.002, the ratio's whole 95 %
  bootstrap interval beyond 2 %, the ratio beyond ``exp(3 * history noise)``; no clocks);
- ``plain 5%``: the median ratio >= 1.05, as many dashboards do; ``plain 2%``: >= 1.02;
- ``plain X% (=FPR)``: a plain median threshold set, per setting, so that its false-positive
  rate there matches ours (an oracle: it needs the null distribution of that noise level;
  at least 1/trials);
- ``plain X% (all)``: the single plain threshold whose false-positive rate is at most ours at
  every setting of the scenario: the plain rule at equal false-positive rate, as a dashboard
  would have to set it without knowing each kernel's noise.

Scenario A has independent runs (the samples of one run are all the noise there is). Scenario
B adds run-to-run drift (every run is scaled by ``exp(N(0, drift))``, as clock and thermal
state do) and gives our rule the history noise of 10 earlier runs, as ``regress check`` does;
``ours, no history`` shows what the history adds.

Scenario C is a whole check: ``--rows`` configs (30) compared at once, each drawn as in B, with
no change (the chance of any false SLOWER in the check), one config slower by a shift
(detection of that config), or every config slower by it (a driver change: the share of configs
detected). ``per row`` is the rule alone on each row; ``family`` adds the check's
Benjamini-Hochberg step across the rows (``regress check`` applies both).

Scenario D is ``regress history``: series of 20 runs (1% noise, drift), with no step or a
step at run 10; how often a change point is found in a flat series, and how often exactly the
step is found, for each ``--confirm-k`` (the confirmation's threshold in segment-noise
deviations, :data:`workbench.regress.history.CONFIRM_K`).

    python benchmarks/regress_power.py [--trials 400] [--samples 32] [--seed 0] [--json OUT]
        [--rows 30] [--checks 200] [--series 200] [--confirm-k 4,5] [--only C|D]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.regress.check import Row, family_step
from workbench.regress.noise import SampleSet, draw_run, load_sample_sets, relative_spread
from workbench.stats.rule import (
    ALPHA,
    FAMILY_Q,
    FLOOR,
    NOISE_K,
    Verdict,
    compare_samples,
    history_estimate,
    history_noise,
)

CACHES = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "tuning-caches"
FILES = (
    "convolution_milo_A100.json.gz",
    "convolution_milo_A4000.json.gz",
    "dedispersion_milo_A100.json.gz",
    "gemm_RTX_3090.json.gz",
)
SHIFTS = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.10)
NOISE_LEVELS = (0.005, 0.01, 0.02, 0.03, 0.05)
DRIFTS = (0.005, 0.01, 0.02)
HISTORY_RUNS = 10
#: Scenario C: shifts of one config, or of all, in a check of many configs.
CHECK_SHIFTS = (0.05, 0.075, 0.10, 0.15)
#: Scenario D: series length, where the step is, and its sizes.
HISTORY_RUNS_D = 20
HISTORY_STEP_AT = 10
HISTORY_STEPS = (0.0, 0.05, 0.10)
#: Detection rate that counts as "detects this shift".
POWER = 0.95

Rule = Callable[[np.ndarray, np.ndarray, float | None], bool]


@dataclass
class Cell:
    """Slower-verdict counts of each rule at one (noise, shift), and the null ratios."""

    hits: dict[str, int]
    trials: int
    ratios: list[float]  #: median ratios of every trial (for the matched plain threshold)


def ours(base: np.ndarray, cand: np.ndarray, history: float | None) -> bool:
    return compare_samples(base, cand, history=history).verdict is Verdict.SLOWER


def ours_no_history(base: np.ndarray, cand: np.ndarray, history: float | None) -> bool:
    return compare_samples(base, cand).verdict is Verdict.SLOWER


def plain(threshold: float) -> Rule:
    def rule(base: np.ndarray, cand: np.ndarray, history: float | None) -> bool:
        return float(np.median(cand) / np.median(base)) >= 1.0 + threshold

    return rule


def run_cell(
    sets: Sequence[SampleSet],
    rules: dict[str, Rule],
    *,
    noise: float,
    shift: float,
    drift: float,
    trials: int,
    samples: int,
    history_runs: int,
    rng: np.random.Generator,
) -> Cell:
    """Apply every rule to ``trials`` (baseline, candidate) pairs drawn at one setting."""
    from workbench.regress.noise import with_noise

    hits = dict.fromkeys(rules, 0)
    ratios = []
    for _ in range(trials):
        real = sets[int(rng.integers(len(sets)))].samples
        scaled = with_noise(real / np.median(real), noise)

        def run(factor: float = 1.0, real: np.ndarray = scaled) -> np.ndarray:
            level = float(np.exp(rng.normal(0.0, drift))) if drift else 1.0
            return draw_run(real, rng, n=samples, factor=factor * level)

        history = None
        if drift:
            earlier = [float(np.median(run())) for _ in range(history_runs)]
        base, cand = run(), run(1.0 + shift)
        if drift:
            history = history_noise([*earlier, float(np.median(base))])
        ratios.append(float(np.median(cand) / np.median(base)))
        for name, rule in rules.items():
            hits[name] += rule(base, cand, history)
    return Cell(hits, trials, ratios)


def matched_threshold(null_ratios: Sequence[float], fpr: float, trials: int) -> float:
    """The plain threshold whose false-positive rate on ``null_ratios`` is at most ``fpr``
    (at least one trial's worth: the largest null ratio when ``fpr`` is 0)."""
    allowed = max(fpr, 1.0 / trials)
    return float(np.quantile(null_ratios, 1.0 - allowed, method="higher")) - 1.0 + 1e-12


def scenario(
    sets: Sequence[SampleSet],
    rules: dict[str, Rule],
    settings: Sequence[tuple[float, float]],
    trials: int,
    samples: int,
    seed: int,
    history_runs: int = HISTORY_RUNS,
) -> list[dict[str, object]]:
    """Rates per setting (noise, drift): FPR and detection per shift for every rule, plus
    ``plain @ours`` and the median ratios of every trial (``ratios``, for a uniform threshold)."""
    rows = []
    for noise, drift in settings:
        rng = np.random.default_rng(seed)
        cells = {
            shift: run_cell(
                sets,
                rules,
                noise=noise,
                shift=shift,
                drift=drift,
                trials=trials,
                samples=samples,
                history_runs=history_runs,
                rng=rng,
            )
            for shift in SHIFTS
        }
        rates = {
            name: {shift: cells[shift].hits[name] / trials for shift in SHIFTS} for name in rules
        }
        fpr = rates["ours"][0.0]
        t = matched_threshold(cells[0.0].ratios, fpr, trials)
        rates["plain @ours"] = plain_rates({s: c.ratios for s, c in cells.items()}, t)
        rows.append(
            {
                "noise": noise,
                "drift": drift,
                "matched_threshold": t,
                "rates": rates,
                "ratios": {s: c.ratios for s, c in cells.items()},
            }
        )
    return rows


def plain_rates(ratios: dict[float, list[float]], threshold: float) -> dict[float, float]:
    """Slower-verdict rate of a plain median threshold at every shift."""
    return {s: float(np.mean([r >= 1.0 + threshold for r in rs])) for s, rs in ratios.items()}


def add_uniform(rows: list[dict[str, object]]) -> float:
    """Add ``plain uniform``: the smallest single threshold whose false-positive rate is at
    most ours at every setting (the plain rule at equal FPR, without knowing the noise)."""
    t = max(float(row["matched_threshold"]) for row in rows)  # type: ignore[arg-type]
    for row in rows:
        row["rates"]["plain uniform"] = plain_rates(row["ratios"], t)  # type: ignore[index]
        row["uniform_threshold"] = t
    return t


def smallest_detected(rates: dict[float, float]) -> str:
    found = [s for s in SHIFTS if s > 0 and rates[s] >= POWER]
    return f"{100 * found[0]:g}%" if found else f">{100 * SHIFTS[-1]:g}%"


def print_table(title: str, rows: list[dict[str, object]]) -> None:
    print(f"\n{title}")
    shifts = " ".join(f"{100 * s:>6g}%" for s in SHIFTS[1:])
    print(
        f"{'noise':>6} {'drift':>6} {'rule':<18} {'FPR':>6} | detection at shift {shifts}"
        f" | smallest shift detected >= {POWER:.0%}"
    )
    for row in rows:
        rates: dict[str, dict[float, float]] = row["rates"]  # type: ignore[assignment]
        for name, r in rates.items():
            label = name
            if name == "plain @ours":
                label = f"plain {100 * row['matched_threshold']:.1f}% (=FPR)"  # type: ignore[operator]
            elif name == "plain uniform":
                label = f"plain {100 * row['uniform_threshold']:.1f}% (all)"  # type: ignore[operator]
            det = " ".join(f"{100 * r[s]:>6.1f}%" for s in SHIFTS[1:])
            print(
                f"{100 * row['noise']:>5g}% {100 * row['drift']:>5g}% {label:<18} "  # type: ignore[operator]
                f"{100 * r[0.0]:>5.1f}% |                    {det} | {smallest_detected(r)}"
            )
        print()


def check_scenario(
    sets: Sequence[SampleSet],
    *,
    rows: int,
    checks: int,
    drift: float,
    noise: float,
    samples: int,
    history_runs: int,
    seed: int,
) -> dict[str, object]:
    """Scenario C at one drift: rates of the per-row rule and of the family step."""
    from workbench.regress.noise import with_noise

    rng = np.random.default_rng(seed)
    any_false = {"per row": 0, "family": 0}
    one = {s: {"per row": 0, "family": 0} for s in CHECK_SHIFTS}
    every = {s: {"per row": 0, "family": 0} for s in CHECK_SHIFTS}
    for _ in range(checks):
        picks = rng.integers(len(sets), size=rows)
        configs = [with_noise(sets[i].samples / np.median(sets[i].samples), noise) for i in picks]

        def run(x: np.ndarray, factor: float = 1.0) -> np.ndarray:
            return draw_run(x, rng, n=samples, factor=factor * float(np.exp(rng.normal(0, drift))))

        hist, bases = {}, []
        for j, x in enumerate(configs):
            earlier = [float(np.median(run(x))) for _ in range(history_runs)]
            base = run(x)
            bases.append(base)
            hist[("n", str(j))] = history_estimate([*earlier, float(np.median(base))])
        cands = [run(x) for x in configs]
        null = _check_rows(bases, cands, hist)
        for name, slower in _slower(null, hist).items():
            any_false[name] += any(slower)
        for shift in CHECK_SHIFTS:
            shifted = [run(x, 1.0 + shift) for x in configs]
            one_rows = [*_check_rows(bases[:1], shifted[:1], hist), *null[1:]]
            for name, slower in _slower(one_rows, hist).items():
                one[shift][name] += slower[0]
            for name, slower in _slower(_check_rows(bases, shifted, hist), hist).items():
                every[shift][name] += sum(slower)
    return {
        "drift": drift,
        "noise": noise,
        "rows": rows,
        "checks": checks,
        "any_false_slower": {k: v / checks for k, v in any_false.items()},
        "one_slower_detected": {s: {k: v / checks for k, v in d.items()} for s, d in one.items()},
        "all_slower_detected": {
            s: {k: v / (checks * rows) for k, v in d.items()} for s, d in every.items()
        },
    }


def _check_rows(
    bases: Sequence[np.ndarray], cands: Sequence[np.ndarray], hist: dict[tuple[str, str], object]
) -> list[Row]:
    out = []
    for j, (b, c) in enumerate(zip(bases, cands, strict=True)):
        noise = hist[("n", str(j))]
        comparison = compare_samples(b, c, history=noise.sigma if noise else None)  # type: ignore[attr-defined]
        out.append(Row("n", str(j), comparison.verdict, None, None, comparison))
    return out


def _slower(rows: list[Row], hist: dict[tuple[str, str], object]) -> dict[str, list[bool]]:
    family = family_step(rows, hist, FAMILY_Q)  # type: ignore[arg-type]
    return {
        "per row": [r.verdict is Verdict.SLOWER for r in rows],
        "family": [r.verdict is Verdict.SLOWER for r in family],
    }


def print_check_scenario(results: list[dict[str, object]]) -> None:
    rows = results[0]["rows"]
    print(f"\nC. a check of {rows} configs at once (1% noise, drift, {HISTORY_RUNS} earlier runs)")
    shifts = " ".join(f"{100 * s:>5g}%" for s in CHECK_SHIFTS)
    print(
        f"{'drift':>6} {'rule':<8} {'P(any false)':>12} | one config slower by {shifts}"
        f" | every config slower by {shifts}"
    )
    for res in results:
        for name in ("per row", "family"):
            one = " ".join(
                f"{100 * res['one_slower_detected'][s][name]:>5.1f}%"  # type: ignore[index]
                for s in CHECK_SHIFTS
            )
            every = " ".join(
                f"{100 * res['all_slower_detected'][s][name]:>5.1f}%"  # type: ignore[index]
                for s in CHECK_SHIFTS
            )
            false = 100 * res["any_false_slower"][name]  # type: ignore[index]
            print(
                f"{100 * res['drift']:>5g}% {name:<8} {false:>11.1f}% |"  # type: ignore[operator]
                f"                      {one} |                        {every}"
            )


def history_scenario(
    sets: Sequence[SampleSet], *, series: int, drift: float, confirm_k: float, seed: int
) -> dict[str, object]:
    """Scenario D at one drift and confirmation threshold."""
    from workbench.regress import history
    from workbench.regress.noise import series_points, with_noise

    saved, history.CONFIRM_K = history.CONFIRM_K, confirm_k
    try:
        out: dict[str, object] = {"drift": drift, "confirm_k": confirm_k, "series": series}
        for step in HISTORY_STEPS:
            rng = np.random.default_rng(seed)
            exact = found_any = 0
            for _ in range(series):
                real = sets[int(rng.integers(len(sets)))].samples
                x = with_noise(real / np.median(real), 0.01)
                runs = [
                    draw_run(
                        x, rng, factor=(1.0 + step * (i >= HISTORY_STEP_AT)) * _drift(rng, drift)
                    )
                    for i in range(HISTORY_RUNS_D)
                ]
                found = [c.index for c in history.change_points(series_points(runs))]
                exact += found == [HISTORY_STEP_AT]
                found_any += bool(found)
            out[f"step {step:g}"] = {"exact": exact / series, "any": found_any / series}
        return out
    finally:
        history.CONFIRM_K = saved


def _drift(rng: np.random.Generator, drift: float) -> float:
    return float(np.exp(rng.normal(0.0, drift))) if drift else 1.0


def print_history_scenario(results: list[dict[str, object]]) -> None:
    print(f"\nD. regress history: {HISTORY_RUNS_D} runs, 1% noise, a step at run {HISTORY_STEP_AT}")
    steps = [s for s in HISTORY_STEPS if s]
    head = " ".join(f"{100 * s:>4g}% exact/any" for s in steps)
    print(f"{'drift':>6} {'k':>4} {'flat: any':>10} | {head}")
    for res in results:
        flat = res["step 0"]["any"]  # type: ignore[index]
        cells = " ".join(
            f"{100 * res[f'step {s:g}']['exact']:>7.1f}/{100 * res[f'step {s:g}']['any']:>5.1f}%"  # type: ignore[index]
            for s in steps
        )
        print(f"{100 * res['drift']:>5g}% {res['confirm_k']:>4g} {100 * flat:>9.1f}% | {cells}")  # type: ignore[operator]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=400, help="trials per (setting, shift)")
    parser.add_argument("--samples", type=int, default=32, help="samples per run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rates here")
    parser.add_argument("--history", type=int, default=HISTORY_RUNS, help="earlier runs (B)")
    parser.add_argument("--rows", type=int, default=30, help="configs per check (C)")
    parser.add_argument("--checks", type=int, default=200, help="checks per drift (C)")
    parser.add_argument("--series", type=int, default=200, help="series per drift (D)")
    parser.add_argument("--confirm-k", default="4,5", help="confirmation thresholds (D)")
    parser.add_argument("--only", choices=("C", "D"), help="run this scenario alone")
    return parser


def main() -> None:
    args = _parser().parse_args()
    start = time.perf_counter()
    sets = [
        s
        for s in load_sample_sets([CACHES / f for f in FILES], 32)
        if relative_spread(s.samples) > 0
    ]
    print(
        f"{len(sets)} recorded configs with >= 32 samples from {len(FILES)} caches "
        f"({time.perf_counter() - start:.1f} s to load); {args.trials} trials per cell, "
        f"{args.samples} samples per run"
    )
    a, b = ([], []) if args.only else scenarios_a_b(sets, args)
    c = scenario_c(sets, args) if args.only != "D" else []
    d = scenario_d(sets, args) if args.only != "C" else []
    print(f"total {time.perf_counter() - start:.0f} s")
    if args.json:
        write_json(args, sets, start, {"A": a, "B": b, "C": c, "D": d})


def scenarios_a_b(
    sets: Sequence[SampleSet], args: argparse.Namespace
) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Scenarios A (independent runs at each noise level) and B (1% noise plus drift), each
    rule's rates printed."""
    plain_rules: dict[str, Rule] = {"plain 5%": plain(0.05), "plain 2%": plain(0.02)}
    a = scenario(
        sets,
        {"ours": ours, **plain_rules},
        [(n, 0.0) for n in NOISE_LEVELS],
        args.trials,
        args.samples,
        args.seed,
    )
    add_uniform(a)
    print_table("A. independent runs (noise = relative standard deviation of the samples)", a)
    b = scenario(
        sets,
        {"ours": ours, "ours, no history": ours_no_history, **plain_rules},
        [(0.01, d) for d in DRIFTS],
        args.trials,
        args.samples,
        args.seed,
        args.history,
    )
    add_uniform(b)
    title = f"B. 1% noise plus run-to-run drift; our rule sees {args.history} earlier runs"
    print_table(title, b)
    return a, b


def scenario_c(sets: Sequence[SampleSet], args: argparse.Namespace) -> list[dict[str, object]]:
    """Scenario C (whole checks of many configs, one per drift), printed."""
    c = [
        check_scenario(
            sets,
            rows=args.rows,
            checks=args.checks,
            drift=drift,
            noise=0.01,
            samples=args.samples,
            history_runs=args.history,
            seed=args.seed,
        )
        for drift in DRIFTS
    ]
    print_check_scenario(c)
    return c


def scenario_d(sets: Sequence[SampleSet], args: argparse.Namespace) -> list[dict[str, object]]:
    """Scenario D (series of runs, per drift and confirmation threshold), printed."""
    d = [
        history_scenario(sets, series=args.series, drift=drift, confirm_k=k, seed=args.seed)
        for drift in (0.0, 0.01, 0.02)
        for k in (float(v) for v in args.confirm_k.split(","))
    ]
    print_history_scenario(d)
    return d


def write_json(
    args: argparse.Namespace,
    sets: Sequence[SampleSet],
    start: float,
    results: dict[str, list[dict[str, object]]],
) -> None:
    """The rates of every scenario run (``results``: A, B, C, D), the data, the rule and the
    machine, to ``--json`` (A's and B's rows without their ratios)."""
    a, b = results["A"], results["B"]
    for row in (*a, *b):
        row.pop("ratios")
    doc = {
        "benchmark": "regress_power",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "processor": platform.processor() or None,
            "gpu": None,  # CPU only: the noise is recorded, nothing is measured here
        },
        "data": data_source(sets),
        "rule": {"alpha": ALPHA, "floor": FLOOR, "noise_k": NOISE_K, "family_q": FAMILY_Q},
        "trials": args.trials,
        "samples": args.samples,
        "history_runs": args.history,
        "power": POWER,
        "seconds": time.perf_counter() - start,
        "summary": summary(a, b),
        **results,
    }
    args.json.write_text(json.dumps(doc, indent=1, default=str) + "\n")


def data_source(sets: Sequence[SampleSet]) -> dict[str, object]:
    """Where the noise comes from: each file (size, sha256), its device, its configs used."""
    files = []
    for name in FILES:
        path = CACHES / name
        used = [s for s in sets if f"({name}" in s.source]
        files.append(
            {
                "file": name,
                "bytes": path.stat().st_size,
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                "sources": sorted({s.source for s in used}),
                "configs_used": len(used),
            }
        )
    return {
        "what": "Kernel Tuner cache `times` arrays: repeated measurements of real kernels on "
        "real GPUs (benchmark_hub, see SOURCES.md next to the files)",
        "directory": "../shared/datasets/tuning-caches",
        "files": files,
        "configs": len(sets),
    }


def summary(a: list[dict[str, object]], b: list[dict[str, object]]) -> list[dict[str, object]]:
    """Per setting: each rule's false-positive rate and smallest shift detected >= POWER."""
    out = []
    for scen, rows in (("A", a), ("B", b)):
        for row in rows:
            rates: dict[str, dict[float, float]] = row["rates"]  # type: ignore[assignment]
            out.append(
                {
                    "scenario": scen,
                    "noise": row["noise"],
                    "drift": row["drift"],
                    "matched_threshold": row["matched_threshold"],
                    "uniform_threshold": row["uniform_threshold"],
                    "rules": {
                        name: {"fpr": r[0.0], "smallest_detected": smallest_detected(r)}
                        for name, r in rates.items()
                    },
                }
            )
    return out


if __name__ == "__main__":
    main()
