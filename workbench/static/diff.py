"""``workbench compile --diff``: what changing a config did to the binary, without a GPU.

Two configs of one space, compiled for one arch, side by side: the parameters that differ,
then each resource that changed (registers, shared memory, spills, occupancy, instruction
count) and each SASS opcode whose count changed, largest change first, and the global-memory
instruction forms only one of them has (where a vector width or a cache hint shows up).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from workbench.spaces import Space
from workbench.spaces.model import Value, config_label, shape_label
from workbench.spaces.registry import builtin_spaces_dir
from workbench.static.sweep import StaticRecord


@dataclass(frozen=True)
class StaticDiff:
    """``a`` against ``b``: rows of (what, value in a, value in b, change)."""

    a: StaticRecord
    b: StaticRecord
    #: the parameters that differ, as NAME=VALUE of each
    a_label: str
    b_label: str
    resources: tuple[tuple[str, str, str, str], ...]
    #: (opcode, count in a, count in b), the largest change first
    opcodes: tuple[tuple[str, int, int], ...]
    memory_only_a: tuple[str, ...]
    memory_only_b: tuple[str, ...]

    @property
    def same_code(self) -> bool:
        return not (self.resources or self.opcodes or self.memory_only_a or self.memory_only_b)


def static_diff(a: StaticRecord, b: StaticRecord) -> StaticDiff:
    """The differences between two compiled (``ok``) records of one arch."""
    changed = [
        n for n in dict.fromkeys([*a.config, *b.config]) if a.config.get(n) != b.config.get(n)
    ]
    # (a parameter only one config has shows as None on the other)
    a_label = config_label({n: a.config.get(n) for n in changed}) or a.label  # type: ignore[misc]
    b_label = config_label({n: b.config.get(n) for n in changed}) or b.label  # type: ignore[misc]
    rows = [
        (name, _resource(a, name), _resource(b, name), _change(a, b, name)) for name in _RESOURCES
    ]
    opcodes = [
        (op, a.opcodes.get(op, 0), b.opcodes.get(op, 0))
        for op in dict.fromkeys([*a.opcodes, *b.opcodes])
        if a.opcodes.get(op, 0) != b.opcodes.get(op, 0)
    ]
    opcodes.sort(key=lambda row: (-abs(row[2] - row[1]), row[0]))
    return StaticDiff(
        a,
        b,
        a_label,
        b_label,
        tuple(row for row in rows if row[1] != row[2]),
        tuple(opcodes),
        tuple(op for op in a.global_memory_ops if op not in b.global_memory_ops),
        tuple(op for op in b.global_memory_ops if op not in a.global_memory_ops),
    )


_RESOURCES = (
    "registers",
    "shared memory",
    "stack frame",
    "spill stores/loads",
    "threads per block",
    "occupancy",
    "SASS instructions",
)


def _amounts(r: StaticRecord, name: str) -> tuple[float | None, ...]:
    """The numbers behind one resource row (two for spills: stores and loads)."""
    if name == "registers":
        return (r.registers,)
    if name == "shared memory":
        return (None if r.static_smem is None else r.static_smem + (r.dynamic_smem or 0),)
    if name == "stack frame":
        return (r.stack_frame,)
    if name == "spill stores/loads":
        return (r.spill_stores, r.spill_loads)
    if name == "threads per block":
        return (r.threads_per_block,)
    if name == "occupancy":
        return (None if r.occupancy is None else round(100 * r.occupancy),)
    return (r.sass_instructions,)


def _change(a: StaticRecord, b: StaticRecord, name: str) -> str:
    """B minus A, signed (occupancy in percentage points); blank where a side is unknown."""
    deltas = []
    for x, y in zip(_amounts(a, name), _amounts(b, name), strict=True):
        if x is None or y is None:
            return ""
        deltas.append(f"{int(y) - int(x):+d}")
    unit = {"shared memory": " B", "occupancy": " pp"}.get(name, "")
    return "/".join(deltas) + unit


def _resource(r: StaticRecord, name: str) -> str:
    if name == "registers":
        return str(r.registers)
    if name == "shared memory":
        return f"{r.static_smem} + {r.dynamic_smem or 0} dynamic"
    if name == "stack frame":
        return str(r.stack_frame)
    if name == "spill stores/loads":
        return f"{r.spill_stores}/{r.spill_loads}"
    if name == "threads per block":
        return str(r.threads_per_block)
    if name == "occupancy":
        if r.occupancy is None:
            return "?"
        return f"{r.occupancy:.0%} ({r.active_blocks} blocks, {r.limiting_factor})"
    return str(r.sass_instructions)


def diff_command(
    space: Space, study: str, where: str = "", pinned: Mapping[str, Value] | None = None
) -> str:
    """The ``workbench compile`` line that diffs ``space``'s default config against the best
    of ``study`` (``where``: the ``--storage`` option, when not the default store). A problem
    variant's ``pinned`` values that are not the defaults are given with the default, so that
    the diff shows what the search chose, not which problem was solved."""
    path = space.spec.path
    library = builtin_spaces_dir().resolve()
    kernel = space.spec.name if path.resolve().parent == library else str(path)
    shape = (
        "" if space.shape == space.spec.default_shape else f" --shape {shape_label(space.shape)}"
    )
    defaults = space.default_config()
    changed = {n: v for n, v in (pinned or {}).items() if defaults.get(n) != v}
    default = config_label(changed) if changed else "default"
    return (
        f"workbench compile {shlex.quote(kernel)}{shape} -c {shlex.quote(default)} -c best "
        f"--diff --study {shlex.quote(study)}{where}"
    )
