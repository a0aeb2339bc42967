"""CUDA C++ to CUBIN through NVRTC (``cuda.bindings.nvrtc``): no GPU and no driver needed."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.compiler.options import CompileOptions
from workbench.errors import CompileError
from workbench.toolchain import cuda_include_dir, nvrtc_module


@dataclass(frozen=True)
class NvrtcOutput:
    """Raw products of one NVRTC compile."""

    ok: bool
    cubin: bytes | None
    ptx: str | None
    log: str
    lowered_names: dict[str, str]


def compile_cuda(
    source: str,
    options: CompileOptions,
    *,
    filename: str = "kernel.cu",
    name_expressions: tuple[str, ...] = (),
) -> NvrtcOutput:
    """Compile CUDA C++ for ``options.arch``; a compile error is returned, not raised.

    Args:
        source: the full source text (includes are resolved through ``options.include_dirs``).
        options: flags; ``-I`` for the CUDA headers from the wheels is added here.
        filename: the name NVRTC prints in diagnostics.
        name_expressions: template instantiations to emit (``gemm<128, 128, 64>``).

    Raises:
        ToolchainError: NVRTC is missing.
        CompileError: NVRTC itself failed (not a diagnostic in the source).
    """
    nvrtc = nvrtc_module()
    ok_code = nvrtc.nvrtcResult.NVRTC_SUCCESS
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], [])
    _check(nvrtc, err, "nvrtcCreateProgram")
    try:
        for expr in name_expressions:
            (err,) = nvrtc.nvrtcAddNameExpression(prog, expr.encode())
            _check(nvrtc, err, f"nvrtcAddNameExpression({expr})")
        flags = [*options.to_nvrtc_flags(), f"-I{cuda_include_dir()}"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(flags), [f.encode() for f in flags])
        log = _log(nvrtc, prog)
        if err != ok_code:
            _, message = nvrtc.nvrtcGetErrorString(err)
            header = f"NVRTC: {message.decode()}\nflags: {' '.join(flags)}\n"
            return NvrtcOutput(False, None, None, header + log, {})
        lowered: dict[str, str] = {}
        for expr in name_expressions:
            err, name = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
            _check(nvrtc, err, f"nvrtcGetLoweredName({expr})")
            lowered[expr] = name.decode()
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check(nvrtc, err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check(nvrtc, err, "nvrtcGetCUBIN")
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx: str | None = None
        if err == ok_code and size > 1:
            buf = b" " * size
            (err,) = nvrtc.nvrtcGetPTX(prog, buf)
            if err == ok_code:
                ptx = buf.rstrip(b"\0").decode(errors="replace")
        return NvrtcOutput(True, cubin, ptx, log, lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _log(nvrtc, prog) -> str:
    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode(errors="replace")


def _check(nvrtc, err, what: str) -> None:
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, message = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"{what} failed: {message.decode()}")
