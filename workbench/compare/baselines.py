"""Library baselines: what each one computes, where it applies, and which to run for a problem.

A :class:`Baseline` declares the families, input dtypes and compute capabilities it supports
and the Python modules it needs; :meth:`Baseline.limits` adds the shape limits its library
documents. Selection (:func:`select`) runs on any machine: it says which baselines a problem
gets and, for every one left out, which and why. Running one (:meth:`Baseline.prepare`) happens
in the baseline worker, where the library is imported; a library that refuses the problem
there raises :class:`BaselineUnsupported`, which is reported the same way.
"""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from workbench.compare.problems import BaselineProblem, Family
from workbench.errors import WorkbenchError
from workbench.spaces.model import UserBaseline, VariantBaseline
from workbench.spaces.schema import BaselineKind


class BaselineUnsupported(WorkbenchError):
    """The library is absent, or refuses this problem on this GPU (the message says why)."""

    recoverable = True  #: read by the worker loop: the worker stays usable


class Prepared(Protocol):
    """A baseline ready to run on one problem: inputs on the device, outputs allocated. One
    that compiled something first says so in attributes ``compile_s`` (seconds) and
    ``compile_note`` (how: JIT, loaded from a cache), which the worker passes on."""

    def poison(self) -> None:
        """Fill the outputs with a pattern no correct result has (before the checked run)."""

    def launch(self) -> None:
        """Enqueue one call of the library on the timing stream."""

    def outputs(self) -> dict[str, np.ndarray]:
        """The outputs of the last call, on the host (after a synchronisation)."""


@dataclass(frozen=True)
class BaselineVariant:
    """One configuration of a library call that offers several (a CUTLASS operator: tile,
    cluster): compare verifies and times each, and the fastest correct one is the baseline's
    row."""

    name: str  #: unique among the baseline's variants (the library's own name for it)
    label: str  #: short, for tables (``tile 128x256x64, cluster 2x1x1``)
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifiedOn:
    """What a baseline that computes on other inputs than the kernel's (attention_decode's torch
    SDPA: the int8/fp8 cache rounded to fp16) is verified against: the reference of the space's
    variant ``variant`` on the problem's inputs as ``inputs`` makes them for it, under that
    variant's tolerance, exactly as the variant's own row is verified
    (:mod:`workbench.compare.variant_baselines`). The problem's reference is not its truth: the
    rounding alone can move the outputs by more than the problem's tolerance."""

    variant: str  #: a variant of the space file (``attention_decode_fp16``)
    inputs: str  #: ``module:function`` making its inputs from the problem's

    @property
    def note(self) -> str:
        """What the row was verified against, for its title."""
        return f"verified against {self.variant}'s reference on the inputs made by {self.inputs}"


class Baseline(ABC):
    """One library routine that solves the same problem as a kernel.

    Class attributes:
        name: registry key and table column (``cublas``).
        kind: the space-file baseline name it answers to (``baselines: [cublas]``).
        title: what runs, for the table (``cuBLAS cublasGemmEx ...``).
        families: the problems it solves.
        dtypes: accepted input dtypes (space dtype names); empty: any.
        min_cc: the lowest compute capability it runs on (0: any).
        modules: Python modules it imports in the worker.
        distributions: pip packages it needs, found by their metadata (a module name can be
            ambiguous, and finding a submodule imports its parents).
        extra: the workbench extra that installs what it needs (for the skip message).
        has_variants: it offers several configurations per problem (:meth:`variants`).
    """

    name: ClassVar[str]
    kind: ClassVar[BaselineKind]
    title: ClassVar[str]
    label: ClassVar[str] = ""  #: short name for tables and headlines (``cuBLAS``); "": the name
    families: ClassVar[frozenset[Family]]
    dtypes: ClassVar[frozenset[str]] = frozenset()
    min_cc: ClassVar[int] = 0
    modules: ClassVar[tuple[str, ...]] = ()
    distributions: ClassVar[tuple[str, ...]] = ()
    extra: ClassVar[str] = ""
    has_variants: ClassVar[bool] = False
    #: it solves whatever the space's reference computes (the user's own baselines)
    any_problem: ClassVar[bool] = False

    def limits(self, problem: BaselineProblem) -> str | None:
        """Why the library's documented limits exclude ``problem`` (None: they do not)."""
        return None

    def verified_on(self, problem: BaselineProblem) -> VerifiedOn | None:
        """The variant and inputs whose reference this baseline's outputs are checked against
        where it computes on other inputs than the kernel's (None: the space's reference on the
        problem's inputs, as the kernel is)."""
        return None

    def missing_module(self) -> str | None:
        """The first needed module that is not installed here (found without importing it)."""
        for module in self.modules:
            try:
                found = importlib.util.find_spec(module)
            except (ImportError, ValueError):
                found = None
            if found is None:
                return module
        return None

    def missing(self) -> list[str]:
        """What this baseline needs that is not installed here, in the words of the skip
        message: each absent module, then each absent pip package."""
        out = []
        module = self.missing_module()
        if module is not None:
            out.append(f"no Python module {module!r}")
        for dist in self.distributions:
            try:
                importlib.metadata.distribution(dist)
            except importlib.metadata.PackageNotFoundError:
                out.append(dist)
        return out

    def check(self, problem: BaselineProblem, cc: int | None) -> str | None:
        """Why this baseline cannot run ``problem`` on a GPU of compute capability ``cc``
        (None: it can, as far as can be told before running it)."""
        if problem.family not in self.families and not self.any_problem:
            fam = problem.family.value if problem.family else "none"
            supported = ", ".join(sorted(f.value for f in self.families))
            return f"solves {supported}, not {fam}"
        if self.dtypes and not problem.input_dtypes & self.dtypes:
            given = ", ".join(sorted(problem.input_dtypes))
            return f"takes {', '.join(sorted(self.dtypes))} inputs, not {given}"
        if cc is not None and cc < self.min_cc:
            return f"needs compute capability {self.min_cc / 10:.1f}+, the GPU has {cc / 10:.1f}"
        missing = self.missing()
        if missing:
            hint = f" (pip install 'workbench[{self.extra}]')" if self.extra else ""
            return f"not installed: {', '.join(missing)}{hint}"
        return self.limits(problem)

    @abstractmethod
    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Prepared:
        """Upload ``inputs`` and get ready to run on CUDA stream ``stream`` (a CUstream
        address). Runs in the baseline worker, with the device's primary context current.

        Raises:
            BaselineUnsupported: the library is absent or refuses the problem.
        """

    def variants(self, problem: BaselineProblem, cc: int) -> tuple[BaselineVariant, ...]:
        """The configurations to time for ``problem`` on a GPU of compute capability ``cc``
        (worker side, for a baseline that :attr:`has_variants`).

        Raises:
            BaselineUnsupported: the library is absent or has none for the problem.
        """
        raise BaselineUnsupported(f"{self.name} offers no variants")

    def prepare_variant(
        self,
        problem: BaselineProblem,
        inputs: Mapping[str, np.ndarray],
        stream: int,
        *,
        variant: str,
        cc: int,
        cache_dir: str | None,
    ) -> Prepared:
        """:meth:`prepare` for one of :meth:`variants` (by name); ``cache_dir``: where the
        library may keep what it compiles between runs (None: nowhere).

        Raises:
            BaselineUnsupported: the library is absent or refuses the problem.
        """
        raise BaselineUnsupported(f"{self.name} offers no variants")

    def version(self) -> str:
        """The library and version that runs (asked in the worker)."""
        return self.title


#: name -> baseline, filled by :func:`register`.
REGISTRY: dict[str, Baseline] = {}


def register(cls: type[Baseline]) -> type[Baseline]:
    """Class decorator: add a baseline to :data:`REGISTRY`."""
    REGISTRY[cls.name] = cls()
    return cls


def contender_label(name: str) -> str:
    """The short name of a stored contender (``cublas`` -> ``cuBLAS``); its name when no
    registered baseline has a label for it (the tuned config, a kind with no member)."""
    _load_all()
    baseline = REGISTRY.get(name)
    return (baseline.label or name) if baseline is not None else name


def missing_here(name: str) -> list[str]:
    """What the registered baseline ``name`` needs that is not installed here (none for a name
    no baseline has)."""
    _load_all()
    baseline = REGISTRY.get(name)
    return baseline.missing() if baseline is not None else []


def baseline_for(name: str, problem: BaselineProblem) -> Baseline:
    """The registered baseline ``name``, or the space's own baseline of that name.

    Raises:
        KeyError: no baseline has that name.
    """
    _load_all()
    if name in REGISTRY:
        return REGISTRY[name]
    if name in problem.variant_baselines:
        from workbench.compare.variant_baselines import variant_baseline

        return variant_baseline(*problem.variant_baselines[name])
    from workbench.compare.user_baselines import user_baseline

    return user_baseline(name, problem.user_baselines[name])


def _candidates(problem: BaselineProblem) -> list[Baseline]:
    """Every registered baseline, then the space's own, then its other variants."""
    own = [*problem.user_baselines, *problem.variant_baselines]
    return [*REGISTRY.values(), *(baseline_for(n, problem) for n in own)]


def _load_all() -> None:
    # the implementations register themselves on import
    from workbench.compare import (  # noqa: F401
        attention_baselines,
        cutlass_baseline,
        gemm_baselines,
        memory_baselines,
        w4a16_baselines,
    )


class Choice(enum.Enum):
    RUN = "run"
    SKIP = "skip"


@dataclass(frozen=True)
class BaselineSelection:
    """One baseline for one problem: run it, or skip it and why."""

    name: str
    kind: str
    title: str
    choice: Choice
    reason: str = ""


def requested_kinds(
    declared: Iterable[BaselineKind | UserBaseline | VariantBaseline],
    problem: BaselineProblem,
    only: Iterable[str] = (),
) -> tuple[list[str], list[str]]:
    """The baseline kinds to consider for ``problem``, and notes on how they were chosen.

    ``only`` (command line) replaces the space's list; the copy baseline joins any problem of
    the ``stream`` family, which every bandwidth-bound kernel can be compared with.
    """
    notes: list[str] = []
    chosen = [str(k) for k in only]
    if not chosen:
        chosen = [k.value if isinstance(k, BaselineKind) else k.name for k in declared]
        if problem.family is Family.STREAM and BaselineKind.COPY.value not in chosen:
            chosen.append(BaselineKind.COPY.value)
            notes.append("copy added: the kernel is judged by its bandwidth")
    return list(dict.fromkeys(chosen)), notes


def select(
    declared: Iterable[BaselineKind | UserBaseline | VariantBaseline],
    problem: BaselineProblem,
    cc: int | None,
    *,
    only: Iterable[str] = (),
    check: Callable[[Baseline, BaselineProblem, int | None], str | None] | None = None,
) -> tuple[list[BaselineSelection], list[str]]:
    """Which baselines run for ``problem`` on a GPU of compute capability ``cc``.

    Args:
        declared: the space's ``baselines`` list.
        problem: the problem (family, shape, dtypes).
        cc: the GPU's compute capability (None: unknown, no GPU).
        only: baseline kinds or names named on the command line (replace ``declared``).
        check: replaces :meth:`Baseline.check` (tests: a machine with other libraries).

    Returns:
        One selection per baseline considered, in the order asked, and notes.

    Raises:
        ConfigError: ``only`` names no known baseline.
    """
    from workbench.errors import ConfigError

    _load_all()
    kinds, notes = requested_kinds(declared, problem, only)
    candidates = _candidates(problem)
    known = {b.kind.value for b in candidates} | {b.name for b in candidates}
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise ConfigError(
            f"unknown baseline(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    check = check or (lambda b, p, c: b.check(p, c))
    out: list[BaselineSelection] = []
    for kind in kinds:
        members = [b for b in candidates if kind in (b.kind.value, b.name)]
        fitting = [b for b in members if problem.family in b.families or b.any_problem]
        if not fitting:
            fam = problem.family.value if problem.family else "none"
            why = problem.why_none or f"no {kind} baseline for the {fam} family"
            out.append(BaselineSelection(kind, kind, kind, Choice.SKIP, why))
            continue
        for b in fitting:
            reason = check(b, problem, cc)
            choice = Choice.RUN if reason is None else Choice.SKIP
            out.append(BaselineSelection(b.name, b.kind.value, b.title, choice, reason or ""))
    return out, notes
