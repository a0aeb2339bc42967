"""The persistent schedule of the TMA GEMMs (kernels_cu/gemm_schedule.cuh), checked without a GPU
with the kernels' own code: the header compiles as host C++, a small program around it
(tests/data/gemm_schedule_harness.cpp, built with g++) lists every unit of every CTA, and the
checks here read that list. For split-K (SCHED=static) and stream-K, at the odd and compare
shapes and skinny ones, with the grid and workspace the space files give:

* every k-iteration of every tile is computed exactly once, every element of C written once
  (by its tile's one finisher);
* the finisher's peers are exactly the tile's other units, each writing its own workspace slot,
  every slot inside the workspace the space file allocates;
* the launch cannot deadlock: CTAs computing their units in order, a finisher waiting for its
  peers, all complete (and the structural reasons the header's comment gives hold);
* stream-K divides the k-iterations evenly (CTAs differ by at most one);
* in thread-block clusters (2x1, 1x2: CLUSTER_M x CLUSTER_N), the grid is whole clusters, every
  CTA of a cluster has the same units in the same order, each on its own tile of the cluster
  tile, so that at every unit the CTAs of a 2x1 cluster hold the same columns of C (they share
  B) and those of a 1x2 cluster the same rows (they share A); every tile of C is computed
  exactly once, and a tile past the edge of C only as the partner of a real one.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from workbench.devices import DEVICES
from workbench.runners.buffers import output_buffers
from workbench.spaces import Space, load_kernel
from workbench.spaces.launch import launch_geometry
from workbench.toolchain import Arch

ROOT = Path(__file__).resolve().parent.parent
HARNESS = Path(__file__).parent / "data" / "gemm_schedule_harness.cpp"
SM90A = Arch.parse("sm_90a")


@dataclasses.dataclass(frozen=True)
class Case:
    """One schedule: a shape, a tile, the raster, static (split_k) or stream-K, the grid."""

    M: int
    N: int
    K: int
    tile_m: int
    tile_n: int
    tile_k: int
    group: int
    along_n: bool
    stream_k: bool
    split_k: int
    ctas: int
    workspace_words: int | None = None  #: what the space file allocates (None: not from one)
    cluster_m: int = 1  #: CLUSTER_M x CLUSTER_N: the thread-block cluster, in tiles
    cluster_n: int = 1

    def line(self) -> str:
        values = [*dataclasses.astuple(self)[:11], self.cluster_m, self.cluster_n]
        return " ".join(str(int(v)) for v in values)


@dataclasses.dataclass(frozen=True)
class Unit:
    cta: int
    i: int  #: its place in the CTA's order
    index: int  #: tile, in raster order
    tm: int
    tn: int
    k0: int
    k_count: int
    finalizes: bool
    slot: int
    peers: int


@dataclasses.dataclass
class Schedule:
    tiles_m: int
    tiles_n: int
    k_tiles: int
    slots: int
    ctas: list[list[Unit]]


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip(
            "g++ is not installed: the schedule's host harness is C++ (apt-get install g++)"
        )
    exe = tmp_path_factory.mktemp("harness") / "gemm_schedule_harness"
    subprocess.run(
        [gxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror",
         f"-I{ROOT / 'kernels_cu'}", str(HARNESS), "-o", str(exe)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return exe


def schedules(harness: Path, cases: list[Case]) -> list[Schedule]:
    """Every CTA's units of each case, as the header computes them."""
    run = subprocess.run(
        [str(harness)],
        input="".join(c.line() + "\n" for c in cases),
        check=True,
        capture_output=True,
        text=True,
    )
    out: list[Schedule] = []
    cta = -1
    for line in run.stdout.splitlines():
        f = line.split()
        if f[0] == "case":
            out.append(Schedule(*map(int, f[1:]), ctas=[]))
        elif f[0] == "cta":
            cta = int(f[1])
            out[-1].ctas.append([])
        elif f[0] == "u":
            v = list(map(int, f[1:]))
            out[-1].ctas[cta].append(Unit(cta, v[0], *v[1:6], bool(v[6]), v[7], v[8]))
    assert len(out) == len(cases)
    return out


def check(case: Case, s: Schedule) -> None:
    """Everything the module docstring promises, for one case."""
    if case.cluster_m * case.cluster_n > 1:
        check_clusters(case, s)
        return
    tiles = s.tiles_m * s.tiles_n
    assert (s.tiles_m, s.tiles_n) == (-(-case.M // case.tile_m), -(-case.N // case.tile_n))
    assert s.k_tiles == -(-case.K // case.tile_k) and len(s.ctas) == case.ctas
    units = [u for cta in s.ctas for u in cta]
    by_tile: dict[int, list[Unit]] = defaultdict(list)
    for u in units:
        assert 0 <= u.index < tiles and u.k_count >= 1, u
        by_tile[u.index].append(u)
    assert sorted(by_tile) == list(range(tiles)), "a tile has no unit"

    # every k-iteration of every tile exactly once; one finisher per tile, covering its last
    # k-tile; its peers are the tile's other units, and their slots are the ones it reads
    written: dict[int, Unit] = {}
    coords = set()
    for index, parts in by_tile.items():
        ks = sorted((u.k0, u.k0 + u.k_count) for u in parts)
        assert ks[0][0] == 0 and ks[-1][1] == s.k_tiles, (index, ks)
        assert all(a[1] == b[0] for a, b in itertools.pairwise(ks)), (index, ks)
        assert len({(u.tm, u.tn) for u in parts}) == 1, parts
        (fin,) = [u for u in parts if u.finalizes]
        assert fin.k0 + fin.k_count == s.k_tiles, fin
        others = [u for u in parts if not u.finalizes]
        assert fin.peers == len(others), (fin, others)
        assert sorted(u.slot for u in others) == list(range(fin.slot, fin.slot + fin.peers))
        for u in others:
            assert u.slot not in written, (u, written[u.slot])  # one writer per slot
            assert 0 <= u.slot < s.slots, (u, s.slots)
            written[u.slot] = u
        coords.add((fin.tm, fin.tn))
    assert coords == set(itertools.product(range(s.tiles_m), range(s.tiles_n)))

    # every element of C written once, by the finisher of its tile
    if case.M * case.N <= 1 << 26:
        hits = np.zeros((case.M, case.N), dtype=np.uint8)
        for u in units:
            if u.finalizes:
                hits[u.tm * case.tile_m : (u.tm + 1) * case.tile_m,
                     u.tn * case.tile_n : (u.tn + 1) * case.tile_n] += 1  # fmt: skip
        assert (hits == 1).all()

    # the workspace: the header's slot count is the space file's, and fits its allocation
    if case.workspace_words is not None:
        shared = case.stream_k or case.split_k > 1
        needed = s.slots * case.tile_m * case.tile_n + tiles if shared else 1
        assert case.workspace_words == needed, (case, s.slots)

    if case.stream_k:
        check_stream_k(case, s)
    else:
        check_static(case, s)
    assert runs_to_completion(s), f"the launch would deadlock: {case}"


def check_static(case: Case, s: Schedule) -> None:
    """Unit u = slice u % SPLIT_K of tile u / SPLIT_K, CTA c taking u = c, c + G, ...; the last
    slice finalizes; slices of a tile differ in size by the rounding only."""
    assert s.slots == (s.tiles_m * s.tiles_n * (case.split_k - 1))
    per = -(-s.k_tiles // case.split_k)
    for c, cta in enumerate(s.ctas):
        for u in cta:
            unit = c + u.i * case.ctas
            assert u.index == unit // case.split_k and u.k0 == unit % case.split_k * per, u
            assert u.finalizes == (unit % case.split_k == case.split_k - 1), u


def check_stream_k(case: Case, s: Schedule) -> None:
    """Each CTA a contiguous range of k-iterations, walked backwards; the ranges even to one
    iteration; a CTA publishes at most one unit, the first it computes, to slot c; a finisher's
    peers are lower-numbered CTAs."""
    assert s.slots == case.ctas
    loads = [sum(u.k_count for u in cta) for cta in s.ctas]
    assert max(loads) - min(loads) <= 1 and min(loads) >= 1, loads
    start = 0
    for c, cta in enumerate(s.ctas):
        forward = cta[::-1]
        its = [
            (u.index * s.k_tiles + u.k0, u.index * s.k_tiles + u.k0 + u.k_count) for u in forward
        ]
        assert its[0][0] == start and all(a[1] == b[0] for a, b in itertools.pairwise(its))
        start = its[-1][1]
        published = [u for u in cta if not u.finalizes]
        assert len(published) <= 1 and all(u.i == 0 and u.slot == c for u in published), cta
        for u in cta:
            if u.finalizes and u.peers:
                assert u.slot + u.peers == c, u  # peers: CTAs slot .. c - 1
    assert start == s.tiles_m * s.tiles_n * s.k_tiles


def check_clusters(case: Case, s: Schedule) -> None:
    """Clusters of cluster_m x cluster_n CTAs (consecutive CTA numbers, rank = c % size): the
    same units for each CTA of a cluster, rank r on row r % cluster_m and column r // cluster_m
    of the unit's cluster tile; the operand they share is the same rows of it at every unit;
    every tile of C exactly once, whole (no fixup with clusters), and past the edge of C only
    beside a real tile."""
    cm, cn = case.cluster_m, case.cluster_n
    size = cm * cn
    assert not case.stream_k and case.split_k == 1, "clusters take no fixup"
    tiles_m, tiles_n = -(-case.M // case.tile_m), -(-case.N // case.tile_n)
    assert (s.tiles_m, s.tiles_n) == (-(-tiles_m // cm), -(-tiles_n // cn))  # cluster tiles
    assert s.slots == 0 and case.ctas % size == 0 and len(s.ctas) == case.ctas
    seen: Counter[tuple[int, int]] = Counter()
    for first in range(0, case.ctas, size):
        members = s.ctas[first : first + size]
        assert len({len(units) for units in members}) == 1, members  # the same count
        for i, units in enumerate(zip(*members, strict=True)):
            # one unit of the cluster: the same cluster tile and k range in every CTA
            assert len({(u.index, u.k0, u.k_count) for u in units}) == 1, units
            assert all(u.i == i and u.finalizes and u.peers == 0 for u in units), units
            assert units[0].k0 == 0 and units[0].k_count == s.k_tiles, units
            base = (units[0].tm - units[0].tm % cm, units[0].tn - units[0].tn % cn)
            for rank, u in enumerate(units):
                assert (u.tm, u.tn) == (base[0] + rank % cm, base[1] + rank // cm), (rank, u)
            if cm > 1:  # 2x1: one tile column, the same BN rows of B for both
                assert len({u.tn for u in units}) == 1 and len({u.tm for u in units}) == cm
            if cn > 1:  # 1x2: one tile row, the same BM rows of A for both
                assert len({u.tm for u in units}) == 1 and len({u.tn for u in units}) == cn
            inside = [(u.tm, u.tn) for u in units if u.tm < tiles_m and u.tn < tiles_n]
            assert inside, units  # a cluster tile holds at least one real tile
            seen.update(inside)
    assert seen == Counter(itertools.product(range(tiles_m), range(tiles_n))), "tiles not once"
    if case.M * case.N <= 1 << 26:  # every element of C written once
        hits = np.zeros((case.M, case.N), dtype=np.uint8)
        for tm, tn in seen:
            hits[tm * case.tile_m : (tm + 1) * case.tile_m,
                 tn * case.tile_n : (tn + 1) * case.tile_n] += 1  # fmt: skip
        assert (hits == 1).all()


def runs_to_completion(s: Schedule) -> bool:
    """Simulate the launch: every CTA resident, computing its units one after the other (what
    the kernel guarantees at most: the ping-pong warpgroups overlap a unit with the next, which
    only helps); a unit that publishes completes at once, a finisher once all its peers have
    published. False if the CTAs get stuck."""
    published: dict[int, int] = defaultdict(int)
    at = [0] * len(s.ctas)
    moved = True
    while moved:
        moved = False
        for c, cta in enumerate(s.ctas):
            while at[c] < len(cta):
                u = cta[at[c]]
                if u.finalizes and published[u.index] < u.peers:
                    break
                if not u.finalizes:
                    published[u.index] += 1
                at[c] += 1
                moved = True
    return all(at[c] == len(cta) for c, cta in enumerate(s.ctas))


# -- the cases ----------------------------------------------------------------------------------
SKINNY = [
    {"M": 16, "N": 4096, "K": 4096},
    {"M": 128, "N": 11008, "K": 4096},
    {"M": 1, "N": 11008, "K": 4096},
    {"M": 16, "N": 14336, "K": 4096},
]
#: the schedule knobs (SPLIT_K, SCHED, RASTER, GROUP_M) over tiles of both consumer schedules
SCHEDULES = [{"SPLIT_K": s, "SCHED": "static"} for s in (1, 2, 4, 16)] + [{"SCHED": "streamk"}]
RASTERS = [
    {"RASTER": "m", "GROUP_M": 8},
    {"RASTER": "n", "GROUP_M": 8},
    {"RASTER": "n", "GROUP_M": 1},
]
TILES = {
    "gemm_int8": [
        {"PATH": "tma_coop", "BM": 128, "BN": 256, "BK": 128},
        {"PATH": "tma_coop", "BM": 256, "BN": 96, "BK": 128},
        {"PATH": "tma_pingpong", "BM": 64, "BN": 128, "BK": 128},
    ],
    "gemm_fp8": [
        # (was BK 64 with the 64-byte swizzle, which the space no longer allows on TMA paths)
        {"PATH": "tma_pingpong", "BM": 64, "BN": 192, "BK": 128},
        {"PATH": "tma_coop", "BM": 128, "BN": 128, "BK": 128},
        {"PATH": "tma_coop", "BM": 128, "BN": 256, "BK": 128, "PROMOTE": False},  # 43 at N=11008
    ],
}


#: the thread-block clusters (CLUSTER_M x CLUSTER_N); 1x1 is every point above
CLUSTERS = [{"CLUSTER_M": 2}, {"CLUSTER_N": 2}]


def space_cases(
    kernel: str,
    shapes: Iterable[dict[str, int]],
    sm_count: int = 0,
    clusters: Iterable[dict[str, int]] = ({},),
) -> list[Case]:
    """Every valid point of TILES x SCHEDULES x RASTERS (x ``clusters``) at each shape, with the
    grid, the cluster and the workspace size the space file gives (on an H200, or one with
    ``sm_count`` SMs)."""
    spec = load_kernel(kernel)
    device = DEVICES["h200"]
    if sm_count:
        device = dataclasses.replace(device, sm_count=sm_count)
    cases = []
    for shape in shapes:
        space = Space(spec, shape=shape, arch=SM90A, device=device)
        points = itertools.product(TILES[kernel], SCHEDULES, RASTERS, clusters)
        for tile, sched, raster, cluster in points:
            config = dict(spec.default_config(), **tile, **sched, **raster, **cluster)
            if not space.is_valid(config):
                continue
            launch = launch_geometry(space, config)
            (ctas, y, z) = launch.grid
            assert (y, z) == (1, 1)
            size = config["CLUSTER_M"] * config["CLUSTER_N"]
            assert launch.cluster == (size, 1, 1)
            (workspace,) = [b for b in output_buffers(space, config) if b.name == "workspace"]
            cases.append(
                Case(shape["M"], shape["N"], shape["K"], config["BM"], config["BN"],
                     config["BK"], config["GROUP_M"], config["RASTER"] == "n",
                     config["SCHED"] == "streamk", config["SPLIT_K"], ctas, workspace.size,
                     config["CLUSTER_M"], config["CLUSTER_N"])
            )  # fmt: skip
    return cases


def shapes_of(kernel: str, *sets: str) -> list[dict[str, int]]:
    spec = load_kernel(kernel)
    return [dict(s) for name in sets for s in spec.shapes(name)]


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8"])
@pytest.mark.parametrize("sets", [("odd",), ("compare",)], ids=["odd", "compare"])
def test_every_iteration_once_and_no_deadlock_at_the_space_shapes(
    harness: Path, kernel: str, sets: tuple[str, ...]
) -> None:
    cases = space_cases(kernel, shapes_of(kernel, *sets))
    assert {c.stream_k for c in cases} == {True, False}
    assert {c.split_k for c in cases if not c.stream_k} >= {1, 2, 4}
    for case, s in zip(cases, schedules(harness, cases), strict=True):
        check(case, s)


def test_skinny_shapes_and_small_gpus(harness: Path) -> None:
    """Decode shapes (M = 1, 16, 128; the M=128, N=11008 layer has 43 tiles of 128 x 256 for
    132 SMs: stream-K's case) on the H200, and the odd shapes on GPUs with few SMs, where a CTA
    has many units and split-K's slices wrap around the grid."""
    int8 = space_cases("gemm_int8", SKINNY)
    cases = int8 + space_cases("gemm_fp8", SKINNY[:2])
    for sms in (1, 3, 7, 20):
        cases += space_cases("gemm_int8", shapes_of("gemm_int8", "odd"), sm_count=sms)
    assert len(cases) > 100
    for case, s in zip(cases, schedules(harness, cases), strict=True):
        check(case, s)
    (layer,) = [
        c
        for c in int8
        if (c.M, c.N, c.tile_m, c.tile_n, c.stream_k, c.along_n)
        == (128, 11008, 128, 256, True, False)
    ]
    assert layer.ctas == 132  # 43 tiles x 32 k-tiles over every SM


def test_grids_the_space_files_never_pick(harness: Path) -> None:
    """The header alone, with any grid up to one CTA per unit: tiles of 16 to 256, ragged K."""
    cases = []
    for M, N, K, tm, tn, tk in [
        (77, 300, 160, 64, 64, 64), (1000, 1000, 1008, 128, 96, 128), (1, 1, 16, 64, 16, 128),
        (333, 4095, 4112, 128, 256, 128), (4097, 100, 272, 256, 16, 32),
    ]:  # fmt: skip
        tiles = -(-M // tm) * -(-N // tn)
        k_tiles = -(-K // tk)
        for split in (1, 2, 3, 5):
            if split > 1 and (split - 1) * -(-k_tiles // split) >= k_tiles:
                continue  # a slice without a k-tile (the spaces refuse it)
            for ctas in {1, 2, 5, 13, tiles * split}:
                if ctas <= tiles * split:
                    cases.append(Case(M, N, K, tm, tn, tk, 4, split == 3, False, split, ctas))
        for ctas in {1, 2, 5, 13, 132, min(tiles * k_tiles, 1000)}:
            if ctas <= tiles * k_tiles:
                cases.append(Case(M, N, K, tm, tn, tk, 2, ctas % 2 == 1, True, 1, ctas))
    for case, s in zip(cases, schedules(harness, cases), strict=True):
        check(case, s)


def test_a_deadlocking_schedule_is_caught() -> None:
    """The simulation is a real check: a finisher waiting for a unit its own CTA computes later
    never completes."""
    unit = Unit(0, 0, 0, 0, 0, 0, 1, True, 0, 1)
    peer = Unit(0, 1, 0, 0, 0, 1, 1, False, 0, 0)
    assert not runs_to_completion(Schedule(1, 1, 2, 1, [[unit, peer]]))
    assert runs_to_completion(Schedule(1, 1, 2, 1, [[peer, unit]]))


# -- thread-block clusters ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["gemm_int8", "gemm_fp8"])
def test_clusters_pair_tiles_that_share_an_operand(harness: Path, kernel: str) -> None:
    """2x1 and 1x2 clusters at the odd, compare and skinny shapes with the space files' grids
    (whole clusters, at most the SMs rounded down: 132 on an H200), and on GPUs of 3, 7 and 20
    SMs where each cluster walks many cluster tiles."""
    shapes = shapes_of(kernel, "odd", "compare") + SKINNY
    cases = space_cases(kernel, shapes, clusters=CLUSTERS)
    for sms in (3, 7, 20):
        cases += space_cases(kernel, shapes_of(kernel, "odd"), sm_count=sms, clusters=CLUSTERS)
    assert {(c.cluster_m, c.cluster_n) for c in cases} == {(2, 1), (1, 2)}
    assert {c.along_n for c in cases} == {False, True}
    # odd tile counts: cluster tiles with a tile past the edge of C
    assert any(-(-c.M // c.tile_m) % 2 for c in cases if c.cluster_m == 2)
    assert any(-(-c.N // c.tile_n) % 2 for c in cases if c.cluster_n == 2)
    assert all(c.ctas % 2 == 0 and c.ctas <= 132 for c in cases)
    assert {c.ctas for c in cases if c.M * c.N >= 4096 * 4096} == {132}
    for case, s in zip(cases, schedules(harness, cases), strict=True):
        check(case, s)


def test_cluster_grids_the_space_files_never_pick(harness: Path) -> None:
    """The header alone: clusters of 2 over any number of clusters up to one per cluster tile,
    odd tile counts along the shared direction."""
    cases = []
    for M, N, K, tm, tn, tk in [
        (77, 300, 160, 64, 64, 64), (1000, 1000, 1008, 128, 96, 128),
        (333, 4095, 4112, 128, 256, 128), (4097, 100, 272, 256, 16, 32),
        (129, 129, 16, 64, 64, 128),
    ]:  # fmt: skip
        for cm, cn in ((2, 1), (1, 2)):
            clusters = -(-M // (tm * cm)) * -(-N // (tn * cn))
            for count in sorted({1, 2, 3, 7, clusters}):
                if count <= clusters:
                    for group, along_n in ((1, False), (4, True), (2, False)):
                        cases.append(Case(M, N, K, tm, tn, tk, group, along_n, False, 1,
                                          2 * count, None, cm, cn))  # fmt: skip
    for case, s in zip(cases, schedules(harness, cases), strict=True):
        check(case, s)


def test_a_cluster_that_does_not_share_its_operand_is_caught(harness: Path) -> None:
    """The cluster check is a real check: in a 2x1 schedule, the second CTA of the first
    cluster moved to the next column of C at one unit (its pair no longer shares B), or its
    unit dropped (a tile never computed), fails it."""
    case = Case(1000, 1000, 1008, 128, 96, 128, 4, False, False, 1, 8, None, 2, 1)
    (s,) = schedules(harness, [case])
    check(case, s)
    for broken in (
        lambda u: dataclasses.replace(u, tn=u.tn + 1),
        lambda u: dataclasses.replace(u, k_count=u.k_count - 1),
    ):
        ctas = [list(units) for units in s.ctas]
        ctas[1][0] = broken(ctas[1][0])
        with pytest.raises(AssertionError):
            check(case, dataclasses.replace(s, ctas=ctas))
