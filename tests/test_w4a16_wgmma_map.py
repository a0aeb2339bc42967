"""The index math of gemm_w4a16's wgmma path (PATH=wgmma), checked without a GPU with the
kernel's own code: kernels_cu/gemm_w4a16_wgmma_map.cuh compiles as host C++ (g++), a small
program (tests/data/w4a16_wgmma_map_harness.cpp) prints its maps, and a NumPy emulation of one
warpgroup's k16 step uses them exactly as gemm_w4a16_wgmma.cuh does: lane l of warp w reads its
16 bytes of weight unit ``unit_of_warp(w)`` in the layout workbench.quant.int4 writes, word
``word_of_wgmma(j)`` of them is dequantized into the four registers of wgmma j's A fragment
(``frag_source``), placed where the PTX ISA puts a wgmma .m64nNk16 A fragment, multiplied by the
activations, and every accumulator is read back where the PTX ISA puts D and stored to the
column ``column_of_row`` names. The result must be the activations times the dequantized
weights, every weight used exactly once.

What the PTX ISA fixes (not the kernel's choice) is written here from the ISA, "Register
Fragments" of wgmma.mma_async .m64nNk16: A register i of lane l in warp w holds row
16 w + l/4 + 8 (i % 2), columns 2 (l % 4) + 8 (i / 2) + {0, 1}; D register x holds row
16 w + l/4 + 8 ((x / 2) % 2), column 8 (x / 4) + 2 (l % 4) + x % 2. What dequant_word returns
is the convert header's documented order: out[o] holds nibbles o (low half) and o + 4 (high).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from workbench.quant.int4 import Int4Weights, to_tiled

ROOT = Path(__file__).resolve().parent.parent
HARNESS = Path(__file__).parent / "data" / "w4a16_wgmma_map_harness.cpp"


@pytest.fixture(scope="module")
def maps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[int]]:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed: the map's host harness is C++ (apt-get install g++)")
    exe = tmp_path_factory.mktemp("w4map") / "harness"
    subprocess.run(
        [gxx, "-std=c++17", "-O1", "-I", str(ROOT / "kernels_cu"), str(HARNESS), "-o", str(exe)],
        check=True,
        capture_output=True,
        text=True,
    )
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {name: [int(v) for v in rest] for name, *rest in (ln.split() for ln in out.splitlines())}


def emulate_step(
    maps: dict[str, list[int]], words: np.ndarray, zeros: np.ndarray, scales: np.ndarray,
    act: np.ndarray, *, group_scales: bool,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """One k16 step of one warpgroup: ``words`` uint32 [4 units, 32 lanes, 4 words], ``zeros`` /
    ``scales`` [256] in the kernel's permuted order (position 64 u + 8 g + tile), ``act`` [WM, 16].
    Returns C [WM, 256] and how often each (k, column) weight was used."""
    wm = act.shape[0]
    c = np.zeros((wm, 256))
    used = np.zeros((16, 256), dtype=int)
    for j in range(4):
        a_mat = np.full((64, 16), np.nan)  # wgmma j's A, as the fragments lay it out
        a_col = np.full((64, 16), -1)  # (for `used`) the weight column each element came from
        row_scale = np.full(64, np.nan)  # SCALE=group: the scale of each A / D row
        for w in range(4):
            unit = maps["unit_of_warp"][w]
            for lane in range(32):
                g, t = lane // 4, lane % 4
                wd = maps["word_of_wgmma"][j]
                word = int(words[unit, lane, wd])
                for i in range(4):
                    o = maps["frag_source"][i]
                    tile = 2 * wd + o // 2  # za for out[0], out[1]; zb for out[2], out[3]
                    z = int(zeros[64 * unit + 8 * g + tile])
                    s = float(scales[64 * unit + 8 * g + tile])
                    row = 16 * w + g + 8 * (i % 2)
                    for half, nib in ((0, o), (1, o + 4)):
                        code = ((word >> (4 * nib)) & 15) - z
                        col = 2 * t + 8 * (i // 2) + half
                        a_mat[row, col] = code if group_scales else code * s
                        a_col[row, col] = 64 * unit + 8 * tile + g
                # SCALE=group: D register x, row h = (x / 2) % 2, takes sc[2 wd + h]
                for h in range(2):
                    row_scale[16 * w + g + 8 * h] = float(scales[64 * unit + 8 * g + 2 * wd + h])
        assert not np.isnan(a_mat).any()
        d = a_mat @ act.T  # (64, WM): D = A . B, B = the activations K-major
        for w in range(4):
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for x in range(wm // 2):
                    row = 16 * w + g + 8 * ((x // 2) % 2)
                    m = 8 * (x // 4) + 2 * t + x % 2
                    n = maps["column_of_row"][64 * j + row]
                    c[m, n] += d[row, m] * (row_scale[row] if group_scales else 1.0)
        for row in range(64):
            n = maps["column_of_row"][64 * j + row]
            for k in range(16):
                assert a_col[row, k] == n, (j, row, k, a_col[row, k], n)  # the row's own column
                used[k, n] += 1
    return c, used


@pytest.mark.parametrize("wm", [16, 32])
@pytest.mark.parametrize("group_scales", [False, True])
def test_the_wgmma_fragments_and_outputs_are_the_weights_and_columns_of_the_layout(
    maps: dict[str, list[int]], wm: int, group_scales: bool
) -> None:
    rng = np.random.default_rng(wm + group_scales)
    k, n = 16, 256  # one k16 step of four 64-column units
    q = rng.integers(0, 16, (k, n), dtype=np.uint8)
    w = Int4Weights(
        q,
        rng.uniform(0.5, 2.0, (1, n)).astype(np.float16),
        rng.integers(0, 16, (1, n), dtype=np.uint8),
        16,
    )
    tiled = to_tiled(w)
    words = tiled.qweight.view(np.uint32).reshape(4, 32, 4)  # (unit, lane, word) of k16 step 0
    assert tiled.zeros is not None
    act = rng.integers(-3, 4, (wm, k)).astype(np.float64)
    c, used = emulate_step(
        maps, words, tiled.zeros[0], tiled.scales[0], act, group_scales=group_scales
    )
    assert (used == 1).all()  # every weight of the step exactly once
    want = act @ w.dequantize().astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-12, atol=1e-9)


def test_the_maps_are_permutations(maps: dict[str, list[int]]) -> None:
    """Each warp its own unit, each wgmma its own word, each fragment register its own output;
    the four wgmma's 64 rows cover the warpgroup's 256 columns once, and a warp's rows stay in
    its own unit (the columns whose scales and zero points it loaded)."""
    assert sorted(maps["frag_source"]) == [0, 1, 2, 3]
    assert sorted(maps["unit_of_warp"]) == [0, 1, 2, 3]
    assert sorted(maps["word_of_wgmma"]) == [0, 1, 2, 3]
    cols = maps["column_of_row"]
    assert sorted(cols) == list(range(256))
    for j in range(4):
        for row in range(64):
            assert cols[64 * j + row] // 64 == maps["unit_of_warp"][row // 16]
