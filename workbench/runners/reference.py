"""The CPU reference of a space: find it, call it, check what it returns, and cache the result.

A reference is named by ``Reference.target``: ``package.module:function`` (importable) or
``/abs/path/file.py:function``, and comes in two forms:

- plain: ``f(x, w, ...)`` takes what it needs by name (input arrays as NumPy arrays, scalar
  arguments, shape dimensions, parameters of the config) and returns the output array (when
  one output is compared) or a dict of output arrays by name;
- call: ``f(call: ReferenceCall)`` (one parameter named ``call`` or annotated ``ReferenceCall``)
  gets everything in one object and returns the dict.

It must return every output that is not ``scratch``, with the output's shape, and finite values
unless the space declares the output ``nonfinite: allowed``: a float output's poison is a NaN,
so a NaN expected there would otherwise say nothing about whether the kernel wrote it.

The reference runs in the user-code process (:mod:`workbench.user_code`), never in the
command's own: a module that calls ``sys.exit``, crashes or hangs costs one located error.

Expected outputs are cached per (shape, seed) and, because a reference may read the config
(an epilogue choice, an output dtype), per the config values it actually read: the config
handed to the reference records the keys it looks at, and a cached result is reused for any
config that agrees on those keys and on the scalar arguments.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import math
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError
from workbench.references import ReferenceCall
from workbench.runners.buffers import (
    OutputBuffer,
    input_shapes,
    input_specs,
    kernel_arguments,
    make_inputs,
    named_scalars,
    numpy_dtype,
    output_buffers,
)
from workbench.spaces.model import ScalarArg, SpaceSpec, Value
from workbench.spaces.schema import DType
from workbench.spaces.space import Space
from workbench.units import si
from workbench.user_code import call_timeout, guarded, in_user_process, load_timeout

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
    """The function ``target`` names, as the call form (a plain function is wrapped).

    Raises:
        ReferenceNotFoundError: malformed target, missing module or file, missing or
            non-callable function.
    """
    fn = load_function(target)
    return fn if takes_call(fn) else _PlainReference(fn, target)  # type: ignore[return-value]


def load_function(target: str, what: str = "reference") -> Callable[..., object]:
    """The function ``target`` names: ``package.module:function`` or ``/path/file.py:function``
    (a reference, or a user baseline: ``what`` says which in the errors).

    Raises:
        ReferenceNotFoundError: malformed target, missing module or file, missing or
            non-callable function.
    """
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise ReferenceNotFoundError(
            f"{what} {target!r}: expected `package.module:function` or `/path/file.py:function`"
        )
    if where.endswith(".py"):
        module = _load_file(where, target, what)
    else:
        module = _import(where, target, what)
    fn = getattr(module, name, None)
    if fn is None:
        public = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ReferenceNotFoundError(
            f"{what} {target!r}: {where} has no function {name!r}"
            + (f" (it has: {', '.join(public)})" if public else "")
        )
    if not callable(fn):
        raise ReferenceNotFoundError(f"{what} {target!r}: {name} is not a function")
    return fn


#: how a reference is called, for the errors that need to say it
CALLING_CONVENTION = (
    "a reference takes the inputs (NumPy arrays), scalar arguments, shape dimensions or "
    "parameters it needs by name and returns the output array or a dict of outputs by name; "
    "or takes one `call: ReferenceCall` and returns the dict"
)


def takes_call(fn: Callable[..., object]) -> bool:
    """Whether ``fn`` is the call form: one parameter named ``call`` or typed ``ReferenceCall``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: call it the rich way
        return True
    if len(params) != 1:
        return False
    p = params[0]
    return p.name == "call" or "ReferenceCall" in str(p.annotation)


def bind_by_name(
    fn: Callable[..., object], target: str, *named: Mapping[str, object]
) -> dict[str, object]:
    """The keyword arguments of a plain function, each parameter taken by its name from the
    first of ``named`` that has it (a parameter with a default may be left out).

    Raises:
        ReferenceNotFoundError: a parameter without a default that none of them provides.
    """
    kwargs: dict[str, object] = {}
    for p in inspect.signature(fn).parameters.values():
        source = next((m for m in named if p.name in m), None)
        if source is not None:  # (a RecordingConfig notes the read: the cache keys on it)
            kwargs[p.name] = source[p.name]
        elif p.default is inspect.Parameter.empty and p.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            known = [n for m in named for n in m]
            raise ReferenceNotFoundError(
                f"{target!r}: parameter {p.name!r} is none of the names it can take "
                f"({', '.join(known)}); {CALLING_CONVENTION}"
            )
    return kwargs


class _PlainReference:
    """A plain reference seen as the call form: its parameters filled by name from the call."""

    def __init__(self, fn: Callable[..., object], target: str) -> None:
        self.fn = fn
        self.target = target

    def __call__(self, call: ReferenceCall) -> Mapping[str, np.ndarray]:
        kwargs = bind_by_name(
            self.fn, f"reference {self.target}", call.inputs, call.scalars, call.shape, call.config
        )
        return self.fn(**kwargs)  # type: ignore[return-value]  # an array is checked after


def _import(module_name: str, target: str, what: str) -> object:
    try:
        return guarded(
            f"{what} {target!r}: importing {module_name}",
            ReferenceNotFoundError,
            importlib.import_module,
            module_name,
        )
    except ModuleNotFoundError as exc:
        hint = (
            " (a module of your project is importable only from PYTHONPATH; or name its file: "
            "{python: path/to/module.py:function})"
            if exc.name and module_name.startswith(exc.name)
            else ""
        )
        raise ReferenceNotFoundError(
            f"{what} {target!r}: no module named {exc.name!r}{hint}"
        ) from exc
    except ReferenceNotFoundError:
        raise
    except Exception as exc:  # the module exists but fails to import: say how
        raise ReferenceNotFoundError(
            f"{what} {target!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _load_file(path_text: str, target: str, what: str) -> object:
    path = Path(path_text)
    if not path.is_absolute() or not path.is_file():
        raise ReferenceNotFoundError(f"{what} {target!r}: no file {path_text}")
    module_name = "workbench_reference_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ReferenceNotFoundError(f"{what} {target!r}: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # an exit at import too: it must not end the command
        del sys.modules[module_name]
        where = _line_in(exc, path)
        did = (
            f"called sys.exit({exc.code!r})"
            if isinstance(exc, SystemExit)
            else f"failed: {type(exc).__name__}: {exc}"
        )
        error = ReferenceNotFoundError(f"{what} {target!r}: running {where} {did}")
        if isinstance(exc, Exception):
            raise error from exc  # (a missing package is told apart by its cause)
        raise error from None
    return module


def _line_in(exc: BaseException, path: Path) -> str:
    """``path:line`` of the deepest frame of ``exc``'s traceback in ``path`` (else ``path``)."""
    frames = traceback.extract_tb(exc.__traceback__)
    line = next((f.lineno for f in reversed(frames) if Path(f.filename) == path), None)
    return f"{path}:{line}" if line else str(path)


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


def call_user_function(
    fn: Callable[..., object], call: ReferenceCall, what: str, error: type[BadReferenceError]
) -> object:
    """``fn`` called in either form a space file's functions take (``fn(call)``, or its
    parameters by name from the call's inputs, scalars, shape and config), in the user-code
    process.

    Raises:
        BadReferenceError: a parameter none of them provides, or the call exited or hung
            (:func:`~workbench.user_code.guarded`); ``error``: anything else it raised.
    """
    try:
        if takes_call(fn):
            return guarded(what, error, fn, call)
        kwargs = bind_by_name(fn, what, call.inputs, call.scalars, call.shape, call.config)
        return guarded(what, error, lambda: fn(**kwargs))
    except BadReferenceError:
        raise
    except Exception as exc:
        raise error(f"{what} raised {type(exc).__name__}: {exc}") from exc


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
        ReferenceOutputError: not a mapping, a missing or unknown output, a wrong shape, a
            non-numeric array, or NaN or inf in an output not declared ``nonfinite: allowed``.
    """
    try:
        result: object = guarded(target, ReferenceFailedError, fn, call)
    except BadReferenceError:
        raise
    except Exception as exc:
        raise ReferenceFailedError(f"{target} raised {type(exc).__name__}: {exc}") from exc
    compared = {o.name: o for o in outputs if o.compared}
    if isinstance(result, np.ndarray) and len(compared) == 1:
        result = {next(iter(compared)): result}  # the plain form's one output
    if not isinstance(result, Mapping):
        raise ReferenceOutputError(
            f"{target} returned {type(result).__name__}; expected "
            + ("the output array or " if len(compared) == 1 else "")
            + f"a dict of output arrays by name ({', '.join(compared)})"
        )
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
        if not out.nonfinite_allowed:
            _require_finite(arr, f"{target}: output {name}")
        expected[name] = arr
    return expected


def _require_finite(arr: np.ndarray, what: str) -> None:
    """Refuse NaN and inf in a reference's output (integers are always finite).

    Raises:
        ReferenceOutputError: naming how many and the first one's index and value.
    """
    if arr.dtype.kind in "biu":
        return
    bad = ~np.isfinite(arr)  # (ml_dtypes' bfloat16 and fp8 have their own isfinite)
    count = int(np.count_nonzero(bad))
    if not count:
        return
    flat = int(np.argmax(bad))
    index = tuple(int(i) for i in np.unravel_index(flat, arr.shape))
    where = str(index[0]) if len(index) == 1 else str(index)
    raise ReferenceOutputError(
        f"{what} holds {count} NaN/inf of {arr.size} elements (first at index {where}: "
        f"{float(arr.reshape(-1)[flat])}); a reference returns finite values unless the space "
        "declares the output `nonfinite: allowed`"
    )


class ExpectedOutputs:
    """Reference results for one problem (inputs fixed by shape and seed), cached.

    The reference runs in the user-code process, where it is loaded here.

    Args:
        target: the reference's ``Reference.target``.
        inputs: the input arrays (the same for every config).
        shape: the problem shape.

    Raises:
        ReferenceNotFoundError: as :func:`resolve_reference`, or loading it exited, crashed
            or hung.
    """

    def __init__(self, target: str, inputs: Mapping[str, np.ndarray], shape: Mapping[str, int]):
        self.target = target
        in_user_process(
            _resolve_here,
            target,
            what=f"reference {target!r}",
            error=ReferenceNotFoundError,
            timeout_s=load_timeout(),
        )
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
            ReferenceFailedError, ReferenceOutputError: as :func:`run_reference`, or the
                reference exited, crashed its process or hung.
        """
        for read, known_scalars, expected in self._entries:
            if (
                known_scalars == scalars
                and all(k in config and config[k] == v for k, v in read.items())
                and _fits(expected, outputs)
            ):
                return expected
        self.calls += 1
        expected, read_keys = in_user_process(
            _expected_here,
            self.target,
            dict(self.inputs),
            dict(scalars),
            self.shape,
            dict(config),
            outputs,
            what=f"reference {self.target!r}",
            error=ReferenceFailedError,
            timeout_s=call_timeout(),
        )
        read = {k: config[k] for k in read_keys if k in config}
        self._entries.append((read, dict(scalars), expected))
        return expected


def _resolve_here(target: str) -> None:
    """In the user-code process: load the reference (the module stays loaded there)."""
    resolve_reference(target)


def _expected_here(
    target: str,
    inputs: dict[str, np.ndarray],
    scalars: dict[str, int | float],
    shape: dict[str, int],
    config: dict[str, Value],
    outputs: tuple[OutputBuffer, ...],
) -> tuple[dict[str, np.ndarray], set[str]]:
    """In the user-code process: the reference's checked outputs, and the config keys it read."""
    recording = RecordingConfig(config)
    call = ReferenceCall(inputs=inputs, scalars=scalars, shape=shape, config=recording)
    expected = run_reference(resolve_reference(target), call, outputs, f"reference {target}")
    return expected, recording.read


def _fits(expected: Mapping[str, np.ndarray], outputs: tuple[OutputBuffer, ...]) -> bool:
    """A cached result also needs the same compared outputs and shapes (they may vary)."""
    compared = {o.name: o.shape for o in outputs if o.compared}
    return compared.keys() == expected.keys() and all(
        expected[k].shape == s for k, s in compared.items()
    )


def check_reference(spec: SpaceSpec) -> None:
    """Find the space's reference and, for the plain form, check every parameter it needs is
    a name it can be given: before anything compiles (in the user-code process).

    Raises:
        ReferenceNotFoundError: missing module, file or function, a parameter that no input,
            scalar argument, shape dimension or space parameter provides, or loading the
            module exited, crashed or hung.
    """
    if spec.reference is None:
        return
    target = spec.reference.target
    in_user_process(
        _check_here,
        target,
        call_names(spec),
        what=f"reference {target!r}",
        error=ReferenceNotFoundError,
        timeout_s=load_timeout(),
    )


def call_names(spec: SpaceSpec) -> tuple[tuple[str, ...], ...]:
    """The names a plain reference or baseline may take its parameters by, in the order
    :func:`bind_by_name` looks: inputs, named scalar arguments, shape dimensions, parameters
    (the values do not matter to a check)."""
    return (
        tuple(i.name for i in spec.inputs),
        tuple(a.name for a in spec.args if isinstance(a, ScalarArg) and a.name),
        tuple(spec.shape_names),
        tuple(spec.parameter_names),
    )


def _check_here(target: str, names: tuple[tuple[str, ...], ...]) -> None:
    """In the user-code process: :func:`check_reference`'s checks."""
    fn = resolve_reference(target)
    if isinstance(fn, _PlainReference):
        bind_by_name(fn.fn, f"reference {fn.target}", *(dict.fromkeys(n) for n in names))


def try_reference(
    space: Space, config: Mapping[str, Value], seed: int = 0
) -> dict[str, np.ndarray]:
    """Run the space's reference once on the CPU, on ``space``'s shape and ``config``: what
    ``workbench space --check-reference`` shows, so a wrong reference shows without a GPU.

    Raises:
        BadReferenceError: as :func:`run_reference`, or :class:`ReferenceTooLargeError`;
            ConfigError: inputs cannot be drawn.
    """
    reference = space.spec.reference
    if reference is None:
        raise ReferenceNotFoundError(f"{space.spec.name} has no reference")
    check_memory(space, config)
    inputs = make_inputs(space, seed, config)
    expected = ExpectedOutputs(reference.target, inputs, space.shape)
    return expected.get(
        config, named_scalars(kernel_arguments(space, config)), output_buffers(space, config)
    )


#: The share of the memory available that a CPU run's inputs and outputs may take: the
#: reference's own temporaries and the copies to and from the user-code process need the rest.
MEMORY_SHARE = 0.25


class ReferenceTooLargeError(BadReferenceError):
    """The problem is too large to run the reference on this machine's memory."""


def check_memory(space: Space, config: Mapping[str, Value], available: int | None = None) -> None:
    """Refuse, before anything is drawn, a CPU reference run whose inputs and outputs would
    take more than :data:`MEMORY_SHARE` of the memory available (``available`` bytes; default:
    what the system says; unknown: no check).

    Raises:
        ReferenceTooLargeError: with each array's size and the memory available.
        ConfigError: a shape fails to evaluate.
    """
    available = available_memory() if available is None else available
    if available is None:
        return
    specs = input_specs(space, config)
    sizes = [
        (name, math.prod(shape) * numpy_dtype(DType(specs[name].dtype)).itemsize)
        for name, shape in input_shapes(space, config).items()
    ] + [(o.name, o.nbytes) for o in output_buffers(space, config)]
    need = sum(n for _, n in sizes)
    if need <= MEMORY_SHARE * available:
        return
    largest = sorted(sizes, key=lambda item: -item[1])[:4]
    each = ", ".join(f"{name} {si(n, 'B')}" for name, n in largest)
    raise ReferenceTooLargeError(
        f"the reference's inputs and outputs need {si(need, 'B')} "
        f"({each}{', ...' if len(sizes) > len(largest) else ''}), more than "
        f"{MEMORY_SHARE:.0%} of the {si(available, 'B')} this machine has available; "
        "give a smaller `shape`"
    )


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux: MemAvailable; else free pages;
    None where neither can be read)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None
