"""CUTLASS's GEMMs through the CUTLASS Operator API, for the int8 and FP8 GEMM families.

``nvidia-cutlass-operators`` (import ``cutlass.operators``, over the CuTe DSL of
``nvidia-cutlass-dsl``) lists the operators that accept a problem's arguments on a target: for
8-bit operands on sm_90a, the persistent TMA warp-specialized Hopper GEMM
(``Sm90StaticPersistentGemmOperator``) in 24 configurations, CTA tile 64/128 x 64/128/256 x 64
and cluster 1/2 x 1/2. Each is a :class:`~workbench.compare.baselines.BaselineVariant` of this
baseline: compare compiles (CuTe DSL JIT), verifies and times every one on the inputs and
protocol of the other contenders, and the fastest correct one is the CUTLASS row, so the
comparison is with CUTLASS tuned for the shape, as its profiler would pick, not with the first
operator listed.

Layouts: A [M, K] and B [N, K] row-major (K-major, as the API's 8-bit GEMMs require), C [M, N]
row-major. The API computes ``out = A @ B`` with B [K, N]: B's column-major view (``B.t()``),
layout "tnt". Accumulators: int32 for int8, fp32 for FP8. The API's sm_90 GEMM has no epilogue
(no alpha, no scales): for FP8 it writes fp32, and ``torch.mul`` scales that into the output
type; the two kernels are timed together as one call.

Without a GPU all but running works: the API imports, lists operators from meta tensors (which
hold no memory), and the CuTe DSL compiles one to an sm_90a cubin. ``cutlass.operators`` 0.3
imports torch (its Blackwell kernels do), so torch is part of the extra.

Compiled operators are kept as object files (the DSL's ``export_to_c``) under the compile cache
and loaded by later runs (``cute.runtime.load_module``): keyed by the operator, the target, the
cluster count it was compiled for and the versions of both packages.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported, BaselineVariant, register
from workbench.compare.gemm_baselines import (
    to_torch,
    torch_dtype,
    torch_on_stream,
    torch_to_numpy,
)
from workbench.compare.problems import BaselineProblem, Family
from workbench.runners.buffers import INT_POISON_BYTE
from workbench.spaces.schema import BaselineKind

#: The pip packages of the extra (``pip install 'workbench[cutlass]'``).
OPERATORS_DIST = "nvidia-cutlass-operators"
DSL_DIST = "nvidia-cutlass-dsl"
EXTRA = "cutlass"
INSTALL_HINT = f"pip install 'workbench[{EXTRA}]'"
#: Where compiled operators are kept, under the compile cache's root.
CACHE_FOLDER = "cutlass-operators"
#: Bytes every 8-bit operand row and every output row must be aligned to (the API's
#: ``alignment_bytes``: TMA moves 16-byte units).
ROW_ALIGNMENT = 16


@register
class CutlassGemm(Baseline):
    """The fastest of the CUTLASS Operator API's GEMMs for the problem (int8, FP8)."""

    name = "cutlass"
    kind = BaselineKind.CUTLASS
    title = "CUTLASS Operator API (CuTe DSL)"
    label = "CUTLASS"
    families = frozenset({Family.GEMM_INT8, Family.GEMM_FP8})
    dtypes = frozenset({"int8", "float8_e4m3", "float8_e5m2"})
    min_cc = 90  # its int8/FP8 GEMMs are Hopper's and newer (its sm_80 GEMM takes fp16/bf16)
    distributions = (OPERATORS_DIST, DSL_DIST, "torch")
    extra = EXTRA
    has_variants = True

    def limits(self, problem: BaselineProblem) -> str | None:
        return gemm_limits(problem)

    def variants(self, problem: BaselineProblem, cc: int) -> tuple[BaselineVariant, ...]:
        return tuple(operator_variant(op) for op in find_operators(problem, cc))

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        raise BaselineUnsupported("the CUTLASS baseline runs one operator at a time (variants)")

    def prepare_variant(
        self,
        problem: BaselineProblem,
        inputs: Mapping[str, np.ndarray],
        stream: int,
        *,
        variant: str,
        cc: int,
        cache_dir: str | None,
    ) -> Any:
        torch = torch_on_stream(stream)
        a = to_torch(torch, inputs["A"], problem.inputs["A"])
        b = to_torch(torch, inputs["B"], problem.inputs["B"])

        def output(dtype: str) -> Any:
            shape = (problem.dim("M"), problem.dim("N"))
            return torch.empty(shape, dtype=torch_dtype(torch, dtype), device=a.device)

        raw = output(raw_dtype(problem))
        args = gemm_arguments(problem, a, b, raw)
        op = next(
            (o for o in find_operators(problem, cc, args) if operator_name(o) == variant), None
        )
        if op is None:
            raise BaselineUnsupported(f"the CUTLASS Operator API lists no operator {variant}")
        if need := op.get_workspace_size(args).size_bytes:
            raise BaselineUnsupported(f"{variant} needs a workspace ({need} bytes): not provided")
        root = Path(cache_dir) / CACHE_FOLDER if cache_dir else None
        artifact, compiled = COMPILED.get(op, args, target_sm(cc), root)
        run = _CutlassRun(torch, op, args, artifact, stream, raw)
        if problem.family is Family.GEMM_FP8:  # no scaled epilogue: fp32, then scaled
            run.scale_into(output(out_dtype(problem)), fp8_scale(inputs), out_dtype(problem))
        run.compile_s, run.compile_note = compiled.seconds, compiled.how
        return run

    def version(self) -> str:
        return library_version()


# -- what the API accepts (no import: the selection runs anywhere) ---------------------------


def gemm_limits(problem: BaselineProblem) -> str | None:
    """Why the API's 8-bit GEMMs refuse ``problem`` (None: they take it). Their operands must
    have 16-byte aligned rows; so must the output, int32 for int8 and fp32 for FP8."""
    if problem.inputs.get("A") != problem.inputs.get("B"):
        return "the CUTLASS Operator API's GEMMs take A and B of one dtype"
    k, n = problem.dim("K"), problem.dim("N")
    if k % ROW_ALIGNMENT:
        return f"the CUTLASS Operator API's 8-bit GEMMs need K a multiple of 16 (K = {k})"
    if n % (ROW_ALIGNMENT // 4):
        return (
            "the CUTLASS Operator API's GEMMs need 16-byte aligned rows of their 32-bit output: "
            f"N a multiple of 4 (N = {n})"
        )
    return None


def raw_dtype(problem: BaselineProblem) -> str:
    """The API's output (its accumulator type): int32 for int8, float32 for FP8 (then scaled)."""
    return "int32" if problem.family is Family.GEMM_INT8 else "float32"


def out_dtype(problem: BaselineProblem) -> str:
    """The problem's output type: int32 for int8, the space's ``OUT`` for FP8."""
    return "int32" if problem.family is Family.GEMM_INT8 else str(problem.out_dtype)


def fp8_scale(inputs: Mapping[str, np.ndarray]) -> np.float32:
    """``scale_a * scale_b`` in float32 (what the FP8 kernels multiply the accumulator by)."""
    scales = [np.float32(np.asarray(inputs[s]).reshape(-1)[0]) for s in ("scale_a", "scale_b")]
    return np.float32(scales[0] * scales[1])


# -- the API (imported in the baseline worker, or by tests) ----------------------------------


def load_api() -> tuple[Any, Any]:
    """``cutlass`` (the CuTe DSL) and ``cutlass.operators``.

    Raises:
        BaselineUnsupported: they do not import (the message says why, and how to install).
    """
    try:
        import cutlass
        import cutlass.operators as ops
    except Exception as exc:  # ImportError, or a native library that fails to load
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise BaselineUnsupported(
            f"the CUTLASS Operator API does not import: {type(exc).__name__}: {first} "
            f"({INSTALL_HINT})"
        ) from exc
    return cutlass, ops


def target_sm(cc: int) -> str:
    """The API's target for compute capability ``cc``: the arch-specific one from sm_90 on
    (``90a``: wgmma and TMA exist only there; ``"90"`` lists no Hopper GEMM), else ``cc``."""
    return f"{cc}a" if cc >= 90 else str(cc)


def gemm_arguments(problem: BaselineProblem, a: Any, b: Any, out: Any) -> Any:
    """``out = a . b^T`` as the API's ``GemmArguments``: ``b`` [N, K] passed as its [K, N]
    column-major view, the accumulator of the family."""
    cutlass, ops = load_api()
    acc = cutlass.Int32 if problem.family is Family.GEMM_INT8 else cutlass.Float32
    return ops.GemmArguments(a, b.t(), out, accumulator_type=acc)


def meta_arguments(problem: BaselineProblem) -> Any:
    """:func:`gemm_arguments` of ``problem`` on torch meta tensors: shapes, strides and dtypes
    without memory, enough to list (and compile) operators anywhere."""
    import torch

    m, n, k = problem.dim("M"), problem.dim("N"), problem.dim("K")

    def meta(shape: tuple[int, int], dtype: str) -> Any:
        return torch.empty(shape, dtype=torch_dtype(torch, dtype), device="meta")

    a, b = meta((m, k), problem.inputs["A"]), meta((n, k), problem.inputs["B"])
    return gemm_arguments(problem, a, b, meta((m, n), raw_dtype(problem)))


def find_operators(problem: BaselineProblem, cc: int, args: Any = None) -> list[Any]:
    """The API's operators that accept ``problem`` (``args``: its arguments; default: meta
    tensors) on a GPU of compute capability ``cc``, in the API's order.

    Raises:
        BaselineUnsupported: the API does not import, or no operator accepts the problem (an
            operator of the same operand types says why it refuses).
    """
    _, ops = load_api()
    args = args if args is not None else meta_arguments(problem)
    target = target_sm(cc)
    found = ops.get_operators(args, target_sm=target)
    if found:
        return list(found)
    dtypes = (args.A.dtype, args.B.dtype, args.out.dtype)

    def same_operands(md: Any) -> bool:
        operands = md.operands
        try:
            return (operands.A.dtype, operands.B.dtype, operands.out.dtype) == dtypes
        except AttributeError:  # not a GEMM's operands
            return False

    peers = ops.get_operators(None, metadata_filter=same_operands, target_sm=target)
    what = f"{problem.inputs['A']} x {problem.inputs['B']} -> {raw_dtype(problem)}"
    if not peers:
        raise BaselineUnsupported(f"the CUTLASS Operator API has no {what} GEMM for sm_{target}")
    why = peers[0].supports(args, target_sm=target).error
    raise BaselineUnsupported(
        f"no {what} GEMM of the CUTLASS Operator API for sm_{target} takes this problem: {why}"
    )


def operator_name(op: Any) -> str:
    """The API's name of an operator (unique: kernel, layout, types, cluster and tile)."""
    return str(op.metadata.operator_name)


def operator_variant(op: Any) -> BaselineVariant:
    """An operator as a variant: its name, and its design (tile, cluster) as the config."""
    design = op.metadata.design
    config: dict[str, Any] = {"operator": type(op).__name__.removesuffix("Operator")}
    for key in ("tile_shape", "cluster_shape", "num_smem_stages"):
        value = getattr(design, key, None)
        if value is not None:
            config[key.removesuffix("_shape")] = (
                "x".join(map(str, value)) if isinstance(value, tuple) else value
            )
    label = ", ".join(f"{k} {v}" for k, v in config.items() if k != "operator")
    return BaselineVariant(operator_name(op), label or config["operator"], config)


def library_version() -> str:
    """The packages that ran, and which CUDA flavour of the DSL's libraries loaded."""
    flavour = ""
    lib = sys.modules.get("cutlass._mlir._mlir_libs._cutlass_ir")
    if m := re.search(r"\.(cu\d+)\.", str(getattr(lib, "__file__", ""))):
        flavour = f" ({m.group(1)} libraries)"
    return (
        f"CUTLASS Operator API {_version(OPERATORS_DIST)}, CuTe DSL {_version(DSL_DIST)}"
        f"{flavour}, PyTorch {_version('torch')}"
    )


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


# -- compiled operators: this process, and the disk between runs -----------------------------


@dataclass(frozen=True)
class Compiled:
    """How an operator's compiled form was had: seconds, and JIT or from a cache."""

    seconds: float
    how: str  #: ``JIT``, ``loaded from the cache``, ``compiled earlier in this run``


def max_active_clusters(op: Any) -> int:
    """Clusters of the operator's shape that fit the GPU at once (asked of the GPU): its
    persistent kernel is compiled for that count."""
    from cutlass.operators.providers.cutedsl.integration_utils.mma import (
        get_max_active_clusters,
    )

    cluster = op.metadata.design.cluster_shape
    return int(get_max_active_clusters(tuple(cluster[:2])))


def cache_key(name: str, target: str, clusters: int) -> str:
    """The disk cache's key of an operator compiled for ``target`` and ``clusters``."""
    parts = [name, target, str(clusters), _version(OPERATORS_DIST), _version(DSL_DIST)]
    parts.append(platform.machine())
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


class CompiledOperators:
    """Compiled operators by cache key: in this process, and as object files under a root."""

    def __init__(self, clusters: Any = max_active_clusters) -> None:
        self._memory: dict[str, Any] = {}
        self._clusters = clusters  #: op -> cluster count (the GPU's answer)

    def get(self, op: Any, args: Any, target: str, root: Path | None) -> tuple[Any, Compiled]:
        """The compiled form of ``op`` for ``args`` on ``target``, compiled (JIT) only when
        neither this process nor ``root`` has it; a new one is written under ``root``."""
        _, ops = load_api()
        key = cache_key(operator_name(op), target, self._clusters(op))
        if key in self._memory:
            return self._memory[key], Compiled(0.0, "compiled earlier in this run")
        path = root / key[:2] / f"{key}.o" if root is not None else None
        symbol = f"wb_{key}"
        t0 = time.perf_counter()
        artifact = self._load(ops, op, target, path, symbol) if path else None
        if artifact is not None:
            compiled = Compiled(time.perf_counter() - t0, "loaded from the cache")
        else:
            t0 = time.perf_counter()
            artifact = op.compile(args, target_sm=target)
            compiled = Compiled(time.perf_counter() - t0, "JIT")
            if path is not None:
                _export(artifact, path, symbol)
        self._memory[key] = artifact
        return artifact, compiled

    @staticmethod
    def _load(ops: Any, op: Any, target: str, path: Path, symbol: str) -> Any:
        """The artifact kept at ``path`` (None: none there, or it does not load)."""
        if not path.is_file():
            return None
        from cutlass.cute.runtime import load_module

        try:
            function = getattr(load_module(str(path), enable_tvm_ffi=True), symbol)
        except Exception:  # a damaged or foreign file: compile again, and overwrite it
            return None
        return ops.CompiledArtifact(
            compiled_obj=function, operator_obj=op, compiled_for=ops.TargetSm(target)
        )


def _export(artifact: Any, path: Path, symbol: str) -> None:
    """Write the compiled operator at ``path`` (atomically; a failure only costs the cache)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".o", dir=path.parent)
    os.close(fd)
    try:
        artifact.compiled_obj.export_to_c(tmp, function_name=symbol)
        os.replace(tmp, path)
    except Exception:
        Path(tmp).unlink(missing_ok=True)


#: The worker's compiled operators (one per process: it lives for a whole compare).
COMPILED = CompiledOperators()


class _CutlassRun:
    """One operator ready to run: ``raw`` is its output (the int8 GEMM's C); for FP8,
    :meth:`scale_into` adds a ``torch.mul`` of ``raw`` into C, in the same call."""

    compile_s: float | None = None
    compile_note: str = ""

    def __init__(self, torch: Any, op: Any, args: Any, artifact: Any, stream: int, raw: Any):
        self.torch, self.op, self.args, self.artifact = torch, op, args, artifact
        self.stream, self.raw = stream, raw
        self.out, self.scale, self.dtype = raw, None, "int32"

    def scale_into(self, out: Any, scale: np.float32, dtype: str) -> None:
        """Make each call write ``raw * scale`` into ``out`` (of space dtype ``dtype``)."""
        self.out, self.dtype = out, dtype
        self.scale = self.torch.tensor(scale, device=out.device)

    def poison(self) -> None:
        # both: a kernel that writes nothing must not pass on a previous operator's result
        self.raw.view(self.torch.uint8).fill_(INT_POISON_BYTE)
        self.out.view(self.torch.uint8).fill_(INT_POISON_BYTE)

    def launch(self) -> None:
        self.op.run(self.args, self.artifact, stream=self.stream, assume_supported_args=True)
        if self.scale is not None:
            self.torch.mul(self.raw, self.scale, out=self.out)

    def outputs(self) -> dict[str, np.ndarray]:
        return {"C": torch_to_numpy(self.torch, self.out, self.dtype)}
