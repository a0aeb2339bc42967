"""``compare``: the tuned config and the library baselines on the same inputs, the same timing
protocol, their outputs checked against the same reference.

Per shape: the CUDA runner verifies and times the tuned config (exactly as ``tune`` does) and
hands over the inputs it drew; the baseline worker runs each selected library on those same
arrays, once on poisoned outputs, whose result is compared with the space's reference under the
space's tolerance (so every correct contender agrees with every other within it), then timed.
A baseline that computes on other inputs than the kernel's (:meth:`Baseline.verified_on`: torch
SDPA on attention_decode's cache rounded to fp16) is checked against the reference of the
variant it names on the inputs it computes on, as the variant rows are, and its title says so.
A baseline that is absent, refuses the shape, crashes or is wrong is reported with the reason
and the comparison goes on.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from workbench.compare.baselines import (
    BaselineSelection,
    BaselineVariant,
    Choice,
    VerifiedOn,
    baseline_for,
    select,
)
from workbench.compare.memory_baselines import COPY_OUTPUT, copy_source
from workbench.compare.problems import BaselineProblem, classify
from workbench.compare.table import (
    TUNED,
    ContenderEntry,
    ShapeComparison,
    Status,
    VariantResult,
    fit_ceilings,
)
from workbench.compare.variant_baselines import (
    VariantPlan,
    default_plan,
    variant_inputs,
    variant_problem,
)
from workbench.compare.worker import (
    ArrayFile,
    BaselineExecutor,
    BaselineJob,
    BaselineReply,
    VariantsJob,
)
from workbench.compiler import CompileCache
from workbench.devices import preset_named
from workbench.errors import ConfigError, WorkbenchError
from workbench.roofline import Ceilings
from workbench.runners.base import Measurement, TrialOutcome
from workbench.runners.buffers import kernel_arguments, named_scalars, output_buffers
from workbench.runners.protocol import write_raw
from workbench.runners.reference import ExpectedOutputs
from workbench.runners.timing import TimingOptions, summarize
from workbench.runners.verify import Verification, compare_output, tolerance_for, verify_outputs
from workbench.runners.worker_runner import STARTUP_TIMEOUT_S
from workbench.spaces.launch import work_precision
from workbench.spaces.model import Config, VariantBaseline, config_label
from workbench.spaces.space import Space
from workbench.supervisor import Supervisor, WorkerError, WorkerFault

Log = Callable[[str], None]


@dataclass(frozen=True)
class ShapePlan:
    """One shape to compare: the space at that shape and the config to compare there."""

    space: Space
    config: Config
    origin: str  #: how the config was chosen, for the table
    study_id: int | None = None
    #: what the space's variant baselines run here (``variant:NAME``; one not here runs its
    #: default config)
    variants: tuple[VariantPlan, ...] = ()


@dataclass
class CompareOptions:
    """How to run: compile cache, input seed, timing protocol, baselines, extra ceilings."""

    cache: CompileCache | None = None
    seed: int = 0
    timing: TimingOptions = field(default_factory=TimingOptions)
    only: tuple[str, ...] = ()
    ceilings: Ceilings = field(default_factory=Ceilings)
    device: int = 0
    call_timeout_s: float = STARTUP_TIMEOUT_S  #: silence allowed while a library loads/runs

    @property
    def cache_dir(self) -> str:
        """Where baselines keep what they compile between runs: beside the compile cache."""
        from workbench.compiler.cache import default_cache_dir

        return str(self.cache.root if self.cache is not None else default_cache_dir())


def plan_baselines(
    plan: ShapePlan, cc: int | None, only: Sequence[str] = ()
) -> list[BaselineSelection]:
    """Which baselines would run for ``plan`` on a GPU of compute capability ``cc``."""
    problem = classify(plan.space, plan.config)
    selections, _ = select(plan.space.spec.baselines, problem, cc, only=only)
    return selections


def compare(plans: Sequence[ShapePlan], options: CompareOptions, log: Log) -> list[ShapeComparison]:
    """Compare every shape of ``plans`` on the GPU; the roofs are raised to the fastest
    contender measured (:func:`~workbench.compare.table.fit_ceilings`).

    Raises:
        NoGpuError: there is no GPU.
        WorkbenchError: the runner or the baseline worker cannot start, or the reference fails.
    """
    from workbench.runners.cuda.runner import CudaRunner

    out = []
    with _BaselineWorker(options) as worker:
        for plan in plans:
            log(f"{plan.space.spec.name} {_label(plan)}: tuned config ({plan.origin})")
            worker.new_shape()
            with CudaRunner(
                plan.space, options.cache, seed=options.seed, timing=options.timing,
                device=options.device,
            ) as runner:  # fmt: skip
                measurement = runner.evaluate(plan.config)
                live = runner.space
                inputs = runner.inputs_for(plan.config)
                cc = runner.device.cc
                # the exact GPU's preset, as tune's share takes it (another part's: wrong roofs)
                datasheet = preset_named(runner.device.name)
            shape = _one_shape(plan, live, inputs, cc, measurement, worker, options, log)
            out.append(replace(shape, datasheet=datasheet))
    return fit_ceilings(out)


def _one_shape(
    plan: ShapePlan,
    live: Space,
    inputs: Mapping[str, np.ndarray],
    cc: int | None,
    measurement: Measurement,
    worker: _BaselineWorker,
    options: CompareOptions,
    log: Log,
) -> ShapeComparison:
    problem = classify(live, plan.config)
    tuned = tuned_entry(measurement, live, plan.config, problem)
    selections, notes = select(live.spec.baselines, problem, cc, only=options.only)
    expected = functools.cache(lambda: _expected(live, plan.config, inputs))
    entries = []
    for sel in selections:
        if sel.choice is Choice.SKIP:
            log(f"  {sel.name}: skipped ({sel.reason})")
            entries.append(ContenderEntry(sel.name, sel.title, Status.SKIPPED, sel.reason))
            continue
        log(f"  {sel.name}: {sel.title}")
        if sel.name in problem.variant_baselines:
            try:
                vplan = _variant_plan(plan, live, sel.name)
            except ConfigError as exc:
                log(f"  {sel.name}: skipped ({exc})")
                entries.append(ContenderEntry(sel.name, sel.title, Status.SKIPPED, str(exc)))
                continue
            entry = run_variant(vplan, problem, inputs, live, plan.config, options, log)
            notes.extend(f"{sel.name}: {n}" for n in vplan.notes)
            entries.append(entry)
            continue
        own = baseline_for(sel.name, problem).verified_on(problem)
        checked = expected
        if own is not None:
            try:
                verifying_variant(own, live, plan.config)
            except ConfigError as exc:
                log(f"  {sel.name}: skipped ({exc})")
                entries.append(ContenderEntry(sel.name, sel.title, Status.SKIPPED, str(exc)))
                continue
            checked = functools.cache(
                functools.partial(baseline_expected, own, live, plan.config, inputs)
            )
            sel = replace(sel, title=f"{sel.title}; {own.note}")
            log(f"    {own.note}")
        entry = worker.run(sel, problem, inputs, live, plan.config, checked, log)
        entries.append(entry)
        if entry.variants:
            notes.append(variants_note(entry))
    return ShapeComparison(
        problem=problem,
        precision=work_precision(live, plan.config),
        config=dict(plan.config),
        config_origin=plan.origin,
        tuned=tuned,
        baselines=tuple(entries),
        notes=tuple(notes),
        ceilings=Ceilings(options.ceilings),
    )


def _variant_plan(plan: ShapePlan, live: Space, name: str) -> VariantPlan:
    found = next((v for v in plan.variants if v.name == name), None)
    if found is not None:
        return found
    baseline = next(
        b for b in live.spec.baselines if isinstance(b, VariantBaseline) and b.name == name
    )
    return default_plan(live, plan.config, baseline)


def run_variant(
    vplan: VariantPlan,
    problem: BaselineProblem,
    inputs: Mapping[str, np.ndarray],
    space: Space,
    config: Config,
    options: CompareOptions,
    log: Log,
) -> ContenderEntry:
    """A variant of the space verified and timed by the CUDA runner on the problem's inputs
    made into its own (:mod:`workbench.compare.variant_baselines`), verified against its own
    reference."""
    from workbench.runners.cuda.runner import CudaRunner

    title = f"{vplan.space.spec.name} {config_label(vplan.config)} ({vplan.origin})"
    base = ContenderEntry(vplan.name, title, Status.SKIPPED, ops=problem.ops)
    base = replace(base, nbytes=problem.min_bytes)
    log(f"    config: {config_label(vplan.config)} ({vplan.origin})")
    try:
        given = dict(inputs)
        if vplan.inputs is not None:
            scalars = named_scalars(kernel_arguments(space, config))
            given = variant_inputs(vplan.inputs, inputs, scalars, space.shape, config)
        with CudaRunner(
            vplan.space, options.cache, seed=options.seed, timing=options.timing,
            device=options.device, given_inputs=given,
        ) as runner:  # fmt: skip
            m = runner.evaluate(vplan.config)
    except WorkbenchError as exc:
        return replace(base, status=Status.FAILED, reason=str(exc))
    entry = tuned_entry(m, vplan.space, vplan.config, problem)
    return replace(
        entry,
        contender=vplan.name,
        title=f"{title}; verified against its own reference on its inputs",
        library=f"workbench {vplan.space.spec.name}",
    )


def fastest_variant(
    base: ContenderEntry, results: Sequence[tuple[BaselineVariant, ContenderEntry]]
) -> ContenderEntry:
    """A baseline's row from its variants' rows: the fastest correct one, titled with its
    configuration; else why none is (wrong before failed before skipped). Either way it carries
    every variant's result and the compile time of them all."""
    compiled = [e.compile_s for _, e in results if e.compile_s is not None]
    compile_s = sum(compiled) if compiled else None
    timed = [(v, e) for v, e in results if e.timed]
    best = min(timed, key=lambda ve: ve[1].median_ms or 0.0) if timed else None
    variants = tuple(
        VariantResult(
            name=v.name, label=v.label, config=dict(v.config), status=e.status, reason=e.reason,
            median_ms=e.median_ms, ci_low_ms=e.ci_low_ms, ci_high_ms=e.ci_high_ms,
            samples=e.samples, compile_s=e.compile_s, compile_note=e.compile_note,
            chosen=best is not None and v.name == best[0].name,
        )
        for v, e in results
    )  # fmt: skip
    if not results:
        return replace(base, reason="the library listed no variant for this problem")
    if best is None:
        statuses = [e.status for _, e in results]
        status = next((s for s in (Status.WRONG, Status.FAILED) if s in statuses), Status.SKIPPED)
        first = next(e.reason for _, e in results if e.status is status)
        counts = ", ".join(f"{statuses.count(s)} {s.value}" for s in Status if s in statuses)
        reason = f"none of its {len(results)} variants ran correctly ({counts}); first: {first}"
        return replace(base, status=status, reason=reason, compile_s=compile_s, variants=variants)
    v, e = best
    title = f"{base.title}: {v.label}, the fastest of {len(results)} ({len(timed)} correct)"
    return replace(e, title=title, compile_s=compile_s, variants=variants)


def variants_note(entry: ContenderEntry) -> str:
    """One line on a baseline's variants at a shape: how many ran correctly, which won, and
    what compiling them cost."""
    vs = entry.variants
    ok = sum(v.status is Status.OK for v in vs)
    chosen = next((v.label for v in vs if v.chosen), None)
    won = f"the fastest is {chosen}" if chosen else "none is timed"
    hows: dict[str, int] = {}
    for v in vs:
        if v.compile_note:
            hows[v.compile_note] = hows.get(v.compile_note, 0) + 1
    how = ", ".join(f"{n} {note}" for note, n in hows.items())
    spent = f"; compiling: {entry.compile_s:.1f} s ({how})" if entry.compile_s is not None else ""
    return f"{entry.contender}: {ok} of {len(vs)} variants correct, {won}{spent}"


def tuned_entry(
    m: Measurement, space: Space, config: Config, problem: BaselineProblem
) -> ContenderEntry:
    """The tuned config's row from the CUDA runner's measurement."""
    title = f"{space.spec.name} {config_label(config)}"
    status = {
        TrialOutcome.OK: Status.OK,
        TrialOutcome.WRONG: Status.WRONG,
        TrialOutcome.INFEASIBLE: Status.SKIPPED,
    }.get(m.outcome, Status.FAILED)
    return ContenderEntry(
        contender=TUNED,
        title=title,
        status=status,
        reason=m.reason if status is not Status.OK else "",
        median_ms=m.value,
        ci_low_ms=m.ci_low,
        ci_high_ms=m.ci_high,
        samples=tuple(m.samples),
        sm_clock_mhz=tuple(m.sm_clock_mhz),
        throttled=tuple(m.throttled),
        verify_max_error=m.verify_max_error,
        library=None,
        ops=problem.ops,
        nbytes=problem.min_bytes,
    )


def _expected(space: Space, config: Config, inputs: Mapping[str, np.ndarray]) -> Any:
    reference = space.spec.reference
    assert reference is not None
    args = kernel_arguments(space, config)
    buffers = output_buffers(space, config)
    fn = ExpectedOutputs(reference.target, inputs, space.shape)
    tolerance = tolerance_for(reference, space.env(config))
    return fn.get(config, named_scalars(args), buffers), buffers, tolerance


def verifying_variant(own: VerifiedOn, space: Space, config: Config) -> tuple[Space, Config]:
    """The space and config of the variant whose reference checks a baseline that
    :meth:`~workbench.compare.baselines.Baseline.verified_on` ``own``.

    Raises:
        ConfigError: ``space``'s file has no such variant, or no valid config of it here.
    """
    asked = VariantBaseline(f"variant:{own.variant}", own.variant, own.inputs)
    try:
        sibling, chosen, _ = variant_problem(space, config, asked)
    except KeyError:
        raise ConfigError(
            f"its outputs are checked against {own.variant}'s reference, and the file of "
            f"{space.spec.name} has no variant {own.variant}"
        ) from None
    return sibling, chosen


def baseline_expected(
    own: VerifiedOn, space: Space, config: Config, inputs: Mapping[str, np.ndarray]
) -> Any:
    """What :func:`check_outputs` takes (expected outputs, buffers, tolerance) for a baseline
    that :meth:`~workbench.compare.baselines.Baseline.verified_on` ``own``: the reference of that
    variant of ``space`` (at its config nearest the default that keeps ``config``'s problem
    values, :func:`~workbench.compare.variant_baselines.variant_problem`) on ``inputs`` made
    into its own by ``own.inputs``, under its tolerance.

    Raises:
        WorkbenchError: the space has no such variant (a ConfigError), or no valid config of it
            here, or the inputs or the reference fail.
    """
    sibling, chosen = verifying_variant(own, space, config)
    scalars = named_scalars(kernel_arguments(space, config))
    given = variant_inputs(own.inputs, inputs, scalars, space.shape, config)
    return _expected(sibling, chosen, given)


def check_outputs(
    name: str,
    got: Mapping[str, np.ndarray],
    problem: BaselineProblem,
    inputs: Mapping[str, np.ndarray],
    expected: Callable[[], Any],
) -> Verification:
    """A baseline's outputs against the reference (the copy: against what it copied).

    Raises:
        ValueError: an output is missing or has another shape.
    """
    if name == "copy":
        source = copy_source(inputs, problem.copy_bytes)
        from workbench.runners.verify import Tolerance

        return Verification(
            (compare_output(COPY_OUTPUT, got[COPY_OUTPUT], source, Tolerance(True)),)
        )
    values, buffers, tolerance = expected()
    cast = {
        b.name: got[b.name].astype(b.np_dtype, copy=False) if b.name in got else None
        for b in buffers
        if b.compared
    }
    missing = [k for k, v in cast.items() if v is None]
    if missing:
        raise ValueError(f"{name} gave no output {', '.join(missing)}")
    return verify_outputs(cast, values, buffers, tolerance)  # type: ignore[arg-type]


class _BaselineWorker:
    """The supervised baseline worker, started at the first baseline that runs."""

    def __init__(self, options: CompareOptions) -> None:
        self.options = options
        self._supervisor: Supervisor | None = None
        self._tmp = Path(tempfile.mkdtemp(prefix="workbench-compare-"))

    def __enter__(self) -> _BaselineWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._supervisor is not None:
            self._supervisor.close()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def run(
        self,
        sel: BaselineSelection,
        problem: BaselineProblem,
        inputs: Mapping[str, np.ndarray],
        space: Space,
        config: Config,
        expected: Callable[[], Any],
        log: Log | None = None,
    ) -> ContenderEntry:
        """``sel`` verified and timed on ``inputs``; a baseline with variants runs each, and
        its row is the fastest correct one (:func:`fastest_variant`)."""
        base = ContenderEntry(sel.name, sel.title, Status.SKIPPED, ops=_ops(sel.name, problem))
        base = replace(
            base, nbytes=2 * problem.copy_bytes if sel.name == "copy" else problem.min_bytes
        )
        if not baseline_for(sel.name, problem).has_variants:
            return self._run_one(base, problem, inputs, space, expected)
        try:
            variants = self.supervisor.call(
                VariantsJob(sel.name, problem), self.options.call_timeout_s, f"baseline {sel.name}"
            )
        except (WorkerError, WorkerFault) as exc:
            return _not_run(base, exc)
        results = []
        for v in variants:
            entry = self._run_one(base, problem, inputs, space, expected, v)
            results.append((v, entry))
            if log is not None:
                log(f"    {v.label}: {_outcome(entry)}")
        return fastest_variant(base, results)

    def _run_one(
        self,
        base: ContenderEntry,
        problem: BaselineProblem,
        inputs: Mapping[str, np.ndarray],
        space: Space,
        expected: Callable[[], Any],
        variant: BaselineVariant | None = None,
    ) -> ContenderEntry:
        name = base.contender
        files = self._inputs(inputs, problem.inputs)
        job = BaselineJob(
            name, problem, files, str(self._tmp), self.options.timing,
            variant=variant.name if variant else None, cache_dir=self.options.cache_dir,
        )  # fmt: skip
        if variant is not None:
            base = replace(base, title=f"{base.title}: {variant.label}")
        try:
            reply: BaselineReply = self.supervisor.call(
                job, self.options.call_timeout_s, f"baseline {name}"
            )
        except (WorkerError, WorkerFault) as exc:
            return _not_run(base, exc)
        with _unlinked(reply.outputs):
            got = {f.name: np.array(f.load()) for f in reply.outputs}
        compiled: dict[str, Any] = {
            "compile_s": reply.compile_s,
            "compile_note": reply.compile_note,
        }
        try:
            verdict = check_outputs(name, got, problem, inputs, expected)
        except ValueError as exc:  # an output missing or of another shape: wrong, said why
            return replace(base, status=Status.WRONG, reason=str(exc), **compiled)
        summary = summarize(reply.timing.samples_ms, reply.timing.throttled)
        clocks = tuple(float("nan") if c is None else float(c) for c in reply.timing.sm_clock_mhz)
        return replace(
            base,
            status=Status.OK if verdict.ok else Status.WRONG,
            reason=verdict.reason,
            median_ms=summary.median,
            ci_low_ms=summary.ci_low,
            ci_high_ms=summary.ci_high,
            samples=summary.samples,
            sm_clock_mhz=clocks,
            throttled=summary.throttled,
            verify_max_error=verdict.max_abs_error,
            library=reply.library,
            **compiled,
        )

    @property
    def supervisor(self) -> Supervisor:
        if self._supervisor is None:
            factory = functools.partial(BaselineExecutor, self.options.device)
            self._supervisor = Supervisor(
                factory, startup_timeout_s=self.options.call_timeout_s, name="wb-compare"
            )
        return self._supervisor

    def _inputs(
        self, inputs: Mapping[str, np.ndarray], dtypes: Mapping[str, str]
    ) -> tuple[ArrayFile, ...]:
        """The input files of a baseline, ``dtypes`` the inputs' space dtypes (the problem's)."""
        files = []
        for name, array in inputs.items():
            path = self._tmp / f"input-{name}.npy"
            if not path.exists():  # once per shape (new_shape clears them)
                write_raw(path, array)
            files.append(ArrayFile(name, str(path), dtypes[name], tuple(array.shape)))
        return tuple(files)

    def new_shape(self) -> None:
        """Forget the input files of the previous shape."""
        for path in self._tmp.glob("input-*.npy"):
            path.unlink(missing_ok=True)


def _ops(name: str, problem: BaselineProblem) -> float:
    return 0.0 if name == "copy" else problem.ops


def _not_run(base: ContenderEntry, exc: WorkerError | WorkerFault) -> ContenderEntry:
    """``base`` skipped (the library refused) or failed (it raised, crashed or hung)."""
    if isinstance(exc, WorkerError):
        status = Status.SKIPPED if exc.type_name == "BaselineUnsupported" else Status.FAILED
        return replace(base, status=status, reason=str(exc).partition(": ")[2] or str(exc))
    return replace(base, status=Status.FAILED, reason=str(exc))


def _outcome(e: ContenderEntry) -> str:
    """A variant's result in a log line."""
    done = f"{e.median_ms:.4g} ms" if e.timed else f"{e.status.value}: {e.reason}"
    if e.compile_s:
        done += f" ({e.compile_note} {e.compile_s:.2f} s)"
    return done


@contextlib.contextmanager
def _unlinked(files: Sequence[ArrayFile]) -> Iterator[None]:
    try:
        yield
    finally:
        for f in files:
            Path(f.path).unlink(missing_ok=True)


def _label(plan: ShapePlan) -> str:
    return ",".join(f"{k}={v}" for k, v in plan.space.shape.items())
