"""Shared fixtures: a throwaway project with one tiny kernel and its space file."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dataset_paths import CACHES, DATASETS, missing

if TYPE_CHECKING:
    from workbench.compiler import CompileCache

TINY_KERNEL = """\
extern "C" __global__ void axpy(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) y[i] = SCALE * x[i] + y[i];
}
"""

TINY_SPACE = """\
name: tiny
source: ../kernels/axpy.cu
entry:
  kernel: axpy
arches: [sm_80, sm_90]
parameters:
  BLOCK: {values: [32, 64, 128, 256], default: 128}
  SCALE: {values: [1, 2, 3], default: 2}
  WAVES: {values: [1, 2], default: 1, role: launch}
constraints:
  - {expr: "BLOCK * SCALE <= 512", reason: "keeps the test space small"}
geometry:
  grid: cdiv(n, BLOCK)
  block: BLOCK
shapes:
  default: {n: 1000}
  sets:
    two: [{n: 10}, {n: 20}]
inputs:
  x: {dtype: float32, shape: [n]}
outputs:
  y: {dtype: float32, shape: [n], init: 1}
args: [x, y, {value: n, dtype: int32}]
reference: {python: "workbench.references.elementwise:scale", rtol: 1e-6}
work: {flops: 2 * n, bytes: 12 * n}
"""


@contextlib.contextmanager
def study_held_elsewhere(store_url: str, study_name: str) -> Iterator[None]:
    """Another process holds ``study_name``'s tuning lock (``Store.exclusive``) in the store at
    ``store_url`` while the block runs. (The lock is a POSIX lock, held per process: a lock
    taken in this process would not stop this process.)"""
    holder = (
        "import sys\n"
        "from workbench.store import Store\n"
        f"s = Store({store_url!r})\n"
        f"with s.exclusive(s.find_study({study_name!r})):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        yield
    finally:
        child.communicate("")


@pytest.fixture(scope="session")
def datasets() -> Path:
    """The public datasets' folder (``$WORKBENCH_DATASETS``, else ``../shared/datasets`` beside the
    repository: tests/dataset_paths.py); the test is skipped, saying where, when it is absent."""
    if not DATASETS.is_dir():
        pytest.skip(missing(DATASETS))
    return DATASETS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (pyproject marker) with kernels/axpy.cu and spaces/tiny.yaml."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'user-kernels'\n")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "axpy.cu").write_text(TINY_KERNEL)
    (tmp_path / "spaces").mkdir()
    (tmp_path / "spaces" / "tiny.yaml").write_text(TINY_SPACE)
    return tmp_path


@pytest.fixture
def recording_without_scale_3(project: Path) -> Path:
    """A recording of the tiny space (22 valid configs, 1 + BLOCK/100 ms each) that lacks the
    6 with SCALE=3: a replay whose recording does not hold every valid config."""
    from recording_helpers import record_space

    from workbench.spaces import Space, load_space

    space = Space(load_space(project / "spaces" / "tiny.yaml"))
    kept = [c for c in space.iter_valid() if c["SCALE"] != 3]
    return record_space(
        space,
        project / "rec-without-scale-3.json",
        [(c, 1.0 + c["BLOCK"] / 100) for c in kept],
        device="GPU",
    )


@pytest.fixture
def write_space(project: Path) -> Callable[[str], Path]:
    """Write a space file (dedented) into the project and return its path."""

    def write(text: str, name: str = "case.yaml") -> Path:
        path = project / "spaces" / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "compile-cache"


#: Where the kernel tests keep compiled binaries between runs (``run``: a fresh cache each run).
TEST_CACHE_ENV = "WORKBENCH_TEST_CACHE"
#: What makes a cached entry besides its key (the source, headers, flags, entry and NVRTC or
#: ptxas version): the code that compiles, stores and disassembles it.
CACHE_MAKERS = ("workbench/compiler", "workbench/analysis/sass.py", "workbench/static/sweep.py")


def makers_digest() -> str:
    """sha256 of CACHE_MAKERS' sources and of the tools and packages behind a cached binary
    and its disassembly: a change to any of them starts a new cache."""
    import hashlib
    from importlib.metadata import PackageNotFoundError, version

    from workbench.errors import ToolchainError
    from workbench.toolchain import tool_version

    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for maker in CACHE_MAKERS:
        path = root / maker
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(f"{source.relative_to(root)}\0".encode() + source.read_bytes())
    for package in ("numba", "numba-cuda", "cuda-python", "cuda-bindings"):
        with contextlib.suppress(PackageNotFoundError):
            digest.update(f"{package}={version(package)}".encode())
    with contextlib.suppress(ToolchainError):
        digest.update(tool_version("nvdisasm").encode())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def cache(tmp_path_factory: pytest.TempPathFactory) -> CompileCache:
    """The kernel tests' compile cache, shared by the tests of every module and every
    pytest-xdist worker, and kept between runs in ``~/.cache/workbench-tests`` (or
    ``$WORKBENCH_TEST_CACHE``; ``run``: the run's temporary root, fresh each run): a config that
    two tests compile compiles once, and a rerun compiles only what changed.

    Safe to share and to keep: an entry's key hashes the source and its headers, the options
    and the NVRTC (or ptxas) version, entries are renamed into place whole, and the folder is
    named by :func:`makers_digest` (the compiler's and disassembler's code, nvdisasm's and
    Numba's versions). A test about the cache itself (misses, hits, damaged entries) makes a
    cache of its own in ``tmp_path``. (This fixture stands in for pytest's cacheprovider
    ``cache``, which no test here uses.)"""
    from workbench.compiler import CompileCache

    where = os.environ.get(TEST_CACHE_ENV)
    if where == "run":
        root = tmp_path_factory.getbasetemp()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            root = root.parent  # the workers' folders (popen-gw0, ...) share the run's root
        return CompileCache(root / "shared-compile-cache")
    base = Path(where) if where else Path.home() / ".cache" / "workbench-tests"
    return CompileCache(base / f"compile-{makers_digest()}")


#: why a ``kernel_tuner`` test skips (None: Kernel Tuner is installed)
NO_KERNEL_TUNER = (
    None
    if importlib.util.find_spec("kernel_tuner")
    else "Kernel Tuner is not installed (pip install -e '.[dev,bench]'; CI runs these tests in "
    ".venv-extras)"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that starts PostgreSQL (the ``pg_cluster`` fixture) is slow: ``-m "not slow"``
    leaves it to the full run. A ``kernel_tuner`` test skips without Kernel Tuner."""
    for item in items:
        if "pg_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        if NO_KERNEL_TUNER and item.get_closest_marker("kernel_tuner"):
            item.add_marker(pytest.mark.skip(reason=NO_KERNEL_TUNER))


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL server on loopback for the scale-out tests (tests/pg_cluster.py);
    skipped only when the server binaries are absent (CI installs them)."""
    from pg_cluster import throwaway_cluster

    with throwaway_cluster() as cluster:
        if isinstance(cluster, str):
            pytest.skip(cluster)
        yield cluster


@pytest.fixture(scope="session", autouse=True)
def no_store_in_the_checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Commands a test runs without naming a store or cache write to the session's temporary
    folder, never to the checkout's .workbench/ (where a store left by an older version would
    make the suite depend on what ran here before)."""
    root = tmp_path_factory.mktemp("default-dirs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WORKBENCH_STORE", str(root / "store.sqlite"))
        mp.setenv("WORKBENCH_CACHE_DIR", str(root / "cache"))
        yield


@pytest.fixture(scope="session", autouse=True)
def no_terminal_size_from_the_runner() -> Iterator[None]:
    """The CLI's output is as wide as a pipe's (``PIPED_WIDTH`` in cli/common.py) unless a test
    sets ``COLUMNS`` itself: a pytest-xdist worker starts with ``COLUMNS=80`` and ``LINES=24``
    in its environment (seen with xdist 3.8; a serial run has neither), which would wrap the
    tables there and nowhere else."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("COLUMNS", raising=False)
        mp.delenv("LINES", raising=False)
        yield


@pytest.fixture
def private_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A compile cache and a default store of the test's own (``WORKBENCH_CACHE_DIR``,
    ``WORKBENCH_STORE``); the store's path."""
    monkeypatch.setenv("WORKBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("WORKBENCH_STORE", str(tmp_path / "store.sqlite"))
    return tmp_path / "store.sqlite"


@pytest.fixture(scope="session")
def one_percent_noise() -> list:
    """Real timing samples with about 1 % run-to-run noise (relative stdev 0.8-1.2 %): the
    configs of a convolution kernel on an A100 recorded with 32 samples each (Kernel Tuner's
    public cache), for the regression tests' synthetic runs."""
    import numpy as np

    from workbench.regress.noise import load_sample_sets

    path = CACHES / "convolution_milo_A100.json.gz"
    if not path.exists():
        pytest.skip(missing(path))
    sets = load_sample_sets([path], min_samples=32)
    return [s for s in sets if 0.008 <= np.std(s.samples) / np.mean(s.samples) <= 0.012]


@pytest.fixture
def store(tmp_path: Path):
    """An empty store in the test's own SQLite file."""
    from workbench.store import Store

    return Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
