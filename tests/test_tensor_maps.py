"""Tensor maps (CUtensorMap) as kernel arguments: the space file's ``{tensor_map: ...}`` entry,
the encoder's rules checked before any launch (one message per rule), the kernel's 128-byte
parameter, and the 128 bytes packed at the parameter's offset, on the CPU through the CUDA
worker's own code on host memory (``HostDevice``: the encoder's real arguments, packed as plain
fields in place of the driver's opaque bytes). The driver's own encoding and a TMA copy on the
GPU are the ``gpu`` tests at the end (skipped without a driver).

The user kernel here is tests/data/tma_copy (Y = X through TMA boxes of X's tensor map).
"""

from __future__ import annotations

import ctypes
import functools
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from gpu_checks import BRIEF, GPU, gpu
from host_device import HostDevice, host_executor, read_host_tensor_map

from workbench.analysis.cubin import read_cubin
from workbench.analysis.signature import kernel_parameters, mismatched_arguments
from workbench.compiler import CompileCache, CompileResult, compile_job, make_job
from workbench.errors import ConfigError, SpaceFileError
from workbench.runners.base import TrialOutcome
from workbench.runners.buffers import (
    BufferArg,
    KernelArg,
    kernel_arguments,
    launch_arguments,
    pack_arguments,
)
from workbench.runners.cuda.driver import TENSOR_MAP_DTYPES, tensor_map_encode_arguments
from workbench.runners.cuda.worker import CudaExecutor
from workbench.runners.input_sets import InputSets
from workbench.runners.kernel_jobs import check_launch_layout, kernel_job
from workbench.runners.protocol import LoadInputs, RunOnce
from workbench.runners.tensor_maps import (
    ELEMENT_BYTES,
    L2_PROMOTIONS,
    SWIZZLE_SPANS,
    TensorMapError,
    TensorMapValue,
    tensor_map_problem,
)
from workbench.runners.worker_runner import WorkerRunner
from workbench.spaces import Space, load_space
from workbench.spaces.model import TensorMapArg
from workbench.spaces.schema import DType
from workbench.toolchain import Arch

DATA = Path(__file__).parent / "data" / "tma_copy"
KERNELS = Path(__file__).parents[1] / "kernels_cu"
SM90 = Arch.parse("sm_90")


# -- the encoder's rules, one message each ---------------------------------------------------
I8, F32 = DType.INT8, DType.FLOAT32
MALFORMED = [  # (dtype, shape, box, swizzle, l2_promotion, the message's distinct part)
    (I8, (64,) * 6, (8,) * 6, 0, 256, "the buffer has 6 dimensions; a tensor map has 1 to 5"),
    (I8, (64, 64), (64,), 0, 256, "box has 1 dimensions but the buffer has 2"),
    (I8, (64, 64), (64, 0), 0, 256, "box[1] is 0: a box extent is at least 1 element"),
    (I8, (512, 64), (257, 64), 0, 256, "box[0] is 257 elements: a box extent is at most 256"),
    (I8, (64, 64), (64, 2.5), 0, 256, "box[1] is 2.5, not a whole number of elements"),
    (I8, (64, 64), (64, 64), 96, 256, "swizzle is 96: expected 0 (none), 32, 64 or 128 bytes"),
    (I8, (64, 64), (64, 64), 64, 32, "l2_promotion is 32: expected 0 (none), 64, 128 or 256"),
    (
        I8,
        (2, 1 << 33),
        (1, 16),
        0,
        256,
        "dimension 1 has 8589934592 elements: a tensor map allows at most",
    ),
    (I8, (64, 1000), (64, 16), 0, 256, "dimension 0 has a stride of 1000 bytes: global strides"),
    (I8, (2, 1 << 32, 256), (1, 1, 16), 0, 256, "stride of 1099511627776 bytes: at most 2^40"),
    (I8, (64, 64), (64, 8), 0, 256, "the box's inner extent is 8 bytes: it must be a multiple"),
    (F32, (64, 64), (64, 64), 128, 256, "inner extent is 256 bytes, wider than the 128-byte"),
]


@pytest.mark.parametrize("case", MALFORMED, ids=[c[-1][:28] for c in MALFORMED])
def test_each_malformed_map_gets_its_own_message(case: tuple) -> None:
    *args, message = case
    problem = tensor_map_problem(*args)
    assert problem is not None and message in problem, problem
    others = [c[-1] for c in MALFORMED if c is not case]
    assert not any(other in problem for other in others)  # the message names this rule alone


def test_maps_the_encoder_takes() -> None:
    assert tensor_map_problem(I8, (4096, 4096), (128, 128), 128, 256) is None
    assert tensor_map_problem(I8, (4096, 4096), (256, 32), 32, 0) is None
    # a box larger than the tensor: the part outside is zero-filled (GEMM tiles at M = 1)
    assert tensor_map_problem(I8, (1, 16), (128, 128), 128, 256) is None
    assert tensor_map_problem(F32, (1000, 300), (64, 32), 0, 64) is None
    assert tensor_map_problem(DType.FLOAT16, (8, 8, 8, 8, 8), (1, 2, 4, 8, 8), 0, 128) is None


def test_the_values_the_encoder_receives() -> None:
    """Dims, strides and box innermost first (the driver's order), strides in bytes."""
    value = TensorMapValue("A", DType.INT8, (77, 160), (128, 128), 128)
    assert value.global_dims == (160, 77) and value.global_strides == (160,)
    assert value.box_dims == (128, 128) and value.box_bytes == 128 * 128
    three = TensorMapValue("C", DType.FLOAT32, (2, 3, 8), (1, 3, 4), 0)
    assert three.global_dims == (8, 3, 2) and three.global_strides == (32, 96)
    args = tensor_map_encode_arguments(value, 0x7F00_0000_0100)
    dtype, rank, address, dims, strides, box, elem, interleave, swizzle, l2, oob = args
    assert (rank, address) == (2, 0x7F00_0000_0100)
    assert [int(d) for d in dims] == [160, 77] and [int(s) for s in strides] == [160]
    assert [int(b) for b in box] == [128, 128] and [int(e) for e in elem] == [1, 1]
    assert swizzle.name == "CU_TENSOR_MAP_SWIZZLE_128B" and l2.name.endswith("L2_256B")
    assert oob.name == "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE"  # zeros outside the tensor
    assert interleave.name == "CU_TENSOR_MAP_INTERLEAVE_NONE"
    assert dtype.name == "CU_TENSOR_MAP_DATA_TYPE_UINT8"  # int8 bytes move as they are
    with pytest.raises(TensorMapError, match="not 16-byte aligned"):
        tensor_map_encode_arguments(value, 0x7F00_0000_0108)


def test_every_dtype_has_an_encoder_type_of_its_size() -> None:
    assert set(TENSOR_MAP_DTYPES) == set(ELEMENT_BYTES) == set(DType)
    for dtype in (DType.INT8, DType.FLOAT8_E4M3, DType.FLOAT8_E5M2):
        assert TENSOR_MAP_DTYPES[dtype].name == "CU_TENSOR_MAP_DATA_TYPE_UINT8"


# -- the space file --------------------------------------------------------------------------
@pytest.fixture
def tma_project(tmp_path: Path) -> Callable[..., Path]:
    """A project holding tma_copy (kernel, header, reference); returns a writer of variants of
    its space file (``old`` -> ``new`` replacements of the text)."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'tma-user'\n")
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for src in (DATA / "tma_copy.cu", DATA / "reference.py", KERNELS / "tma_sm90.cuh"):
        shutil.copy(src, kernels / src.name)
    text = (DATA / "tma_copy.yaml").read_text()
    text = text.replace("source: tma_copy.cu", "source: ../kernels/tma_copy.cu")
    text = text.replace("includes: [../../../kernels_cu]", "includes: [../kernels]")
    text = text.replace("file: reference.py", "file: ../kernels/reference.py")
    (tmp_path / "spaces").mkdir()

    def write(*edits: tuple[str, str], name: str = "tma.yaml") -> Path:
        variant = text
        for old, new in edits:
            assert old in variant, old
            variant = variant.replace(old, new, 1)
        path = tmp_path / "spaces" / name
        path.write_text(variant)
        return path

    return write


MAP_ENTRY = "  - {tensor_map: X, box: [BR, BC], swizzle: 0}"


def test_the_entry_loads_as_a_tensor_map_argument() -> None:
    spec = load_space(DATA / "tma_copy.yaml")
    arg = spec.args[-1]
    assert isinstance(arg, TensorMapArg) and arg.buffer == "X"
    assert [e.text for e in arg.box] == ["BR", "BC"] and arg.swizzle.text == "0"
    assert arg.when.text == "True" and arg.l2_promotion == 256


@pytest.mark.parametrize(
    ("entry", "key", "message"),
    [
        ("{tensor_map: Z, box: [BR, BC]}", "args[4].tensor_map", "'Z' is not an input or output"),
        ("{tensor_map: X, box: [BC]}", "args[4].box", "box has 1 dimension but buffer 'X' has 2"),
        ("{tensor_map: X, box: [BR, BK]}", "args[4].box[1]", "unknown name(s) BK"),
        ("{tensor_map: X, box: [BR, BC], when: PATH}", "args[4].when", "unknown name(s) PATH"),
        (
            "{tensor_map: X, box: [BR, BC], value: 1}",
            "args[4].value",
            "unknown key 'value'; expected one of: box, l2_promotion, name, swizzle, tensor_map, "
            "when",
        ),
        ("{tensor_map: X}", "args[4]", "missing required key 'box'"),
        ("{tensor_map: X, box: [BR, BC], l2_promotion: 100}", "args[4].l2_promotion", "256"),
    ],
)
def test_a_malformed_entry_is_located(
    tma_project: Callable[..., Path], entry: str, key: str, message: str
) -> None:
    path = tma_project((MAP_ENTRY, f"  - {entry}"))
    with pytest.raises(SpaceFileError) as info:
        load_space(path)
    err = info.value
    assert err.key == key and message in str(err), str(err)
    assert err.line == next(i for i, t in enumerate(path.read_text().splitlines(), 1) if entry in t)


def test_an_output_passed_only_as_a_tensor_map_counts_as_passed(
    tma_project: Callable[..., Path],
) -> None:
    path = tma_project(
        ("  - Y\n", ""), (MAP_ENTRY, MAP_ENTRY + "\n  - {tensor_map: Y, box: [BR, BC]}")
    )
    spec = load_space(path)
    assert [a.buffer for a in spec.args if isinstance(a, TensorMapArg)] == ["X", "Y"]


# -- per config: checked before any launch ---------------------------------------------------
def maps_of(args: Sequence[KernelArg]) -> list[TensorMapValue]:
    return [a for a in args if isinstance(a, TensorMapValue)]


@pytest.mark.parametrize(
    ("edits", "shape", "message"),
    [
        ([("box: [BR, BC]", "box: [BR * 8, BC]")], None, "box[0] is 512 elements"),
        ([("box: [BR, BC]", "box: [BR, 3]")], None, "inner extent is 12 bytes"),
        ([("swizzle: 0", "swizzle: 64")], None, "inner extent is 128 bytes, wider than the 64"),
        ([("swizzle: 0", "swizzle: BR + 1")], None, "swizzle is 65: expected"),
        ([], {"R": 10, "C": 30}, "dimension 0 has a stride of 120 bytes"),
    ],
)
def test_a_map_the_encoder_would_refuse_stops_the_config(
    tma_project: Callable[..., Path], edits: list, shape: dict | None, message: str
) -> None:
    space = Space(load_space(tma_project(*edits)), shape=shape, arch=SM90)
    config = space.spec.default_config()
    with pytest.raises(TensorMapError, match="args\\[4\\] \\(X\\): tensor map of X: ") as info:
        check_launch_layout(space, config)  # what `workbench run` checks before any GPU
    assert message in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_check_reference_locates_a_map_the_encoder_would_refuse(
    tma_project: Callable[..., Path],
) -> None:
    import subprocess
    import sys

    path = tma_project(("box: [BR, BC]", "box: [BR * 8, BC]"))
    done = subprocess.run(
        [sys.executable, "-m", "workbench.cli.entry", "space", str(path), "--check-reference",
         "--sample", "0"],
        cwd=path.parent, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "BR * 8" in t)
    assert done.returncode == 2, done.stderr
    assert f"{path}:{line} [args[4]]: on shape" in done.stderr.replace("\n", ""), done.stderr
    assert "tensor map of X: box[0] is 512 elements" in done.stderr.replace("\n", "")


def test_when_false_passes_zeros_and_checks_nothing(tma_project: Callable[..., Path]) -> None:
    """A path that does not read the map is not refused for a box only another path uses."""
    path = tma_project(("box: [BR, BC], swizzle: 0}", "box: [BR * 8, BC], when: BR < 64}"))
    space = Space(load_space(path), arch=SM90)
    (used,) = maps_of(kernel_arguments(space, {"BR": 8, "BC": 32}))
    assert not used.zeroed and used.box == (64, 32)
    (unused,) = maps_of(kernel_arguments(space, {"BR": 64, "BC": 32}))
    assert unused.zeroed  # box 512 would be refused, but this config does not use the map
    assert launch_arguments([unused], {}).storage.tobytes()[:128] == bytes(128)


def test_the_runner_refuses_the_config_before_any_launch(
    tma_project: Callable[..., Path], tmp_path: Path
) -> None:
    path = tma_project(("box: [BR, BC]", "box: [BR * 8, BC]"))
    record = tmp_path / "launches.jsonl"
    space = Space(load_space(path), shape={"R": 100, "C": 64}, arch=SM90)
    with WorkerRunner(
        space,
        CompileCache(tmp_path / "cache"),
        executor_factory=functools.partial(host_executor, str(record)),
        workdir=tmp_path,
    ) as runner:
        bad = runner.evaluate({"BR": 64, "BC": 32})
        assert bad.outcome is TrialOutcome.INFEASIBLE
        assert "box[0] is 512 elements: a box extent is at most 256" in bad.reason
        assert not record.exists()  # nothing was launched
        fine = runner.evaluate({"BR": 8, "BC": 32})  # box 64 x 32: launched on host memory
        assert fine.outcome is TrialOutcome.WRONG and "untouched" in fine.reason
    (launch,) = [json.loads(line) for line in record.read_text().splitlines()]
    fields = read_host_tensor_map(bytes.fromhex(launch["params"][4]))
    assert fields["box"] == (32, 64) and fields["dims"] == (64, 100)


# -- the kernel's parameter, and the bytes packed for it -------------------------------------
@pytest.fixture(scope="module")
def compiled() -> tuple[Space, CompileResult]:
    space = Space(load_space(DATA / "tma_copy.yaml"), arch=SM90)
    result = compile_job(make_job(space, space.spec.default_config()))
    assert result.ok and result.cubin is not None and result.entry, result.log
    return space, result


def test_the_kernel_parameter_is_a_128_byte_64_aligned_map(
    compiled: tuple[Space, CompileResult],
) -> None:
    space, result = compiled
    params = kernel_parameters(result.cubin, result.entry, result.ptx)
    assert params is not None
    assert (params[4].size, params[4].ptx_type, params[4].align) == (128, "b8[128]", 64)
    assert params[4].is_tensor_map and not params[0].is_tensor_map
    assert mismatched_arguments(space.spec.args, result.cubin, result.entry, result.ptx) == []
    # a buffer where the kernel takes the map, and the map where it takes a pointer
    args = list(space.spec.args)
    swapped = [args[4], *args[1:4], args[0]]
    problems = mismatched_arguments(swapped, result.cubin, result.entry, result.ptx)
    assert len(problems) == 2
    assert "args[0] (tensor map of X) is a tensor map" in problems[0]
    assert "kernel's parameter 0 is .u64" in problems[0]
    assert "args[4] (X) is a buffer" in problems[1]
    assert "pass it as {tensor_map: BUFFER, box: [...]}" in problems[1]


def test_pack_places_a_map_on_a_64_byte_boundary() -> None:
    blob = bytes(range(128))
    pack = pack_arguments([(np.dtype(np.int32), 7), blob, (np.dtype(np.uint64), 5)])
    assert pack.sizes == (4, 128, 8)
    pointers = [int(p) for p in pack.pointers]
    assert pointers[1] % 64 == 0 and pointers[2] >= pointers[1] + 128
    assert ctypes.string_at(pointers[1], 128) == blob
    assert ctypes.string_at(pointers[0], 4) == (7).to_bytes(4, "little")


def test_a_map_to_encode_needs_an_encoder() -> None:
    value = TensorMapValue("X", DType.FLOAT32, (8, 8), (8, 8), 0)
    with pytest.raises(ValueError, match="nothing to encode it with"):
        launch_arguments([value], {"X": 1 << 40})
    with pytest.raises(ValueError, match="64 bytes, not 128"):
        launch_arguments([value], {"X": 1 << 40}, lambda v, a: bytes(64))
    with pytest.raises(KeyError, match="buffer X has no device address"):
        launch_arguments([value], {}, lambda v, a: bytes(128))


def test_the_worker_packs_the_map_at_its_parameter_offset(
    compiled: tuple[Space, CompileResult], tmp_path: Path
) -> None:
    """The CUDA worker's own code on host memory: the encoder's arguments for X's address, 128
    bytes at the offset the cubin gives parameter 4, the other parameters where they belong."""
    space, result = compiled
    config = space.spec.default_config()
    sets = InputSets(space, 0, tmp_path, None)
    inputs = sets.get(config)
    job = kernel_job(space, config, result)
    device = HostDevice("sm_90")
    executor = CudaExecutor(gpu=device)  # type: ignore[arg-type]
    (tmp_path / "out").mkdir()
    try:
        quiet = lambda stage: None  # noqa: E731
        executor.handle(LoadInputs(inputs.key, inputs.files), quiet)
        executor.handle(RunOnce(job, str(tmp_path / "out")), quiet)
    finally:
        executor.close()
    (launched,) = device.launches
    (encoded, address) = device.encoded[0]
    assert len(device.encoded) == 1 and encoded.buffer == "X"
    slots = read_cubin(result.cubin).kernels[result.entry].params
    assert slots is not None and slots[4].size == 128
    raw = launched.block[slots[4].offset : slots[4].offset + 128]
    assert raw == launched.params[4]
    fields = read_host_tensor_map(raw)
    x_address = int.from_bytes(launched.params[0], "little")
    assert fields["address"] == address == x_address  # the map describes X's buffer
    assert launched.pointees[0] == inputs.arrays["X"].tobytes()
    assert fields["dims"] == (300, 1000) and fields["strides"] == (1200,)
    assert fields["box"] == (32, 64) and fields["swizzle"] == 0 and fields["rank"] == 2
    # the scalars at their own offsets, untouched by the map's 64-byte alignment
    for i, value in ((2, 1000), (3, 300)):
        got = launched.block[slots[i].offset : slots[i].offset + 4]
        assert int.from_bytes(got, "little") == value
    assert isinstance(job.args[0], BufferArg)


# -- on a GPU: the driver's encoding and a TMA copy ------------------------------------------
GPU_SHAPES = [{"R": 1000, "C": 300}, {"R": 1, "C": 4}, {"R": 77, "C": 36}, {"R": 513, "C": 1004}]


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=lambda s: f"{s['R']}x{s['C']}")
def test_the_driver_encodes_the_map_and_tma_copies_bit_exactly(
    shape: dict[str, int], tmp_path: Path
) -> None:
    """Every box (1 to 256 rows, 16 to 256 bytes wide) at shapes that leave partial boxes at
    both edges: what the kernel read through the map is X, exactly."""
    from workbench.runners.cuda import CudaRunner

    if GPU.cc is None or GPU.cc < 90:
        pytest.skip(f"TMA needs sm_90 or newer (the GPU is sm_{GPU.cc})")
    space = Space(load_space(DATA / "tma_copy.yaml"), shape=shape, arch=SM90)
    with CudaRunner(space, CompileCache(tmp_path), timing=BRIEF) as runner:
        for config in space.iter_valid():
            m = runner.evaluate(config)
            assert m.outcome is TrialOutcome.OK, (config, m.reason)


@gpu
@pytest.mark.gpu
def test_the_driver_refuses_what_the_host_check_refuses() -> None:
    """The host's rules agree with the driver on a map each rule refuses (the encoder answers
    CUDA_ERROR_INVALID_VALUE), and the driver encodes a map the rules accept."""
    from workbench.runners.cuda.driver import CudaError, Gpu, encode_tensor_map

    gpu_ = Gpu()
    buf = gpu_.alloc(1 << 20)
    try:
        ok = TensorMapValue("X", DType.INT8, (1, 16), (128, 128), 128)  # box larger than tensor
        assert tensor_map_problem(ok.dtype, ok.shape, ok.box, ok.swizzle, 256) is None
        assert len(encode_tensor_map(ok, buf.ptr)) == 128
        for dtype, shape, box, swizzle, l2, _ in MALFORMED:
            expressible = (  # as the encoder's arguments: its enums, one extent per dimension
                len(shape) == len(box)
                and all(isinstance(b, int) for b in box)
                and swizzle in SWIZZLE_SPANS
                and l2 in L2_PROMOTIONS
            )
            if not expressible:
                continue
            value = TensorMapValue("X", dtype, shape, box, swizzle, l2)
            with pytest.raises(CudaError, match="INVALID_VALUE"):
                encode_tensor_map(value, buf.ptr)
    finally:
        gpu_.free(buf)
        gpu_.close()
