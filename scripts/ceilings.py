"""Measure the two ceilings of the GPU at hand: device-to-device copy bandwidth and dense
matrix-multiply throughput (int8 through torch._int_mm = cuBLASLt, fp16 through torch.matmul).

Run on the lent GPU by scripts/device_check.sh; prints a table and writes JSON. Timing: CUDA
events around each repetition after warm-ups, median of the repetitions. No clocks are changed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
from pathlib import Path


def _time_ms(fn, reps: int = 20, warmup: int = 3) -> list[float]:
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
    n_bytes = int(args.copy_gib * 2**30)
    src = torch.empty(n_bytes, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    copy_ms = statistics.median(_time_ms(lambda: dst.copy_(src)))
    copy_gbs = 2 * n_bytes / (copy_ms * 1e-3) / 1e9  # bytes read + bytes written
    n = args.n
    a8 = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
    b8 = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
    int8_ms = statistics.median(_time_ms(lambda: torch._int_mm(a8, b8.t())))
    a16 = torch.randn(n, n, dtype=torch.float16, device="cuda")
    b16 = torch.randn(n, n, dtype=torch.float16, device="cuda")
    fp16_ms = statistics.median(_time_ms(lambda: a16 @ b16.t()))
    flops = 2.0 * n * n * n
    result = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "gpu": dev.name,
        "sm_count": dev.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "copy": {"bytes": n_bytes, "median_ms": copy_ms, "gbs_read_plus_write": copy_gbs},
        "int8_matmul": {
            "n": n,
            "median_ms": int8_ms,
            "tops": flops / (int8_ms * 1e-3) / 1e12,
            "via": "torch._int_mm (cuBLASLt)",
        },
        "fp16_matmul": {
            "n": n,
            "median_ms": fp16_ms,
            "tflops": flops / (fp16_ms * 1e-3) / 1e12,
            "via": "torch.matmul",
        },
    }
    print(json.dumps(result, indent=1))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
