"""The process Nsight Compute profiles: one config of one kernel, through the CUDA runner.

``python -m workbench.profile.target K --config NAME=VALUE,... [--shape n=...] [--arch ...]``

It compiles (through the compile cache the parent filled), verifies the config once when the
space has a reference, and times it with the shortest protocol the runner allows (one warm-up
launch, two samples). Every launch sits in the runner's NVTX range ``K/<config>`` of domain
``workbench``; the parent's ``--launch-count 1`` profiles the first launch of the kernel in
that range (the verification launch, or the warm-up launch without a reference). ncu replays
that launch with its own cache control, so the profiled launch does not depend on which one it
is. The last line on stdout is ``WORKBENCH_PROFILE_TARGET {json}`` with the outcome; the exit
status is 0 when the config ran correctly, 1 when it failed, 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

#: The shortest timing the runner accepts: what matters here is the profiled launch.
WARMUP_LAUNCHES = 1
SAMPLES = 2
#: Silence allowed during one launch (s). Under ncu a launch is replayed once per pass (tens
#: of passes, SASS instrumentation for the ``smsp__sass_*`` metrics, memory saved and restored
#: between passes): far beyond the runner's 10 s default for a plain launch.
LAUNCH_TIMEOUT_S = 600.0
#: Worker start and input upload under the profiler (context creation is slower there).
STARTUP_TIMEOUT_S = 600.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workbench.profile.target")
    parser.add_argument("kernel")
    parser.add_argument("--config", required=True, help="NAME=VALUE[,NAME=VALUE...]")
    parser.add_argument("--shape", action="append", default=[], help="NAME=VALUE")
    parser.add_argument("--arch")
    parser.add_argument("--device")
    parser.add_argument("--spaces", action="append", default=[], type=Path)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the config once under the profiler; returns the exit status."""
    from workbench.compiler import CompileCache
    from workbench.errors import WorkbenchError
    from workbench.profile.ncu import TARGET_MARKER
    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda.runner import CudaRunner
    from workbench.runners.timing import StoppingRule, TimingOptions
    from workbench.search.configs import select_configs
    from workbench.spaces.targets import space_from_options

    args = _parser().parse_args(argv)
    try:
        space = space_from_options(args.kernel, args.spaces, args.arch, args.device, args.shape)
        (config,) = select_configs(space, given=[space.parse_config(args.config.split(","))])
        timing = TimingOptions(
            rule=StoppingRule(min_samples=SAMPLES, max_samples=SAMPLES),
            warmup_s=0.0,
            warmup_min_launches=WARMUP_LAUNCHES,
        )
        with CudaRunner(
            space,
            CompileCache(args.cache_dir),
            seed=args.seed,
            timing=timing,
            verify=space.spec.reference is not None,
            launch_timeout_s=LAUNCH_TIMEOUT_S,
            startup_timeout_s=STARTUP_TIMEOUT_S,
        ) as runner:
            m = runner.evaluate(config)
            device = runner.device.name
    except WorkbenchError as exc:
        print(TARGET_MARKER + json.dumps({"outcome": "error", "reason": str(exc)}), flush=True)
        return 2
    doc = {"outcome": m.outcome.value, "value_ms": m.value, "reason": m.reason, "device": device}
    print(TARGET_MARKER + json.dumps(doc), flush=True)
    return 0 if m.outcome is TrialOutcome.OK else 1


if __name__ == "__main__":  # pragma: no cover - run by ncu on a GPU
    sys.exit(main())
