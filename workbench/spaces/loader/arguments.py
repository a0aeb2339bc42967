"""What a space file's kernels are passed: ``args`` (buffers, scalars, tensor maps) and the
second kernel ``then`` with its geometry and arguments."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.spaces import schema
from workbench.spaces.loader.checks import FileChecks
from workbench.spaces.model import ArgSpec, Geometry, ScalarArg, TensorMapArg, ThenLaunch


def read_args(file: FileChecks, known: set[str], ranks: dict[str, int]) -> tuple[ArgSpec, ...]:
    """``args`` checked: buffer names exist, expressions use known names, a tensor map's box
    has one dimension per dimension of its buffer."""
    args = _arg_list(file, ("args",), file.m.args, known, ranks)
    passed = {a for a in args if isinstance(a, str)}
    passed |= {a.buffer for a in args if isinstance(a, TensorMapArg)}
    missing = [o for o in file.m.outputs if o not in passed]
    if missing:
        raise file.err(("args",), f"output(s) {', '.join(missing)} are not passed to the kernel")
    return tuple(args)


def read_then(
    file: FileChecks, language: str, known: set[str], ranks: dict[str, int]
) -> ThenLaunch | None:
    """``then``: the second kernel, its geometry and arguments."""
    t = file.m.then
    if t is None:
        return None
    key = ("then",)
    if language == "numba":
        raise file.err(key, "a Numba kernel is one function: it has no second kernel")
    if t.kernel == file.m.entry.kernel:
        raise file.err((*key, "kernel"), "the second kernel is the entry itself")
    geometry = Geometry(
        grid=file.dims((*key, "grid"), t.grid, known),
        block=file.dims((*key, "block"), t.block, known),
        shared_bytes=file.expr((*key, "shared_bytes"), t.shared_bytes, known),
    )
    args = tuple(_arg_list(file, (*key, "args"), t.args, known, ranks))
    return ThenLaunch(t.kernel, file.expr((*key, "when"), t.when, known), geometry, args)


def _arg_list(
    file: FileChecks,
    key: tuple[str, ...],
    entries: Sequence[object],
    known: set[str],
    ranks: dict[str, int],
) -> list[ArgSpec]:
    """One ``args`` list (the entry's, or ``then``'s) checked entry by entry."""
    args: list[ArgSpec] = []
    for i, a in enumerate(entries):
        if isinstance(a, str):
            if a not in ranks:
                raise file.err((*key, i), f"{a!r} is not an input or output buffer")
            args.append(a)
        elif isinstance(a, schema.TensorMapArgModel):
            args.append(_tensor_map(file, i, a, known, ranks, key))
        else:
            assert isinstance(a, schema.ScalarArgModel)
            value = file.expr((*key, i, "value"), a.value, known)
            args.append(ScalarArg(value, a.dtype, a.name))
    return args


def _tensor_map(
    file: FileChecks,
    i: int,
    a: schema.TensorMapArgModel,
    known: set[str],
    ranks: dict[str, int],
    where: tuple[str, ...] = ("args",),
) -> TensorMapArg:
    key: tuple[str | int, ...] = (*where, i)
    rank = ranks.get(a.tensor_map)
    if rank is None:
        raise file.err((*key, "tensor_map"), f"{a.tensor_map!r} is not an input or output buffer")
    if len(a.box) != rank:
        raise file.err(
            (*key, "box"),
            f"box has {len(a.box)} dimension{'s'[: len(a.box) != 1]} but buffer "
            f"{a.tensor_map!r} has {rank} (one box extent per dimension of its shape, "
            "outermost first)",
        )
    box = tuple(file.expr((*key, "box", d), t, known) for d, t in enumerate(a.box))
    return TensorMapArg(
        buffer=a.tensor_map,
        box=box,
        swizzle=file.expr((*key, "swizzle"), a.swizzle, known),
        when=file.expr((*key, "when"), a.when, known),
        l2_promotion=a.l2_promotion,
        name=a.name,
    )
