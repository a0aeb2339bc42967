"""Nsight Compute on the command line: find ``ncu``, build the command that profiles exactly one
launch of one config, run it, and say plainly why it failed when it does.

The profiled process is ``python -m workbench.profile.target K --config ...``
(:mod:`workbench.profile.target`): it runs that one config through the CUDA runner, whose
worker (a child process, hence ``--target-processes all``) wraps the config's launches in the
NVTX push/pop range ``<kernel>:<config_label>`` of domain ``workbench``. ncu selects

- the kernel by its mangled symbol (``--kernel-name-base mangled``, an anchored regex): the
  compiler's lowered name, so a template instantiation is matched exactly and an L2-flush or
  reference kernel never is;
- the config's NVTX range (``--nvtx --nvtx-include workbench@<kernel>:<config>/``: domain,
  range, trailing ``/`` for a push/pop range; a ``/`` inside would step into a nested range);
- one launch (``--launch-count 1``, after ``--launch-skip``), with the clocks left as they are
  (``--clock-control none``: the GPU is shared and its clocks are never changed here).

The metrics are added with ``--metrics`` to ncu's default (basic) sections, which bring the
launch statistics and occupancy.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.profile.errors import NcuProblem, NcuUnavailable
from workbench.runners.protocol import NVTX_DOMAIN, nvtx_range

NCU_ENV = "WORKBENCH_NCU"
#: Longest a profile may take (s): replaying one launch for ~100 metrics takes tens of passes.
NCU_TIMEOUT_S = 600.0
#: Marker of the line the profiled process prints with its outcome (JSON follows).
TARGET_MARKER = "WORKBENCH_PROFILE_TARGET "
#: Where Nsight Compute usually lives, besides ``$PATH``.
SEARCH_GLOBS = (
    "/usr/local/cuda/bin/ncu",
    "/usr/local/cuda-*/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/NVIDIA-Nsight-Compute*/ncu",
)


def find_ncu(explicit: str | Path | None = None) -> Path:
    """The ``ncu`` executable: ``explicit``, ``$WORKBENCH_NCU``, ``$PATH``, then the usual
    install folders (newest version first).

    Raises:
        NcuUnavailable: NOT_FOUND, saying where it looked.
    """
    for given in (explicit, os.environ.get(NCU_ENV)):
        if given:
            path = Path(given)
            if path.is_file() and os.access(path, os.X_OK):
                return path
            raise NcuUnavailable(NcuProblem.NOT_FOUND, f"{path} is not an executable ncu")
    found = shutil.which("ncu")
    if found:
        return Path(found)
    for pattern in SEARCH_GLOBS:
        for candidate in sorted(glob.glob(pattern), reverse=True):
            if os.access(candidate, os.X_OK):
                return Path(candidate)
    raise NcuUnavailable(
        NcuProblem.NOT_FOUND,
        f"not on $PATH nor in {', '.join(SEARCH_GLOBS)}; set ${NCU_ENV} or give its path as `ncu`",
    )


def nvtx_filter(kernel: str, config_label: str, domain: str = NVTX_DOMAIN) -> str:
    """ncu's ``--nvtx-include`` expression for a config's push/pop range."""
    return f"{domain}@{nvtx_range(kernel, config_label)}/"


def kernel_filter(mangled: str) -> str:
    """An anchored ``--kernel-name`` regex matching exactly the symbol ``mangled``."""
    return f"regex:^{re.escape(mangled)}$"


@dataclass(frozen=True)
class LaunchSelection:
    """Which launch ncu profiles.

    Attributes:
        mangled: the kernel's symbol (the compiler's lowered name).
        nvtx: the ``--nvtx-include`` expression, or None to select by kernel name only.
        launch_skip: matching launches to let pass before the profiled one.
    """

    mangled: str
    nvtx: str | None
    launch_skip: int = 0


def ncu_command(
    ncu: Path | str,
    *,
    metrics: Sequence[str],
    selection: LaunchSelection,
    output: Path,
    target: Sequence[str],
) -> list[str]:
    """The full ncu command line (``output`` without the ``.ncu-rep`` suffix ncu adds)."""
    command = [
        str(ncu),
        "--target-processes",
        "all",
        "--clock-control",
        "none",
        "--kernel-name-base",
        "mangled",
        "--kernel-name",
        kernel_filter(selection.mangled),
        "--launch-skip",
        str(selection.launch_skip),
        "--launch-count",
        "1",
    ]
    if metrics:
        command += ["--metrics", ",".join(metrics)]
    if selection.nvtx is not None:
        command += ["--nvtx", "--nvtx-include", selection.nvtx]
    return [*command, "--export", str(output), "--force-overwrite", *target]


def target_command(
    kernel: str,
    config_label: str,
    *,
    shape: Mapping[str, int] | None = None,
    arch: str | None = None,
    device: str | None = None,
    spaces: Sequence[Path] = (),
    cache_dir: Path | None = None,
    seed: int = 0,
    python: str | None = None,
) -> list[str]:
    """The profiled process: one config through the CUDA runner (:mod:`.target`)."""
    command = [python or sys.executable, "-m", "workbench.profile.target", kernel]
    command += ["--config", config_label, "--seed", str(seed)]
    for name, value in (shape or {}).items():
        command += ["--shape", f"{name}={value}"]
    if arch:
        command += ["--arch", arch]
    if device:
        command += ["--device", device]
    for folder in spaces:
        command += ["--spaces", str(folder)]
    if cache_dir is not None:
        command += ["--cache-dir", str(cache_dir)]
    return command


@dataclass(frozen=True)
class NcuRun:
    """One ncu invocation and what came of it."""

    command: tuple[str, ...]
    returncode: int
    output: str
    report: Path | None
    seconds: float

    @property
    def shown(self) -> str:
        return shlex.join(self.command)

    def target_lines(self) -> list[str]:
        """The JSON lines the profiled process printed after :data:`TARGET_MARKER`."""
        return [
            line.split(TARGET_MARKER, 1)[1]
            for line in self.output.splitlines()
            if TARGET_MARKER in line
        ]


#: (problem, pattern in ncu's output), checked in order.
_PATTERNS = (
    (NcuProblem.NO_PERMISSION, re.compile(r"ERR_NVGPUCTRPERM|permission to access NVIDIA GPU")),
    (
        NcuProblem.UNSUPPORTED,
        re.compile(
            r"(not supported|unsupported).{0,80}(device|GPU|profil|vGPU|virtual)"
            r"|ERR_NVGPUCTRPERM_VGPU|vGPU.{0,40}profil",
            re.IGNORECASE,
        ),
    ),
    (NcuProblem.NO_KERNELS, re.compile(r"No kernels were profiled")),
)


def classify(output: str, report_exists: bool) -> tuple[NcuProblem, str] | None:
    """Why ncu produced no report, from its output; None when it wrote one (warnings about
    single sections or metrics do not make a report unusable)."""
    if report_exists:
        return None
    lines = output.splitlines()
    for problem, pattern in _PATTERNS:
        match = pattern.search(output)
        if match:
            line = next((x for x in lines if match.group(0) in x), match.group(0))
            return problem, line.strip()
    errors = [line.strip() for line in lines if line.startswith("==ERROR==")]
    return NcuProblem.FAILED, "; ".join(errors[-3:]) or "no report was written"


def run_ncu(command: Sequence[str], report: Path, timeout_s: float = NCU_TIMEOUT_S) -> NcuRun:
    """Run ``command`` and return the run when ``report`` was written.

    Raises:
        NcuUnavailable: timeout, no permission, counters unsupported, no kernel matched, or
            another failure (with ncu's error lines and the command).
    """
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.monotonic()
    try:
        done = subprocess.run(
            list(command),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise NcuUnavailable(
            NcuProblem.TIMEOUT, f"no report after {timeout_s:g} s: {shlex.join(command)}"
        ) from exc
    except OSError as exc:
        raise NcuUnavailable(NcuProblem.NOT_FOUND, f"cannot run {command[0]}: {exc}") from exc
    output = (done.stdout or "") + (done.stderr or "")
    run = NcuRun(
        tuple(command),
        done.returncode,
        output,
        report if report.is_file() else None,
        time.monotonic() - start,
    )
    problem = classify(output, run.report is not None)
    if problem is not None:
        kind, detail = problem
        raise NcuUnavailable(kind, f"{detail} (command: {run.shown})")
    return run
