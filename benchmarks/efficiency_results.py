"""The results of benchmarks/tuner_efficiency.py: records pooled over runs on disjoint seeds,
the goal rows (the default sampler against the best Kernel Tuner strategy on the same seeds),
the printed tables, and the JSON file."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.search.request import DEFAULT_SAMPLER

if TYPE_CHECKING:
    from tuner_efficiency import Space


def _seeds(record: dict) -> set[int]:
    """The seeds of a record's repeats (a pooled record lists its seed ranges)."""
    ranges = record.get("seeds") or [
        [record["first_seed"], record["first_seed"] + record["repeats"] - 1]
    ]
    return {seed for first, last in ranges for seed in range(first, last + 1)}


def merge_records(records: Sequence[dict], spaces: dict[str, Space]) -> list[dict]:
    """One record per (space, tool, strategy, budget, value order): the repeats of every
    given record pooled and rescored.

    Raises:
        ValueError: two records of the same cell share a seed (a repeat would count twice).
    """
    cells: dict[tuple, list[dict]] = {}
    for r in records:
        key = (r["space"], r["tool"], r["strategy"], r["budget"], r.get("value_order"))
        cells.setdefault(key, []).append(r)
    merged = []
    for (name, tool, strategy, budget, order), runs in cells.items():
        by_seeds = sorted(((_seeds(r), r) for r in runs), key=lambda sr: min(sr[0]))
        parts = [r for _, r in by_seeds]  # repeats in seed order
        seen: set[int] = set()
        for seeds, _ in by_seeds:
            if shared := seen & seeds:
                raise ValueError(
                    f"{name} {tool} {strategy} t={budget}: seed {min(shared)} is in two runs"
                )
            seen |= seeds
        repeats = sum(r["repeats"] for r in parts)
        mean_best = sum(r["mean_best"] * r["repeats"] for r in parts) / repeats
        # the interval needs every repeat's best value (records written before they were kept
        # have only the mean, and a pooled record of those has None: pooled without an interval)
        kept = all(r.get("best_by_repeat") is not None for r in parts)
        bests = [v for r in parts for v in r["best_by_repeat"]] if kept else None
        space = spaces[name]
        merged.append(
            {
                "space": name,
                "tool": tool,
                "strategy": strategy,
                "budget": budget,
                "repeats": repeats,
                "seeds": _ranges(seen),
                "value_order": order,
                "score": space.score(mean_best, budget),
                "score_ci90": list(space.score_interval(bests, budget)) if bests else None,
                "mean_best": mean_best,
                "best_by_repeat": bests,
                "evals_to_within_5pct": None,
                "evals_to_within_1pct": None,
            }
        )
    return merged


def _ranges(seeds: set[int]) -> list[list[int]]:
    """Seeds as sorted [first, last] ranges of consecutive seeds."""
    out: list[list[int]] = []
    for seed in sorted(seeds):
        if out and seed == out[-1][1] + 1:
            out[-1][1] = seed
        else:
            out.append([seed, seed])
    return out


def goal_rows(records: Sequence[dict]) -> list[dict]:
    """Per space and budget: the default sampler's record and the best-scoring Kernel Tuner
    strategy's among those with the same repeats (the same seeds)."""
    ours = {
        (r["space"], r["budget"]): r
        for r in records
        if r["tool"] == "workbench" and r["strategy"] == DEFAULT_SAMPLER
    }
    rows = []
    for (name, budget), r in sorted(ours.items()):
        seeds = _seeds(r)
        rivals = [
            k
            for k in records
            if k["tool"] == "kernel_tuner"
            and (k["space"], k["budget"]) == (name, budget)
            and _seeds(k) == seeds
        ]
        best = max(rivals, key=lambda k: k["score"], default=None)
        rows.append({"space": name, "budget": budget, "ours": r, "kernel_tuner": best})
    return rows


def print_goal(records: Sequence[dict]) -> None:
    """The goal table: the default sampler against the best Kernel Tuner strategy per cell."""
    rows = goal_rows(records)
    if not rows or all(row["kernel_tuner"] is None for row in rows):
        return
    width = max(26, *(len(row["space"]) + 1 for row in rows))
    print(f"\ngoal: {DEFAULT_SAMPLER} against the best Kernel Tuner strategy on the same seeds")
    ahead = 0
    for row in rows:
        r, k = row["ours"], row["kernel_tuner"]
        ci = "[{:.3f}, {:.3f}]".format(*r["score_ci90"]) if r.get("score_ci90") else ""
        if k is None:
            print(f"  {row['space']:<{width}}{row['budget']:>5}  {r['score']:.3f} {ci}  no rival")
            continue
        ahead += r["score"] > k["score"]
        verdict = "ahead" if r["score"] > k["score"] else "behind"
        print(
            f"  {row['space']:<{width}}{row['budget']:>5}  {r['score']:.3f} {ci}  "
            f"{k['strategy']:<24}{k['score']:.3f}  {r['score'] - k['score']:+.3f} {verdict}"
        )
    print(f"  ahead in {ahead} of {sum(row['kernel_tuner'] is not None for row in rows)} cells")


def write_json(
    path: Path, records: list[dict], started: float, failed: Sequence[dict] = ()
) -> None:
    """The records so far (rewritten after every strategy: a long run stopped early keeps what
    it measured), and the cells that failed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "benchmark": "tuner_efficiency",
                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform()},
                "python": sys.version.split()[0],
                "default_sampler": DEFAULT_SAMPLER,
                "seconds": time.perf_counter() - started,
                "records": records,
                "failed_cells": list(failed),
            },
            indent=1,
        )
    )


def print_table(records: list[dict], budgets: list[int]) -> None:
    """Mean score over spaces per (tool, strategy) and budget, best first; records of a
    space's values in reversed order (``--value-order reversed``) are a row of their own."""
    by: dict[tuple[str, str], dict[int, list[float]]] = {}
    for r in records:
        reversed_ = r.get("value_order") == "reversed"
        strategy = r["strategy"] + (" (reversed)" if reversed_ else "")
        by.setdefault((r["tool"], strategy), {}).setdefault(r["budget"], []).append(r["score"])
    rows = sorted(
        by.items(), key=lambda kv: -statistics.fmean(statistics.fmean(v) for v in kv[1].values())
    )
    print("\nmean score over spaces (1 = optimum found, 0 = random search)")
    print(f"{'tool':<14}{'strategy':<24}" + "".join(f"{'t=' + str(b):>9}" for b in budgets))
    for (tool, strategy), per_budget in rows:
        cells = "".join(
            f"{statistics.fmean(per_budget[b]):9.3f}" if b in per_budget else f"{'-':>9}"
            for b in budgets
        )
        print(f"{tool:<14}{strategy:<24}{cells}")
