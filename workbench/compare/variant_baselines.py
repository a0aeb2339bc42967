"""Another variant of the same space file as a baseline: ``baselines: [{variant: NAME, inputs:
module:function}]`` (attention_decode's fp16-cache variant beside its int8 and fp8 caches).

It is the workbench's own kernel, not a library: ``compare`` runs it through the CUDA runner
like the tuned config, on the problem's inputs made into the variant's by ``inputs`` (the int8
cache dequantized to fp16), with the config it is told (the variant's best in the store at the
shape, else its default: :class:`VariantPlan` says which), verified against the variant's own
reference on those inputs under its own tolerance (its inputs are not the problem's, so the
problem's reference is not its truth: rounding the dequantized cache to fp16 moves the outputs
by up to a few of the int8 tolerance), and timed by the same protocol.

The variant keeps the problem's other problem values (layout, head size, group, query type)
where they are valid with the variant's own; one that is not (per-channel k scales, with an
fp16 cache that has no scales) takes the variant's default, and :class:`VariantPlan` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported
from workbench.compare.problems import BaselineProblem, Family
from workbench.errors import ConfigError
from workbench.references import ReferenceCall
from workbench.runners.reference import (
    ReferenceFailedError,
    call_user_function,
    load_function,
)
from workbench.spaces.completion import complete_config
from workbench.spaces.model import Config, Value, VariantBaseline
from workbench.spaces.schema import BaselineKind
from workbench.spaces.space import Space
from workbench.spaces.variants import variant_named, variant_spec
from workbench.user_code import call_timeout, in_user_process


class VariantBaselineRow(Baseline):
    """A variant of the space as a baseline (one subclass per variant: :func:`variant_baseline`).
    It runs in the command's CUDA runner, never in the baseline worker."""

    kind = BaselineKind.VARIANT
    families = frozenset(Family)
    any_problem = True
    variant: str = ""

    def check(self, problem: BaselineProblem, cc: int | None) -> str | None:
        if problem.kernel == self.variant:
            return f"the tuned config is {self.variant} itself"
        return None

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        raise BaselineUnsupported(f"{self.name} runs in the CUDA runner, not the baseline worker")


def variant_baseline(variant: str, inputs: str | None) -> Baseline:
    """The baseline of ``variant`` (``inputs``: where its inputs are made, for the title)."""
    made = f"the inputs made by {inputs}" if inputs else "the same inputs"
    cls = type(
        f"VariantBaselineRow_{variant}",
        (VariantBaselineRow,),
        {
            "name": f"variant:{variant}",
            "title": f"{variant} (this space's own variant) on {made}",
            "label": variant,
            "variant": variant,
        },
    )
    return cls()


@dataclass(frozen=True)
class VariantPlan:
    """What a variant baseline runs at one shape.

    Attributes:
        name: ``variant:NAME``.
        space: the variant's space at the shape.
        config: the config it runs.
        origin: where the config comes from (``best of study ...``, ``default (...)``).
        inputs: where its inputs are made (None: the problem's arrays).
        notes: problem values it could not keep.
    """

    name: str
    space: Space
    config: Config
    origin: str
    inputs: str | None
    notes: tuple[str, ...] = ()


def variant_problem(
    space: Space, config: Config, baseline: VariantBaseline
) -> tuple[Space, Config, tuple[str, ...]]:
    """The variant's space at ``space``'s shape, arch and device, its valid config nearest the
    default that keeps the problem values of ``config`` it can (its own where the file's, or
    where no valid config of the variant takes the problem's), and a note per value it could
    not keep.

    Raises:
        KeyError: the space file has no such variant.
        ConfigError: no valid config of the variant at this shape.
    """
    spec = variant_spec(space.spec, baseline.variant)
    own = variant_named(space.spec, baseline.variant)
    assert own is not None
    sibling = Space(spec, shape=space.shape, arch=space.arch, device=space.device)
    kept: Config = {}
    notes = []
    dropped = []
    for name, value in space.variant_values(config).items():
        if name in own.values:
            continue
        trial = {**kept, name: value}
        try:
            if value not in spec.parameter(name).values:
                raise ConfigError(f"{name}={value} is not one of the variant's values")
            complete_config(sibling, trial)
        except ConfigError:
            dropped.append((name, value))
            continue
        kept = trial
    chosen = complete_config(sibling, kept).config
    shown = ", ".join(f"{k}={v}" for k, v in own.values.items())
    for name, value in dropped:
        notes.append(f"{name}={value} is invalid with {shown}: {name}={chosen[name]}")
    return sibling, chosen, tuple(notes)


def variant_inputs(
    target: str,
    inputs: Mapping[str, np.ndarray],
    scalars: Mapping[str, float | int],
    shape: Mapping[str, int],
    config: Mapping[str, Value],
) -> dict[str, np.ndarray]:
    """The variant's inputs as ``target`` makes them from the problem's (in the user-code
    process, like a reference).

    Raises:
        BadReferenceError: the function is missing, raised, exited, hung or returned
            something other than a dict of arrays.
    """
    return in_user_process(
        _inputs_here,
        target,
        dict(inputs),
        dict(scalars),
        dict(shape),
        dict(config),
        what=f"variant inputs {target!r}",
        error=ReferenceFailedError,
        timeout_s=call_timeout(),
    )


def _inputs_here(
    target: str,
    inputs: dict[str, np.ndarray],
    scalars: dict[str, float | int],
    shape: dict[str, int],
    config: dict[str, Value],
) -> dict[str, np.ndarray]:
    what = f"variant inputs {target}"
    fn = load_function(target, "variant inputs")
    call = ReferenceCall(inputs=inputs, scalars=scalars, shape=shape, config=config)
    result = call_user_function(fn, call, what, ReferenceFailedError)
    if not isinstance(result, Mapping) or not all(
        isinstance(k, str) and isinstance(a, np.ndarray) for k, a in result.items()
    ):
        raise ReferenceFailedError(f"{what} returned {type(result).__name__}; expected a dict "
                                   "of input arrays by name")  # fmt: skip
    return dict(result)


def default_plan(space: Space, config: Config, baseline: VariantBaseline) -> VariantPlan:
    """The variant at its default config (with the problem values it keeps; the valid config
    nearest it where the default is invalid there): what runs where no tuned study of it is
    known.

    Raises:
        KeyError: the space file has no such variant.
        ConfigError: no valid config of the variant at this shape.
    """
    sibling, chosen, notes = variant_problem(space, config, baseline)
    return VariantPlan(
        baseline.name,
        sibling,
        chosen,
        f"default (no tuned study of {baseline.variant} at this shape)",
        baseline.inputs,
        notes,
    )
