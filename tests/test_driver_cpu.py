"""The CUDA Driver API side of the package, checked without a GPU or a driver.

The CUDA runner, the compare worker and the copy baseline call ``cuda.bindings.driver`` only on
a GPU: a misspelled enum, a wrong argument count or a wrong unpacking of a binding's result would
first show on a lent GPU, within its few minutes. Every use of the Driver API and NVRTC
bindings in the package is read here (from the source's syntax tree) and checked against the
installed cuda-bindings:

* every name used on the modules exists (``cu.CUevent_flags.CU_EVENT_DEFAULT``);
* every call of a binding, direct or through the runner's checked ``call(cu.cuX, ...)``, binds
  to the binding's signature;
* a tuple unpacking of a call has as many targets as the binding returns values (its
  docstring's Returns section): all of them for a direct call, all but the CUresult for
  ``call``.

What the driver module builds without a driver (the cluster launch's configuration, errors,
UUIDs) is built and read back.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

driver = pytest.importorskip("cuda.bindings.driver")
nvrtc = pytest.importorskip("cuda.bindings.nvrtc")

from workbench.runners.cuda.driver import (  # noqa: E402  (after the bindings' check)
    CudaError,
    call,
    cluster_launch_config,
    format_uuid,
)
from workbench.spaces.launch import Launch  # noqa: E402

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"
#: The runner's checked call: ``call(cu.cuX, *args)`` returns the values after the CUresult.
CHECKED_CALL = "call"
MODULES = {"driver": driver, "nvrtc": nvrtc}


#: What a name stands for: a bindings module and the attributes taken on it (``R = cu.CUresult``
#: is (driver, ("CUresult",))).
Alias = tuple[ModuleType, tuple[str, ...]]


@dataclass(frozen=True)
class Use:
    """A binding or name used in the package: where, and what."""

    where: str
    chain: tuple[str, ...]  #: ("cuEventCreate",) or ("CUevent_flags", "CU_EVENT_DEFAULT")
    module: ModuleType
    node: ast.AST

    @property
    def text(self) -> str:
        return ".".join((self.module.__name__.rsplit(".", 1)[-1], *self.chain))

    def resolve(self) -> Any:
        obj: Any = self.module
        for name in self.chain:
            obj = getattr(obj, name)
        return obj


def _own_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a module's or function's body, not those of functions defined in it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))


class Scan:
    """One file's uses of the bindings, each read with the names of its own scope: imports of
    ``cuda.bindings`` (``from cuda.bindings import driver as cu``), ``nvrtc = nvrtc_module()``, a
    parameter named ``nvrtc``, a name bound to an attribute of one of those (``R = cu.CUresult``,
    unless the scope also binds it to something else), and ``self.cu`` where the file sets
    ``self.cu = cu``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(), str(path))
        self.self_aliases: dict[str, Alias] = {}
        self.scopes: list[tuple[ast.AST, dict[str, Alias]]] = []
        module_aliases = self._aliases(self.tree, {})
        self.scopes.append((self.tree, module_aliases))
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.scopes.append((node, self._aliases(node, module_aliases)))

    def _aliases(self, scope: ast.AST, outer: dict[str, Alias]) -> dict[str, Alias]:
        found = dict(outer)
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in scope.args.args:
                found.pop(arg.arg, None)
                if arg.arg == "nvrtc":  # helpers that take the module as an argument
                    found["nvrtc"] = (nvrtc, ())
        nodes = list(_own_nodes(scope))
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and node.module == "cuda.bindings":
                for alias in node.names:
                    if alias.name in MODULES:
                        found[alias.asname or alias.name] = (MODULES[alias.name], ())
        other: set[str] = set()
        for node in nodes:  # name = <an attribute of an alias>, or nvrtc_module()
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                pairs = (
                    zip(target.elts, node.value.elts, strict=False)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                for name, value in pairs:
                    bound = self._bound(value, found)
                    if isinstance(name, ast.Name):
                        if bound is None:
                            other.add(name.id)
                        else:
                            found[name.id] = bound
                    elif (
                        isinstance(name, ast.Attribute)
                        and isinstance(name.value, ast.Name)
                        and name.value.id == "self"
                        and bound is not None
                    ):
                        self.self_aliases[name.attr] = bound
        for name in other:  # bound to something else too: not read as an alias here
            found.pop(name, None)
        return found

    def _bound(self, value: ast.AST, aliases: dict[str, Alias]) -> Alias | None:
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id == "nvrtc_module"
        ):
            return (nvrtc, ())
        if isinstance(value, ast.Name) and value.id in aliases:
            return aliases[value.id]
        return self.chain(value, aliases)

    def chain(self, node: ast.AST, aliases: dict[str, Alias]) -> Alias | None:
        """The module and attribute names of ``cu.A.B`` (``self.cu.A.B``, ``R.A``), else None."""
        names: list[str] = []
        while isinstance(node, ast.Attribute):
            if (
                isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr in self.self_aliases
            ):
                module, prefix = self.self_aliases[node.attr]
                return (module, (*prefix, *names[::-1])) if names else None
            names.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name) and node.id in aliases and names:
            module, prefix = aliases[node.id]
            return module, (*prefix, *names[::-1])
        return None

    def where(self, node: ast.AST) -> str:
        return f"{self.path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"

    def uses(self) -> list[Use]:
        """Each maximal chain once (not its prefixes)."""
        out = []
        for scope, aliases in self.scopes:
            inner: set[int] = set()
            for node in _own_nodes(scope):
                if not isinstance(node, ast.Attribute) or id(node) in inner:
                    continue
                found = self.chain(node, aliases)
                if found is None:
                    continue
                value = node.value
                while isinstance(value, ast.Attribute):  # its prefixes are not chains of their own
                    inner.add(id(value))
                    value = value.value
                out.append(Use(self.where(node), found[1], found[0], node))
        return out

    def calls(self) -> Iterator[tuple[Use, list[ast.expr], list[ast.keyword], bool]]:
        """(use, positional args, keywords, checked) for every call of a binding: direct
        (``cu.cuX(a, b)``) or checked (``call(cu.cuX, a, b)``)."""
        for scope, aliases in self.scopes:
            for node in _own_nodes(scope):
                if not isinstance(node, ast.Call):
                    continue
                found = self.chain(node.func, aliases)
                checked, args = False, node.args
                if found is None:
                    callee = node.func
                    name = (
                        callee.attr
                        if isinstance(callee, ast.Attribute)
                        else getattr(callee, "id", "")
                    )
                    if name != CHECKED_CALL or not node.args:
                        continue
                    found = self.chain(node.args[0], aliases)
                    if found is None:
                        continue
                    checked, args = True, node.args[1:]
                use = Use(self.where(node), found[1], found[0], node)
                yield use, list(args), list(node.keywords), checked


@functools.cache
def scans() -> tuple[Scan, ...]:
    found = (Scan(path) for path in sorted(PACKAGE.rglob("*.py")))
    return tuple(scan for scan in found if scan.uses())


def returned_values(binding: Any) -> int:
    """How many values a binding returns (the CUresult/nvrtcResult included), from the Returns
    section of its docstring: one unindented line per value."""
    doc = binding.__doc__ or ""
    section = re.search(r"\nReturns\n-+\n(.*?)(?:\n\n\S|\Z)", doc, re.S)
    assert section, f"{binding.__name__}: no Returns section in its docstring"
    return sum(1 for line in section.group(1).splitlines() if line and not line[0].isspace())


def _all_uses() -> list[Use]:
    return [use for scan in scans() for use in scan.uses()]


def test_the_package_uses_the_driver_api() -> None:
    """The scan finds what it checks (a scan that reads nothing passes everything)."""
    uses = _all_uses()
    files = {u.where.split(":")[0] for u in uses if u.module is driver}
    assert {"workbench/runners/cuda/driver.py", "workbench/compare/worker.py"} <= files
    assert {"workbench/gpu.py", "workbench/compare/memory_baselines.py"} <= files
    texts = {u.text for u in uses}
    # through a name bound to an attribute (attr = cu.CUfunction_attribute) and through self.cu
    assert (
        "driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED" in texts
    )
    assert "driver.cuMemcpyDtoDAsync" in texts
    assert len([u for u in uses if u.chain[0].startswith("cu")]) > 50


def test_every_name_used_on_the_bindings_exists() -> None:
    missing = []
    for use in _all_uses():
        try:
            use.resolve()
        except AttributeError:
            missing.append(f"{use.where}: {use.text}")
    assert not missing, "not in the installed cuda-bindings:\n" + "\n".join(missing)


def test_every_binding_call_binds_to_its_signature() -> None:
    wrong, checked_calls = [], 0
    for scan in scans():
        for use, args, keywords, _checked in scan.calls():
            binding = use.resolve()
            if not callable(binding) or isinstance(binding, type):
                continue  # a constructor (cu.CUstream(...)): not a binding
            if any(isinstance(a, ast.Starred) for a in args) or any(
                k.arg is None for k in keywords
            ):
                continue  # forwarded arguments: not countable here
            checked_calls += 1
            try:
                inspect.signature(binding).bind(
                    *[None] * len(args), **{k.arg: None for k in keywords if k.arg}
                )
            except TypeError as exc:
                wrong.append(f"{use.where}: {use.text} with {len(args)} arguments: {exc}")
    assert checked_calls > 40
    assert not wrong, "\n".join(wrong)


def test_unpacked_results_match_what_the_bindings_return() -> None:
    wrong, unpacked = [], 0
    for scan in scans():
        calls = {id(use.node): (use, checked) for use, *_, checked in scan.calls()}
        for node in ast.walk(scan.tree):
            if not (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Tuple)
                and id(node.value) in calls
            ):
                continue
            use, checked = calls[id(node.value)]
            targets = len(node.targets[0].elts)
            expected = returned_values(use.resolve()) - (1 if checked else 0)
            unpacked += 1
            if targets != expected:
                wrong.append(f"{use.where}: {use.text} returns {expected}, unpacked into {targets}")
    assert unpacked > 10
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("binding", "values"),
    [(driver.cuInit, 1), (driver.cuEventElapsedTime, 2), (nvrtc.nvrtcVersion, 3)],
)
def test_returned_values_reads_the_docstrings(binding: Any, values: int) -> None:
    assert returned_values(binding) == values


def test_the_cluster_launch_configuration_carries_the_launch() -> None:
    launch = Launch(grid=(64, 8, 2), block=(128, 2, 1), shared_bytes=98_304, cluster=(2, 1, 1))
    config = cluster_launch_config(launch, driver.CUstream(0))
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (64, 8, 2)
    assert (config.blockDimX, config.blockDimY, config.blockDimZ) == (128, 2, 1)
    assert config.sharedMemBytes == 98_304
    assert config.numAttrs == 1 and len(config.attrs) == 1
    attr = config.attrs[0]
    assert attr.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dim = attr.value.clusterDim
    assert (dim.x, dim.y, dim.z) == (2, 1, 1)


def test_call_returns_the_values_after_the_result_and_raises_on_failure() -> None:
    ok = driver.CUresult.CUDA_SUCCESS

    def version() -> tuple:
        return ok, 13000

    def pair() -> tuple:
        return ok, 1, 2

    def nothing() -> tuple:
        return (ok,)

    def fault() -> tuple:
        return (driver.CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,)

    def bad_value() -> tuple:
        return driver.CUresult.CUDA_ERROR_INVALID_VALUE, 0

    assert call(version) == 13000
    assert call(pair) == (1, 2)
    assert call(nothing) is None
    with pytest.raises(CudaError, match=r"CUDA_ERROR_ILLEGAL_ADDRESS.*\(fault\)") as lost:
        call(fault)
    assert lost.value.sticky and not lost.value.recoverable  # the worker must restart
    with pytest.raises(CudaError, match=r"CUDA_ERROR_INVALID_VALUE") as bad:
        call(bad_value)
    assert bad.value.recoverable  # a bad argument leaves the context usable


def test_uuids_read_as_nvml_writes_them() -> None:
    raw = bytes(range(0xA0, 0xB0))
    assert format_uuid(raw) == "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"
    assert format_uuid(raw, prefix="MIG").startswith("MIG-a0a1a2a3-")


@pytest.mark.parametrize(("knobs", "cluster"), [({"CLUSTER_M": 2}, (2, 1, 1)), ({}, None)])
def test_a_cluster_config_of_the_tma_gemm_goes_to_cuLaunchKernelEx(
    monkeypatch: pytest.MonkeyPatch, knobs: dict, cluster: tuple[int, int, int] | None
) -> None:
    """Up to the driver call: gemm_int8's TMA path in a 2x1 cluster (the space file's geometry:
    132 CTAs in clusters of (2, 1, 1)) is launched with cuLaunchKernelEx and a configuration
    that carries the grid and the cluster dimension; without a cluster (a (1, 1, 1) cluster) it
    is a plain cuLaunchKernel. The checked ``call`` is replaced by a recorder: no driver."""
    from workbench.runners.buffers import pack_arguments
    from workbench.runners.cuda import driver as runner_driver
    from workbench.spaces import Space, load_kernel
    from workbench.spaces.launch import launch_geometry
    from workbench.toolchain import Arch

    spec = load_kernel("gemm_int8")
    space = Space(spec, arch=Arch.parse("sm_90a"))
    config = dict(spec.default_config(), PATH="tma_coop", BM=128, BN=256, BK=128, STAGES=4, **knobs)
    launch = launch_geometry(space, config)
    assert launch.grid == (132, 1, 1) and launch.cluster == (cluster or (1, 1, 1))
    calls: list[tuple[Any, tuple]] = []
    monkeypatch.setattr(runner_driver, "call", lambda fn, *args: calls.append((fn, args)))
    gpu = object.__new__(runner_driver.Gpu)  # (its __init__ asks the driver for a context)
    gpu.stream = driver.CUstream(0)
    kernel = runner_driver.Kernel(None, driver.CUfunction(), "gemm_int8")
    gpu.launch(kernel, launch, pack_arguments([]))
    ((fn, args),) = calls
    if cluster is None:
        assert fn is driver.cuLaunchKernel and args[1:7] == (132, 1, 1, 384, 1, 1)
        return
    assert fn is driver.cuLaunchKernelEx
    config_ = args[0]
    assert (config_.gridDimX, config_.gridDimY, config_.gridDimZ) == launch.grid
    assert (config_.blockDimX, config_.sharedMemBytes) == (384, launch.shared_bytes)
    (attr,) = config_.attrs
    assert attr.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dim = attr.value.clusterDim
    assert (dim.x, dim.y, dim.z) == cluster
    assert config_.gridDimX % dim.x == 0  # whole clusters
