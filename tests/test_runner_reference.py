"""Finding and calling references, checking what they return, and caching expected outputs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from workbench.references import ReferenceCall
from workbench.runners.buffers import Fill, OutputBuffer, OutputRole
from workbench.runners.reference import (
    ExpectedOutputs,
    RecordingConfig,
    ReferenceFailedError,
    ReferenceNotFoundError,
    ReferenceOutputError,
    resolve_reference,
    run_reference,
)
from workbench.spaces.schema import DType

TOTAL = OutputBuffer("total", DType.FLOAT32, (1,), OutputRole.INITIALIZED, Fill(bytes(4)))
WORKSPACE = OutputBuffer("ws", DType.FLOAT32, (9,), OutputRole.SCRATCH, Fill(bytes(4)))


def call_with(x: np.ndarray, config: dict | None = None) -> ReferenceCall:
    return ReferenceCall(inputs={"x": x}, scalars={}, shape={"n": x.size}, config=config or {})


def test_resolves_a_module_function() -> None:
    fn = resolve_reference("workbench.references.reduce:sum_all")
    out = run_reference(fn, call_with(np.ones(10, np.float32)), (TOTAL, WORKSPACE))
    assert set(out) == {"total"} and out["total"].tolist() == [10.0]  # scratch not required


def test_resolves_a_file_function(tmp_path: Path) -> None:
    path = tmp_path / "my_ref.py"
    path.write_text(
        "import numpy as np\n"
        "def double_sum(call):\n"
        "    return {'total': np.array([2 * call.inputs['x'].sum()])}\n"
    )
    fn = resolve_reference(f"{path}:double_sum")
    assert run_reference(fn, call_with(np.ones(3)), (TOTAL,))["total"].tolist() == [6.0]
    assert resolve_reference(f"{path}:double_sum") is fn  # loaded once


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ("workbench.references.nope:f", "no module named 'workbench.references.nope'"),
        ("workbench.references.reduce:nope", "has no function 'nope' (it has: "),
        ("workbench.references.reduce:np", "not a function"),
        ("no_colon_here", "expected `package.module:function`"),
        ("/definitely/not/here.py:f", "no file /definitely/not/here.py"),
    ],
)
def test_missing_references_say_what_is_missing(target: str, words: str) -> None:
    with pytest.raises(ReferenceNotFoundError) as info:
        resolve_reference(target)
    assert words in str(info.value) and target in str(info.value)


def test_a_file_that_fails_to_run(tmp_path: Path) -> None:
    path = tmp_path / "broken_ref.py"
    path.write_text("raise RuntimeError('half-written')\n")
    with pytest.raises(ReferenceNotFoundError, match="RuntimeError: half-written"):
        resolve_reference(f"{path}:f")


@pytest.mark.parametrize(
    ("returned", "error", "words"),
    [
        ("[1.0]", ReferenceOutputError, "returned list; expected the output array or a dict"),
        ("{}", ReferenceOutputError, "returned no total"),
        ("{'total': np.zeros(2)}", ReferenceOutputError, "has shape (2,); expected (1,)"),
        ("{'total': np.zeros(1), 'extra': 1}", ReferenceOutputError, "returned extra"),
        ("{'total': np.array(['a'])}", ReferenceOutputError, "non-numeric"),
        ("1 / 0", ReferenceFailedError, "raised ZeroDivisionError"),
    ],
)
def test_bad_results_are_refused(
    tmp_path: Path, returned: str, error: type[Exception], words: str
) -> None:
    path = tmp_path / f"ref_{abs(hash(returned))}.py"
    path.write_text(f"import numpy as np\ndef f(call):\n    return {returned}\n")
    fn = resolve_reference(f"{path}:f")
    with pytest.raises(error) as info:
        run_reference(fn, call_with(np.ones(3)), (TOTAL, WORKSPACE))
    assert words in str(info.value)


def test_recording_config_notes_what_is_read() -> None:
    cfg = RecordingConfig({"OP": "max", "BLOCK": 128})
    assert cfg.get("OP") == "max" and "MISSING" not in cfg
    assert cfg.read == {"OP", "MISSING"}
    dict(cfg)
    assert cfg.read == {"OP", "BLOCK", "MISSING"}


def test_expected_outputs_are_cached_by_what_the_reference_reads(tmp_path: Path) -> None:
    """A reference that reads OP only: configs differing in BLOCK share one run."""
    path = tmp_path / "op_ref.py"
    path.write_text(
        "import numpy as np\n"
        "def reduce(call):\n"
        "    x = call.inputs['x'].astype(np.float64)\n"
        "    value = x.max() if call.config.get('OP') == 'max' else x.sum()\n"
        "    return {'total': np.array([value * call.scalars.get('alpha', 1.0)])}\n"
    )
    x = np.linspace(-1, 2, 1000, dtype=np.float32)
    expected = ExpectedOutputs(f"{path}:reduce", {"x": x}, {"n": 1000})
    a = expected.get({"OP": "sum", "BLOCK": 64}, {}, (TOTAL,))
    b = expected.get({"OP": "sum", "BLOCK": 256}, {}, (TOTAL,))
    assert a is b and expected.calls == 1
    c = expected.get({"OP": "max", "BLOCK": 64}, {}, (TOTAL,))
    assert expected.calls == 2 and c["total"].tolist() == [2.0]
    # other scalar arguments: computed again
    d = expected.get({"OP": "max", "BLOCK": 64}, {"alpha": 2.0}, (TOTAL,))
    assert expected.calls == 3 and d["total"].tolist() == [4.0]
    # another output shape (a per-config output): computed again
    wide = OutputBuffer("total", DType.FLOAT32, (2,), OutputRole.INITIALIZED, Fill(bytes(4)))
    with pytest.raises(ReferenceOutputError, match="expected \\(2,\\)"):
        expected.get({"OP": "sum", "BLOCK": 64}, {}, (wide,))


@pytest.mark.parametrize("value", ["np.nan", "np.inf", "-np.inf"])
def test_nan_or_inf_in_a_reference_is_refused_unless_the_output_allows_it(
    tmp_path: Path, value: str
) -> None:
    """Verification would otherwise pass whatever the kernel left there (the poison is a NaN)."""
    path = tmp_path / f"nonfinite_{value.strip('-np.')}{value.startswith('-')}.py"
    path.write_text(
        "import numpy as np\n"
        "def f(call):\n"
        "    total = np.zeros((2, 3))\n"
        f"    total[1, 2] = {value}\n"
        "    return {'total': total}\n"
    )
    fn = resolve_reference(f"{path}:f")
    grid = replace(TOTAL, shape=(2, 3))
    with pytest.raises(ReferenceOutputError) as info:
        run_reference(fn, call_with(np.ones(3)), (grid, WORKSPACE), "reference f")
    assert str(info.value) == (
        f"reference f: output total holds 1 NaN/inf of 6 elements (first at index (1, 2): "
        f"{float(eval(value, {'np': np}))}); a reference returns finite values unless the "
        "space declares the output `nonfinite: allowed`"
    )
    allowed = replace(grid, nonfinite_allowed=True)
    out = run_reference(fn, call_with(np.ones(3)), (allowed, WORKSPACE))
    assert not np.isfinite(out["total"][1, 2])


def test_a_tune_stops_at_a_reference_with_nan_before_it_records_a_verdict(
    tmp_path: Path,
) -> None:
    """The runner computes the reference's outputs before the first verification launch: a NaN
    there stops the run instead of becoming a verdict (which the poison would have passed)."""
    import functools

    from host_device import host_executor

    from workbench.compiler import CompileCache
    from workbench.runners.worker_runner import WorkerRunner
    from workbench.spaces import Space, load_kernel

    spec = load_kernel("stream_scale")
    ref = tmp_path / "nan_ref.py"
    ref.write_text("import numpy as np\ndef f(x):\n    return np.full(x.shape, np.nan)\n")
    assert spec.reference is not None
    spec = replace(spec, reference=replace(spec.reference, target=f"{ref}:f"))
    runner = WorkerRunner(
        Space(spec, shape={"n": 4096}),
        CompileCache(tmp_path / "cache"),
        executor_factory=functools.partial(host_executor, str(tmp_path / "launches.jsonl")),
        startup_timeout_s=120,
        workdir=tmp_path,
    )
    try:
        with pytest.raises(ReferenceOutputError, match="output y holds 4096 NaN/inf"):
            runner.evaluate(runner.space.default_config())
        assert runner.verdicts == {}
    finally:
        runner.close()
