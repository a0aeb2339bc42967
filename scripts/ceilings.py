"""Measure the two ceilings of the GPU at hand: device-to-device copy bandwidth and dense
matrix-multiply throughput (int8 through torch._int_mm = cuBLASLt, fp16 through torch.matmul).

Run on the lent GPU by scripts/device_check.sh; prints a table and writes JSON. Timing: CUDA
events around each repetition after warm-ups, median of the repetitions; each ceiling is timed
twice (``repeat_ms``: the two medians, the same-run repeatability; ``median_ms`` is the
lower one). No clocks are changed. A measurement that fails is left out (its
error goes to ``errors``) and the others are still written.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
from collections.abc import Callable
from pathlib import Path


def _time_ms(fn: Callable[[], object], reps: int = 20, warmup: int = 3) -> list[float]:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end))
    return out


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--copy-gib", type=float, default=4.0)
    parser.add_argument("--n", type=int, default=8192)
    args = parser.parse_args()
    dev = torch.cuda.get_device_properties(0)
    result: dict[str, object] = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu": dev.name,
        "sm_count": dev.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }

    #: failed measurements, kept out of their sections (workbench reads a section as a ceiling)
    errors: dict[str, str] = {}
    result["errors"] = errors

    def twice(fn: Callable[[], object]) -> tuple[float, list[float]]:
        runs = [statistics.median(_time_ms(fn)) for _ in range(2)]
        return min(runs), runs

    n_bytes = int(args.copy_gib * 2**30)
    n = args.n
    flops = 2.0 * n * n * n
    try:
        src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        copy_ms, runs = twice(lambda: dst.copy_(src))
        result["copy"] = {
            "bytes": n_bytes,
            "median_ms": copy_ms,
            "repeat_ms": runs,
            "gbs_read_plus_write": 2 * n_bytes / (copy_ms * 1e-3) / 1e9,
        }
    except Exception as exc:  # keep the other ceilings
        errors["copy"] = f"{type(exc).__name__}: {exc}"
    try:
        a8 = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
        b8 = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
        int8_ms, runs = twice(lambda: torch._int_mm(a8, b8.t()))
        result["int8_matmul"] = {
            "n": n,
            "median_ms": int8_ms,
            "repeat_ms": runs,
            "tops": flops / (int8_ms * 1e-3) / 1e12,
            "via": "torch._int_mm (cuBLASLt)",
        }
    except Exception as exc:
        errors["int8_matmul"] = f"{type(exc).__name__}: {exc}"
    try:
        a16 = torch.randn(n, n, dtype=torch.float16, device="cuda")
        b16 = torch.randn(n, n, dtype=torch.float16, device="cuda")
        fp16_ms, runs = twice(lambda: a16 @ b16.t())
        result["fp16_matmul"] = {
            "n": n,
            "median_ms": fp16_ms,
            "repeat_ms": runs,
            "tflops": flops / (fp16_ms * 1e-3) / 1e12,
            "via": "torch.matmul",
        }
    except Exception as exc:
        errors["fp16_matmul"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(result, indent=1))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
