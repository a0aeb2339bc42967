"""Every library kernel, with its default config, at every shape of every shape set: the whole
way up to the launch, on the CPU, through the runner's and the CUDA worker's own code.

What runs is what ``workbench run`` does on a GPU, minus the GPU: the kernel compiled by NVRTC
and its arguments checked against the cubin (``require_matching_arguments``), the runner's job
for the config (geometry, arguments, outputs: ``kernel_job``), its inputs (``InputSets``), and
the worker (``CudaExecutor``) on host memory (``HostDevice``): inputs loaded from their files,
outputs poisoned, arguments packed into ``kernelParams`` and read back with the sizes the cubin
declares, as ``cuLaunchKernel`` reads them. Then the reference runs on the CPU on those inputs
and its outputs are compared with what came back (nothing ran: every output is untouched).

What is checked where: drawing the inputs of the largest shapes and running their reference
would take minutes and gigabytes (cache_hints' hot_sizes hold a 512 MiB input; a 4096^3 int8
GEMM reference is ~140 GFLOP), so

* every shape (the default and every set's): the input shapes the runner would draw, output
  buffers, launch geometry, and the packed argument bytes against the cubin's parameter sizes,
  with a distinct made-up device address per buffer (packing never dereferences them);
* the smallest shape of each set (by the bytes of its inputs and outputs), when those bytes
  are at most ``WHOLE_WAY_BYTES``: the whole way (inputs drawn and written, loaded by the
  worker, packed, "launched", the reference called on the prepared inputs, its outputs of the
  declared shapes and dtypes, the comparison made). Larger ones stop after the packing: every
  default shape (32 to 1056 MiB), cache_hints' hot_sizes, the prefill sets of the fp8 GEMMs,
  quantize_static, the dequantizers and reduce_rows; every kernel goes the whole way at least
  once.
"""

from __future__ import annotations

import functools
import json
import math
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from host_device import HostDevice, host_executor, read_kernel_params

from workbench.analysis.signature import kernel_parameters, require_matching_arguments
from workbench.compiler import CompileCache, CompileResult, compile_job, make_job
from workbench.errors import WorkbenchError
from workbench.runners.base import TrialOutcome
from workbench.runners.buffers import (
    BufferArg,
    OutputRole,
    ScalarValue,
    launch_arguments,
    named_scalars,
    numpy_dtype,
    output_buffers,
)
from workbench.runners.cuda.worker import CudaExecutor
from workbench.runners.protocol import KernelJob, LoadInputs, RunOnce
from workbench.runners.worker_runner import (
    InputSets,
    WorkerRunner,
    kernel_job,
    output_verdict,
)
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config, ScalarArg, Shape, shape_label
from workbench.spaces.registry import list_spaces

KERNELS = sorted(entry.name for entry in list_spaces())
#: Largest inputs + outputs (bytes) of a shape that goes the whole way.
WHOLE_WAY_BYTES = 32 << 20
#: Made-up device addresses: 16 TiB apart, in the canonical range, none zero.
FAKE_BASE, FAKE_STRIDE = 0x7F00_0000_0000, 1 << 44
#: How the driver reads each by-value type (little-endian, as on every CUDA host).
STRUCT_FORMAT = {"int32": "<i", "int64": "<q", "uint32": "<I", "float32": "<f", "float64": "<d"}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> CompileCache:
    return CompileCache(tmp_path_factory.mktemp("compile-cache"))


def shape_sets(name: str) -> dict[str, tuple[Shape, ...]]:
    spec = load_kernel(name)
    return {"default": (dict(spec.default_shape),), **spec.shape_sets}


def compiled_default(space: Space, cache: CompileCache) -> tuple[Config, CompileResult]:
    """The default config, valid at this shape, compiled, its args matching the kernel's."""
    config = space.spec.default_config()
    assert not space.explain(config), [v.message for v in space.explain(config)]
    result = compile_job(make_job(space, config), cache)
    assert result.ok and result.cubin is not None and result.entry, result.log[-600:]
    require_matching_arguments(space.spec, result.cubin, result.entry, result.ptx)
    return config, result


def buffer_bytes(space: Space, config: Config) -> int:
    """Bytes of every input and output of ``config`` at the space's shape (nothing drawn)."""
    shapes = InputSets(space, 0, Path("unused"), None).shapes(config)
    inputs = sum(
        math.prod(shape) * numpy_dtype(spec.dtype).itemsize
        for spec, shape in zip(space.spec.inputs, shapes.values(), strict=True)
    )
    return inputs + sum(o.nbytes for o in output_buffers(space, config))


def expected_param(arg: BufferArg | ScalarValue, size: int, addresses: Mapping[str, int]) -> bytes:
    """The bytes a parameter of ``size`` bytes must receive for ``arg``: a buffer's 64-bit
    address, or the scalar in its C type, its low ``size`` bytes (narrow integer parameters)."""
    if isinstance(arg, BufferArg):
        assert size == 8, f"{arg.name}: an {size}-byte parameter for a pointer"
        return struct.pack("<Q", addresses[arg.name])
    raw = struct.pack(STRUCT_FORMAT[arg.dtype], arg.value)
    return raw[:size].ljust(size, b"\0")


def check_scalars(space: Space, job: KernelJob) -> None:
    """A scalar argument that names a shape dimension carries that dimension."""
    for spec_arg, arg in zip(space.spec.args, job.args, strict=True):
        if isinstance(spec_arg, ScalarArg) and spec_arg.value.text in space.shape:
            assert isinstance(arg, ScalarValue) and arg.value == space.shape[spec_arg.value.text]


def check_layout(space: Space, config: Config, compiled: CompileResult, sets: InputSets) -> None:
    """Inputs, outputs, geometry and the packed arguments of ``config`` at this shape."""
    job = kernel_job(space, config, compiled)
    shapes = sets.shapes(config)
    assert list(shapes) == [spec.name for spec in space.spec.inputs]
    assert all(len(s) == len(spec.shape) and min(s) >= 1 for spec, s in zip(
        space.spec.inputs, shapes.values(), strict=True))  # fmt: skip
    buffers = [*shapes, *(o.name for o in job.outputs)]
    assert len(set(buffers)) == len(buffers)
    passed = {a.name for a in job.args if isinstance(a, BufferArg)}
    assert passed <= set(buffers), passed - set(buffers)
    assert set(shapes) <= passed, f"inputs drawn but never passed: {set(shapes) - passed}"
    assert min(job.launch.grid) >= 1 and 1 <= job.launch.threads_per_block <= 1024
    addresses = {name: FAKE_BASE + i * FAKE_STRIDE for i, name in enumerate(buffers)}
    pack = launch_arguments(job.args, addresses)
    assert compiled.cubin is not None and compiled.entry is not None
    params = kernel_parameters(compiled.cubin, compiled.entry, compiled.ptx)
    assert params is not None and len(params) == len(job.args) == len(pack.sizes)
    sizes = [p.size for p in params]
    got = read_kernel_params(pack.address, sizes)
    for i, (arg, size, raw) in enumerate(zip(job.args, sizes, got, strict=True)):
        assert raw == expected_param(arg, size, addresses), (i, arg, raw.hex())
    check_scalars(space, job)


@pytest.mark.parametrize("name", KERNELS)
def test_every_shape_lays_out_inputs_outputs_and_arguments(
    name: str, cache: CompileCache, tmp_path: Path
) -> None:
    failures = []
    for set_name, shapes in shape_sets(name).items():
        for shape in shapes:
            space = Space(load_kernel(name), shape=shape)
            try:
                config, compiled = compiled_default(space, cache)
                check_layout(space, config, compiled, InputSets(space, 0, tmp_path, None))
            except Exception as exc:  # every shape is checked; all failures are reported
                failures.append(f"{set_name} {shape_label(shape)}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


def whole_way(space: Space, config: Config, compiled: CompileResult, tmp: Path) -> None:
    """Draw, load, pack, "launch" on host memory, run the reference, compare."""
    assert space.spec.reference is not None
    sets = InputSets(space, 0, tmp, space.spec.reference.target)
    inputs = sets.get(config)
    assert sets.get(config) is inputs  # drawn once
    for spec, shape in zip(space.spec.inputs, sets.shapes(config).values(), strict=True):
        array = inputs.arrays[spec.name]
        assert array.shape == shape and array.dtype == numpy_dtype(spec.dtype), spec.name
        assert np.count_nonzero(array.astype(np.float64)) > 0, spec.name
    job = kernel_job(space, config, compiled)
    device = HostDevice(space.arch.sm)
    executor = CudaExecutor(gpu=device)  # type: ignore[arg-type]
    out_dir = tmp / "outputs"
    out_dir.mkdir()
    try:
        quiet = lambda stage: None  # noqa: E731
        executor.handle(LoadInputs(inputs.key, inputs.files), quiet)
        reply = executor.handle(RunOnce(job, str(out_dir)), quiet)
        (launched,) = device.launches
        assert launched.entry == compiled.entry and launched.launch == job.launch
        outputs = {o.name: o for o in job.outputs}
        for arg, raw, pointee in zip(job.args, launched.params, launched.pointees, strict=True):
            if isinstance(arg, ScalarValue):
                assert raw == expected_param(arg, len(raw), {}), arg
            elif arg.name in inputs.arrays:  # the very bytes drawn, in a buffer of their size
                assert pointee == inputs.arrays[arg.name].tobytes(), arg.name
            else:  # an output, filled (poison, init value or zeros) before the launch
                out = outputs[arg.name]
                assert pointee is not None and pointee[: out.nbytes] == out.initial().tobytes()
        verdict = output_verdict(space, config, job, inputs, reply)
    finally:
        executor.close()
    assert inputs.expected is not None
    expected = inputs.expected.get(config, named_scalars(job.args), job.outputs)
    assert inputs.expected.calls == 1  # the verdict's reference call, cached
    for out in job.outputs:
        if out.compared:
            got = expected[out.name]
            assert got.shape == out.shape and got.dtype == out.np_dtype, (out.name, got.dtype)
    assert not verdict.ok
    for check in verdict.checks:  # nothing ran: every poisoned output is untouched
        if outputs[check.name].role is OutputRole.POISONED:
            assert check.first is not None and check.first.untouched, check.describe()


def whole_way_shapes() -> list[Any]:
    """(kernel, shape) of the smallest shape of each set, where it fits ``WHOLE_WAY_BYTES``."""
    cases = []
    for name in KERNELS:
        spec = load_kernel(name)
        for set_name, shapes in shape_sets(name).items():
            try:
                sized = [
                    (buffer_bytes(Space(spec, shape=s), spec.default_config()), s) for s in shapes
                ]
            except WorkbenchError:  # no size without inputs: the set's test says why
                sized = [(0, shapes[0])]
            nbytes, shape = min(sized, key=lambda pair: pair[0])
            if nbytes <= WHOLE_WAY_BYTES:
                cases.append(pytest.param(name, shape, id=f"{name}-{set_name}"))
    return cases


WHOLE_WAY = whole_way_shapes()


def test_every_kernel_goes_the_whole_way_at_least_once() -> None:
    assert {case.values[0] for case in WHOLE_WAY} == set(KERNELS)


@pytest.mark.parametrize(("name", "shape"), WHOLE_WAY)
def test_smallest_shape_of_each_set_goes_the_whole_way(
    name: str, shape: Shape, cache: CompileCache, tmp_path: Path
) -> None:
    spec = load_kernel(name)
    space = Space(spec, shape=shape)
    config, compiled = compiled_default(space, cache)
    whole_way(space, config, compiled, tmp_path)


# -- the runner and a worker process: inputs that follow the config ------------------------


@pytest.fixture
def host_runner(tmp_path: Path, cache: CompileCache) -> Iterator[tuple[WorkerRunner, Path]]:
    record = tmp_path / "launches.jsonl"
    runner = WorkerRunner(
        Space(load_kernel("quantize_static"), shape={"M": 3, "K": 64}),
        cache,
        executor_factory=functools.partial(host_executor, str(record)),
        startup_timeout_s=120,
        workdir=tmp_path,
    )
    yield runner, record
    runner.close()


def test_runner_draws_and_loads_inputs_per_config_value(
    host_runner: tuple[WorkerRunner, Path],
) -> None:
    """quantize_static's scales are [K] per channel and [1] per tensor: each config launches
    with its own, the worker reloading when the set changes, and nothing is drawn twice."""
    runner, record = host_runner
    channel = runner.space.parse_config([])
    tensor = runner.space.parse_config(["GRANULARITY=tensor"])
    assert channel["GRANULARITY"] == "channel"
    for config in (channel, tensor, {**channel, "BLOCK": 128}):
        m = runner.evaluate(config)
        # nothing ran on host memory: verified against the reference, every code untouched
        assert m.outcome is TrialOutcome.WRONG, m.reason
        assert "output q untouched at index (0, 0)" in m.reason
        assert "192 of 192 elements wrong" in m.reason
    launches = [json.loads(line) for line in record.read_text().splitlines()]
    names = [a if isinstance(a, str) else None for a in runner.space.spec.args]
    scale, zero_point, x = names.index("scale"), names.index("zero_point"), names.index("x")
    assert [launch["pointee_bytes"][scale] for launch in launches] == [4 * 64, 4, 4 * 64]
    assert [launch["pointee_bytes"][zero_point] for launch in launches] == [4 * 64, 4, 4 * 64]
    assert [launch["pointee_bytes"][x] for launch in launches] == [2 * 3 * 64] * 3
    assert runner.inputs_for(channel)["scale"].shape == (64,)
    assert runner.inputs_for(tensor)["scale"].shape == (1,)
    assert runner.inputs_for(tensor)["x"] is runner.inputs_for(channel)["x"]  # drawn once
