"""Compile throughput: the workbench (cold cache, all cores), the warm cache, and a loop of nvcc.

The same N configs of a library kernel are compiled three ways, side by side in one run:

  (a) ``compile_jobs`` with an empty cache and one process per core (NVRTC in-process);
  (b) the same call again: every config is a cache lookup;
  (c) a plain shell-style loop of ``nvcc -cubin`` processes over the same configs (explicit
      template instantiations appended to the same source), when nvcc is installed.

Prints configs/s and the ratios (a)/(c) and (b)/(a); writes JSON with the machine's details.

    python benchmarks/compile_throughput.py [--kernel reduce] [--configs 24] [--arch sm_90]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workbench.analysis.signature import cxx_parameter_types
from workbench.compiler import CompileCache, compile_jobs, make_job
from workbench.compiler.driver import default_workers
from workbench.spaces import Space, load_kernel
from workbench.toolchain import Arch, nvrtc_version


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--kernel", default="reduce", help="a CUDA C++ kernel with a template entry"
    )
    parser.add_argument("--configs", type=int, default=24)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--json", type=Path, default=Path("benchmarks/out/compile_throughput.json"))
    return parser


def distinct_jobs(args: argparse.Namespace) -> list:
    """The compile jobs of ``--configs`` sampled configs, each binary once (launch-only knobs
    share one)."""
    spec = load_kernel(args.kernel)
    if spec.language != "cuda" or spec.entry_template is None:
        sys.exit(f"{args.kernel}: this benchmark needs a CUDA C++ kernel with a template entry")
    space = Space(spec, arch=Arch.parse(args.arch))
    configs = space.sample(args.configs, seed=args.seed)
    jobs = [make_job(space, c) for c in configs]
    unique = {j.key(): j for j in jobs}  # launch-only knobs share a binary: compile each once
    return list(unique.values())


def timed_compiles(
    jobs: list, args: argparse.Namespace
) -> tuple[list[tuple[str, float]], str | None]:
    """Seconds to compile the jobs with a cold cache, a warm one and an nvcc loop (when nvcc is
    installed), as (method, seconds) rows; and nvcc's version."""
    with tempfile.TemporaryDirectory(prefix="wb-bench-") as tmp:
        cache = CompileCache(Path(tmp) / "cache")
        start = time.perf_counter()
        cold = compile_jobs(jobs, cache, workers=args.workers)
        cold_s = time.perf_counter() - start
        start = time.perf_counter()
        warm = compile_jobs(jobs, cache, workers=args.workers)
        warm_s = time.perf_counter() - start
        assert all(r.ok for r in cold), [r.log for r in cold if not r.ok][:1]
        assert all(r.cached for r in warm) and [r.cubin for r in warm] == [r.cubin for r in cold]
        entries = [r.entry or "" for r in cold]
        nvcc_s, nvcc_version = nvcc_loop(jobs, entries, Path(tmp), args.arch)
    rows = [("workbench, cold cache", cold_s), ("workbench, warm cache", warm_s)]
    if nvcc_s is not None:
        rows.append(("nvcc -cubin loop", nvcc_s))
    return rows, nvcc_version


def main() -> None:
    args = _parser().parse_args()
    jobs = distinct_jobs(args)
    n = len(jobs)
    rows, nvcc_version = timed_compiles(jobs, args)
    seconds = dict(rows)
    cold_s, warm_s = seconds["workbench, cold cache"], seconds["workbench, warm cache"]
    nvcc_s = seconds.get("nvcc -cubin loop")
    print(
        f"{n} distinct configs of {args.kernel} for {args.arch}, {args.workers} workers, "
        f"NVRTC {nvrtc_version()}; nvcc: {nvcc_version or 'not installed'}"
    )
    print(f"{'method':<24}{'seconds':>10}{'configs/s':>12}")
    for name, secs in rows:
        print(f"{name:<24}{secs:>10.2f}{n / secs:>12.1f}")
    ratios = {"warm_over_cold": cold_s / warm_s}
    if nvcc_s is not None:
        ratios["cold_over_nvcc"] = nvcc_s / cold_s
        print(f"(a) cold vs nvcc loop: {ratios['cold_over_nvcc']:.1f}x   (goal >= 2x)")
    print(f"(b) warm vs cold:      {ratios['warm_over_cold']:.1f}x   (goal >= 50x)")

    result = {
        "benchmark": "compile_throughput",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "processor": _cpu_model(),
            "gpu": None,
        },
        "kernel": args.kernel,
        "arch": args.arch,
        "configs": n,
        "workers": args.workers,
        "nvrtc": nvrtc_version(),
        "nvcc": nvcc_version,
        "seconds": seconds,
        "configs_per_second": {name: n / s for name, s in rows},
        "ratios": ratios,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    print(f"wrote {args.json}")


def nvcc_loop(
    jobs: list, entries: list[str], tmp: Path, arch: str
) -> tuple[float | None, str | None]:
    """One ``nvcc -cubin`` process per config, run one after another, as a shell loop would;
    ``entries`` are the symbols NVRTC gave the same jobs (their parameter types, demangled,
    write the explicit instantiation nvcc needs)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None, None
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    version = version.strip().splitlines()[-1] if version else "unknown"
    sources = []
    for i, (job, entry) in enumerate(zip(jobs, entries, strict=True)):
        src = tmp / f"cfg{i}.cu"
        # nvcc needs the instantiation written out; NVRTC gets it from nvrtcAddNameExpression
        types = cxx_parameter_types(entry)
        if types is None:
            sys.exit(f"cannot demangle {entry!r} to write its instantiation for nvcc")
        src.write_text(
            job.source + f"\ntemplate __global__ void {job.name_expression}({', '.join(types)});\n"
        )
        flags = [f for f in job.options.to_nvrtc_flags() if not f.startswith("-arch")]
        sources.append((src, flags))
    start = time.perf_counter()
    for src, flags in sources:
        cmd = [
            nvcc,
            "-cubin",
            f"-arch={arch}",
            *flags,
            str(src),
            "-o",
            str(src.with_suffix(".cubin")),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"nvcc failed: {' '.join(cmd)}\n{proc.stderr}")
    return time.perf_counter() - start, version


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
