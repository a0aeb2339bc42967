"""The launch register count a ``setmaxnreg`` kernel is balanced for, read from its cubin.

A warp-specialized kernel moves registers between its warpgroups with ``setmaxnreg``: the
producer gives some back (``.dec``), the consumers take them (``.inc``). ``.inc`` waits until
the CTA's pool holds the registers, and the pool is what the launch allocated, the kernel's
register count for every thread. The counts are balanced for one allocation
(``kernels_cu/gemm_tma_ws.cuh``: 40 + 2 x 232 = 3 x 168 per thread of each warpgroup); given
fewer at launch, the consumers wait forever. ptxas allocates 168 there only because of
``__launch_bounds__(384, 1)``. Measured with ptxas 13.5 (NVRTC 13.5) on that kernel's PTX:
without ``.maxntid`` / ``.minnctapersm`` it allocates 91 registers, with ``--maxrregcount=160``
160, and warns of neither; with the bounds, ``--maxrregcount`` is ignored (168).

Such a kernel exports the count it was balanced for as an initialised ``int`` named
:data:`BUDGET_SYMBOL` (``extern "C" __device__ const int workbench_setmaxnreg_budget = 168;``),
and :func:`budget_mismatch` compares it with the register count the cubin gives its entry.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.analysis.cubin import read_cubin

#: The symbol a module exports with the registers per thread its setmaxnreg counts assume.
BUDGET_SYMBOL = "workbench_setmaxnreg_budget"


@dataclass(frozen=True)
class BudgetMismatch:
    """A kernel whose launch allocation differs from the setmaxnreg budget of its module."""

    kernel: str
    #: registers per thread the cubin allocates at launch (``EIATTR_REGCOUNT``)
    registers: int
    #: registers per thread the kernel's setmaxnreg counts were balanced for
    budget: int

    def describe(self) -> str:
        """What is wrong and what it would do, in one sentence."""
        effect = (
            "its setmaxnreg.inc would wait forever for registers the launch never gave"
            if self.registers < self.budget
            else "its warpgroups' setmaxnreg counts were balanced for another allocation"
        )
        return (
            f"the cubin allocates {self.registers} registers per thread at launch, but the "
            f"kernel's setmaxnreg budget ({BUDGET_SYMBOL}) is {self.budget}: {effect}"
        )


def register_budget(cubin: bytes) -> int | None:
    """The setmaxnreg budget a module exports, or None when it exports none.

    Raises:
        CubinError: the cubin is malformed.
    """
    return read_cubin(cubin).int32_objects.get(BUDGET_SYMBOL)


def budget_mismatch(cubin: bytes, entry: str) -> BudgetMismatch | None:
    """How ``entry``'s launch allocation differs from its module's setmaxnreg budget; None when
    they agree, when the module exports no budget, or when ``entry`` is not in the cubin (the
    module load says so).

    Raises:
        CubinError: the cubin is malformed.
    """
    info = read_cubin(cubin)
    budget = info.int32_objects.get(BUDGET_SYMBOL)
    kernel = info.kernels.get(entry)
    if budget is None or kernel is None or kernel.registers == budget:
        return None
    return BudgetMismatch(entry, kernel.registers, budget)
