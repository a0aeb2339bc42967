"""What a kernel computes, in the terms a library baseline needs: the family, the shape and
the dtypes.

The family comes from the space's reference function: two kernels that share a reference
compute the same thing, whatever their names, parameters or source. Kernels with another
reference are compared only with a copy of the bytes their work model says they must move
(the ``stream`` family), and only when their work unit is a bandwidth.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from workbench.roofline.timed import BANDWIDTH_UNITS
from workbench.runners.buffers import kernel_arguments, named_scalars
from workbench.spaces.launch import work_counts
from workbench.spaces.model import Config, UserBaseline, Value, VariantBaseline
from workbench.spaces.space import Space


class Family(enum.Enum):
    """What a kernel computes, as far as a library can do the same."""

    GEMM_INT8 = "gemm_int8"  #: C[M, N] int32 = A[M, K] int8 . B[N, K]^T
    GEMM_W8A8 = "gemm_w8a8"  #: the int8 GEMM with a per-row x per-column dequantizing epilogue
    GEMM_FP8 = "gemm_fp8"  #: C = (A . B^T) * scale_a * scale_b, FP8 in, fp16/bf16 out
    GEMM_W4A16 = "gemm_w4a16"  #: C = A . dequant(W), fp16/bf16 A and C, group-wise int4 W
    #: out = softmax(q . K^T / sqrt(D)) . V, one query per sequence, a (quantized) KV cache
    ATTENTION_DECODE = "attention_decode"
    REDUCE = "reduce"  #: total = OP(x) over the whole input
    REDUCE_ROWS = "reduce_rows"  #: out[r] = OP(x[r, :])
    STREAM = "stream"  #: anything bandwidth-bound: compared with a copy of its bytes


#: Reference function -> family (``Reference.target``).
REFERENCE_FAMILIES: Mapping[str, Family] = {
    "workbench.references.gemm:gemm_int8": Family.GEMM_INT8,
    "workbench.references.gemm:gemm_w8a8": Family.GEMM_W8A8,
    "workbench.references.gemm_fp8:gemm_fp8": Family.GEMM_FP8,
    "workbench.references.w4a16:gemm_w4a16": Family.GEMM_W4A16,
    "workbench.references.attention:attention_decode": Family.ATTENTION_DECODE,
    "workbench.references.reduce:reduce_all": Family.REDUCE,
    "workbench.references.reduce:sum_all": Family.REDUCE,
    "workbench.references.reduce:reduce_rows": Family.REDUCE_ROWS,
}


@dataclass(frozen=True)
class BaselineProblem:
    """One kernel problem a baseline may solve.

    Attributes:
        kernel: the space's name.
        family: what is computed (None: nothing a library does the same, not even a copy).
        shape: the problem shape (``M``, ``N``, ``K`` or ``n``, ``rows``, ``cols``).
        inputs: input name -> space dtype name (``int8``, ``float8_e4m3``, ``float32``).
        outputs: compared output name -> dtype name (scratch buffers left out).
        op: the reduction (``sum``, ``max``, ``sumsq``) for the reduce families.
        out_dtype: the GEMM output type where the config chooses it (``OUT``).
        ops: operations of one launch (work model).
        min_bytes: minimum bytes one launch moves (work model).
        unit: the space's throughput unit (``TOPS``, ``TFLOP/s``, ``GB/s``).
        why_none: why ``family`` is None.
    """

    kernel: str
    family: Family | None
    shape: Mapping[str, int]
    inputs: Mapping[str, str]
    outputs: Mapping[str, str]
    ops: float
    min_bytes: float
    unit: str
    op: str | None = None
    out_dtype: str | None = None
    why_none: str = ""
    config: Mapping[str, Value] = field(default_factory=dict)
    #: named scalar arguments (``eps``), which a user baseline may take by name
    scalars: Mapping[str, float | int] = field(default_factory=dict)
    #: the space's own baselines: ``python:FUNCTION`` -> where the function is
    user_baselines: Mapping[str, str] = field(default_factory=dict)
    #: other variants of the same space file: ``variant:NAME`` -> (NAME, where the function
    #: making its inputs is, or None)
    variant_baselines: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)

    def dim(self, name: str) -> int:
        """A shape variable (``M``), or 0 when the shape has none of that name."""
        return int(self.shape.get(name, 0))

    @property
    def input_dtypes(self) -> frozenset[str]:
        return frozenset(self.inputs.values())

    @property
    def copy_bytes(self) -> int:
        """Bytes a copy baseline copies: half the work model's bytes, so that what it reads
        plus what it writes is the kernel's minimum traffic."""
        return max(1, int(self.min_bytes) // 2)


def classify(space: Space, config: Config) -> BaselineProblem:
    """The problem ``space`` solves at its shape with ``config`` (its problem variants).

    Raises:
        ConfigError: the work model or an output dtype fails to evaluate for ``config``.
    """
    spec = space.spec
    env = space.env(config)
    ops, min_bytes = work_counts(space, config)
    outputs = {o.name: o.dtype_for(env).value for o in spec.outputs if not o.scratch}
    family: Family | None = None
    why = ""
    target = spec.reference.target if spec.reference is not None else ""
    if target in REFERENCE_FAMILIES:
        family = REFERENCE_FAMILIES[target]
        if family is Family.GEMM_INT8 and config.get("EPI") == "w8a8":
            family = Family.GEMM_W8A8  # (its reference applies the epilogue the config names)
    elif spec.work.unit in BANDWIDTH_UNITS:
        family = Family.STREAM
    elif spec.reference is None:
        why = "the space has no reference, so no library result can be checked against it"
    else:
        why = (
            f"no library computes what {target} does, and the work unit {spec.work.unit} "
            "is not a bandwidth (no copy baseline)"
        )
    op = config.get("OP")
    out = config.get("OUT")
    return BaselineProblem(
        kernel=spec.name,
        family=family,
        shape=dict(space.shape),
        inputs={i.name: i.dtype_for(env).value for i in spec.inputs},
        outputs=outputs,
        ops=ops,
        min_bytes=min_bytes,
        unit=spec.work.unit,
        op=str(op) if op is not None else ("sum" if family in _REDUCES else None),
        out_dtype=str(out) if out is not None else None,
        why_none=why,
        config=dict(config),
        scalars=named_scalars(kernel_arguments(space, config)),
        user_baselines={b.name: b.target for b in spec.baselines if isinstance(b, UserBaseline)},
        variant_baselines={
            b.name: (b.variant, b.inputs) for b in spec.baselines if isinstance(b, VariantBaseline)
        },
    )


_REDUCES = (Family.REDUCE, Family.REDUCE_ROWS)
