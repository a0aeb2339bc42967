"""``workbench compare``: the tuned config against cuBLAS, cuBLASLt, CUTLASS, CUB and a copy.

What the command uses is imported when it runs (``--help`` stays light)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from workbench.cli.common import (
    CONFIG_FORMS,
    EXIT_FAILED,
    EXIT_NO_GPU,
    ArchOpt,
    BestStudyOpt,
    CacheOpt,
    DeviceOpt,
    ShapeOpt,
    ShapesOpt,
    SpacesOpt,
    StorageOpt,
    check_user_code,
    cli_errors,
    console,
    err_console,
)
from workbench.errors import ConfigError
from workbench.jsontext import strict_dumps

if TYPE_CHECKING:
    from rich.console import Console

    from workbench.cli.config_request import ConfigRequest
    from workbench.compare.run import ShapePlan
    from workbench.compare.table import ShapeComparison
    from workbench.compare.variant_baselines import VariantPlan
    from workbench.spaces import Space
    from workbench.spaces.model import Config
    from workbench.store import Store


def compare_command(
    kernel: Annotated[str, typer.Argument(help="A kernel name or space file.", show_default=False)],
    shapes: ShapesOpt = None,
    shape: ShapeOpt = None,
    config: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            "-c",
            help=f"The config at every shape: {CONFIG_FORMS}; 'best' is an error where the "
            "shape has no study. Repeated NAME=VALUE options are merged. Default: the best in "
            "the store where the shape has a study, else the default (the table says which).",
            show_default=False,
        ),
    ] = None,
    baseline: Annotated[
        list[str] | None,
        typer.Option(
            "--baseline",
            help="Compare with these baselines only (repeatable: cublas, cublaslt, cutlass, "
            "cub, copy, or a name such as cublaslt_fp8). Default: the space's list.",
            show_default=False,
        ),
    ] = None,
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    storage: StorageOpt = None,
    study: BestStudyOpt = None,
    ceilings_file: Annotated[
        Path | None,
        typer.Option("--ceilings", help="Measured ceilings (JSON of scripts/ceilings.py)."),
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random inputs.")] = 0,
    cache_dir: CacheOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout (progress: stderr).")
    ] = False,
) -> None:
    """Time the tuned config against library baselines (cuBLAS, cuBLASLt, CUTLASS, CUB, copy).

    Same inputs and timing protocol, every output checked against the same reference: time,
    TOPS or GB/s, % of the roofline bound and speedup per shape, stored for the report.
    Without a GPU: says so and which baselines would run. Exit status: 0 done; 1 the tuned
    config failed or was wrong on a shape; 2 bad input; 3 no GPU (the plan shown, nothing
    compared); 130 interrupted."""
    from workbench.cli.config_request import parse_config_options
    from workbench.compare.run import CompareOptions, compare
    from workbench.compare.table import Status
    from workbench.gpu import probe_gpu
    from workbench.spaces import load_kernel
    from workbench.spaces.targets import one_arch, option_spaces
    from workbench.store.opening import open_store

    out = err_console if as_json else console
    with cli_errors(json_errors=as_json):
        spec = load_kernel(kernel, spaces or [])
        check_user_code(spec)  # (a wrong reference or baseline is bad input, GPU or not)
        target = one_arch(spec, arch)
        spaces_ = option_spaces(spec, target, device, shape, shapes)
        store = open_store(storage)
        gpu = probe_gpu()
        requests = parse_config_options(config, merge=True)
        plans = [_plan(sp, requests[0] if requests else None, store, study, out)
                 for sp in spaces_]  # fmt: skip
        only = tuple(baseline or ())
        if not gpu.available:
            _no_gpu(plans, gpu.reason, only, as_json)
            raise typer.Exit(EXIT_NO_GPU)  # (the plan is shown; nothing was compared)
        from workbench.compiler import CompileCache
        from workbench.roofline import Ceilings, measured_ceilings

        options = CompareOptions(
            cache=CompileCache(cache_dir),
            seed=seed,
            only=only,
            ceilings=Ceilings(measured_ceilings(ceilings_file)) if ceilings_file else Ceilings(),
        )
        results = compare(plans, options, lambda line: out.print(escape(line)))
        from workbench.compare.storage import save_comparisons

        batch = save_comparisons(
            store,
            results,
            device=gpu.name,
            study_ids=[p.study_id for p in plans],
            command=shlex.join(["workbench", *sys.argv[1:]]),
        )
        _emit(results, gpu.name, batch, store, as_json)
        if any(r.tuned.status is not Status.OK for r in results):
            raise typer.Exit(EXIT_FAILED)


def _plan(
    space: Space, request: ConfigRequest | None, store: Store, study: str | None, out: Console
) -> ShapePlan:
    """The config to compare at ``space``'s shape (``request``, else the best in the store,
    else the default), and where it comes from."""
    from workbench.cli.config_request import BEST_CONFIG, resolve_config
    from workbench.compare.run import ShapePlan
    from workbench.spaces.model import shape_label

    label = shape_label(space.shape)
    try:
        resolved = resolve_config(space, request or BEST_CONFIG, store=store, study=study)
    except ConfigError:
        if request is not None:
            raise
        default = space.default_config()
        if problems := space.explain(default):
            reasons = "; ".join(v.message for v in problems)
            raise ConfigError(
                f"{label}: no tuned study here, and the default config is invalid at this "
                f"shape ({reasons}); give one with -c NAME=VALUE,..."
            ) from None
        return ShapePlan(
            space, default, "default (no tuned study here)", None, _variants(space, default, store)
        )
    for note in resolved.notes():
        out.print(f"{escape(label)}: {escape(note)}", soft_wrap=True)
    chosen = resolved.study
    return ShapePlan(
        space,
        resolved.config,
        resolved.origin,
        chosen.id if chosen else None,
        _variants(space, resolved.config, store),
    )


def _variants(space: Space, config: Config, store: Store) -> tuple[VariantPlan, ...]:
    """What each of the space's variant baselines runs at the shape: the variant's best in the
    store (its study of the same problem values), else its default."""
    from dataclasses import replace

    from workbench.cli.config_request import BEST_CONFIG, resolve_config
    from workbench.compare.variant_baselines import default_plan
    from workbench.spaces.model import VariantBaseline
    from workbench.spaces.variants import problem_label

    plans = []
    for b in space.spec.baselines:
        if not isinstance(b, VariantBaseline) or b.variant == space.spec.name:
            continue
        try:
            plan = default_plan(space, config, b)
        except ConfigError:  # (no valid config of the variant here: compare says so in its row)
            continue
        pinned = plan.space.variant_values(plan.config)
        try:
            best = resolve_config(
                plan.space, BEST_CONFIG, store=store, variant=problem_label(plan.space.spec, pinned)
            )
        except ConfigError:
            plans.append(plan)
            continue
        plans.append(replace(plan, config=best.config, origin=best.origin))
    return tuple(plans)


def _no_gpu(plans: list[ShapePlan], reason: str, only: tuple[str, ...], as_json: bool) -> None:
    """Say that nothing can be timed, and what would run on a GPU of the target arch."""
    from workbench.compare.baselines import Choice, missing_here
    from workbench.compare.run import plan_baselines
    from workbench.spaces.model import shape_label

    shapes: list[dict[str, Any]] = []
    for plan in plans:
        cc = plan.space.arch.cc
        selections = plan_baselines(plan, cc, only)
        shapes.append(
            {
                "label": shape_label(plan.space.shape),
                "config": dict(plan.config),
                "config_origin": plan.origin,
                "variants": {
                    v.name: {"config": dict(v.config), "origin": v.origin, "notes": list(v.notes)}
                    for v in plan.variants
                },
                "baselines": [
                    {
                        "name": s.name,
                        "title": s.title,
                        "would_run": s.choice is Choice.RUN,
                        "reason": s.reason,
                        # what it lacks here, the GPU last (a refusal, e.g. of a shape, aside)
                        "missing": [*missing_here(s.name), "a GPU"],
                    }
                    for s in selections
                ],
            }
        )
    arch = plans[0].space.arch.sm if plans else ""
    if as_json:
        doc = {"gpu": False, "reason": reason, "arch": arch, "measured": False, "shapes": shapes}
        console.print_json(strict_dumps(doc))
        return
    console.print(f"[bold]no GPU[/] ({escape(reason)}): nothing is timed or compared here.")
    console.print(f"On a GPU of {arch}, `workbench compare` would run:")
    for s in shapes:
        console.print(f"  {escape(s['label'])}: config {escape(s['config_origin'])}")
        for b in s["baselines"]:
            if b["would_run"]:
                what = "run; missing here: a GPU (the library is installed)"
            else:  # a library not installed is missing beside the GPU, a shape refused is not
                either = "; no GPU here either" if len(b["missing"]) > 1 else ""
                what = f"skip ({b['reason']}){either}"
            console.print(f"    {escape(b['name'])}: {escape(b['title'])}: {escape(what)}")
            if (v := s["variants"].get(b["name"])) is not None:
                config = ",".join(f"{k}={x}" for k, x in v["config"].items())
                console.print(f"      config {escape(config)} ({escape(v['origin'])})")
                for n in v["notes"]:
                    console.print(f"      {escape(n)}")


def _emit(
    results: list[ShapeComparison], device: str, batch: str, store: Store, as_json: bool
) -> None:
    from workbench.compare.table import Status, format_rows

    if as_json:
        doc = {
            "gpu": True,
            "device": device,
            "measured": True,
            "kernel": results[0].problem.kernel if results else None,
            "ceilings": _ceiling_labels(results),
            "ceiling_notes": _ceiling_notes(results),
            "shapes": [r.to_json() for r in results],
            "stored": {"batch": batch, "store": store.shown_url},
        }
        console.print_json(strict_dumps(doc))
        return
    table = Table(title=f"compare on {device}", show_lines=False)
    for col in ("shape", "contender", "status", "median ms [95% CI]", "throughput",
                "% of roofline bound", "speedup"):  # fmt: skip
        table.add_column(col)
    for row in format_rows(results):
        table.add_row(*(escape(c) for c in row))
    console.print(table)
    for r in results:
        for n in r.notes:
            console.print(f"note ({escape(r.shape_label)}): {escape(n)}")
        for e in r.baselines:
            if e.status is Status.WRONG:
                console.print(
                    f"[yellow]{escape(e.contender)} disagrees with the reference at "
                    f"{escape(r.shape_label)}:[/] {escape(e.reason)}"
                )
    console.print("ceilings: " + escape("; ".join(_ceiling_labels(results))))
    for note in _ceiling_notes(results):
        console.print(f"note: {escape(note)}")
    console.print(f"stored as comparison batch {batch}")


def _ceiling_labels(results: list[ShapeComparison]) -> list[str]:
    """Every roof a contender was placed under (datasheet compute roofs at the SM clock the
    contender's samples ran at)."""
    return sorted({c.label for r in results for c in r.all_roofs()})


def _ceiling_notes(results: list[ShapeComparison]) -> list[str]:
    """Each roof raised to a contender, once (every shape of the run carries the same)."""
    return list(dict.fromkeys(n for r in results for n in r.ceiling_notes))
