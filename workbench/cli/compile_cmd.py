"""``workbench compile``: compile configs of a space and print their static resources."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from workbench.analysis.lints import Lint, LintCode, Severity
from workbench.cli.common import (
    CONFIG_FORMS,
    EXIT_FAILED,
    ArchOpt,
    BestStudyOpt,
    CacheOpt,
    DeviceOpt,
    JobsOpt,
    KernelNameArg,
    PinOpt,
    ShapeOpt,
    SpacesOpt,
    cli_errors,
    console,
    err_console,
    open_best_store,
)
from workbench.errors import ConfigError

if TYPE_CHECKING:  # (what the command uses is imported when it runs: --help stays light)
    from workbench.cli.config_request import ConfigRequest
    from workbench.search.configs import NamedConfigs
    from workbench.spaces import Space
    from workbench.spaces.model import Config, SpaceSpec, Value
    from workbench.static.sweep import StaticRecord
    from workbench.store import Store

ConfigOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--config",
        "-c",
        help=f"A config to compile (repeatable: one config per option): {CONFIG_FORMS}.",
        show_default=False,
    ),
]
AllOpt = Annotated[bool, typer.Option("--all", help="Every valid config of the space.")]
SampleOpt = Annotated[
    int | None,
    typer.Option(
        "--sample",
        min=0,
        help="The default config plus N sampled valid configs.",
        show_default=False,
    ),
]


def compile_command(
    kernel: KernelNameArg,
    spaces: SpacesOpt = None,
    arch: ArchOpt = None,
    device: DeviceOpt = None,
    shape: ShapeOpt = None,
    config: ConfigOpt = None,
    all_configs: AllOpt = False,
    sample: SampleOpt = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed of --sample.")] = 0,
    jobs: JobsOpt = None,
    cache_dir: CacheOpt = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Compile even if cached.")] = False,
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json", help="Write records as JSON here ('-': stdout).", show_default=False
        ),
    ] = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", help="Write records as CSV here.", show_default=False)
    ] = None,
    show_log: Annotated[
        bool, typer.Option("--log", help="Print compile logs of failures.")
    ] = False,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            help="Also keep the results in this store (URL or SQLite path), in the kernel's "
            "compile-only study per shape and arch, for workbench report.",
            show_default=False,
        ),
    ] = None,
    emit: Annotated[
        Path | None,
        typer.Option(
            "--emit",
            metavar="DIR",
            help="Write each config's PTX, SASS and CUBIN (a failed compile's log) into DIR, "
            "with index.json naming the config of each file.",
            show_default=False,
        ),
    ] = None,
    study: BestStudyOpt = None,
    pin: PinOpt = None,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            metavar="LEVEL",
            help="Exit 1 when a config has a lint of this level or worse: 'error' (cannot "
            "launch, expected SASS missing, args mismatch, failed compile) or 'warning' (also "
            "spills, local memory, emulated FP8 MMA): a CI gate.",
            show_default=False,
        ),
    ] = None,
    diff: Annotated[
        bool,
        typer.Option(
            "--diff",
            help="Two configs (-c A -c B, or --sample 1: the default and one other): show "
            "what changed between their binaries (resources, SASS opcodes, memory ops).",
        ),
    ] = False,
) -> None:
    """Compile configs with NVRTC/ptxas (no GPU needed) and show registers, shared memory,
    spills, occupancy, SASS and lints per config."""
    from workbench.cli.compile_output import (
        compile_selection,
        print_diffs,
        print_records,
        refuse_broken_space,
        write_records,
    )
    from workbench.cli.config_request import parse_config_options
    from workbench.compiler import CompileCache
    from workbench.search.configs import CompileSelection
    from workbench.spaces import load_kernel
    from workbench.spaces.targets import parse_shape, resolve_arches
    from workbench.static.artifacts import ArtifactDir
    from workbench.store.opening import open_store

    with cli_errors():  # (--json -: the records may be out already when an error comes)
        requests = parse_config_options(config, merge=False)
        _check_options(config, all_configs, sample, fail_on, diff)
        spec = load_kernel(kernel, spaces or [])
        store = open_store(storage) if storage is not None else None
        arches = resolve_arches(spec, arch)
        artifacts = ArtifactDir(emit) if emit is not None else None
        # --json -: the JSON alone on stdout; the progress, the table and the notes on stderr
        out = err_console if json_out is not None and str(json_out) == "-" else console
        selection = CompileSelection(
            spec,
            tuple(arches),
            (parse_shape(shape, spec.default_shape),),
            device=device,
            pin=tuple(pin or ()),
            given=_given(spec, requests, store, study, out),
            all_configs=all_configs,
            sample=sample,
            seed=seed,
        )
        swept = compile_selection(
            selection,
            jobs=jobs,
            cache=None if no_cache else CompileCache(cache_dir),
            store=store,
            emit=artifacts,
            out=out,
        )
        records = swept.records
        print_records(records, show_log=show_log, out=out, defaults=swept.defaults)
        if diff:
            print_diffs(records, out=out)
        write_records(records, json_out, csv_out, out=out)
        if artifacts is not None:
            out.print(f"wrote PTX, SASS and CUBIN files; their configs: {artifacts.close()}")
        refuse_broken_space(spec, records)
        _exit_status(records, fail_on, out)


def _check_options(
    config: list[str] | None,
    all_configs: bool,
    sample: int | None,
    fail_on: str | None,
    diff: bool,
) -> None:
    """Refuse options that do not go together (before anything is read).

    Raises:
        ConfigError: --config with --all or --sample, --all with --sample, an unknown
            --fail-on level, or --diff without two configs.
    """
    if config and (all_configs or sample is not None):
        raise ConfigError("--config names the configs: it cannot go with --all or --sample")
    if all_configs and sample is not None:
        raise ConfigError("--all compiles every valid config: it cannot go with --sample")
    if fail_on is not None and fail_on not in LINT_LEVELS:
        raise ConfigError(f"--fail-on {fail_on!r}: expected 'error' or 'warning'")
    if diff and len(config or []) != 2 and sample != 1:
        raise ConfigError("--diff compares two configs: give -c A -c B, or --sample 1")


def _given(
    spec: SpaceSpec,
    requests: Sequence[ConfigRequest],
    store: Store | None,
    study: str | None,
    out: Console,
) -> NamedConfigs | None:
    """The configs the --config options name (None: none), ``best`` read from ``store``, else
    from the kernel's default store."""
    from workbench.cli.config_request import wants_best

    if not requests:
        return None
    best_from = None  # where --config best is read: the --storage store, else the default
    if wants_best(requests):
        best_from = store or open_best_store(None, spec.name)
    return _Requested(tuple(requests), best_from, study, out)


@dataclass(frozen=True)
class _Requested:
    """The configs the --config options name, in one space: ``best`` is the fastest correct
    one of the shape's study (of the problem variant, with --set) in ``best_from`` (``study``:
    which); a partial config is completed. What was chosen or filled in is said on ``out``."""

    requests: tuple[ConfigRequest, ...]
    best_from: Store | None
    study: str | None
    out: Console

    def __call__(self, space: Space, fixed: Mapping[str, Value], kernel: str) -> list[Config]:
        from workbench.cli.config_request import resolve_config

        configs = []
        for request in self.requests:
            resolved = resolve_config(
                space, request, store=self.best_from, study=self.study, variant=kernel, fixed=fixed
            )
            for note in resolved.notes():
                self.out.print(f"{space.arch.sm}: {escape(note)}", soft_wrap=True)
            configs.append(resolved.config)
        return configs


def _exit_status(records: Sequence[StaticRecord], fail_on: str | None, out: Console) -> None:
    """Exit 1 when no config compiled, or (``--fail-on``) one has a lint at that level.

    Raises:
        typer.Exit: with EXIT_FAILED, then.
    """
    if records and not any(r.ok for r in records):
        raise typer.Exit(EXIT_FAILED)
    if fail_on is not None and (gated := gate(records, fail_on)):
        out.print(f"[red]--fail-on {fail_on}[/]: {len(gated)} of {len(records)} configs:")
        for record, why in gated:
            out.print(f"  {escape(record.label)} ({record.arch}): {escape(why.text)}")
        raise typer.Exit(EXIT_FAILED)


#: Lint levels, mildest first (the analysis's severities; a failed compile counts as an error).
LINT_LEVELS = tuple(s.value for s in Severity)


def gate(records: Sequence[StaticRecord], level: str) -> list[tuple[StaticRecord, Lint]]:
    """The configs with a lint at ``level`` or worse, each with its first such finding."""
    floor = Severity(level)
    found = []
    for r in records:
        if not r.ok:
            failed = Lint(
                r.entry or r.kernel,
                LintCode.COMPILE_FAILED,
                Severity.ERROR,
                r.error or "compile failed",
            )
            found.append((r, failed))
            continue
        worst = [x for x in r.lints if x.at_least(floor)]
        if worst:
            found.append((r, worst[0]))
    return found
