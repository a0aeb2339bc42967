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
from host_device import (
    HostDevice,
    host_executor,
    host_tensor_map,
    read_host_tensor_map,
    read_kernel_params,
)

from workbench.analysis.cubin import read_cubin
from workbench.analysis.signature import kernel_parameters, require_matching_arguments
from workbench.compiler import CompileCache, CompileResult, compile_job, make_job
from workbench.errors import WorkbenchError
from workbench.runners.base import TrialOutcome
from workbench.runners.buffers import (
    BufferArg,
    KernelArg,
    OutputRole,
    ScalarValue,
    input_specs,
    launch_arguments,
    named_scalars,
    numpy_dtype,
    output_buffers,
)
from workbench.runners.cuda.driver import tensor_map_encode_arguments
from workbench.runners.cuda.worker import CudaExecutor
from workbench.runners.input_sets import InputSets
from workbench.runners.kernel_jobs import kernel_job, output_verdict
from workbench.runners.protocol import KernelJob, LoadInputs, RunOnce
from workbench.runners.tensor_maps import TENSOR_MAP_BYTES, TensorMapValue
from workbench.runners.worker_runner import WorkerRunner
from workbench.spaces import Space, load_kernel
from workbench.spaces.model import Config, ScalarArg, Shape, shape_label
from workbench.spaces.numba_abi import HEAD_FIELDS, array_fields
from workbench.spaces.registry import list_spaces
from workbench.toolchain import Arch

KERNELS = sorted(entry.name for entry in list_spaces())
#: Largest inputs + outputs (bytes) of a shape that goes the whole way.
WHOLE_WAY_BYTES = 32 << 20
#: Made-up device addresses: 16 TiB apart, in the canonical range, none zero.
FAKE_BASE, FAKE_STRIDE = 0x7F00_0000_0000, 1 << 44
#: How the driver reads each by-value type (little-endian, as on every CUDA host).
STRUCT_FORMAT = {"int32": "<i", "int64": "<q", "uint32": "<I", "float32": "<f", "float64": "<d"}


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
    specs = input_specs(space, config)  # (a problem variant's dtype: the config's)
    inputs = sum(
        math.prod(shape) * numpy_dtype(specs[name].dtype).itemsize  # type: ignore[arg-type]
        for name, shape in shapes.items()
    )
    return inputs + sum(o.nbytes for o in output_buffers(space, config))


def host_encoder(value: TensorMapValue, address: int) -> bytes:
    """What the host device passes for a tensor map: the encoder's arguments as plain fields."""
    return host_tensor_map(tensor_map_encode_arguments(value, address))


def expected_param(arg: KernelArg, size: int, addresses: Mapping[str, int]) -> bytes:
    """The bytes a parameter of ``size`` bytes must receive for ``arg``: a buffer's 64-bit
    address, the scalar in its C type, its low ``size`` bytes (narrow integer parameters), or a
    tensor map's 128 bytes (zeros where its ``when`` is false)."""
    if isinstance(arg, BufferArg):
        assert size == 8, f"{arg.name}: an {size}-byte parameter for a pointer"
        return struct.pack("<Q", addresses[arg.name])
    if isinstance(arg, TensorMapValue):
        assert size == TENSOR_MAP_BYTES, f"tensor map of {arg.buffer}: a {size}-byte parameter"
        return bytes(size) if arg.zeroed else host_encoder(arg, addresses[arg.buffer])
    raw = struct.pack(STRUCT_FORMAT[arg.dtype], arg.value)
    return raw[:size].ljust(size, b"\0")


#: the field of a Numba array struct that holds the buffer's address
DATA_FIELD = HEAD_FIELDS.index("data")


def per_parameter(args: tuple[KernelArg, ...]) -> list[tuple[KernelArg, int | None]]:
    """What each kernel parameter carries: an argument, or field ``i`` of a Numba array's
    struct (:func:`~workbench.spaces.numba_abi.array_fields`; field 4 is the data pointer)."""
    out: list[tuple[KernelArg, int | None]] = []
    for arg in args:
        if isinstance(arg, BufferArg) and arg.numba_shape is not None:
            out += [(arg, i) for i in range(len(array_fields(0, arg.numba_shape, 1)))]
        else:
            out.append((arg, None))
    return out


def expected_field(arg: BufferArg, field: int, addresses: Mapping[str, int]) -> bytes:
    """Field ``field`` of a Numba array struct, as the parameter's 8 bytes."""
    assert arg.numba_shape is not None
    dtype, value = array_fields(addresses.get(arg.name, 0), arg.numba_shape, arg.itemsize)[field]
    return np.array(value, dtype=dtype).tobytes()


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
    passed |= {a.buffer for a in job.args if isinstance(a, TensorMapValue) and not a.zeroed}
    assert passed <= set(buffers), passed - set(buffers)
    assert set(shapes) <= passed, f"inputs drawn but never passed: {set(shapes) - passed}"
    assert min(job.launch.grid) >= 1 and 1 <= job.launch.threads_per_block <= 1024
    addresses = {name: FAKE_BASE + i * FAKE_STRIDE for i, name in enumerate(buffers)}
    pack = launch_arguments(job.args, addresses, host_encoder)
    assert compiled.cubin is not None and compiled.entry is not None
    params = kernel_parameters(compiled.cubin, compiled.entry, compiled.ptx)
    carried = per_parameter(job.args)
    assert params is not None and len(params) == len(carried) == len(pack.sizes)
    sizes = [p.size for p in params]
    got = read_kernel_params(pack.address, sizes)
    for i, ((arg, field), size, raw) in enumerate(zip(carried, sizes, got, strict=True)):
        if field is not None:
            assert isinstance(arg, BufferArg) and size == 8
            assert raw == expected_field(arg, field, addresses), (i, arg, field, raw.hex())
        else:
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
    specs = input_specs(space, config)  # (a problem variant's dtype: the config's)
    for spec, shape in zip(specs.values(), sets.shapes(config).values(), strict=True):
        array = inputs.arrays[spec.name]
        assert array.shape == shape and array.dtype == numpy_dtype(spec.dtype), spec.name  # type: ignore[arg-type]
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
        carried = per_parameter(job.args)
        for (arg, field), raw, pointee in zip(
            carried, launched.params, launched.pointees, strict=True
        ):
            if field is not None and field != DATA_FIELD:  # a Numba array's size fields
                assert isinstance(arg, BufferArg)
                assert raw == expected_field(arg, field, {}), (arg, field)
            elif isinstance(arg, ScalarValue):
                assert raw == expected_param(arg, len(raw), {}), arg
            elif isinstance(arg, TensorMapValue):  # zeros, or a map of a buffer of this launch
                if arg.zeroed:
                    assert raw == bytes(len(raw)), arg
                else:
                    assert read_host_tensor_map(raw)["address"] in device.allocations, arg
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


# -- tensor maps: the Hopper TMA path of the int8 GEMMs -------------------------------------
#: gemm_int8's and gemm_w8a8's cooperative TMA path at 128 x 256 x 128
TMA_WS = {"PATH": "tma_coop", "BM": 128, "BN": 256, "BK": 128}
#: ... with the staged epilogue (EPILOGUE=tma, issue 54): 3 stages leave room for the staging
#: tiles of 16-bit outputs (2 x 64 x 256 x 2 bytes)
TMA_WS_STAGED = {**TMA_WS, "STAGES": 3, "EPILOGUE": "tma"}
SM90A = "sm_90a"


@pytest.mark.parametrize(
    ("name", "knobs"),
    [("gemm_int8", TMA_WS), ("gemm_w8a8", TMA_WS), ("gemm_w8a8", TMA_WS_STAGED)],
    ids=["gemm_int8", "gemm_w8a8", "gemm_w8a8-staged"],
)
def test_tma_paths_lay_out_their_tensor_maps_at_every_shape(
    name: str, knobs: dict, cache: CompileCache, tmp_path: Path
) -> None:
    """At every shape of every set: the maps of A [M, K] and B [N, K] with boxes of BM and BN
    rows x 128 bytes and the 128-byte swizzle, encoded for the buffers' addresses and packed as
    the kernel's 128-byte parameters; one persistent CTA per SM at most. C's map is zeros with
    the direct epilogue; with EPILOGUE=tma it is [M, N] with boxes of a consumer's 64 rows x
    128 bytes, wherever C's rows start 16-byte aligned (elsewhere the space refuses the point,
    saying so)."""
    spec = load_kernel(name)
    staged = knobs.get("EPILOGUE") == "tma"
    failures = []
    for set_name, shapes in shape_sets(name).items():
        for shape in shapes:
            space = Space(spec, shape=shape, arch=Arch.parse(SM90A))
            config = dict(spec.default_config(), **knobs)
            if staged and shape["N"] % 8:
                problems = [v.message for v in space.explain(config)]
                if len(problems) != 1 or "N * out_bytes % 16 == 0" not in problems[0]:
                    failures.append(f"{set_name} {shape_label(shape)}: {problems}")
                continue
            try:
                assert not space.explain(config), space.explain(config)
                result = compile_job(make_job(space, config), cache)
                assert result.ok, result.log[-600:]
                check_layout(space, config, result, InputSets(space, 0, tmp_path, None))
                job = kernel_job(space, config, result)
                maps = [a for a in job.args if isinstance(a, TensorMapValue)]
                m, n, k = shape["M"], shape["N"], shape["K"]
                c_map = (
                    ("C", (m, n), (64, 64), 128, False) if staged else ("C", (m, n), (), 0, True)
                )
                assert [(t.buffer, t.shape, t.box, t.swizzle, t.zeroed) for t in maps] == [
                    ("A", (m, k), (128, 128), 128, False),
                    ("B", (n, k), (256, 128), 128, False),
                    c_map,
                ]
                tiles = -(-m // 128) * -(-n // 256)
                assert job.launch.grid == (min(tiles, space.device.sm_count), 1, 1)
                assert job.launch.block == (384, 1, 1)
            except Exception as exc:  # every shape is checked; all failures are reported
                failures.append(f"{set_name} {shape_label(shape)}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


#: the TMA paths' schedulers: static split-K and stream-K, of both GEMMs with TMA paths
TMA_SCHEDULES = [
    ("gemm_int8", {**TMA_WS, "SPLIT_K": 2}),
    ("gemm_int8", {**TMA_WS, "SCHED": "streamk", "RASTER": "n"}),
    ("gemm_fp8", {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128, "SPLIT_K": 4}),
    ("gemm_fp8", {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 128, "SCHED": "streamk"}),
    # the staged epilogue after stream-K's fixup: the workspace and C's map in one signature
    ("gemm_fp8", {**TMA_WS, "BN": 128, "SCHED": "streamk", "EPILOGUE": "tma"}),
    ("gemm_w8a8", {**TMA_WS_STAGED, "SCHED": "streamk"}),
]


@pytest.mark.parametrize(
    ("name", "knobs"),
    TMA_SCHEDULES,
    ids=[
        f"{n}-{k.get('SCHED', 'static')}-{k['PATH']}-{k.get('EPILOGUE', 'direct')}"
        for n, k in TMA_SCHEDULES
    ],
)
def test_tma_schedules_lay_out_grid_and_workspace_at_the_odd_and_compare_shapes(
    name: str, knobs: dict, cache: CompileCache, tmp_path: Path
) -> None:
    """Split-K and stream-K at every odd and compare shape where the point is valid (split-K
    needs a k-tile per slice and its partial tiles within L2): the arguments packed as the
    kernel's parameters (the workspace a buffer of its own), one CTA per unit up to one per SM
    (units: tiles x SPLIT_K, or the tiles' k-iterations), and a scratch workspace of the
    schedule's partial tiles (SPLIT_K - 1 per tile, or one per CTA) plus a counter per tile.
    With the staged epilogue (EPILOGUE=tma) C's tensor map follows, encoded, wherever C's rows
    start 16-byte aligned."""
    spec = load_kernel(name)
    config = dict(spec.default_config(), **knobs)
    stream_k = config["SCHED"] == "streamk"
    staged = config["EPILOGUE"] == "tma"
    checked, failures = 0, []
    for shape in [*spec.shapes("odd"), *spec.shapes("compare")]:
        space = Space(spec, shape=shape, arch=Arch.parse(SM90A))
        if not space.is_valid(config):
            problems = [v.message for v in space.explain(config)]
            if staged:  # the one reason: C's rows (stream-K fits every shape)
                rows = ("N * out_bytes % 16 == 0", "N % 8 == 0")
                assert len(problems) == 1 and any(r in problems[0] for r in rows), problems
            else:
                assert not stream_k, (shape, problems)  # stream-K fits every shape
            continue
        try:
            result = compile_job(make_job(space, config), cache)
            assert result.ok, result.log[-600:]
            check_layout(space, config, result, InputSets(space, 0, tmp_path, None))
            job = kernel_job(space, config, result)
            bm, bn, bk = config["BM"], config["BN"], config["BK"]
            tiles = -(-shape["M"] // bm) * -(-shape["N"] // bn)
            units = tiles * (-(-shape["K"] // bk) if stream_k else config["SPLIT_K"])
            ctas = min(units, space.device.sm_count)
            assert job.launch.grid == (ctas, 1, 1) and job.launch.block == (384, 1, 1)
            (workspace,) = [o for o in job.outputs if o.name == "workspace"]
            slots = ctas if stream_k else tiles * (config["SPLIT_K"] - 1)
            assert workspace.shape == (slots * bm * bn + tiles,), workspace.shape
            assert workspace.role is OutputRole.SCRATCH and workspace.np_dtype == np.int32
            maps = [a for a in job.args if isinstance(a, TensorMapValue)]
            assert [(t.buffer, t.zeroed) for t in maps] == [
                ("A", False),
                ("B", False),
                ("C", not staged),
            ]
            checked += 1
        except Exception as exc:  # every shape is checked; all failures are reported
            failures.append(f"{shape_label(shape)}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)
    assert checked >= 4, checked  # (split-K: 4 to 6 of the 8 or 9 shapes)


def test_tma_maps_reach_their_parameter_offsets(cache: CompileCache, tmp_path: Path) -> None:
    """The CUDA worker's own code on host memory at M=77, N=300, K=160: each map is encoded for
    the very buffer passed beside it (A's map for A's address), and its 128 bytes sit at the
    offset the cubin gives its parameter in the parameter block; other paths get zeros there,
    and so does C's map unless the epilogue is staged (EPILOGUE=tma: a 128 x 128 int32 tile,
    boxes of 64 rows x 32 columns)."""
    shape = {"M": 77, "N": 300, "K": 160}
    space = Space(load_kernel("gemm_int8"), shape=shape, arch=Arch.parse(SM90A))
    staged = {**TMA_WS, "BN": 128, "STAGES": 4, "EPILOGUE": "tma"}
    for config in (
        dict(space.spec.default_config(), **TMA_WS),
        dict(space.spec.default_config(), **staged),
        space.spec.default_config(),
    ):
        result = compile_job(make_job(space, config), cache)
        assert result.ok and result.cubin is not None and result.entry, result.log[-600:]
        sets = InputSets(space, 0, tmp_path, None)
        inputs = sets.get(config)
        job = kernel_job(space, config, result)
        device = HostDevice(SM90A)
        executor = CudaExecutor(gpu=device)  # type: ignore[arg-type]
        out_dir = tmp_path / f"out-{config['PATH']}-{config['EPILOGUE']}"
        out_dir.mkdir()
        try:
            quiet = lambda stage: None  # noqa: E731
            executor.handle(LoadInputs(inputs.key, inputs.files), quiet)
            executor.handle(RunOnce(job, str(out_dir)), quiet)
        finally:
            executor.close()
        (launched,) = device.launches
        slots = read_cubin(result.cubin).kernels[result.entry].params
        assert slots is not None and len(slots) == len(job.args) == 12
        names = [a.name if isinstance(a, BufferArg) else None for a in job.args]
        for index, buffer in ((9, "A"), (10, "B"), (11, "C")):
            slot = slots[index]
            raw = launched.block[slot.offset : slot.offset + slot.size]
            assert slot.size == TENSOR_MAP_BYTES and raw == launched.params[index]
            if config["PATH"] != "tma_coop" or (buffer == "C" and config["EPILOGUE"] != "tma"):
                assert raw == bytes(TENSOR_MAP_BYTES)
                assert config["PATH"] == "tma_coop" or not device.encoded
                continue
            pointer = launched.params[names.index(buffer)]
            fields = read_host_tensor_map(raw)
            assert fields["address"] == int.from_bytes(pointer, "little")
            assert fields["swizzle"] == 3  # CU_TENSOR_MAP_SWIZZLE_128B
            if buffer == "C":  # int32 [77, 300]: 1200-byte rows
                assert fields["dims"] == (300, 77) and fields["strides"] == (1200,)
                assert fields["box"] == (32, 64)  # 128 bytes of a row x a consumer's 64 rows
                continue
            rows = 77 if buffer == "A" else 300
            assert fields["dims"] == (160, rows) and fields["strides"] == (160,)
            assert fields["box"] == (128, 128 if buffer == "A" else config["BN"])
        # the maps 64-byte aligned against the same base, after the nine other parameters
        assert (slots[10].offset - slots[9].offset) % 64 == 0
        assert (slots[11].offset - slots[9].offset) % 64 == 0
        assert slots[9].offset >= slots[8].offset + slots[8].size
