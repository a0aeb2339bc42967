"""Counting, enumerating, sampling and explaining the configs of a space."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from workbench.devices import device_for
from workbench.errors import ConfigError
from workbench.spaces import Space, load_kernel, load_space
from workbench.spaces.launch import launch_geometry, work_counts
from workbench.spaces.space import WalkTimeout
from workbench.toolchain import Arch


def tiny(project: Path, **kwargs: object) -> Space:
    return Space(load_space(project / "spaces" / "tiny.yaml"), **kwargs)  # type: ignore[arg-type]


def brute_force_valid(space: Space) -> list[dict]:
    names = space.names
    domains = [p.values for p in space.spec.parameters]
    configs = [dict(zip(names, v, strict=True)) for v in itertools.product(*domains)]
    return [c for c in configs if not space.explain(c)]


def test_count_matches_brute_force(project: Path) -> None:
    space = tiny(project)
    assert space.cartesian_size == 4 * 3 * 2
    valid = brute_force_valid(space)
    # BLOCK * SCALE <= 512 removes (256, 3) only: 24 - 2 (two WAVES values)
    assert len(valid) == 22
    assert space.count_valid() == 22
    assert list(space.iter_valid()) == valid


def test_explain_names_the_constraint_and_line(project: Path) -> None:
    space = tiny(project)
    problems = space.explain({"BLOCK": 256, "SCALE": 3, "WAVES": 1})
    assert len(problems) == 1
    assert "BLOCK * SCALE <= 512" in problems[0].message
    assert "keeps the test space small" in problems[0].message
    assert problems[0].constraint is not None and problems[0].constraint.line is not None
    assert space.explain({"BLOCK": 256, "SCALE": 2, "WAVES": 1}) == []


def test_explain_domain_problems(project: Path) -> None:
    space = tiny(project)
    messages = [v.message for v in space.explain({"BLOCK": 100, "SCALE": 2, "WAVE": 1})]
    assert any("BLOCK=100 is not in its domain" in m for m in messages)
    assert any("unknown parameter 'WAVE'" in m for m in messages)
    assert any("WAVES has no value" in m for m in messages)


def test_parse_config(project: Path) -> None:
    space = tiny(project)
    assert space.parse_config(["BLOCK=64"]) == {"BLOCK": 64, "SCALE": 2, "WAVES": 1}
    for bad, message in [
        ("BLOCK=65", "not in its domain"),
        ("NOPE=1", "unknown parameter"),
        ("BLOCK", "NAME=VALUE"),
    ]:
        with pytest.raises(ConfigError, match=message):
            space.parse_config([bad])


def test_sample_is_distinct_valid_and_uniform(project: Path) -> None:
    space = tiny(project)
    picks = space.sample(5, seed=1)
    assert len({tuple(c.values()) for c in picks}) == 5
    assert all(not space.explain(c) for c in picks)
    assert len(space.sample(1000, seed=1)) == 22  # all of them, no repeats
    counts = Counter(tuple(space.sample(1, seed=s)[0].values()) for s in range(4400))
    assert len(counts) == 22
    # 200 expected per config; a uniform sampler stays well inside 120..280
    assert min(counts.values()) > 120 and max(counts.values()) < 280


def test_rejection_sampling_on_a_huge_space(
    write_space: Callable[..., Path], project: Path
) -> None:
    text = (
        (project / "spaces" / "tiny.yaml")
        .read_text()
        .replace(
            "  WAVES: {values: [1, 2], default: 1, role: launch}",
            "  WAVES: {values: [1, 2], default: 1, role: launch}\n"
            "  A: {range: {start: 0, stop: 999}, role: launch}\n"
            "  B: {range: {start: 0, stop: 999}, role: launch}",
        )
        .replace(
            '- {expr: "BLOCK * SCALE <= 512"',
            '- {expr: "(A + B) % 7 == 0"}\n  - {expr: "BLOCK * SCALE <= 512"',
        )
    )
    space = Space(load_space(write_space(text)))
    assert space.cartesian_size == 24 * 10**6
    picks = space.sample(50, seed=3)
    assert len(picks) == 50
    assert all((c["A"] + c["B"]) % 7 == 0 and c["BLOCK"] * c["SCALE"] <= 512 for c in picks)


def sparse_space_text(project: Path) -> str:
    """10^6 points, 500 valid: the first constraint (on A alone) leaves 1 in 1000 subtrees."""
    text = (
        (project / "spaces" / "tiny.yaml")
        .read_text()
        .replace(
            "  WAVES: {values: [1, 2], default: 1, role: launch}",
            "  A: {range: {start: 0, stop: 999}, role: launch}\n"
            "  B: {range: {start: 0, stop: 999}, role: launch}",
        )
        .replace(
            "parameters:\n  BLOCK: {values: [32, 64, 128, 256], default: 128}\n"
            "  SCALE: {values: [1, 2, 3], default: 2}\n",
            "parameters:\n",
        )
        .replace('- {expr: "BLOCK * SCALE <= 512"', '- {expr: "A == 7"}\n  - {expr: "B % 2 == 0"')
        .replace("cdiv(n, BLOCK)", "1")
        .replace("block: BLOCK", "block: 32")
    )
    return text.replace("default: 128", "")


def test_pruning_counts_a_big_space_fast(write_space: Callable[..., Path], project: Path) -> None:
    space = Space(load_space(write_space(sparse_space_text(project))))
    assert space.cartesian_size == 10**6
    assert space.count_valid() == 500


@pytest.mark.parametrize("path", ["draws", "count"])
def test_large_space_sampling_is_uniform_both_ways(
    project: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Above the enumeration limit: random draws checked level by level, or (a space too
    sparse for draws) indices drawn into the counted valid set; both uniform."""
    from workbench.spaces import space as space_module

    monkeypatch.setattr(space_module, "SAMPLE_LIST_LIMIT", 0)
    if path == "count":
        monkeypatch.setattr(space_module, "REJECTION_DRAWS", 0)  # no draws at all
    space = tiny(project)
    counts = Counter(tuple(space.sample(1, seed=s)[0].values()) for s in range(4400))
    assert len(counts) == 22
    assert min(counts.values()) > 120 and max(counts.values()) < 280  # 200 expected each
    picks = space.sample(1000, seed=1)  # more than there are: every one, once
    assert len({tuple(c.values()) for c in picks}) == 22


def test_a_sparse_space_gives_every_config_asked_for(
    write_space: Callable[..., Path], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Draws that find too few (the int8 GEMM: 0.08% of its product was valid; 200 asked gave
    159 before) hand over to a count of the valid set and draws of indices into it: every
    valid config once when all are asked for; a count too long is said, with how far it got."""
    from workbench.errors import WorkbenchError
    from workbench.spaces import counting
    from workbench.spaces import space as space_module

    space = Space(load_space(write_space(sparse_space_text(project))))  # 500 valid of 10^6
    monkeypatch.setattr(space_module, "REJECTION_DRAWS", 2000)
    picks = space.sample(300, seed=2)
    assert len({tuple(c.values()) for c in picks}) == 300
    assert all(c["A"] == 7 and c["B"] % 2 == 0 and space.is_valid(c) for c in picks)
    every = space.sample(600, seed=2)
    assert len({tuple(c.values()) for c in every}) == 500 == len(every)
    monkeypatch.setattr(space_module, "WALK_SECONDS", -1.0)
    monkeypatch.setattr(counting, "CLOCK_EVERY", 1)
    with pytest.raises(WorkbenchError, match=r"found \d+ of the 300 valid configs asked for"):
        space.sample(300, seed=2)


def test_each_index_of_the_counted_valid_set_is_its_config_in_domain_order() -> None:
    """The counted sample's configs are built from indices: index i is the i-th config a walk
    lists (derived values and constraints at many levels: gemm_fp8 on sm_89)."""
    from workbench.spaces.counting import ValidCounter

    space = Space(load_kernel("gemm_fp8"), arch=Arch.parse("sm_89"))
    domains = [p.values for p in space.spec.parameters]
    counter = ValidCounter(space, domains, seconds=60)
    listed = list(Space(load_kernel("gemm_fp8"), arch=Arch.parse("sm_89"))._walk(domains))
    assert counter.count() == len(listed) > 1000
    assert [counter.config_at(i) for i in range(len(listed))] == listed
    with pytest.raises(IndexError):
        counter.config_at(len(listed))


@pytest.mark.slow
def test_gemm_int8_at_a_decode_shape_gives_the_sample_asked_for() -> None:
    """gemm_int8's product is 2.7e11 points with the TMA scheduler, epilogue and cluster knobs;
    at M=16 random draws find almost none valid (1.6 M of them are): the sample drawn from the
    count still holds every config asked for, all valid, across more than one path."""
    space = Space(load_kernel("gemm_int8"), shape={"M": 16, "N": 256, "K": 512})
    picks = space.sample(6, seed=5)
    assert len({tuple(c.values()) for c in picks}) == 6 and all(map(space.is_valid, picks))
    assert len({c["PATH"] for c in picks}) > 1


def test_device_limits_in_constraints(write_space: Callable[..., Path], project: Path) -> None:
    text = (
        (project / "spaces" / "tiny.yaml")
        .read_text()
        .replace(
            '- {expr: "BLOCK * SCALE <= 512"', '- {expr: "BLOCK * 8 <= device.max_threads_per_sm"'
        )
    )
    spec = load_space(write_space(text))
    # 2048 threads per SM on sm_90 (H200): every BLOCK up to 256 passes
    assert Space(spec, arch=Arch.parse("sm_90")).count_valid() == 24
    # 1536 on sm_89 (L40S): BLOCK=256 (2048 threads) fails
    l40s = Space(spec, arch=Arch.parse("sm_90"), device=device_for(name="l40s"))
    assert l40s.count_valid() == 18


def test_launch_geometry_and_work(project: Path) -> None:
    space = tiny(project, shape={"n": 1000})
    launch = launch_geometry(space, {"BLOCK": 128, "SCALE": 2, "WAVES": 1})
    assert launch.grid == (8, 1, 1) and launch.block == (128, 1, 1) and launch.shared_bytes == 0
    assert work_counts(space, {"BLOCK": 128, "SCALE": 2, "WAVES": 1}) == (2000.0, 12000.0)


def test_a_cluster_must_divide_the_grid(write_space: Callable[..., Path], project: Path) -> None:
    """geometry.cluster: whole clusters (each dimension divides the grid's), at most 8 CTAs,
    sm_90 and later; a config that breaks a rule is invalid with the reason at the cluster's
    line, and a launch made of it anyway is refused with that line, before any driver call."""
    text = (project / "spaces" / "tiny.yaml").read_text()
    text = text.replace("  block: BLOCK\n", "  block: BLOCK\n  cluster: [WAVES * 2, 1, 1]\n")
    text = text.replace("WAVES: {values: [1, 2]", "WAVES: {values: [1, 2, 3, 4, 8]")
    path = write_space(text)
    line = text.splitlines().index("  cluster: [WAVES * 2, 1, 1]") + 1
    spec = load_space(path)
    assert spec.geometry.cluster_line == line
    space = Space(spec, shape={"n": 1024}, arch=Arch.parse("sm_90"))
    # n = 1024, BLOCK 128: 8 blocks; clusters of 2 and 4 divide them, 6 does not, 16 is too big
    ok = {"BLOCK": 128, "SCALE": 2, "WAVES": 2}
    assert space.is_valid(ok) and launch_geometry(space, ok).cluster == (4, 1, 1)
    ragged = {**ok, "WAVES": 3}
    (problem,) = space.explain(ragged)
    assert problem.constraint is not None and problem.constraint.line == line
    assert "cluster.x is a whole number that divides grid.x" in problem.message
    assert f"(line {line})" in problem.message
    with pytest.raises(ConfigError, match=rf"case.yaml:{line} \[geometry.cluster\]: cluster "
                       r"\(6, 1, 1\) does not divide grid \(8, 1, 1\)"):  # fmt: skip
        launch_geometry(space, ragged)
    big = {**ok, "BLOCK": 32, "WAVES": 8}  # 32 blocks in clusters of 16
    (problem,) = space.explain(big)
    assert "at most 8 CTAs (the portable size)" in problem.message
    with pytest.raises(ConfigError, match=rf"case.yaml:{line} .*16 CTAs, more than the portable 8"):
        launch_geometry(space, big)
    ampere = Space(spec, shape={"n": 1024}, arch=Arch.parse("sm_80"))
    (problem,) = ampere.explain(ok)
    assert "thread-block clusters need sm_90 or later" in problem.message


def test_shape_must_match(project: Path) -> None:
    with pytest.raises(ConfigError, match="exactly"):
        tiny(project, shape={"m": 3})


def test_builtin_reduce_space() -> None:
    spec = load_kernel("reduce")
    space = Space(spec, arch=Arch.parse("sm_90"))
    valid = list(space.iter_valid())
    assert valid and all(c["ITEMS"] % c["VEC"] == 0 for c in valid)
    assert all(c["BLOCK"] * c["BLOCKS_PER_SM"] <= 2048 for c in valid)
    launch = launch_geometry(space, spec.default_config())
    # n = 2^24, tile = 256 * 8 = 2048 -> 8192 tiles; capped at 132 SMs * 4
    assert launch.grid == (528, 1, 1) and launch.block == (256, 1, 1)


@pytest.mark.parametrize("kernel", ["reduce", "stream_scale"])
def test_builtin_defaults_are_valid_on_every_declared_arch(kernel: str) -> None:
    spec = load_kernel(kernel)
    for arch in spec.arches:
        space = Space(spec, arch=Arch.parse(arch))
        assert space.explain(spec.default_config()) == [], arch


def test_a_config_that_could_never_launch_is_invalid_with_the_reason(write_space) -> None:
    """Launch limits are constraints of every space: more than 1024 threads in a block, a grid
    of no block, dynamic shared memory past the device's limit (an H200: 227 KiB)."""
    from conftest import TINY_SPACE

    text = (
        TINY_SPACE.replace("BLOCK: {values: [32, 64, 128, 256], default: 128}",
                           "BLOCK: {values: [32, 64, 128, 256, 2048], default: 128}")
        .replace('"BLOCK * SCALE <= 512"', '"BLOCK * SCALE <= 8192"')
        .replace("grid: cdiv(n, BLOCK)", "grid: cdiv(n, BLOCK) * (SCALE - 1)")
        .replace("block: BLOCK", "block: BLOCK\n  shared_bytes: 100000 * SCALE")
    )  # fmt: skip
    space = Space(load_space(write_space(text)))

    def why(block: int, scale: int) -> str:
        return "; ".join(
            v.message for v in space.explain({"BLOCK": block, "SCALE": scale, "WAVES": 1})
        )

    assert "block.x is a whole number from 1 to 1024" in why(2048, 2)
    assert "threads per block within the device's" in why(2048, 2)
    assert "grid.x is a whole number from 1" in why(128, 1)  # no block at all
    assert "dynamic shared memory within the device's per-block limit" in why(128, 3)
    assert why(128, 2) == ""
    valid = list(space.iter_valid())
    assert valid and all(c["BLOCK"] <= 1024 and c["SCALE"] == 2 for c in valid)


def test_a_shape_label_reads_back() -> None:
    from workbench.spaces.model import parse_shape_label, shape_label

    shape = {"M": 16, "N": 4096, "K": 4096}
    assert parse_shape_label(shape_label(shape)) == shape
    assert parse_shape_label("[4096, 4096]") is None and parse_shape_label("recorded") is None
    assert parse_shape_label("n=1.5") is None and parse_shape_label("=3") is None


def needle_space_text(project: Path, params: int = 12, values: int = 20) -> str:
    """``params`` parameters of ``values`` values each whose sum must be 0: one valid config
    (all zeros) in values**params, and the constraint is checked only once all are bound, so
    a walk goes for hours between two valid configs."""
    names = [f"P{i}" for i in range(params)]
    domain = ", ".join(map(str, range(values)))
    return (
        (project / "spaces" / "tiny.yaml")
        .read_text()
        .replace(
            "  WAVES: {values: [1, 2], default: 1, role: launch}",
            "\n".join(f"  {n}: {{values: [{domain}], role: launch}}" for n in names),
        )
        .replace('"BLOCK * SCALE <= 512"', f'"{" + ".join(names)} == 0"')
    )


@pytest.mark.parametrize(
    ("kernel", "shape"),
    [
        ("reduce", None),
        ("gemm_fp8", None),
        ("gemm_w4a16", {"M": 16, "N": 4096, "K": 4096}),
        pytest.param("attention_decode", None, marks=pytest.mark.slow),  # (7 s)
        ("quantize", None),
    ],
)
def test_the_count_of_valid_configs_is_the_length_of_their_list(
    kernel: str, shape: dict[str, int] | None
) -> None:
    """count_valid counts each level's completions once per frontier (the values the deeper
    derived values and constraints read): the same number as listing them, on every arch."""
    spec = load_kernel(kernel)
    for arch in spec.arches:
        counted = Space(spec, arch=Arch.parse(arch), shape=shape).count_valid()
        listed = sum(1 for _ in Space(spec, arch=Arch.parse(arch), shape=shape).iter_valid())
        assert counted == listed > 0, (kernel, arch)


@pytest.mark.slow
def test_a_seed_gives_the_same_sample_on_a_slower_machine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gemm_int8 at a decode shape is sampled by draws, then by a count: how many draws are made
    is a count, not a time, so the seed alone decides the sample (a loaded machine drew a
    different one before, and ``compile --sample 4`` printed a different table each time)."""
    from workbench.spaces import space as space_module

    shape = {"M": 16, "N": 256, "K": 512}
    first = Space(load_kernel("gemm_int8"), shape=shape).sample(4, seed=3)
    real = time.perf_counter
    monkeypatch.setattr(space_module.time, "perf_counter", lambda: 3 * real())  # 3x slower
    again = Space(load_kernel("gemm_int8"), shape=shape).sample(4, seed=3)
    assert again == first


def test_a_walk_of_a_space_almost_nothing_meets_stops_at_its_deadline(
    write_space: Callable[..., Path], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20^12 points, one valid: draws find nothing, and the count that follows (no two partial
    configs read alike below any level, so nothing is counted once for many) would run for
    hours: its deadline holds all the same, and the error says how far it got."""
    from workbench.errors import SparseSampleError
    from workbench.spaces import space as space_module

    space = Space(load_space(write_space(needle_space_text(project))))
    monkeypatch.setattr(space_module, "REJECTION_DRAWS", 10_000)
    monkeypatch.setattr(space_module, "WALK_SECONDS", 1.0)
    start = time.perf_counter()
    with pytest.raises(
        SparseSampleError, match=r"stopped after 1 s, having checked [\d,]+ partial"
    ):
        space.sample(3, seed=0)
    assert time.perf_counter() - start < 10
    start = time.perf_counter()
    with pytest.raises(WalkTimeout) as info:
        space.count_valid(seconds=1.0)
    assert time.perf_counter() - start < 5
    assert info.value.visited > 1000 and info.value.found <= 1
