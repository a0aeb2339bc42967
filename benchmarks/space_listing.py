"""Listing valid configs: what every search of a library space pays before its first proposal.

The default, random and brute-force samplers need the valid set (``SpaceProblem.valid_configs``:
one pruned walk of the product, a uniform sample of 500,000 past that many); ``--sample N``
draws from it. For each library space at its default shape and arch (problem variants at their
defaults, as tune pins them) this prints the cartesian size, the valid configs, the seconds to
list them (the median of ``--repeats`` walks, each on a fresh ``Space``: its memos start empty,
as in a new tune), configs per second, and the seconds to draw a uniform sample of
``--sample`` configs. Writes JSON with the machine.

    python benchmarks/space_listing.py [--kernels gemm_int8 reduce] [--repeats 3] [--sample 200]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

from workbench.search.problem import SpaceProblem
from workbench.spaces import Space, load_kernel
from workbench.spaces.registry import list_spaces


def _listing_seconds(kernel: str) -> tuple[float, int]:
    problem = SpaceProblem(Space(load_kernel(kernel)))
    start = time.perf_counter()
    valid = problem.valid_configs()
    seconds = time.perf_counter() - start
    return seconds, problem.valid_total if valid is not None else -1  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", nargs="*", help="default: every library space")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/out/space_listing.json"))
    args = parser.parse_args()

    kernels = args.kernels or [e.name for e in list_spaces()]
    rows = []
    print(
        f"{'kernel':18s} {'product':>14s} {'valid':>9s} {'list s':>8s} {'cfg/s':>9s} "
        f"{'sample s':>9s}"
    )
    for kernel in kernels:
        runs = [_listing_seconds(kernel) for _ in range(args.repeats)]
        seconds = statistics.median(s for s, _ in runs)
        valid = runs[0][1]
        space = Space(load_kernel(kernel))
        start = time.perf_counter()
        space.sample(args.sample, seed=0)
        sample_s = time.perf_counter() - start
        row = {
            "kernel": kernel,
            "cartesian": space.cartesian_size,
            "valid": valid,  # -1: not listed within the time limit
            "list_seconds": [round(s, 4) for s, _ in runs],
            "list_seconds_median": round(seconds, 4),
            "configs_per_second": round(valid / seconds) if valid > 0 and seconds else None,
            "sample": args.sample,
            "sample_seconds": round(sample_s, 4),
        }
        rows.append(row)
        print(
            f"{kernel:18s} {space.cartesian_size:>14,} {valid:>9,} {seconds:>8.2f} "
            f"{row['configs_per_second'] or 0:>9,} {sample_s:>9.2f}"
        )
    result = {
        "benchmark": "space_listing",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        },
        "repeats": args.repeats,
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
