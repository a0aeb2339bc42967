"""Your own baseline: a Python function that ``workbench compare`` times and verifies like a
library's (``baselines: [{python: baseline.py:torch_rmsnorm}]`` in the space file).

The function takes what it needs by name, as a plain reference does: the inputs (CuPy arrays,
already on the GPU), named scalar arguments, shape dimensions and parameters of the config; it
returns the output (an array, or a dict of arrays by output name) as CuPy arrays or anything
CuPy takes without a copy to the host (a PyTorch tensor on the GPU: ``torch.as_tensor(x,
device="cuda")`` reads a CuPy array in place). It runs on the timing stream: CuPy's current
stream, and PyTorch's once the function has imported it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported
from workbench.compare.gemm_baselines import cupy_on_stream, torch_on_stream
from workbench.compare.problems import Family, Problem
from workbench.runners.reference import BadReferenceError, bind_by_name, load_function
from workbench.spaces.schema import Baseline as BaselineKind


class PythonBaseline(Baseline):
    """A user's function as a baseline (one subclass per function: :func:`user_baseline`)."""

    kind = BaselineKind.PYTHON
    families = frozenset(Family)
    any_problem = True
    modules = ("cupy",)
    target: str = ""

    def prepare(self, problem: Problem, inputs: Mapping[str, np.ndarray], stream: int) -> Any:
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
        self.result = self.fn(**self.kwargs)
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
