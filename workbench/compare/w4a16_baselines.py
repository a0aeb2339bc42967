"""W4A16 GEMM baselines through PyTorch: the dense matmul on the dequantized weights (what
serving does without an int4 kernel: four times the weight bytes) and PyTorch's own int4
weight-only GEMM, ``torch._weight_int4pack_mm`` (tinygemm).

Both take gemm_w4a16's inputs (the tiled int4 layout of :mod:`workbench.quant.int4`), unpack
them on the host while preparing (not timed) and compute ``C = A . dequant(W)``.

tinygemm's format (``aten/src/ATen/native/cuda/int4mm.cu``, and the int4 tests and gpt-fast's
``quantize.py`` that call it): the codes as uint8 ``[N, K/2]``, the even k in the high nibble,
converted by ``torch._convert_weight_to_int4pack(w, inner_k_tiles)`` (torch before 2.5 took
int32 ``[N, K]`` codes instead: both are tried), bf16 activations, and ``scales_and_zeros``
``[K/G, N, 2]`` in bf16 with ``w = (q - 8) * scale + zero``: for ``w = s * (q - z)`` that is
``scale = s`` and ``zero = s * (8 - z)``, each rounded to bf16 (within the space's tolerance).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from workbench.compare.baselines import Baseline, BaselineUnsupported, register
from workbench.compare.gemm_baselines import _torch_version, _TorchRun, to_torch, torch_on_stream
from workbench.compare.problems import BaselineProblem, Family
from workbench.quant.int4 import Int4Weights, from_tiled
from workbench.references.w4a16 import DTYPES, tiled_from_inputs
from workbench.spaces.schema import BaselineKind

#: Group sizes ``torch._weight_int4pack_mm`` accepts.
TINYGEMM_GROUPS = (32, 64, 128, 256)


def problem_weights(problem: BaselineProblem, inputs: Mapping[str, np.ndarray]) -> Int4Weights:
    """The logical int4 weights of a gemm_w4a16 problem's inputs."""
    config = problem.config
    tiled = tiled_from_inputs(
        np.asarray(inputs["qweight"]),
        np.asarray(inputs["scales"]),
        np.asarray(inputs["zeros"]) if "zeros" in inputs else None,
        n=problem.dim("N"),
        group=int(config.get("G", 128)),
        symmetric=bool(config.get("SYMMETRIC", True)),
    )
    return from_tiled(tiled)


def problem_dtype(problem: BaselineProblem) -> str:
    """The activation and output type (the space's DTYPE)."""
    return str(problem.config.get("DTYPE", "float16"))


def inner_k_tiles(k: int) -> int:
    """The largest ``inner_k_tiles`` of tinygemm's packing that divides K into whole tiles
    (K must be a multiple of ``16 * inner_k_tiles``); 0 when none does."""
    return next((t for t in (8, 4, 2) if k % (16 * t) == 0), 0)


def tinygemm_operands(w: Int4Weights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 ``[N, K/2]`` codes with the even k in the high nibble, the same as int32 ``[N,
    K]``, float32 ``[K/G, N, 2]`` scales and zeros) for ``torch._weight_int4pack_mm``."""
    qt = np.ascontiguousarray(w.q.T)  # [N, K]
    packed = ((qt[:, 0::2] << 4) | qt[:, 1::2]).astype(np.uint8)
    s = w.scales.astype(np.float32)
    zero = s * (8.0 - w.zero_points().astype(np.float32))
    return packed, qt.astype(np.int32), np.stack([s, zero], axis=-1)


@register
class TorchDenseMatmul(Baseline):
    """``torch.matmul`` on the weights dequantized to the activations' type (cuBLAS)."""

    name = "torch_dense"
    kind = BaselineKind.TORCH
    title = "PyTorch matmul on the dequantized fp16/bf16 weights (cuBLAS)"
    label = "dense fp16/bf16"
    families = frozenset({Family.GEMM_W4A16})
    min_cc = 70
    modules = ("torch",)

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        torch = torch_on_stream(stream)
        dtype = problem_dtype(problem)
        dense = problem_weights(problem, inputs).dequantize().astype(DTYPES[dtype])  # [K, N]
        a = to_torch(torch, inputs["A"], dtype)
        w = to_torch(torch, dense, dtype)
        out = torch.empty((problem.dim("M"), problem.dim("N")), dtype=a.dtype, device=a.device)

        def call(o: Any) -> Any:
            return torch.matmul(a, w) if o is None else torch.matmul(a, w, out=o)

        return _TorchRun(torch, call, out, "C", dtype)

    def version(self) -> str:
        return _torch_version()


@register
class TorchInt4PackMM(Baseline):
    """PyTorch's int4 weight-only GEMM, ``torch._weight_int4pack_mm`` (bf16 activations)."""

    name = "torch_int4mm"
    kind = BaselineKind.TORCH
    title = "PyTorch torch._weight_int4pack_mm (tinygemm, bf16)"
    label = "torch int4mm"
    families = frozenset({Family.GEMM_W4A16})
    dtypes = frozenset({"bfloat16"})  # tinygemm's CUDA kernel takes bf16 activations only
    min_cc = 80
    modules = ("torch",)

    def limits(self, problem: BaselineProblem) -> str | None:
        n, k = problem.dim("N"), problem.dim("K")
        group = int(problem.config.get("G", 128))
        if n % 8:
            return f"torch._weight_int4pack_mm needs N a multiple of 8 (N = {n})"
        if not inner_k_tiles(k):
            return f"torch._weight_int4pack_mm needs K a multiple of 32 (K = {k})"
        if group not in TINYGEMM_GROUPS:
            return f"torch._weight_int4pack_mm takes groups of 32, 64, 128, 256 (G = {group})"
        return None

    def prepare(
        self, problem: BaselineProblem, inputs: Mapping[str, np.ndarray], stream: int
    ) -> Any:
        torch = torch_on_stream(stream)
        if not hasattr(torch, "_weight_int4pack_mm"):
            raise BaselineUnsupported(f"PyTorch {torch.__version__} has no _weight_int4pack_mm")
        w = problem_weights(problem, inputs)
        packed, codes, scales_zeros = tinygemm_operands(w)
        tiles = inner_k_tiles(w.k)
        try:  # torch >= 2.5: uint8 [N, K/2]
            weight = torch._convert_weight_to_int4pack(torch.from_numpy(packed).cuda(), tiles)
        except RuntimeError:  # earlier: int32 [N, K]
            weight = torch._convert_weight_to_int4pack(torch.from_numpy(codes).cuda(), tiles)
        sz = torch.from_numpy(scales_zeros).cuda().to(torch.bfloat16)
        a = to_torch(torch, inputs["A"], "bfloat16")
        out = torch.empty((problem.dim("M"), problem.dim("N")), dtype=a.dtype, device=a.device)
        group = int(problem.config.get("G", 128))

        def call(o: Any) -> Any:
            return torch._weight_int4pack_mm(a, weight, group, sz)

        run = _TorchRun(torch, call, out, "C", "bfloat16")
        run.use_out = False  # (no out= overload)
        return run

    def version(self) -> str:
        return _torch_version()
