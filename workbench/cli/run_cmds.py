"""``workbench run`` (verify and time one config) and ``workbench record`` (sweep to a file).

What a command uses is imported when it runs (``--help`` stays light)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from workbench.cli.common import (
    EXIT_FAILED,
    ArchOpt,
    BestStudyOpt,
    CacheOpt,
    DeviceOpt,
    KernelNameArg,
    OneConfigOpt,
    ShapeOpt,
    SpacesOpt,
    StorageOpt,
    cli_errors,
    console,
    err_console,
    open_best_store,
)
from workbench.jsontext import strict_dumps


def run(
    kernel: KernelNameArg,
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    shape: ShapeOpt = None,
    config: OneConfigOpt = None,
    study: BestStudyOpt = None,
    storage: StorageOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random inputs.")] = 0,
    cache_dir: CacheOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the measurement as JSON.")] = False,
) -> None:
    """Verify and time one config on the GPU (needs a CUDA GPU). Exit 1 if it fails.

    Several --config options are merged into that one config (-c BM=64 -c BN=128); without
    one, the space's default for the arch."""
    from workbench.cli.config_request import (
        DEFAULT_CONFIG,
        parse_config_options,
        resolve_config,
        wants_best,
    )
    from workbench.compiler import CompileCache
    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda.runner import CudaRunner
    from workbench.runners.kernel_jobs import check_launch_layout
    from workbench.spaces import config_label
    from workbench.spaces.targets import space_from_options

    with cli_errors(json_errors=as_json):
        space = space_from_options(kernel, spaces, arch, device, shape)
        (request,) = parse_config_options(config, merge=True) or [DEFAULT_CONFIG]
        store = open_best_store(storage, space.spec.name) if wants_best([request]) else None
        resolved = resolve_config(space, request, store=store, study=study)
        cfg = resolved.config
        for note in resolved.notes():  # said first: the GPU run may fail, the choice still shows
            err_console.print(escape(note), soft_wrap=True)
        check_launch_layout(space, cfg)  # what needs no GPU fails before one is looked for
        with CudaRunner(space, CompileCache(cache_dir), seed=seed) as runner:
            m = runner.evaluate(cfg)
        if as_json:
            console.print_json(
                strict_dumps(
                    {
                        "config": cfg,
                        "outcome": m.outcome.value,
                        "value_ms": m.value,
                        "ci": [m.ci_low, m.ci_high],
                        "samples": list(m.samples),
                        "reason": m.reason,
                        "metrics": dict(m.metrics),
                        "device": runner.device.name,
                    }
                )
            )
        else:
            console.print(
                f"{escape(space.spec.name)} {escape(config_label(cfg))} on "
                f"{escape(runner.device.name)}: [bold]{m.outcome.value}[/]"
            )
            if m.value is not None:
                console.print(
                    f"  median {m.value:.5g} ms (95% CI {m.ci_low:.5g} .. "
                    f"{m.ci_high:.5g}), {len(m.samples)} samples"
                )
                for name, value in m.metrics.items():
                    console.print(f"  {escape(name)}: {value:,.4g}")
            if m.reason:
                console.print(f"  {escape(m.reason)}")
        if m.outcome is not TrialOutcome.OK:
            raise typer.Exit(EXIT_FAILED)


def record(
    kernel: KernelNameArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Recording file (.json or .json.gz).")],
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    shape: ShapeOpt = None,
    all_configs: Annotated[
        bool, typer.Option("--all", help="Every valid config (brute force).")
    ] = False,
    sample: Annotated[
        int | None,
        typer.Option(
            "--sample",
            min=0,
            help="The default plus N sampled valid configs.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the sample and of the inputs.")] = 0,
    cache_dir: CacheOpt = None,
) -> None:
    """Measure a sweep of configs on the GPU and write it as a recording that `tune --replay`
    (and the no-GPU path of `tune`) can answer from."""
    from workbench.compiler import CompileCache
    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda.runner import CudaRunner
    from workbench.runners.recordings import write_recording
    from workbench.search.configs import select_configs
    from workbench.spaces.model import space_sha256
    from workbench.spaces.targets import space_from_options

    with cli_errors():
        space = space_from_options(kernel, spaces, arch, device, shape)
        configs = select_configs(space, all_configs=all_configs, sample=sample, seed=seed)
        results = []
        with CudaRunner(space, CompileCache(cache_dir), seed=seed) as runner:
            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
            )
            with Progress(*columns, console=console) as progress:
                task = progress.add_task(f"recording {escape(space.spec.name)}", total=len(configs))
                for cfg in configs:
                    results.append((cfg, runner.evaluate(cfg)))
                    progress.advance(task)
            info = runner.device
        path = write_recording(
            out,
            kernel=space.spec.name,
            device=info,
            parameters=[(p.name, p.values) for p in space.spec.parameters],
            entries=results,
            shape=space.shape,
            arch=space.arch.sm,
            space_sha256=space_sha256(space.spec),
        )
        table = Table(title=f"{escape(space.spec.name)} on {escape(info.name)}")
        for col in ("outcome", "configs"):
            table.add_column(col)
        for outcome in TrialOutcome:
            n = sum(1 for _, m in results if m.outcome is outcome)
            if n:
                table.add_row(outcome.value, str(n))
        console.print(table)
        console.print(f"wrote {path}")
        if not any(m.outcome is TrialOutcome.OK for _, m in results):
            raise typer.Exit(EXIT_FAILED)
