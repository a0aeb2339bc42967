"""Hand-written PTX to CUBIN with ptxas from the ``nvidia-cuda-nvcc`` wheel."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from workbench.compiler.nvrtc import NvrtcOutput
from workbench.compiler.options import CompileOptions
from workbench.errors import ToolchainError
from workbench.toolchain import find_tool

#: A ptxas run longer than this is treated as hung (real kernels assemble in well under 10 s).
PTXAS_TIMEOUT_S = 300


def assemble_ptx(ptx: str, options: CompileOptions, *, filename: str = "kernel.ptx") -> NvrtcOutput:
    """Assemble PTX text for ``options.arch``; an assembler error is returned, not raised.

    Raises:
        ToolchainError: ptxas is missing or cannot run.
    """
    ptxas = find_tool("ptxas")
    with tempfile.TemporaryDirectory(prefix="workbench-ptxas-") as tmp:
        src = Path(tmp) / Path(filename).name
        out = Path(tmp) / "out.cubin"
        src.write_text(ptx)
        cmd = [ptxas, *options.to_ptxas_flags(), str(src), "-o", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PTXAS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return NvrtcOutput(False, None, ptx, f"ptxas timed out after {PTXAS_TIMEOUT_S} s", {})
        except OSError as exc:
            raise ToolchainError(f"ptxas at {ptxas} cannot run: {exc}") from exc
        log = (proc.stdout + proc.stderr).replace(str(src), filename)
        if proc.returncode != 0 or not out.exists():
            header = f"ptxas exited with {proc.returncode}\ncommand: {' '.join(cmd[1:-3])}\n"
            return NvrtcOutput(False, None, ptx, header + log, {})
        return NvrtcOutput(True, out.read_bytes(), ptx, log, {})
