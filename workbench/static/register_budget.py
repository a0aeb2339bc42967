"""Refuse to launch a binary whose register count is not the setmaxnreg budget it was built for.

A kernel that moves registers between warpgroups with ``setmaxnreg`` exports the launch
allocation its counts assume (:mod:`workbench.analysis.register_budget`); a cubin that gives its
entry any other count would hang in ``setmaxnreg.inc``. The runner and the profiler refuse such
a binary before its launch, and the static sweep lints it, each with one line that points at
the kernel's definition of the budget and names the config and both counts.
"""

from __future__ import annotations

from workbench.analysis import AnalysisError
from workbench.analysis.register_budget import BUDGET_SYMBOL, budget_mismatch
from workbench.compiler import CompileResult, make_job
from workbench.compiler.jobs import defining_line
from workbench.errors import CompileError, LaunchRefusedError
from workbench.spaces import Space, config_label
from workbench.spaces.model import Config


def register_budget_problem(space: Space, config: Config, result: CompileResult) -> str | None:
    """One located line when ``result``'s entry is allocated another register count than the
    setmaxnreg budget its module exports; None when they agree or nothing is exported."""
    if result.cubin is None or not result.entry:
        return None
    try:
        mismatch = budget_mismatch(result.cubin, result.entry)
    except AnalysisError:
        return None  # loading the module will say what is wrong with the binary
    if mismatch is None:
        return None
    where = str(space.spec.source)
    try:
        found = defining_line(make_job(space, config), BUDGET_SYMBOL)
    except (CompileError, OSError):
        found = None
    if found is not None:
        where = f"{found[0]}:{found[1]}"
    return (
        f"{where}: {space.spec.name} {config_label(config)}: {mismatch.describe()}; "
        "refusing to launch it"
    )


def require_register_budget(space: Space, config: Config, result: CompileResult) -> None:
    """Stop before launching a binary allocated another register count than its budget.

    Raises:
        LaunchRefusedError: :func:`register_budget_problem` found one.
    """
    if problem := register_budget_problem(space, config, result):
        raise LaunchRefusedError(problem)
