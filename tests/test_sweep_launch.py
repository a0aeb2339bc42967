"""Configs that compile but could never launch are named by the static sweep (no GPU): a block
larger than the kernel's ``__launch_bounds__``, or one whose resources fit on no SM; and an
entry the binary does not have says what it has."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.analysis import LintCode
from workbench.analysis.occupancy import theoretical_occupancy
from workbench.compiler import CompileCache
from workbench.search.configs import select_configs
from workbench.spaces import Space, load_space
from workbench.static.sweep import static_sweep

BOUNDED_KERNEL = """\
extern "C" __global__ void __launch_bounds__(256) bounded(const float* x, float* y, int n) {
  __shared__ float tile[12288];  // 48 KiB of static shared memory
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  extern __shared__ float more[];
  if (i < n) y[i] = tile[threadIdx.x] + more[0];
}
"""

SPACE = """\
name: {name}
source: ../kernels/{source}
entry: {{kernel: {name}}}
arches: [sm_90]
parameters:
{parameters}
geometry: {geometry}
shapes: {{default: {{n: 1000}}}}
inputs: {{x: {{dtype: float32, shape: [n]}}}}
outputs: {{y: {{dtype: float32, shape: [n]}}}}
args: [x, y, {{value: n, dtype: int32}}]
reference: {{python: "workbench.references.elementwise:scale", rtol: 1e-6}}
work: {{bytes: 8 * n}}
"""


def _sweep_every_config(
    project: Path, cache_dir: Path, source: str, text: str, parameters: str, geometry: str
) -> list:
    """Write the kernel and a space of ``x -> y`` for it, and compile every valid config."""
    (project / "kernels" / source).write_text(text)
    name = source.split(".")[0]
    path = project / "spaces" / f"{name}.yaml"
    path.write_text(
        SPACE.format(name=name, source=source, parameters=parameters, geometry=geometry)
    )
    space = Space(load_space(path))
    configs = select_configs(space, all_configs=True)
    return static_sweep(space, configs, cache=CompileCache(cache_dir))


def test_configs_that_cannot_launch_get_an_error_lint(project: Path, cache_dir: Path) -> None:
    swept = _sweep_every_config(
        project,
        cache_dir,
        "bounded.cu",
        BOUNDED_KERNEL,
        "  BLOCK: {values: [128, 256, 512], default: 256, role: launch}\n"
        "  DYNAMIC_KB: {values: [0, 160, 200], default: 0, role: launch}",
        '{grid: "cdiv(n, BLOCK)", block: BLOCK, shared_bytes: DYNAMIC_KB * 1024}',
    )
    records = {(r.config["BLOCK"], r.config["DYNAMIC_KB"]): r for r in swept}
    assert len(records) == 9 and all(r.ok for r in records.values())
    launch_errors: dict[Any, list[str]] = {
        k: [x.text for x in r.lints if x.code is LintCode.CANNOT_LAUNCH] for k, r in records.items()
    }
    for (block, dynamic_kb), errors in launch_errors.items():
        too_wide = block > 256
        # 48 KiB static + 200 KiB dynamic is past sm_90's 227 KiB per block; 48 + 160 is not
        too_much_shared = dynamic_kb == 200
        assert len(errors) == too_wide + too_much_shared, (block, dynamic_kb, errors)
        if too_wide:
            assert (
                f"error: cannot launch: {block} threads per block, more than the kernel's bound "
                "of 256 (__launch_bounds__ or .maxntid)"
            ) in errors
        if too_much_shared:
            assert errors[-1].startswith("error: cannot launch: no block fits on an SM of cc 90")
            assert "bytes of shared memory per block" in errors[-1]
            assert records[(block, dynamic_kb)].occupancy == 0
    assert launch_errors[(256, 160)] == [] and records[(256, 160)].occupancy > 0


REQNTID_PTX = """\
.version 8.0
.target sm_80
.address_size 64
.visible .entry fixed(.param .u64 p_x, .param .u64 p_y, .param .u32 p_n)
.reqntid ${BLOCK}, 1, 1
{
  ret;
}
"""


def test_a_block_other_than_reqntid_cannot_launch(project: Path, cache_dir: Path) -> None:
    """``.reqntid`` asks for that exact block: larger and smaller ones are both refused."""
    records = _sweep_every_config(
        project,
        cache_dir,
        "fixed.ptx",
        REQNTID_PTX,
        "  BLOCK: {values: [128, 256], default: 256}\n"
        "  LAUNCH: {values: [128, 256], default: 256, role: launch}",
        '{grid: "cdiv(n, LAUNCH)", block: LAUNCH}',
    )
    assert len(records) == 4
    for r in records:
        errors = [x.text for x in r.lints if x.code is LintCode.CANNOT_LAUNCH]
        block, launch = r.config["BLOCK"], r.config["LAUNCH"]
        if block == launch:
            assert errors == [], r.config
        else:
            assert errors == [
                f"error: cannot launch: a block of {launch} x 1 x 1 threads, but the kernel "
                f"requires exactly {block} x 1 x 1 (.reqntid)"
            ]


def test_the_blocker_names_the_resource() -> None:
    fits = theoretical_occupancy(90, 256, 32, 0)
    assert fits.active_blocks > 0 and fits.launch_blocker() is None
    # 255 registers x 1024 threads: 261120 registers, four times what a block may have
    regs = theoretical_occupancy(90, 1024, 255, 0)
    assert regs.launch_blocker() == (
        f"no block fits on an SM of cc 90: it needs {regs.registers_per_block} registers per block"
    )


def test_a_cxx_kernel_named_as_extern_c_gets_the_mangling_hint(
    project: Path, cache_dir: Path
) -> None:
    src = project / "kernels" / "axpy.cu"
    src.write_text(src.read_text().replace('extern "C" ', ""))  # a plain C++ kernel now
    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    (record,) = static_sweep(space, select_configs(space), cache=CompileCache(cache_dir))
    assert not record.ok
    assert record.error == (
        "entry axpy not found in the cubin (it has: _Z4axpyPKfPfi); axpy is a C++ kernel, so "
        'its symbol is mangled: declare it extern "C", or give entry: {template: "axpy"}'
    )
