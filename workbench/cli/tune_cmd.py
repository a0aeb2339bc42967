"""``workbench tune``: the main command. Without a GPU it runs the stages that need none."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from workbench.cli.common import (
    EXIT_FAILED,
    ArchOpt,
    DeviceOpt,
    KernelArg,
    ShapeOpt,
    SpacesOpt,
    cli_errors,
    console,
)
from workbench.cli.compile_cmd import (
    AllOpt,
    CacheOpt,
    JobsOpt,
    print_records,
    run_static_sweep,
)
from workbench.compiler import CompileCache
from workbench.gpu import probe_gpu
from workbench.spaces import load_kernel
from workbench.spaces.targets import resolve_arches

#: Sampled configs compiled by the no-GPU path besides the default (seconds, not minutes).
NO_GPU_SAMPLE = 8


def tune(
    kernel: KernelArg,
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    shape: ShapeOpt = None,
    all_configs: AllOpt = False,
    sample: Annotated[
        int,
        typer.Option(help="Configs to compile besides the default when there is nothing to run."),
    ] = NO_GPU_SAMPLE,
    seed: Annotated[int, typer.Option(help="Seed of the sample.")] = 0,
    jobs: JobsOpt = None,
    cache_dir: CacheOpt = None,
) -> None:
    """Tune a kernel: find its fastest correct config on the GPU at hand.

    Today this runs the compile stage: every selected config is compiled for the target arch
    and inspected (registers, shared memory, spills, occupancy, SASS, lints). Exit status: 0 when
    the stage ran, 1 when no config compiled, 2 on bad input.
    """
    with cli_errors():
        spec = load_kernel(kernel, spaces or [])
        targets = resolve_arches(spec, arch)
        gpu = probe_gpu()
        if gpu.available:
            console.print(
                f"GPU: {escape(gpu.name)} (sm_{gpu.cc}). The CUDA runner is not part of "
                "this version yet: running the compile stage only."
            )
        else:
            console.print(
                f"[bold]No CUDA GPU here[/] ({escape(gpu.reason)}): nothing can be "
                "timed on this machine, so this runs the stages that need no GPU."
            )
        console.print(
            f"{escape(spec.name)}: compiling the default config"
            + ("" if all_configs else f" and {sample} sampled configs")
            + f" for {', '.join(t.sm for t in targets)} with NVRTC."
        )
        records = []
        for target in targets:
            records += run_static_sweep(
                spec,
                target,
                device=device,
                shape=shape,
                all_configs=all_configs,
                sample=sample,
                seed=seed,
                jobs=jobs,
                cache=CompileCache(cache_dir),
            )
        print_records(records)
        console.print("To time and search configs, run on a machine with a CUDA GPU.")
        if not any(r.ok for r in records):
            raise typer.Exit(EXIT_FAILED)
