"""The CPU reference of a space: find it, call it, check what it returns, and cache the result.

A reference is ``f(call: ReferenceCall) -> dict[str, numpy.ndarray]`` named by
``Reference.target``: ``package.module:function`` (importable) or ``/abs/path/file.py:function``.
It must return every output that is not ``scratch``, with the output's shape.

Expected outputs are cached per (shape, seed) and, because a reference may read the config
(an epilogue choice, an output dtype), per the config values it actually read: the config
handed to the reference records the keys it looks at, and a cached result is reused for any
config that agrees on those keys and on the scalar arguments.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError
from workbench.references import ReferenceCall
from workbench.runners.buffers import OutputBuffer
from workbench.spaces.model import Value

ReferenceFn = Callable[[ReferenceCall], Mapping[str, np.ndarray]]


class BadReferenceError(WorkbenchError):
    """Root of the reference errors (the builtin ``ReferenceError`` name is taken)."""


class ReferenceNotFoundError(BadReferenceError):
    """The reference's module, file or function does not exist (or is not callable)."""


class ReferenceFailedError(BadReferenceError):
    """The reference raised."""


class ReferenceOutputError(BadReferenceError):
    """The reference returned something other than every compared output with its shape."""


def resolve_reference(target: str) -> ReferenceFn:
    """The function ``target`` names.

    Raises:
        ReferenceNotFoundError: malformed target, missing module or file, missing or
            non-callable function.
    """
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise ReferenceNotFoundError(
            f"reference {target!r}: expected `package.module:function` or `/path/file.py:function`"
        )
    module = _load_file(where, target) if where.endswith(".py") else _import(where, target)
    fn = getattr(module, name, None)
    if fn is None:
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ReferenceNotFoundError(
            f"reference {target!r}: {where} has no function {name!r}"
            + (f" (it has: {', '.join(public)})" if public else "")
        )
    if not callable(fn):
        raise ReferenceNotFoundError(f"reference {target!r}: {name} is not a function")
    return fn  # type: ignore[no-any-return]


def _import(module_name: str, target: str) -> object:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        hint = (
            " (a module of your project is importable only from PYTHONPATH; or name its file: "
            "reference: {file: path/to/module.py, function: ...})"
            if exc.name and module_name.startswith(exc.name)
            else ""
        )
        raise ReferenceNotFoundError(
            f"reference {target!r}: no module named {exc.name!r}{hint}"
        ) from exc
    except Exception as exc:  # the module exists but fails to import: say how
        raise ReferenceNotFoundError(
            f"reference {target!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _load_file(path_text: str, target: str) -> object:
    path = Path(path_text)
    if not path.is_absolute() or not path.is_file():
        raise ReferenceNotFoundError(f"reference {target!r}: no file {path_text}")
    module_name = "workbench_reference_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ReferenceNotFoundError(f"reference {target!r}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise ReferenceNotFoundError(
            f"reference {target!r}: running {path} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


class RecordingConfig(Mapping[str, Value]):
    """A read-only config that remembers which keys were read (iteration reads them all)."""

    def __init__(self, config: Mapping[str, Value]) -> None:
        self._config = dict(config)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Value:
        self.read.add(key)
        return self._config[key]

    def __iter__(self) -> Iterator[str]:
        self.read.update(self._config)
        return iter(self._config)

    def __len__(self) -> int:
        return len(self._config)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return key in self._config


def run_reference(
    fn: ReferenceFn,
    call: ReferenceCall,
    outputs: tuple[OutputBuffer, ...],
    target: str = "reference",
) -> dict[str, np.ndarray]:
    """Call ``fn`` and check it returned every compared output with the right shape.

    Returns:
        The expected arrays of the compared outputs, by name.

    Raises:
        ReferenceFailedError: the reference raised.
        ReferenceOutputError: not a mapping, a missing or unknown output, a wrong shape, or a
            non-numeric array.
    """
    try:
        result = fn(call)
    except Exception as exc:
        raise ReferenceFailedError(f"{target} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, Mapping):
        raise ReferenceOutputError(
            f"{target} returned {type(result).__name__}; expected a dict of output arrays"
        )
    compared = {o.name: o for o in outputs if o.compared}
    missing = [name for name in compared if name not in result]
    if missing:
        raise ReferenceOutputError(f"{target} returned no {', '.join(missing)}")
    unknown = sorted(set(result) - compared.keys())
    if unknown:
        raise ReferenceOutputError(
            f"{target} returned {', '.join(map(str, unknown))}, which are not compared outputs "
            f"(compared: {', '.join(compared)})"
        )
    expected: dict[str, np.ndarray] = {}
    for name, out in compared.items():
        arr = np.asarray(result[name])
        if arr.shape != out.shape:
            raise ReferenceOutputError(
                f"{target}: output {name} has shape {arr.shape}; expected {out.shape}"
            )
        if arr.dtype.kind not in "biuf" and arr.dtype != out.np_dtype:
            raise ReferenceOutputError(f"{target}: output {name} has non-numeric dtype {arr.dtype}")
        expected[name] = arr
    return expected


class ExpectedOutputs:
    """Reference results for one problem (inputs fixed by shape and seed), cached.

    Args:
        target: the reference's ``Reference.target``.
        inputs: the input arrays (the same for every config).
        shape: the problem shape.
    """

    def __init__(self, target: str, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int]):
        self.target = target
        self.fn = resolve_reference(target)
        self.inputs = inputs
        self.shape = dict(shape)
        self._entries: list[
            tuple[dict[str, Value], dict[str, int | float], dict[str, np.ndarray]]
        ] = []
        self.calls = 0

    def get(
        self,
        config: Mapping[str, Value],
        scalars: Mapping[str, int | float],
        outputs: tuple[OutputBuffer, ...],
    ) -> dict[str, np.ndarray]:
        """The expected outputs for ``config`` (computed once per distinct relevant config).

        Raises:
            ReferenceFailedError, ReferenceOutputError: as :func:`run_reference`.
        """
        for read, known_scalars, expected in self._entries:
            if (
                known_scalars == scalars
                and all(k in config and config[k] == v for k, v in read.items())
                and _fits(expected, outputs)
            ):
                return expected
        recording = RecordingConfig(config)
        call = ReferenceCall(
            inputs=self.inputs, scalars=dict(scalars), shape=self.shape, config=recording
        )
        self.calls += 1
        expected = run_reference(self.fn, call, outputs, f"reference {self.target}")
        read = {k: config[k] for k in recording.read if k in config}
        self._entries.append((read, dict(scalars), expected))
        return expected


def _fits(expected: Mapping[str, np.ndarray], outputs: tuple[OutputBuffer, ...]) -> bool:
    """A cached result also needs the same compared outputs and shapes (they may vary)."""
    compared = {o.name: o.shape for o in outputs if o.compared}
    return compared.keys() == expected.keys() and all(
        expected[k].shape == s for k, s in compared.items()
    )
