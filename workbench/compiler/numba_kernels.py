"""Kernels written in Python with Numba's CUDA target (``source: kernel.py``): compiled to PTX by
Numba, then to a CUBIN by the same ptxas path as hand-written PTX, so registers, SASS and lints
read the same.

Knobs reach the kernel as module globals: the space's ``define`` parameters (the default role)
are set, by name, in a fresh namespace of the source module before Numba compiles the function,
and Numba freezes a global's value into the code it generates, as a ``#define`` would. A
source may give each a default (``BLOCK = 128`` at the top) so that it also runs on its own.
Argument types come from the space: each buffer a C-contiguous array of its dtype and number of
dimensions, each scalar its type. Numba runs without a GPU (``numba.cuda.compile_ptx``), in the
user-code process (:mod:`workbench.user_code`): running the module runs the user's code, and
an exit, a crash or an endless loop there costs this config a located error, not the command.
"""

from __future__ import annotations

import functools
import hashlib
import re
import traceback
import types
from collections.abc import Mapping
from dataclasses import dataclass

from workbench.errors import CompileError
from workbench.spaces.model import InputSpec, OutputSpec, ScalarArg, SpaceSpec, TensorMapArg, Value
from workbench.user_code import in_user_process, load_timeout

#: Numba's PTX names its kernel ``.entry <mangled name>(``
ENTRY = re.compile(r"\.entry\s+([\w$]+)\s*\(")
#: where Numba's typing errors point: ``File "path", line N``
FILE_LINE = re.compile(r'File "([^"]+)", line (\d+)')

#: an argument's Numba type: ("array", dtype, ndim) or ("scalar", dtype)
ArgType = tuple[str, str, int]


@dataclass(frozen=True)
class NumbaPtx:
    text: str
    entry: str  #: the kernel's mangled ``.entry`` name


def arg_types(spec: SpaceSpec, env: Mapping[str, object]) -> tuple[ArgType, ...]:
    """The Numba type of each of ``args`` for one config (``env``: its values, for dtypes
    that depend on it).

    Raises:
        CompileError: a tensor map (Numba kernels take arrays, not TMA descriptors).
    """
    buffers: dict[str, InputSpec | OutputSpec] = {b.name: b for b in spec.inputs}
    buffers.update({b.name: b for b in spec.outputs})
    out: list[ArgType] = []
    for i, arg in enumerate(spec.args):
        if isinstance(arg, ScalarArg):
            out.append(("scalar", arg.dtype, 0))
        elif isinstance(arg, TensorMapArg):
            raise CompileError(f"args[{i}]: a Numba kernel takes no tensor map")
        else:
            b = buffers[arg]
            out.append(("array", b.dtype_for(env).value, len(b.shape)))
    return tuple(out)


def numba_ptx(
    spec: SpaceSpec,
    text: str,
    knobs: Mapping[str, Value],
    types_: tuple[ArgType, ...],
    cc: tuple[int, int],
) -> NumbaPtx:
    """The PTX of ``spec``'s kernel function for these knob values and argument types.

    Raises:
        CompileError: the source does not run, has no such function, does not read a knob,
            or Numba cannot type or compile it; located at ``file:line`` where Python or Numba
            says where.
    """
    assert spec.entry_kernel is not None
    return _compile(
        text, str(spec.source), spec.entry_kernel, tuple(sorted(knobs.items())), types_, cc
    )


@functools.lru_cache(maxsize=512)
def _compile(
    text: str,
    filename: str,
    function: str,
    knobs: tuple[tuple[str, Value], ...],
    types_: tuple[ArgType, ...],
    cc: tuple[int, int],
) -> NumbaPtx:
    return in_user_process(
        _compile_here,
        text,
        filename,
        function,
        knobs,
        types_,
        cc,
        what=f"{filename} (a Numba kernel module)",
        error=CompileError,
        timeout_s=load_timeout(),
    )


def _compile_here(
    text: str,
    filename: str,
    function: str,
    knobs: tuple[tuple[str, Value], ...],
    types_: tuple[ArgType, ...],
    cc: tuple[int, int],
) -> NumbaPtx:
    """In the user-code process: run the module, check the knobs, compile with Numba."""
    namespace = _run_module(text, filename)
    fn = namespace.get(function)
    if fn is None or not callable(fn):
        found = sorted(n for n, v in namespace.items() if isinstance(v, types.FunctionType))
        raise CompileError(
            f"{filename}: no function {function!r}"
            + (f" (it has: {', '.join(found)})" if found else "")
        )
    py_func = getattr(fn, "py_func", fn)  # a @cuda.jit dispatcher keeps the Python function
    read = _globals_read(namespace)
    unread = [name for name, _ in knobs if name not in read]
    if unread:
        raise CompileError(
            f"{filename}: no function reads {', '.join(unread)}; a knob reaches a Numba "
            "kernel as the module global of its name"
        )
    namespace.update(dict(knobs))  # frozen into the code by Numba, like a #define
    from numba import cuda
    from numba.core.errors import NumbaError

    try:
        ptx, _ = cuda.compile_ptx(py_func, tuple(_numba_type(t) for t in types_), cc=cc)
    except NumbaError as exc:
        raise CompileError(_located(exc, filename, "Numba cannot compile it")) from None
    except Exception as exc:  # (Numba asks for a driver where a device function is jitted)
        raise CompileError(
            _located(
                exc,
                filename,
                f"Numba failed ({type(exc).__name__}; device functions "
                "compile only with a driver: write them inline)",
            )
        ) from None
    match = ENTRY.search(ptx)
    if match is None:
        raise CompileError(f"{filename}: Numba's PTX for {function} has no .entry")
    return NumbaPtx(ptx, match.group(1))


def _run_module(text: str, filename: str) -> dict[str, object]:
    """The source run in a namespace of its own (a module object, so Numba sees its globals)."""
    try:
        code = compile(text, filename, "exec")
    except SyntaxError as exc:
        raise CompileError(f"{filename}:{exc.lineno}: syntax error: {exc.msg}") from None
    name = "workbench_numba_" + hashlib.sha256(text.encode()).hexdigest()[:12]
    module = types.ModuleType(name)
    module.__file__ = filename
    try:
        exec(code, module.__dict__)
    except BaseException as exc:  # an exit at import too: it must not end the command
        line = next(
            (
                f.lineno
                for f in reversed(traceback.extract_tb(exc.__traceback__))
                if f.filename == filename
            ),
            None,
        )
        where = f"{filename}:{line}" if line else filename
        did = (
            f"called sys.exit({exc.code!r})"
            if isinstance(exc, SystemExit)
            else f"failed: {type(exc).__name__}: {exc}"
        )
        raise CompileError(f"{where}: running the module {did}") from None
    return module.__dict__


def _globals_read(namespace: Mapping[str, object]) -> set[str]:
    """The global names the module's functions read (nested code included)."""
    names: set[str] = set()

    def walk(code: types.CodeType) -> None:
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    for value in namespace.values():
        fn = getattr(value, "py_func", value)
        if isinstance(fn, types.FunctionType):
            walk(fn.__code__)
    return names


def _numba_type(t: ArgType) -> object:
    import numpy as np
    from numba import from_dtype

    kind, dtype, ndim = t
    base = from_dtype(np.dtype(dtype))
    if kind == "scalar":
        return base
    return base[(slice(None),) * (ndim - 1) + (slice(None, None, 1),)]  # C-contiguous


def _located(exc: Exception, filename: str, what: str) -> str:
    """Numba's error in one line, at the first place in ``filename`` it names (Numba shortens
    the path it prints, so the file's name is what is matched)."""
    message = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))  # (Numba colours its messages)
    name = filename.rsplit("/", 1)[-1]
    spots = [int(line) for f, line in FILE_LINE.findall(message) if f.rsplit("/", 1)[-1] == name]
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    # the line after Numba's "Failed in ... pipeline" says what failed
    first = next((ln for ln in lines if not ln.startswith("Failed in")), type(exc).__name__)
    where = f"{filename}:{spots[0]}" if spots else filename
    return f"{where}: {what}: {first}"
