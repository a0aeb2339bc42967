"""A space's own accuracy figure (``accuracy:`` in the space file), computed on the CPU.

Some problems have an accuracy of their own, apart from any kernel: an 8-bit KV cache or
weight format changes the result against the unquantized problem on the same data. The space
names a function that measures it (:class:`~workbench.spaces.model.AccuracyFigure`); this
module draws its inputs as the runner draws a problem's (the same per-input streams, seeded),
with the figure's ``draw`` values over the config and at the study's shape capped per dimension
(the CPU's memory and time), and calls it in the user-code process like a reference
(:mod:`workbench.user_code`). It returns rows (column name -> number or word) that the report
shows beside the speed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from workbench.references import ReferenceCall
from workbench.runners.buffers import kernel_arguments, make_inputs, named_scalars
from workbench.runners.reference import (
    BadReferenceError,
    ReferenceNotFoundError,
    call_user_function,
    check_memory,
    load_function,
)
from workbench.spaces.model import Config, Value, shape_label
from workbench.spaces.space import Space
from workbench.user_code import call_timeout, in_user_process

#: The input seed of the figure: the runner's default (``tune`` and ``compare`` draw with 0).
SEED = 0

Cell = str | int | float


class AccuracyFigureError(BadReferenceError):
    """The accuracy function is missing, raised, or returned something other than rows."""


@dataclass(frozen=True)
class AccuracyRows:
    """A space's accuracy figure for one problem.

    Attributes:
        title: the space's title of the figure.
        target: the function that computed it.
        shape: the shape it was computed at.
        capped: the study's dimensions it lowered (name -> the study's size).
        drawn: the values its inputs were drawn with over the study's config (``draw``).
        seed: the input seed.
        columns: column names, in the first row's order.
        rows: one mapping per row.
    """

    title: str
    target: str
    shape: Mapping[str, int]
    capped: Mapping[str, int]
    drawn: Mapping[str, Value]
    seed: int
    columns: tuple[str, ...]
    rows: tuple[Mapping[str, Cell], ...]

    @property
    def shape_text(self) -> str:
        """``B=2,Hkv=8,...``, and what was lowered from the study's shape."""
        text = shape_label(self.shape)
        if self.capped:
            was = ", ".join(f"{k}={v}" for k, v in self.capped.items())
            text += f" (capped from the study's {was})"
        return text


def capped_shape(space: Space) -> tuple[dict[str, int], dict[str, int]]:
    """The space's shape with each dimension of its figure's cap at most that, and the
    dimensions lowered (name -> the original size)."""
    figure = space.spec.accuracy
    cap = figure.cap if figure is not None else {}
    shape = {k: min(v, cap[k]) if k in cap else v for k, v in space.shape.items()}
    return shape, {k: v for k, v in space.shape.items() if shape[k] != v}


def compute_accuracy(space: Space, config: Config, seed: int = SEED) -> AccuracyRows:
    """The space's accuracy figure for ``config`` (its problem variant) at ``space``'s shape,
    capped.

    Raises:
        AccuracyFigureError: the space declares none; the function is missing, raised,
            exited, hung or returned no rows; the capped problem is too large for this
            machine's memory (:class:`~workbench.runners.reference.ReferenceTooLargeError`).
        ConfigError: an input cannot be drawn with the drawn config.
    """
    figure = space.spec.accuracy
    if figure is None:
        raise AccuracyFigureError(f"{space.spec.name} declares no accuracy figure")
    shape, capped = capped_shape(space)
    small = Space(space.spec, shape=shape, arch=space.arch, device=space.device)
    # (only the inputs are drawn with these values: no kernel runs, so the knobs' constraints
    # with them, such as a vector width the drawn dtype does not allow, do not matter)
    drawn = {**config, **figure.draw}
    check_memory(small, drawn)
    inputs = make_inputs(small, seed, drawn)
    scalars = named_scalars(kernel_arguments(small, drawn))
    what = f"accuracy {figure.target!r}"
    rows = in_user_process(
        _rows_here,
        figure.target,
        inputs,
        scalars,
        shape,
        dict(config),
        what=what,
        error=AccuracyFigureError,
        timeout_s=call_timeout(),
    )
    return AccuracyRows(
        figure.title,
        figure.target,
        shape,
        capped,
        dict(figure.draw),
        seed,
        tuple(rows[0]),
        tuple(rows),
    )


def _rows_here(
    target: str,
    inputs: dict[str, np.ndarray],
    scalars: dict[str, int | float],
    shape: dict[str, int],
    config: dict[str, Value],
) -> list[dict[str, Cell]]:
    """In the user-code process: call the function and check it returned rows."""
    what = f"accuracy {target}"
    try:
        fn = load_function(target, "accuracy")
    except ReferenceNotFoundError as exc:
        raise AccuracyFigureError(str(exc)) from None
    call = ReferenceCall(inputs=inputs, scalars=scalars, shape=shape, config=config)
    try:
        result = call_user_function(fn, call, what, AccuracyFigureError)
    except AccuracyFigureError:
        raise
    except BadReferenceError as exc:
        raise AccuracyFigureError(str(exc)) from None
    return check_rows(result, what)


def check_rows(result: object, what: str) -> list[dict[str, Cell]]:
    """``result`` as rows: a non-empty list of mappings of the same column names (strings) to
    numbers or words.

    Raises:
        AccuracyFigureError: anything else, said how.
    """
    if not isinstance(result, list | tuple) or not result:
        raise AccuracyFigureError(
            f"{what} returned {type(result).__name__}; expected a non-empty list of rows "
            "(dicts of column name to a number or a word)"
        )
    rows: list[dict[str, Cell]] = []
    for i, row in enumerate(result):
        if not isinstance(row, Mapping) or not all(isinstance(k, str) for k in row):
            raise AccuracyFigureError(f"{what}: row {i} is not a dict of column names")
        if rows and list(row) != list(rows[0]):
            raise AccuracyFigureError(
                f"{what}: row {i} has columns {list(row)}, row 0 {list(rows[0])}"
            )
        out: dict[str, Cell] = {}
        for key, value in row.items():
            if isinstance(value, np.generic):
                value = value.item()
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                raise AccuracyFigureError(
                    f"{what}: row {i}, {key!r} is {type(value).__name__}; expected a number "
                    "or a word"
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise AccuracyFigureError(f"{what}: row {i}, {key!r} is {value}")
            out[key] = value
        rows.append(out)
    return rows


__all__ = ["AccuracyFigureError", "AccuracyRows", "compute_accuracy"]
