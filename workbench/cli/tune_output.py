"""What ``workbench tune`` shows of a finished search: the progress line's best, the table of
the top configs, and the ``--json`` summary (shared by the local and the shared-study paths)."""

from __future__ import annotations

import shlex

from rich.markup import escape
from rich.table import Table

from workbench.cli.common import shown
from workbench.runners.base import TrialOutcome
from workbench.search.problem import SpaceProblem
from workbench.search.session import TunePlan
from workbench.search.tuner import TuneResult
from workbench.spaces import config_label
from workbench.spaces.model import base_kernel
from workbench.static_diff import diff_command as static_diff_command
from workbench.store.store import storage_option


def best_text(plan: TunePlan, best: object) -> str:
    if best is None:
        return "best: -"
    m = best.measurement  # type: ignore[attr-defined]
    text = f"best {m.value:.4g} ms"
    if plan.throughput is not None:
        rate = plan.throughput(best.config, m.value)  # type: ignore[attr-defined]
        if rate is not None:
            text += f" ({rate:,.1f} {plan.unit}"
            share = bound_share(plan, best.config, m.value)  # type: ignore[attr-defined]
            text += f", {share} of the roofline bound)" if share else ")"
    return text


def bound_share(plan: TunePlan, config: dict, ms: float) -> str:
    """``"42%"`` of the roofline bound, or "" when the GPU's roofline is not known."""
    bound = plan.roofline(config, ms) if plan.roofline is not None else None
    if bound is None:
        return ""
    return f"{bound.fraction:.1%}" if bound.fraction < 0.1 else f"{bound.fraction:.0%}"


def summary(plan: TunePlan, result: TuneResult, url: str) -> dict:
    best = result.best
    doc = {
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
    }
    if plan.recorded_optimum is not None:
        doc["recorded_optimum"] = plan.recorded_optimum
    if result.moves is not None:
        doc["moves"] = result.moves
    if result.drift:
        doc["drift"] = [c.to_json() for c in result.drift]
    if best and plan.throughput is not None:
        doc["throughput"] = {
            "value": plan.throughput(best.config, best.measurement.value),
            "unit": plan.unit,
        }
        bound = plan.roofline(best.config, best.measurement.value) if plan.roofline else None
        if bound is not None:  # the share of the roofline bound, and the roofs it is under
            doc["throughput"]["roofline"] = {
                "fraction": bound.fraction,
                "limit": bound.limit,
                "ceilings": list(bound.ceilings),
            }
    return doc


def print_result(plan: TunePlan, result: TuneResult, url: str, out: object) -> None:
    problem, device = plan.problem, plan.runner.device.name
    # escaped whole: rich would take an unescaped "[n=1000]" for markup and drop it
    table = Table(title=shown(f"top configs: {problem.kernel} [{problem.shape_label}] on {device}"))
    table.add_column("#", justify="right")
    table.add_column("config", overflow="fold")
    table.add_column(
        f"{plan.runner.objective.name} ({plan.runner.objective.unit})", justify="right"
    )
    if plan.throughput is not None:
        table.add_column(plan.unit or "", justify="right")
    if plan.roofline is not None:
        table.add_column("roofline bound", justify="right")
    for i, e in enumerate(result.top(10), 1):
        cells = [str(i), escape(config_label(e.config)), f"{e.measurement.value:.5g}"]
        if plan.throughput is not None:
            rate = plan.throughput(e.config, e.measurement.value)  # type: ignore[arg-type]
            cells.append("" if rate is None else f"{rate:,.1f}")
        if plan.roofline is not None:
            cells.append(bound_share(plan, e.config, e.measurement.value))  # type: ignore[arg-type]
        table.add_row(*cells)
    out.print(table)  # type: ignore[attr-defined]
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
    out.print(f"Results: study {escape(result.study.name)!r} in {escape(url)}")  # type: ignore[attr-defined]
    if result.best is not None:  # the next step: the tuned configs into the user's build
        kernel = base_kernel(result.study.kernel)
        where = storage_option(url)
        command = shlex.join(["workbench", "store", "header", kernel, "-o", f"{kernel}_tuned.h"])
        out.print(escape(f"For your build: {command}{where}"))  # type: ignore[attr-defined]
        if command := diff_command(plan, where):
            out.print(escape(f"What tuning changed in the binary: {command}"))  # type: ignore[attr-defined]


def diff_command(plan: TunePlan, where: str) -> str | None:
    """``workbench compile`` of the space's default against this study's best, ``--diff``
    (None for a recording without a space file: nothing to compile)."""
    problem = plan.problem
    if not isinstance(problem, SpaceProblem):
        return None
    return static_diff_command(problem.space, plan.study.name, where, problem.pinned)
