"""What tuning changed in the binary: the space's default config against the study's best,
compiled for the study's arch, as ``workbench compile K -c default -c best --diff`` prints it.

A live tune compiled both, so the compile cache usually answers; otherwise the report compiles
the two (seconds, no GPU). Parameters that are not tuned (a problem variant such as the
reduction's operator) take the best config's values in the default too, so the diff shows
what the search chose, not which problem was solved.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.compiler import CompileCache
from workbench.errors import ConfigError, WorkbenchError
from workbench.report.data import StudyData
from workbench.report.page import PageSection, esc, table
from workbench.search.configs import select_configs
from workbench.static.diff import StaticDiff, diff_command, static_diff
from workbench.static.sweep import static_sweep

#: Opcode rows shown (the largest changes); the rest are counted.
MAX_OPCODES = 20


@dataclass(frozen=True)
class TunedBinary:
    """The diff of the default against the best, or why there is none (``reason``)."""

    diff: StaticDiff | None
    reason: str | None
    command: str | None  #: the same diff in a terminal
    arch: str = ""
    cached: int = 0  #: of the two compiles, how many the cache answered


def gather_tuned_binary(
    data: StudyData, cache: CompileCache | None = None, where: str = ""
) -> TunedBinary:
    """Compile (or look up) the default and the best config of ``data``'s study (``where``:
    the command's ``--storage`` option, when the store is not the default one)."""
    space, why = data.space_file  # (compiled here: the file, never the store's copy)
    if space is None:
        return TunedBinary(None, f"nothing to compile: {why}", None)
    if data.study.compile_only:
        return TunedBinary(None, "a compile-only study: nothing was timed, so no best config", None)
    best = data.best
    if best is None:
        command = diff_command(space, data.study.name, where)
        return TunedBinary(None, "no correct evaluation, so no best config", command)
    default = space.default_config()
    fixed = {
        p.name: best.config.get(p.name, default[p.name])
        for p in space.spec.parameters
        if not p.tunable
    }
    command = diff_command(space, data.study.name, where, fixed)
    # the two configs as `compile -c default -c best` selects them (the default with the
    # variant's values; one config when they are the same)
    best_items = [f"{name}={value}" for name, value in best.config.items()]
    try:
        given = [{**default, **fixed}, space.parse_config(best_items)]
        configs = select_configs(space, given=given, fixed=fixed)
    except ConfigError as exc:
        return TunedBinary(None, f"a config to compare is not valid here: {exc}", command)
    if len(configs) == 1:
        return TunedBinary(None, "the best config is the space's default", command)
    try:
        records = static_sweep(space, configs, cache=cache or CompileCache())
    except WorkbenchError as exc:  # the toolchain is missing or broken
        return TunedBinary(None, f"cannot compile: {exc}", command)
    failed = [f"{r.label}: {r.error}" for r in records if not r.ok]
    if failed:
        return TunedBinary(None, "no binary to read: " + "; ".join(failed), command)
    return TunedBinary(
        static_diff(*records), None, command, space.arch.sm, sum(r.cached for r in records)
    )


def add_tuned_binary(sec: PageSection, tuned: TunedBinary) -> None:
    """The section's body: what changed, largest first, or why nothing is shown."""
    d = tuned.diff
    if d is None:
        sec.text(f"No diff: {tuned.reason}.", "missing")
    else:
        compiled = 2 - tuned.cached
        sec.note(
            f"Default ({d.a_label}) against the tuned best ({d.b_label}), compiled for "
            f"{tuned.arch}; {tuned.cached} of 2 from the compile cache"
            + (f", {compiled} compiled for this report." if compiled else ".")
        )
        if d.same_code:
            sec.text("The same resources, SASS opcode counts and memory instructions.")
        rows: list[list[object]] = [[name, a, b, delta] for name, a, b, delta in d.resources]
        rows += [[op, a, b, f"{b - a:+d}"] for op, a, b in d.opcodes[:MAX_OPCODES]]
        if rows:
            sec.html(table(("", "default", "tuned best", "change"), rows, numeric=(1, 2, 3)))
        if len(d.opcodes) > MAX_OPCODES:
            sec.note(f"{len(d.opcodes)} opcodes changed; the {MAX_OPCODES} largest shown.")
        for who, ops in (("the default", d.memory_only_a), ("the tuned best", d.memory_only_b)):
            if ops:
                sec.html(
                    f"<p>Global memory instructions only in {who}: <code>"
                    f"{esc(' '.join(ops))}</code></p>"
                )
    if tuned.command:
        sec.html(f"<p class='note'>In a terminal: <code>{esc(tuned.command)}</code></p>")
