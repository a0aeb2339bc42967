"""A kernel's parameters as its binary declares them, checked against a space's ``args``.

``cuLaunchKernel`` copies each argument with the size the *kernel* declares, so an ``args`` list
that disagrees with the signature (one argument too few, an ``int32`` where the kernel takes
``long long``, a buffer where it takes a count) launches with garbage: on a GPU that is a wrong
result or an illegal address, many trials later. All of it can be read without a GPU:

* the cubin's ``EIATTR_KPARAM_INFO`` records give the count and the size of every parameter
  (what the driver copies: :class:`~workbench.analysis.cubin.ParamSlot`);
* the PTX ``.entry`` declaration gives each one's type class (``.f32`` against ``.u32``);
* a C++ kernel's mangled name, demangled by libstdc++'s ``__cxa_demangle``, gives the C++ types
  (``float const*`` against ``long long``). ``extern "C"`` kernels and hand-written PTX have
  only the first two.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.analysis.cubin import read_cubin
from workbench.analysis.errors import AnalysisError
from workbench.spaces.model import ArgSpec, ScalarArg, SpaceSpec, TensorMapArg
from workbench.spaces.numba_abi import abi_args

#: A ``CUtensorMap`` by value: 128 bytes on a 64-byte boundary (cuda.h).
TENSOR_MAP_PARAM_BYTES = 128
TENSOR_MAP_PARAM_ALIGN = 64

#: C++ types a by-value float argument may land in (the demangler's spelling).
FLOAT_C_TYPES = frozenset({"float", "double", "__half", "half", "__nv_bfloat16"})
#: C++ integer types (the demangler's spelling), ``bool`` and the ``char`` family included.
INTEGER_C_TYPES = frozenset(
    {
        "bool",
        "char",
        "signed char",
        "unsigned char",
        "short",
        "unsigned short",
        "int",
        "unsigned int",
        "long",
        "unsigned long",
        "long long",
        "unsigned long long",
    }
)


@dataclass(frozen=True)
class KernelParameter:
    """One parameter of a kernel: its size (from the cubin), and its PTX and C++ types where
    the binary tells them (``u64``, ``f32``, ``b8[16]``; ``float const*``)."""

    size: int
    ptx_type: str | None = None
    c_type: str | None = None
    #: the PTX ``.align`` of the parameter, where the declaration gives one
    align: int | None = None

    @property
    def is_aggregate(self) -> bool:
        """Whether it is passed as plain bytes (a struct, a vector type, ``__half`` by value):
        the PTX declares such a parameter as a byte array."""
        return self.ptx_type is not None and "[" in self.ptx_type

    @property
    def is_pointer(self) -> bool | None:
        """Whether it is a pointer: None when only the PTX is known (``.u64`` is either)."""
        if self.c_type is not None:
            return is_pointer_type(self.c_type)
        if self.is_aggregate or (self.ptx_type is not None and self.ptx_type.startswith("f")):
            return False
        return None

    @property
    def is_float(self) -> bool | None:
        """Whether it holds a floating-point value; None when neither type says."""
        if self.c_type is not None:
            base = self.c_type.replace("const", "").strip()
            if base in FLOAT_C_TYPES:
                return True
            if base in INTEGER_C_TYPES or self.is_pointer:
                return False
        # no C++ name, or an enum or struct by name: the PTX may still say
        if self.ptx_type is None or self.ptx_type.startswith("b") or self.is_aggregate:
            return None  # untyped bits, or an aggregate
        return self.ptx_type.startswith("f")

    @property
    def is_tensor_map(self) -> bool | None:
        """Whether it can hold a ``CUtensorMap`` (128 bytes, by value, 64-byte aligned); None
        when the size fits and nothing says more (a cubin without PTX)."""
        if self.size != TENSOR_MAP_PARAM_BYTES or self.is_pointer:
            return False
        if self.c_type is not None and self.is_float is not None:
            return False  # a scalar C++ type
        if self.align is not None:
            return self.align % TENSOR_MAP_PARAM_ALIGN == 0
        return None if self.ptx_type is None else self.is_aggregate

    @property
    def spelled(self) -> str:
        """Its C++ type, else its PTX type, else its size."""
        return self.c_type or (f".{self.ptx_type}" if self.ptx_type else self._bytes)

    @property
    def _bytes(self) -> str:
        return f"{self.size} byte{'s'[: self.size != 1]}"

    def __str__(self) -> str:
        return self.spelled if self.spelled == self._bytes else f"{self.spelled} ({self._bytes})"


def kernel_parameters(
    cubin: bytes, entry: str, ptx: str | None = None
) -> tuple[KernelParameter, ...] | None:
    """The parameters of ``entry`` in ``cubin``; None when the cubin does not describe them.

    Raises:
        CubinError: the cubin is malformed.
    """
    kernel = read_cubin(cubin).kernels.get(entry)
    if kernel is None or kernel.params is None:
        return None
    ptx_decls = ptx_parameters(ptx, entry) if ptx else None
    c_types = cxx_parameter_types(entry)
    if ptx_decls is not None and len(ptx_decls) != len(kernel.params):
        ptx_decls = None  # not the same kernel's declaration: trust the binary alone
    if c_types is not None and len(c_types) != len(kernel.params):
        c_types = None
    return tuple(
        KernelParameter(
            slot.size,
            ptx_decls[i][0] if ptx_decls else None,
            c_types[i] if c_types else None,
            ptx_decls[i][1] if ptx_decls else None,
        )
        for i, slot in enumerate(kernel.params)
    )


def mismatched_arguments(
    args: Sequence[ArgSpec], cubin: bytes, entry: str, ptx: str | None
) -> list[str]:
    """:func:`argument_problems` of ``args`` against ``entry`` in ``cubin``: empty when they fit
    or when the binary does not describe its parameters (nothing to check against).

    Raises:
        CubinError: the cubin is malformed.
    """
    params = kernel_parameters(cubin, entry, ptx)
    return [] if params is None else argument_problems(args, params)


def require_matching_arguments(spec: SpaceSpec, cubin: bytes, entry: str, ptx: str | None) -> None:
    """Stop before a launch whose arguments would not fit the kernel.

    Raises:
        SpaceFileError: the space file's ``args`` do not match the kernel's parameters.
    """
    try:
        problems = mismatched_arguments(abi_args(spec), cubin, entry, ptx)
        then = then_problems(spec, cubin, ptx)
    except AnalysisError:
        return  # loading the module will say what is wrong with the binary
    if problems:
        raise spec.error("args", args_error(problems))
    if then:
        raise spec.error("then", "; ".join(then))


def then_problems(spec: SpaceSpec, cubin: bytes, ptx: str | None) -> list[str]:
    """What is wrong with the space's second kernel (``then``) in ``cubin``: it is missing, or
    its ``args`` do not fit its parameters (empty: it fits, or the space has none).

    Raises:
        CubinError: the cubin is malformed.
    """
    then = spec.then
    if then is None:
        return []
    kernels = read_cubin(cubin).kernels
    if then.kernel not in kernels:
        return [f"then.kernel {then.kernel} is not in the binary (kernels: {', '.join(kernels)})"]
    problems = mismatched_arguments(then.args, cubin, then.kernel, ptx)
    return ["then." + args_error(problems)] if problems else []


def args_error(problems: Sequence[str]) -> str:
    """One line for :func:`argument_problems`' findings."""
    return "args do not match the kernel's parameters: " + "; ".join(problems)


def argument_problems(args: Sequence[ArgSpec], params: Sequence[KernelParameter]) -> list[str]:
    """What is wrong with a space's ``args`` (buffer names and scalars) for these parameters;
    empty when they fit.

    Two cases that work on the GPU are allowed: an ``int64`` where the kernel takes a pointer
    (0 is a null pointer), and an ``int32``/``uint32`` where it takes an integer narrower than
    4 bytes (``bool``, ``char``, ``short``: ``args`` has no such type, and the driver copies the
    parameter's size from the start of the little-endian value, so a value that fits arrives
    intact)."""
    if len(args) != len(params):
        listed = ", ".join(p.spelled for p in params) or "none"
        return [
            f"args lists {len(args)} argument{'s'[: len(args) != 1]} but the kernel takes "
            f"{len(params)} parameter{'s'[: len(params) != 1]} ({listed})"
        ]
    problems = []
    for i, (arg, param) in enumerate(zip(args, params, strict=True)):
        if isinstance(arg, ScalarArg):
            dtype = np.dtype(arg.dtype)
            what = f"args[{i}] ({arg.name or arg.value.text})"
            given = f"{arg.dtype} ({dtype.itemsize} bytes)"
            integer_param = param.is_float is False or (
                param.is_float is None and param.c_type is None and not param.is_aggregate
            )  # (untyped .b8/.b16 bits of hand-written PTX count as an integer)
            narrow_integer = (
                dtype.kind in "iu" and dtype.itemsize == 4 and param.size < 4 and integer_param
            )
            fits = (dtype.itemsize == param.size or narrow_integer) and (
                param.is_float is None or param.is_float == (dtype.kind == "f")
            )
            if (dtype.kind == "f" and param.is_pointer) or _bytes_only(param):
                fits = False
        elif isinstance(arg, TensorMapArg):
            what = f"args[{i}] (tensor map of {arg.buffer})"
            given = "a tensor map (a CUtensorMap by value, 128 bytes, 64-byte aligned)"
            fits = param.is_tensor_map is not False
        else:
            what, given = f"args[{i}] ({arg})", "a buffer (a device pointer, 8 bytes)"
            fits = param.size == 8 and param.is_pointer is not False
        if not fits:
            hint = _bytes_hint(param) if _bytes_only(param) else ""
            problems.append(f"{what} is {given}, but the kernel's parameter {i} is {param}{hint}")
    return problems


def _bytes_hint(param: KernelParameter) -> str:
    if param.is_tensor_map:
        return ", a CUtensorMap by value: pass it as {tensor_map: BUFFER, box: [...]}"
    return ", passed by value as bytes (no args type can pass it)"


def _bytes_only(param: KernelParameter) -> bool:
    """A struct or vector by value: bytes in PTX and no scalar C++ type (a ``__grid_constant__``
    ``long long`` is bytes in PTX too, but its C++ type says what it holds)."""
    return param.is_aggregate and param.is_float is None and not param.is_pointer


# -- PTX ------------------------------------------------------------------------------------
_PTX_TYPE = re.compile(r"\.([usbf](?:8|16|32|64))\b")
_PTX_ARRAY = re.compile(r"\[\s*(\d+)\s*\]\s*$")
_PTX_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)


def ptx_parameter_types(ptx: str, entry: str) -> tuple[str, ...] | None:
    """The PTX types of ``entry``'s parameters in order (``u64``, ``f32``, ``b8[16]`` for an
    aggregate); None when the PTX has no such entry."""
    decls = ptx_parameters(ptx, entry)
    return None if decls is None else tuple(kind for kind, _ in decls)


_PTX_ALIGN = re.compile(r"\.align\s+(\d+)")


def ptx_parameters(ptx: str, entry: str) -> tuple[tuple[str, int | None], ...] | None:
    """``(type, .align or None)`` of each of ``entry``'s parameters in order; None when the PTX
    has no such entry or declares a parameter this reader does not know."""
    ptx = _PTX_COMMENT.sub(" ", ptx)  # a comment may hold a type, a comma or a parenthesis
    found = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\(", ptx)
    if found is None:
        return None
    end = ptx.find(")", found.end())
    if end < 0:
        return None
    body = ptx[found.end() : end].strip()
    if not body:
        return ()
    decls = []
    for decl in body.split(","):
        kind = _PTX_TYPE.search(decl)
        if kind is None:
            return None  # .texref and the like: not a type this check knows
        array = _PTX_ARRAY.search(decl)
        align = _PTX_ALIGN.search(decl)
        decls.append(
            (
                kind.group(1) + (f"[{array.group(1)}]" if array else ""),
                int(align.group(1)) if align else None,
            )
        )
    return tuple(decls)


# -- C++ ------------------------------------------------------------------------------------
def cxx_parameter_types(symbol: str) -> tuple[str, ...] | None:
    """The C++ parameter types of a mangled kernel name (``_Z...``), as the demangler spells
    them; None for an unmangled name or where libstdc++ is not at hand."""
    text = demangle(symbol)
    if text is None or not text.endswith(")"):
        return None
    depth, start = 0, None
    for pos in range(len(text) - 1, -1, -1):  # the parameter list is the last (...) group
        if text[pos] == ")":
            depth += 1
        elif text[pos] == "(":
            depth -= 1
            if depth == 0:
                start = pos
                break
    if start is None:
        return None
    inner = text[start + 1 : -1].strip()
    if inner in ("", "void"):
        return ()
    types, depth, begin = [], 0, 0
    for pos, ch in enumerate(inner):
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        elif ch == "," and depth == 0:
            types.append(inner[begin:pos].strip())
            begin = pos + 1
    types.append(inner[begin:].strip())
    return tuple(types)


def is_pointer_type(c_type: str) -> bool:
    """Whether a demangled C++ type is a pointer: ``float const*``, ``float*  __restrict__``,
    a pointer to an array (``float const (*) [4]``) or to a function (``void (*)(int)``), but
    not a class whose template arguments hold one (``Fn<void (*)(int)>``)."""
    outer, depth = [], 0
    for ch in c_type:  # the type without its template arguments
        depth += ch == "<"
        if depth == 0:
            outer.append(ch)
        depth -= ch == ">"
    text = "".join(outer).replace("__restrict__", "").replace(" ", "")
    return text.endswith("*") or "(*" in text


def demangle(symbol: str) -> str | None:
    """The demangled C++ name, or None (not a mangled name, or no libstdc++)."""
    if not symbol.startswith("_Z"):
        return None
    return _demangle(symbol)


@functools.lru_cache(maxsize=1024)
def _demangle(symbol: str) -> str | None:
    functions = _cxa_demangle()
    if functions is None:
        return None
    cxa_demangle, free = functions
    status = ctypes.c_int(0)
    out = cxa_demangle(symbol.encode(), None, None, ctypes.byref(status))
    if not out:
        return None
    try:
        return ctypes.string_at(out).decode(errors="replace") if status.value == 0 else None
    finally:
        free(out)


@functools.cache
def _cxa_demangle() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """libstdc++'s ``__cxa_demangle`` and libc's ``free`` (the result is malloc'ed)."""
    names = (ctypes.util.find_library("stdc++"), ctypes.util.find_library("c"))
    if not all(names):
        return None
    try:
        cxx, libc = (ctypes.CDLL(name) for name in names)
        fn, free = cxx.__cxa_demangle, libc.free
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_void_p
    fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    free.argtypes = [ctypes.c_void_p]
    return fn, free
