"""Verification on the GPU, as far as a CPU can check it: the compare kernel compiles with NVRTC
for every output type it takes, its parameters are the ones the worker packs (sizes read from
the cubin, as the driver reads them), and its semantics, written out element for element in
NumPy (:func:`compare_model`), agree with the host verifier (:func:`compare_output`) on outputs
that are right, wrong, untouched, NaN, infinite, within and past the tolerance. Whether the
kernel computes what the model says is the GPU check's job (benchmarks/gpu_throughput.py runs
both verifications on the same outputs)."""

from __future__ import annotations

import math
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

from workbench.analysis.cubin import read_cubin
from workbench.compiler import CompileCache
from workbench.runners.buffers import (
    Fill,
    OutputBuffer,
    OutputRole,
    ScalarValue,
    pack_arguments,
    poison_pattern,
)
from workbench.runners.device_verify import (
    RESULT,
    CompareResult,
    compare_arguments,
    compare_launch,
    compare_model,
    compile_compare,
    supported,
)
from workbench.runners.verify import Tolerance, compare_output, output_tolerance
from workbench.spaces.schema import DType
from workbench.toolchain import Arch

RNG = np.random.default_rng(7)


def output(dtype: DType, shape: tuple[int, ...], role: OutputRole = OutputRole.POISONED):
    return OutputBuffer("C", dtype, shape, role, Fill(poison_pattern(dtype)))


def spoilt(out: OutputBuffer, expected: np.ndarray) -> list[np.ndarray]:
    """Outputs against ``expected``: right, one wrong element, a tail left as the poison, and
    (floats) NaN, inf, and errors just within and past a tolerance."""
    right = expected.astype(out.np_dtype)
    wrong = right.copy().reshape(-1)
    wrong[5] = wrong[5] + 3 if out.np_dtype.kind in "iu" else wrong[5] * 2 + 1
    poisoned = right.copy().reshape(-1)
    poisoned.view(np.uint8).reshape(poisoned.size, -1)[-7:] = np.frombuffer(
        out.fill.pattern, np.uint8
    )
    cases = [right, wrong.reshape(right.shape), poisoned.reshape(right.shape)]
    if out.np_dtype.kind == "f" or out.dtype is DType.BFLOAT16:
        odd = right.copy().reshape(-1)
        odd[1], odd[2] = np.nan, np.inf
        near = (expected.astype(np.float64) * (1 + 1e-3)).astype(out.np_dtype)
        cases += [odd.reshape(right.shape), near]
    return cases


CASES = [
    (DType.INT32, lambda s: RNG.integers(-(2**20), 2**20, size=s, dtype=np.int32)),
    (DType.INT8, lambda s: RNG.integers(-128, 127, size=s, dtype=np.int8)),
    (DType.UINT8, lambda s: RNG.integers(0, 255, size=s, dtype=np.uint8)),
    (DType.FLOAT32, lambda s: RNG.standard_normal(s).astype(np.float32)),
    (DType.FLOAT16, lambda s: RNG.standard_normal(s).astype(np.float64)),  # a float64 reference
    (DType.BFLOAT16, lambda s: RNG.standard_normal(s).astype(ml_dtypes.bfloat16)),
]


@pytest.mark.parametrize(("dtype", "draw"), CASES, ids=[c[0].value for c in CASES])
@pytest.mark.parametrize("tolerance", [Tolerance(True), Tolerance(False, 2e-3, 1e-6)])
def test_the_model_counts_what_the_host_verifier_counts(dtype, draw, tolerance) -> None:
    out = output(dtype, (37, 29))
    expected = draw(out.shape)
    tol = output_tolerance(out, tolerance)
    assert supported(out, expected)
    for got in spoilt(out, expected):
        host = compare_output("C", got, expected, tol, out.fill.pattern, chunk=100)
        model = compare_model(got, expected, tol, out.fill.pattern)
        assert model.check(out, tol).ok == host.ok
        assert (model.wrong, model.untouched, model.nonfinite) == (
            host.wrong,
            host.untouched,
            host.nonfinite,
        )
        first = host.first.index if host.first else None
        got_first = np.unravel_index(model.first, out.shape) if model.first is not None else None
        assert got_first == first
        assert model.checked == out.size
        assert model.max_abs_error == pytest.approx(host.max_abs_error, rel=1e-12)
        assert model.max_rel_error == pytest.approx(host.max_rel_error, rel=1e-12)


FLOATS = [DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16]


@pytest.mark.parametrize("dtype", FLOATS, ids=[d.value for d in FLOATS])
@pytest.mark.parametrize("allowed", [False, True], ids=["finite", "nonfinite-allowed"])
def test_the_model_counts_poison_as_untouched_where_the_reference_is_nan(dtype, allowed) -> None:
    """A NaN expected where the kernel left the poison (a NaN too) is untouched, whatever the
    output allows; a NaN or inf the kernel wrote matches only in a `nonfinite: allowed` one."""
    out = replace(output(dtype, (8, 16)), nonfinite_allowed=allowed)
    expected = RNG.standard_normal(out.shape).astype(out.np_dtype).astype(np.float64)
    expected[0, :3] = [np.nan, np.inf, -np.inf]
    expected[1] = np.nan
    tol = output_tolerance(out, Tolerance(False, 2e-3, 1e-6))
    assert tol.nonfinite is allowed
    written = expected.astype(out.np_dtype)  # a computed NaN: not the poison's bits
    untouched = out.initial()
    half = written.copy()
    half[1, 8:] = untouched[1, 8:]
    for got in (written, untouched, half):
        host = compare_output("C", got, expected, tol, out.fill.pattern, chunk=50)
        model = compare_model(got, expected, tol, out.fill.pattern)
        assert (model.wrong, model.untouched, model.nonfinite) == (
            host.wrong,
            host.untouched,
            host.nonfinite,
        )
        assert model.check(out, tol).ok == host.ok
    right = compare_model(written, expected, tol, out.fill.pattern)
    assert right.wrong == (0 if allowed else 19)  # 3 + 16 non-finite expected values
    none = compare_model(untouched, expected, tol, out.fill.pattern)
    assert (none.wrong, none.untouched) == (out.size, out.size)
    tail = compare_model(half, expected, tol, out.fill.pattern)
    assert tail.untouched == 8 and tail.wrong == (8 if allowed else 19)


def test_the_kernel_is_told_whether_the_output_allows_nan_and_inf() -> None:
    plain = output(DType.FLOAT32, (4,))
    flags = {}
    for out in (plain, replace(plain, nonfinite_allowed=True)):
        args = compare_arguments(out, "expected", "result", Tolerance(False, 1e-3, 0.0))
        (flag,) = [a.value for a in args if isinstance(a, ScalarValue) and a.name == "nonfinite"]
        flags[out.nonfinite_allowed] = flag
    assert flags == {False: 0, True: 1}


def test_the_result_struct_round_trips() -> None:
    raw = RESULT.pack(10, 2, 1, 0, 4, *np.array([0.5, 0.25]).view(np.uint64).tolist())
    r = CompareResult.from_bytes(raw)
    assert (r.checked, r.wrong, r.untouched, r.first) == (10, 2, 1, 4)
    assert (r.max_abs_error, r.max_rel_error) == (0.5, 0.25)
    out = output(DType.INT32, (2, 5))
    check = r.check(out, Tolerance(True))
    assert not check.ok and check.first is not None and check.first.index == (0, 4)


@pytest.mark.parametrize(("dtype", "draw"), CASES, ids=[c[0].value for c in CASES])
def test_the_compare_kernel_compiles_and_takes_what_the_worker_packs(dtype, draw, tmp_path) -> None:
    out = output(dtype, (64, 64))
    expected = draw(out.shape)
    result = compile_compare(out, expected, Arch.parse("sm_90"), CompileCache(tmp_path))
    assert result.ok and result.cubin and result.entry, result.log
    kernel = read_cubin(result.cubin).kernels[result.entry]
    args = compare_arguments(out, "expected", "result", Tolerance(False, 1e-3, 0.0))
    addresses = {"C": 0x1000, "expected": 0x2000, "result": 0x3000}
    pack = pack_arguments(
        [
            (np.dtype(np.uint64), addresses[a.name])
            if hasattr(a, "name") and a.name in addresses
            else (a.np_dtype, a.value)  # type: ignore[union-attr]
            for a in args
        ]
    )
    assert kernel.params is not None
    assert pack.sizes == tuple(p.size for p in kernel.params)
    launch = compare_launch(out.size, 132)
    assert launch.grid == (math.ceil(out.size / 256), 1, 1) and launch.block == (256, 1, 1)
    assert compare_launch(1 << 30, 132).grid == (8 * 132, 1, 1)


def test_formats_the_kernel_does_not_take_stay_on_the_host() -> None:
    fp8 = output(DType.FLOAT8_E4M3, (4,))
    assert not supported(fp8, np.zeros(4, dtype=np.float32))
    wide = output(DType.UINT64, (4,)) if hasattr(DType, "UINT64") else None
    if wide is not None:
        assert not supported(wide, np.zeros(4, dtype=np.uint64))


def test_the_worker_runs_the_comparison_and_the_host_decides_when_it_did_not_run(
    tmp_path,
) -> None:
    """On host memory nothing runs: the compare kernel is launched with the output, the
    reference's output (uploaded once) and the result struct, finds nothing checked, and the
    host verifies instead (the output is untouched: WRONG)."""
    import functools
    import json

    from host_device import host_executor

    from workbench.runners.base import TrialOutcome
    from workbench.runners.cuda.worker import INITIAL_RESULT, RESULT_BYTES
    from workbench.runners.device_verify import INITIAL
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_kernel

    assert (INITIAL, RESULT.size) == (INITIAL_RESULT, RESULT_BYTES)  # the worker's copy
    record = tmp_path / "launches.jsonl"
    runner = WorkerRunner(
        Space(load_kernel("stream_scale"), shape={"n": 4096}),
        CompileCache(tmp_path / "cache"),
        executor_factory=functools.partial(host_executor, str(record)),
        startup_timeout_s=120,
        workdir=tmp_path,
        device_verify=True,
    )
    try:
        default = runner.space.default_config()
        for config in (default, {**default, "BLOCK": 128}):
            m = runner.evaluate(config)
            assert m.outcome is TrialOutcome.WRONG and "untouched" in m.reason, m.reason
        launches = [json.loads(line) for line in record.read_text().splitlines()]
        compares = [launch for launch in launches if "compare" in launch["entry"]]
        kernels = [launch for launch in launches if "compare" not in launch["entry"]]
        # per config: a launch and its comparison on the GPU, then the host's own launch
        assert len(compares) == 2 and len(kernels) == 4
        n = int.from_bytes(bytes.fromhex(compares[0]["params"][2]), "little", signed=True)
        assert n == 4096
        # got, expected (float64: 8 bytes per element) and the 56-byte result struct
        assert compares[0]["pointee_bytes"][1] == 8 * 4096
        assert compares[0]["pointee_bytes"][-1] == RESULT.size
        assert len(list(tmp_path.glob("workbench-run-*/expected-*.npy"))) == 1  # once per set
        assert runner.on_device is not None  # never found "right": nothing to cross-check
    finally:
        runner.close()
