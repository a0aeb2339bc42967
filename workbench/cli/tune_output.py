"""What ``workbench tune`` shows of a finished search: the progress line's best, the table of
the top configs, and the ``--json`` summary (shared by the local and the shared-study paths, and
the compile stage's)."""

from __future__ import annotations

import shlex
from typing import Any

from rich.console import Console
from rich.markup import escape

from workbench.cli.common import shown
from workbench.cli.tables import Column, config_cells, print_table
from workbench.roofline.timed import Bound
from workbench.runners.base import TrialOutcome
from workbench.search.problem import SpaceProblem
from workbench.search.request import Budget
from workbench.search.tune_plan import Resumption, TunePlan
from workbench.search.tuner import TuneResult
from workbench.spaces.model import SpaceSpec, base_kernel
from workbench.static.diff import diff_command as static_diff_command
from workbench.static.sweep import StaticRecord
from workbench.store import StoredEvaluation
from workbench.store.database import storage_option


def best_text(plan: TunePlan, best: object) -> str:
    if best is None:
        return "best: -"
    m = best.measurement  # type: ignore[attr-defined]
    text = f"best {m.value:.4g} {plan.runner.objective.unit}"
    if plan.throughput is not None:
        rate = plan.throughput(best.config, m.value)  # type: ignore[attr-defined]
        if rate is not None:
            text += f" ({rate:,.1f} {plan.unit}"
            bound = bound_of(plan, best)  # type: ignore[arg-type]
            share = percent(bound.fraction) if bound else ""
            at = f" {bound.clock_text}" if bound and bound.clock_text else ""
            text += f", {share} of the roofline bound{at})" if share else ")"
    return text


def bound_of(plan: TunePlan, e: StoredEvaluation) -> Bound | None:
    """Where ``e`` sits under the roofline at the SM clock its samples ran at (None: the GPU's
    roofline or the config's work is not known)."""
    return plan.roofline(e.config, e.measurement) if plan.roofline is not None else None


def percent(fraction: float) -> str:
    """``"42%"`` (``"4.2%"`` below 10 %)."""
    return f"{fraction:.1%}" if fraction < 0.1 else f"{fraction:.0%}"


def resume_note(
    study: str, resumed: Resumption, budget: Budget, *, budget_given: bool, sampler: str, seed: int
) -> str:
    """What a tune of a study that holds evaluations does with them: the budget counts them,
    and a seed or sampler other than the stored runs' steers only what this run adds."""
    searched = [f"sampler {s}" for s in resumed.samplers if s != sampler]
    seeds = ", ".join(str(s) for s in resumed.seeds)
    searched += [f"seed{'s' if len(resumed.seeds) > 1 else ''} {seeds}"] if seeds else []
    origin = ", ".join(searched) or "imported from a recording"
    note = f"Resuming study {study!r}: {resumed.evaluations} evaluations already ({origin})."
    left = resumed.budget_left(budget)
    if left is not None:
        what = "--budget" if budget_given else "The default budget of"
        more = f"up to {left} more" if left else "nothing left to evaluate"
        note += f" {what} {budget.evaluations} counts them: {more}; a larger --budget adds to it,"
    else:  # --time, --patience: this run's
        limits = [o for o, v in (("--time", budget.seconds), ("--patience", budget.patience)) if v]
        verb = "limits" if len(limits) == 1 else "limit"
        note += f" {' and '.join(limits)} {verb} this run only: it adds to the study,"
    note += " --fresh starts an independent one."
    changed = [f"--seed {seed}"] if resumed.seeds not in ([], [seed]) else []
    changed += [f"--sampler {sampler}"] if resumed.samplers not in ([], [sampler]) else []
    if changed:
        note += (
            f" {' and '.join(changed)} steer{'s' if len(changed) == 1 else ''} only the "
            "evaluations this run adds; the stored ones stay and are not measured again."
        )
    return note


def resumed_json(resumed: Resumption | None, budget: Budget, seed: int) -> dict | None:
    """``--json``'s ``resumed``: None for a study searched from scratch."""
    if resumed is None:
        return None
    return {
        "evaluations_before": resumed.evaluations,
        "runs": len(resumed.runs),
        "seeds": resumed.seeds,
        "samplers": resumed.samplers,
        "seed": seed,
        "budget_left": resumed.budget_left(budget),
    }


def summary(plan: TunePlan, result: TuneResult, url: str) -> dict:
    best = result.best
    doc: dict[str, Any] = {
        "kernel": plan.problem.kernel,
        "shape": plan.problem.shape_label,
        "study": result.study.name,
        "device": plan.runner.device.name,
        "replayed_from": plan.runner.replay_source,
        "objective": {"name": plan.runner.objective.name, "unit": plan.runner.objective.unit},
        "best_config": best.config if best else None,
        "best_value": best.measurement.value if best else None,
        "evaluations": result.evaluations,
        "new_evaluations": result.new_evaluations,
        "failed": sum(1 for e in result.history if e.measurement.outcome.failed),
        "stop": result.stop.value,
        "unanswered": result.unanswered,
        "store": url,
        "phases": result.phases.to_json(),
        "gpu_busy": result.phases.gpu_busy if plan.runner.replay_source is None else None,
    }
    if plan.recorded_optimum is not None:
        doc["recorded_optimum"] = plan.recorded_optimum
    if result.moves is not None:
        doc["moves"] = result.moves
    if result.drift:
        doc["drift"] = [c.to_json() for c in result.drift]
    if best and plan.throughput is not None and best.measurement.value is not None:
        doc["throughput"] = {
            "value": plan.throughput(best.config, best.measurement.value),
            "unit": plan.unit,
        }
        bound = bound_of(plan, best)
        if bound is not None:  # the share of the roofline bound, the roofs, the SM clock
            doc["throughput"]["roofline"] = {
                "fraction": bound.fraction,
                "limit": bound.limit,
                "ceilings": list(bound.ceilings),
                "clock_mhz": bound.clock_mhz if bound.clock_timed else None,
            }
    return doc


def compile_summary(
    spec: SpaceSpec, records: list[StaticRecord], reason: str, url: str
) -> dict[str, object]:
    """``--json`` of the no-GPU compile stage: nothing was timed, so no best config."""
    return {
        "kernel": spec.name,
        "device": None,
        "no_gpu_reason": reason,
        "stage": "compile",
        "objective": {"name": "time", "unit": "ms"},
        "best_config": None,
        "best_value": None,
        "evaluations": 0,
        "compiled": sum(r.ok for r in records),
        "failed": sum(not r.ok for r in records),
        "store": url,
        "records": [r.to_dict() for r in records],
    }


def print_result(plan: TunePlan, result: TuneResult, url: str, out: object) -> None:
    print_top(plan, result, out)  # type: ignore[arg-type]
    if result.evaluations and not result.new_evaluations:  # a finished study tuned again
        out.print(escape(already_done(result)))  # type: ignore[attr-defined]
    else:
        _print_run(plan, result, out)
    _print_next_steps(plan, result, url, out)


def already_done(result: TuneResult) -> str:
    """What a tune that evaluated nothing new says: the study was done, what it found, and how
    to go on (a larger budget) or start again (``--fresh``)."""
    best = result.best
    found = (
        f"; best {best.measurement.value:.5g} {result.study.unit or ''}".rstrip()
        if best is not None and best.measurement.value is not None
        else "; no config succeeded"
    )
    head = f"Already done: study {result.study.name!r} holds {result.evaluations} evaluations"
    if result.stop.value == "exhausted":
        return (
            f"{head}{found}; every config it can evaluate is evaluated, so nothing new was. "
            "--fresh starts an independent study."
        )
    return (
        f"{head}{found}; its budget is spent (stopped: {result.stop.value}), so nothing new was "
        f"evaluated. A larger --budget (more than {result.evaluations}) extends it; --fresh "
        "starts an independent study."
    )


def _print_run(plan: TunePlan, result: TuneResult, out: object) -> None:
    """What this run did: evaluations, why it stopped, moves, where the time went."""
    failed = sum(1 for e in result.history if e.measurement.outcome is not TrialOutcome.OK)
    line = (
        f"{result.evaluations} configs evaluated ({result.new_evaluations} new, {failed} "
        f"failed); stopped: {result.stop.value}."
    )
    if plan.recorded_optimum and result.best is not None:
        gap = result.best.measurement.value / plan.recorded_optimum  # type: ignore[operator]
        line += f" Recorded optimum {plan.recorded_optimum:.5g} (best found is {gap:.3f}x)."
    if result.unanswered:
        line += f" {result.unanswered} valid configs could not be evaluated (not in the recording)."
    total, held = plan.problem.valid_total, plan.problem.valid_configs()
    if total and held is not None and total > len(held):
        line += (
            f" The space has {total:,} valid configs: the search drew from a uniform sample of "
            f"{len(held):,}."
        )
    if result.unanswered is None:
        line += (
            f" The search covered the {len(held or ())} recorded configs "
            "valid here (the space's others, too many to count, cannot be replayed)."
        )
    out.print(line)  # type: ignore[attr-defined]
    if result.moves:
        used = ", ".join(
            f"{move} {s['proposed']}/{s['improved']}" for move, s in result.moves.items()
        )
        out.print(f"Search moves (proposed/improved the best): {used}")  # type: ignore[attr-defined]
    if result.phases.total > 0:
        live = plan.runner.replay_source is None
        out.print(escape(phases_line(result, live=live)))  # type: ignore[attr-defined]
    if result.drift:
        drifted = result.drifted
        what = (
            f"[bold yellow]drift:[/] {len(drifted)} of {len(result.drift)} re-timings of the "
            f"reference config differ from its first timing ({escape(drifted[-1].describe())}): "
            "configs timed far apart compare off by that much"
            if drifted
            else f"No drift: {len(result.drift)} re-timings of the reference config matched its "
            "first timing."
        )
        out.print(what)  # type: ignore[attr-defined]


def _print_next_steps(plan: TunePlan, result: TuneResult, url: str, out: object) -> None:
    out.print(f"Results: study {escape(result.study.name)!r} in {escape(url)}")  # type: ignore[attr-defined]
    if result.best is not None:  # the next step: the tuned configs into the user's build
        kernel = base_kernel(result.study.kernel)
        where = storage_option(url)
        command = shlex.join(["workbench", "store", "header", kernel, "-o", f"{kernel}_tuned.h"])
        out.print(escape(f"For your build: {command}{where}"))  # type: ignore[attr-defined]
        if diff := diff_command(plan, where):
            out.print(escape(f"What tuning changed in the binary: {diff}"))  # type: ignore[attr-defined]


def phases_line(result: TuneResult, *, live: bool) -> str:
    """Where the run's wall time went; measured live: the evaluations per minute and the share
    of the time the GPU ran candidate kernels."""
    phases = result.phases
    line = f"Time: {phases.total:.3g} s: {phases.describe()}"
    busy = phases.gpu_busy
    if live and busy is not None and result.new_evaluations:
        rate = 60 * result.new_evaluations / phases.total
        line += f"; {rate:.1f} evaluations/min, GPU busy with candidates {busy:.0%}"
    return line + "."


def print_top(plan: TunePlan, result: TuneResult, out: Console) -> None:
    """The fastest correct configs: the parameters that differ between them as columns (or
    NAME=VALUE tokens), those equal in all in the caption, within the terminal's width."""
    problem, device = plan.problem, plan.runner.device.name
    top = result.top(10)
    configs = config_cells([e.config for e in top])
    objective = plan.runner.objective
    columns = [Column("#", "right"), *configs.columns]
    columns.append(Column(f"{objective.name} ({objective.unit})", "right"))
    columns += [Column(plan.unit or "", "right")] if plan.throughput is not None else []
    bounds = [bound_of(plan, e) for e in top]
    clocks = {b.clock_text for b in bounds if b is not None}
    one_clock = clocks.pop() if len(clocks) == 1 else None  # said once, in the header
    if plan.roofline is not None:
        columns.append(
            Column(
                f"roofline bound {one_clock}".strip() if one_clock else "roofline bound", "right"
            )
        )
    rows = []
    for i, (e, config, bound) in enumerate(zip(top, configs.rows, bounds, strict=True), 1):
        value = e.measurement.value
        cells = [str(i), *config, f"{value:.5g}"]
        if plan.throughput is not None:
            rate = plan.throughput(e.config, value)  # type: ignore[arg-type]
            cells.append("" if rate is None else f"{rate:,.1f}")
        if plan.roofline is not None:
            at = f" {bound.clock_text}" if bound and bound.clock_text and not one_clock else ""
            cells.append(f"{percent(bound.fraction)}{at}" if bound else "")
        rows.append(cells)
    # escaped whole: rich would take an unescaped "[n=1000]" for markup and drop it
    title = shown(f"top configs: {problem.kernel} [{problem.shape_label}] on {device}")
    print_table(out, columns, rows, title=title, caption=configs.caption)


def diff_command(plan: TunePlan, where: str) -> str | None:
    """``workbench compile`` of the space's default against this study's best, ``--diff``
    (None for a recording without a space file: nothing to compile)."""
    problem = plan.problem
    if not isinstance(problem, SpaceProblem):
        return None
    return static_diff_command(problem.space, plan.study.name, where, problem.pinned)
