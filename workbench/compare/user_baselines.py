"""Your own baseline: a Python function that ``workbench compare`` times and verifies like a
library's (``baselines: [{python: baseline.py:torch_rmsnorm}]`` in the space file).

The function takes what it needs by name, as a plain reference does: the inputs (CuPy arrays,
already on the GPU), named scalar arguments, shape dimensions and parameters of the config; it
returns the output (an array, or a dict of arrays by output name) as CuPy arrays or anything
CuPy takes without a copy to the host (a PyTorch tensor on the GPU: ``torch.as_tensor(x,
device="cuda")`` reads a CuPy array in place). It runs on the timing stream: CuPy's current
stream, and PyTorch's once the function has imported it.

It is checked without a GPU (:func:`check_user_baselines`, from ``workbench space`` and before
``compare``) in the user-code process, as a reference is: its module, file and function must
exist and its parameters must be names it can be given; a package its module imports that is
not installed here (PyTorch, CuPy) is not an error there, but a reason compare skips it that
names every such package.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
import sys
import textwrap
from collections.abc import Mapping
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported
from workbench.compare.gemm_baselines import cupy_on_stream, torch_on_stream
from workbench.compare.problems import BaselineProblem, Family
from workbench.runners.reference import (
    BadReferenceError,
    ReferenceNotFoundError,
    bind_by_name,
    call_names,
    load_function,
)
from workbench.spaces.model import SpaceSpec, UserBaseline
from workbench.spaces.schema import BaselineKind
from workbench.user_code import guarded, in_user_process, load_timeout


class PythonBaseline(Baseline):
    """A user's function as a baseline (one subclass per function: :func:`user_baseline`)."""

    kind = BaselineKind.PYTHON
    families = frozenset(Family)
    any_problem = True
    modules = ("cupy",)
    target: str = ""

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        cp = cupy_on_stream(stream)
        try:
            fn = load_function(self.target, what="baseline")
            on_gpu = {n: cp.asarray(np.ascontiguousarray(a)) for n, a in inputs.items()}
            kwargs = bind_by_name(
                fn, f"baseline {self.target}", on_gpu, problem.scalars, problem.shape,
                problem.config,
            )  # fmt: skip
        except BadReferenceError as exc:
            raise BaselineUnsupported(str(exc)) from exc
        return _PythonRun(cp, fn, kwargs, tuple(problem.outputs), stream)

    def missing(self) -> list[str]:
        """CuPy where it is absent, and each package the function's module imports that is
        not installed here (found by loading it in the user-code process)."""
        out = super().missing()
        for module in missing_imports(self.target):
            named = f"no Python module {module!r}"
            if named not in out:
                out.append(named)
        return out

    def version(self) -> str:
        return f"{self.target} (your function)"


def user_baseline(name: str, target: str) -> Baseline:
    """The baseline ``name`` (``python:FUNCTION``) that calls ``target``."""
    function = name.removeprefix("python:")
    cls = type(
        f"PythonBaseline_{function}",
        (PythonBaseline,),
        {"name": name, "target": target, "title": f"{function} (your baseline)", "label": function},
    )
    return cls()


class _PythonRun:
    def __init__(
        self, cp: Any, fn: Any, kwargs: dict[str, object], outputs: tuple[str, ...], stream: int
    ) -> None:
        self.cp, self.fn, self.kwargs, self.names, self.stream = cp, fn, kwargs, outputs, stream
        self.result: Any = None
        self.torch_stream_set = False

    def poison(self) -> None:
        self.result = None  # the function allocates its result on every call

    def launch(self) -> None:
        # (an exit in the function is this baseline's failure, not the worker's end)
        what = getattr(self.fn, "__qualname__", "the function")
        self.result = guarded(what, BaselineUnsupported, lambda: self.fn(**self.kwargs))
        if not self.torch_stream_set and "torch" in sys.modules:  # it uses PyTorch: same stream
            torch_on_stream(self.stream)
            self.torch_stream_set = True

    def outputs(self) -> dict[str, np.ndarray]:
        if self.result is None:
            return {}
        result = self.result
        if not isinstance(result, Mapping):
            if len(self.names) != 1:
                raise BaselineUnsupported(
                    f"returned one array; expected a dict of outputs ({', '.join(self.names)})"
                )
            result = {self.names[0]: result}
        return {str(k): self.cp.asnumpy(self.cp.asarray(v)) for k, v in result.items()}


def check_user_baselines(spec: SpaceSpec) -> dict[str, tuple[str, ...]]:
    """Find each of the space's own baselines and check its parameters, without a GPU.

    Returns:
        Each baseline's name (``python:FUNCTION``) and the packages its module imports that
        are not installed here (compare skips it on this machine and says so).

    Raises:
        ReferenceNotFoundError: a missing module, file or function, a parameter that nothing
            provides, or loading the module exited, crashed or hung.
    """
    names = call_names(spec)
    return {
        b.name: in_user_process(
            _check_here,
            b.target,
            names,
            what=f"baseline {b.target!r}",
            error=ReferenceNotFoundError,
            timeout_s=load_timeout(),
        )
        for b in spec.baselines
        if isinstance(b, UserBaseline)
    }


@functools.lru_cache(maxsize=64)
def missing_imports(target: str) -> tuple[str, ...]:
    """The packages ``target``'s module imports that are not installed here (none where it
    cannot be loaded for another reason: :func:`check_user_baselines` says why)."""
    try:
        return in_user_process(
            _check_here,
            target,
            None,
            what=f"baseline {target!r}",
            error=ReferenceNotFoundError,
            timeout_s=load_timeout(),
        )
    except BadReferenceError:
        return ()


def _check_here(target: str, names: tuple[tuple[str, ...], ...] | None) -> tuple[str, ...]:
    """In the user-code process: load the function (and bind its parameters to ``names``);
    the missing packages when its module's import stops at one."""
    try:
        fn = load_function(target, what="baseline")
    except ReferenceNotFoundError as exc:
        package = _missing_package(exc, target)
        if package is None:
            raise
        return (package,)
    if names is not None:
        bind_by_name(fn, f"baseline {target}", *(dict.fromkeys(n) for n in names))
    return tuple(p for p in _imported_in(fn) if not _installed(p))


def _imported_in(fn: Any) -> list[str]:
    """The top-level packages ``fn``'s own body imports (``import torch`` inside it: the
    module loads without them, the call does not)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):  # (no source to read: nothing to tell)
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name.partition(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module.partition(".")[0])
    return list(dict.fromkeys(found))


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _missing_package(exc: ReferenceNotFoundError, target: str) -> str | None:
    """The top-level package whose absence stopped loading ``target``'s module (None: the
    module itself is missing, or it failed for another reason)."""
    cause = exc.__cause__
    if not isinstance(cause, ModuleNotFoundError) or not cause.name:
        return None
    where = target.rpartition(":")[0]
    if not where.endswith(".py") and (where == cause.name or where.startswith(cause.name + ".")):
        return None  # the baseline's own module: an error of the space file
    package = cause.name.partition(".")[0]
    return None if _installed(package) else package
