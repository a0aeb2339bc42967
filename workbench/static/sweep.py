"""The static sweep: compile configs of a space and inspect every binary.

This is what ``workbench compile`` and the no-GPU path of ``workbench tune`` run (which configs:
:func:`workbench.search.configs.select_configs`; kept in the store by
:func:`workbench.search.configs.store_sweep`): each config
becomes a :class:`StaticRecord` with its resources (registers, shared memory, stack, spills),
theoretical occupancy for its launch on the target device, SASS histogram and lints. A failed
compile is a record too, with its log.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from workbench.analysis import (
    AnalysisError,
    KernelResources,
    Lint,
    LintCode,
    Severity,
    TheoreticalOccupancy,
    histogram,
    kernel_resources,
    lint,
    parse_sass,
    theoretical_occupancy,
)
from workbench.analysis.sass import SassInstruction, disassembly_text
from workbench.analysis.signature import (
    args_error,
    demangle,
    mismatched_arguments,
    then_problems,
)
from workbench.compiler import CompileCache, CompileResult, compile_jobs, make_job
from workbench.compiler.driver import default_workers
from workbench.errors import CompileError, ConfigError, ExpressionError
from workbench.spaces import Space, config_label
from workbench.spaces.launch import Launch, launch_geometry
from workbench.spaces.model import Config
from workbench.spaces.numba_abi import abi_args
from workbench.static.register_budget import register_budget_problem

if TYPE_CHECKING:
    from workbench.static.artifacts import ArtifactDir

#: Base opcodes that touch global memory (loads, stores, async copies, atomics, TMA).
GLOBAL_MEMORY_OPCODES = frozenset(
    {"LDG", "STG", "LDGSTS", "ATOMG", "RED", "REDG", "UTMALDG", "UTMASTG", "UBLKCP"}
)


@dataclass
class StaticRecord:
    """Everything known about one compiled config without running it."""

    kernel: str
    arch: str
    device: str
    config: Config
    label: str
    ok: bool
    #: the problem size it was compiled for (derived values and geometry depend on it)
    shape: dict[str, int] = field(default_factory=dict)
    entry: str | None = None
    cache_key: str | None = None
    compile_seconds: float = 0.0
    cached: bool = False
    registers: int | None = None
    static_smem: int | None = None
    dynamic_smem: int | None = None
    stack_frame: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    threads_per_block: int | None = None
    occupancy: float | None = None
    active_blocks: int | None = None
    limiting_factor: str | None = None
    sass_instructions: int | None = None
    #: SASS histogram of base opcodes, most frequent first (NOP padding excluded)
    opcodes: dict[str, int] = field(default_factory=dict)
    #: distinct global-memory opcodes with their modifiers: where cache hints show up
    global_memory_ops: list[str] = field(default_factory=list)
    lints: list[Lint] = field(default_factory=list)
    #: how the space's ``args`` disagree with the kernel's parameters (a lint says so too)
    args_problems: list[str] = field(default_factory=list)
    error: str | None = None
    log: str = ""

    def to_dict(self) -> dict[str, object]:
        """Plain data (``--json``, ``--csv``): each lint as its text (``error: ...``)."""
        return {**asdict(self), "lints": [x.text for x in self.lints]}

    def add_lint(self, code: LintCode, message: str, severity: Severity = Severity.ERROR) -> None:
        """A finding of the sweep itself about this config (an error unless said)."""
        self.lints.append(Lint(self.entry or self.kernel, code, severity, message))


def static_sweep(
    space: Space,
    configs: Sequence[Config],
    *,
    cache: CompileCache | None = None,
    workers: int | None = None,
    on_compiled: Callable[[CompileResult], None] | None = None,
    emit: ArtifactDir | None = None,
) -> list[StaticRecord]:
    """Compile ``configs`` for the space's arch (in parallel) and inspect every binary;
    with ``emit``, write each one's PTX, SASS and CUBIN (a failure's log) there.

    Raises:
        ToolchainError: the compiler or disassembler is missing.
    """
    jobs, records, prepared = [], [], []
    for cfg in configs:
        record = StaticRecord(
            kernel=space.spec.name,
            arch=space.arch.sm,
            device=space.device.name,
            config=cfg,
            label=config_label(cfg),
            ok=False,
            shape=dict(space.shape),
        )
        records.append(record)
        try:
            jobs.append(make_job(space, cfg))
            prepared.append(record)
        except CompileError as exc:
            record.error = str(exc)
    results = compile_jobs(jobs, cache, workers=workers, on_result=on_compiled)
    with ThreadPoolExecutor(max_workers=workers or default_workers()) as pool:

        def inspect(record: StaticRecord, result: CompileResult) -> None:
            text = _inspect(space, record, result, cache)
            if emit is not None:  # a failed compile's log too
                emit.write(record, result, text)

        list(pool.map(inspect, prepared, results))
    return records


def sass_text(result: CompileResult, cache: CompileCache | None) -> str:
    """The disassembly of a compiled binary (nvdisasm's text), made once per cache entry.

    Raises:
        AnalysisError, ToolchainError: the binary cannot be disassembled.
    """
    assert result.cubin is not None
    text = cache.get_artifact(result.key, "sass.txt") if cache is not None else None
    if text is None:
        text = disassembly_text(result.cubin)
        if cache is not None:
            cache.put_artifact(result.key, "sass.txt", text)
    return text


def sass_of(result: CompileResult, cache: CompileCache | None) -> dict[str, list[SassInstruction]]:
    """SASS per kernel of a compiled binary, disassembled once per cache entry.

    Raises:
        AnalysisError, ToolchainError: the binary cannot be disassembled.
    """
    return parse_sass(sass_text(result, cache))


def _inspect(
    space: Space, record: StaticRecord, result: CompileResult, cache: CompileCache | None
) -> str | None:
    """Fill ``record`` from a compile result: resources, occupancy, SASS, lints. Returns the
    SASS text it read (None when inspection stopped before the disassembly)."""
    if not inspect_resources(space, record, result):
        return None
    assert result.cubin is not None
    try:
        text = sass_text(result, cache)
        sass = parse_sass(text)
    except AnalysisError as exc:
        record.ok = False
        record.error = f"cannot inspect the binary: {exc}"
        return None
    instructions = sass.get(result.entry or "", [])
    counts = histogram(i for i in instructions if i.base != "NOP")  # NOPs are alignment padding
    record.sass_instructions = sum(counts.values())
    record.opcodes = dict(counts.most_common())
    record.global_memory_ops = sorted(
        {i.opcode for i in instructions if i.base in GLOBAL_MEMORY_OPCODES}
    )
    res = kernel_resources(result.cubin, result.log)[result.entry or ""]
    expected = _expected_sass(space, record.config)
    findings = lint(result.entry or "", space.arch.sm, res, instructions, result.ptx, expected)
    record.lints += findings
    if record.args_problems:
        record.add_lint(LintCode.ARGS_MISMATCH, args_error(record.args_problems))
    return text


def compiled_record(space: Space, config: Config, result: CompileResult) -> StaticRecord:
    """Resources and occupancy of one compile, without SASS: what a live tune keeps of each
    config it compiles (the ELF is parsed; nothing is disassembled)."""
    record = StaticRecord(
        kernel=space.spec.name,
        arch=space.arch.sm,
        device=space.device.name,
        config=dict(config),
        label=config_label(config),
        ok=False,
        shape=dict(space.shape),
    )
    inspect_resources(space, record, result)
    return record


def inspect_resources(space: Space, record: StaticRecord, result: CompileResult) -> bool:
    """Fill ``record``'s compile facts, resources and theoretical occupancy from a compile
    result; False (``error`` says why) when the compile failed or the binary is unreadable."""
    record.compile_seconds = result.seconds
    record.cached = result.cached
    record.cache_key = result.key
    record.log = result.log
    if not result.ok or result.cubin is None:
        record.error = "compile failed"
        return False
    record.entry = result.entry
    res = _entry_resources(record, result.cubin, result)
    if res is None:
        return False
    record.args_problems = mismatched_arguments(
        abi_args(space.spec), result.cubin, result.entry or "", result.ptx
    ) + then_problems(space.spec, result.cubin, result.ptx)
    record.ok = True
    record.registers = res.registers
    record.static_smem = res.smem
    record.stack_frame = res.stack_frame
    record.spill_stores = res.spill_stores
    record.spill_loads = res.spill_loads
    try:
        launch = launch_geometry(space, record.config)
    except ConfigError as exc:
        record.add_lint(LintCode.LAUNCH_GEOMETRY, f"launch geometry: {exc}")
        return True
    record.threads_per_block = launch.threads_per_block
    record.dynamic_smem = launch.shared_bytes
    occ = theoretical_occupancy(
        space.arch.cc,
        launch.threads_per_block,
        res.registers,
        res.smem,
        dynamic_shared_bytes=launch.shared_bytes,
    )
    record.occupancy = occ.occupancy
    record.active_blocks = occ.active_blocks
    record.limiting_factor = occ.limiting_factor
    _cannot_launch(space, record, result, res, launch, occ)
    return True


def _entry_resources(
    record: StaticRecord, cubin: bytes, result: CompileResult
) -> KernelResources | None:
    """The entry kernel's resources in the cubin; None (``record.error`` says why) when the
    binary cannot be read or has no such kernel."""
    try:
        resources = kernel_resources(cubin, result.log)
    except AnalysisError as exc:
        record.error = f"cannot inspect the binary: {exc}"
        return None
    res = resources.get(result.entry or "")
    if res is None:
        record.error = f"entry {result.entry} not found in the cubin" + _entry_hint(
            result.entry or "", resources
        )
    return res


def _cannot_launch(
    space: Space,
    record: StaticRecord,
    result: CompileResult,
    res: KernelResources,
    launch: Launch,
    occ: TheoreticalOccupancy,
) -> None:
    """Lint the configs that compile but cannot launch: a GPU run would spend an evaluation
    on each (a block past the kernel's thread bound or unlike its required shape, no block
    fitting an SM, a register budget that would hang)."""
    bound = math.prod(res.max_threads) if res.max_threads else None
    if bound and launch.threads_per_block > bound:
        record.add_lint(
            LintCode.CANNOT_LAUNCH,
            f"cannot launch: {launch.threads_per_block} threads per block, more than the "
            f"kernel's bound of {bound} (__launch_bounds__ or .maxntid)",
        )
    required = res.required_threads
    if required and launch.block != required:
        record.add_lint(
            LintCode.CANNOT_LAUNCH,
            f"cannot launch: a block of {_dims(launch.block)} threads, but the kernel "
            f"requires exactly {_dims(required)} (.reqntid)",
        )
    if blocker := occ.launch_blocker():
        record.add_lint(LintCode.CANNOT_LAUNCH, f"cannot launch: {blocker}")
    if problem := register_budget_problem(space, record.config, result):  # it would hang
        record.add_lint(LintCode.CANNOT_LAUNCH, f"cannot launch: {problem}")


def _entry_hint(entry: str, kernels: Mapping[str, object]) -> str:
    """Which kernels the cubin has, and why a C++ kernel is not found by its plain name."""
    mangled = [k for k in kernels if demangle(k) is not None]
    if not kernels:
        return " (it has no kernels)"
    shown = ", ".join(sorted(kernels)[:5]) + (", ..." if len(kernels) > 5 else "")
    hint = f" (it has: {shown})"
    if mangled and any(f"{len(entry)}{entry}" in k for k in mangled):
        hint += (
            f"; {entry} is a C++ kernel, so its symbol is mangled: declare it "
            f'extern "C", or give entry: {{template: "{entry}"}}'
        )
    return hint


def _dims(dims: tuple[int, int, int]) -> str:
    return " x ".join(map(str, dims))


def _expected_sass(space: Space, config: Config) -> list[str]:
    """Opcode prefixes the space expects for this config and arch."""
    out: list[str] = []
    for rule in space.spec.expect_sass:
        try:
            applies = bool(rule.when.evaluate(space.env(config)))
        except ExpressionError:
            applies = False
        if applies:
            out += rule.opcodes
    return out
