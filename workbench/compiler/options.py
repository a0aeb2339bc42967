"""Compile options: one frozen dataclass, turned into NVRTC or ptxas flags in one place."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.spaces.option_knobs import BOOL_KNOBS, OPTION_KNOBS
from workbench.toolchain import Arch


@dataclass(frozen=True)
class CompileOptions:
    """Everything that changes the binary, besides the source text.

    ``arch`` is required: it is never read from a GPU, so a compile is the same on every machine.
    """

    arch: Arch
    defines: tuple[tuple[str, str], ...] = ()
    fast_math: bool = False
    ftz: bool | None = None
    prec_div: bool | None = None
    prec_sqrt: bool | None = None
    fmad: bool | None = None
    maxrregcount: int = 0
    dlcm: str | None = None
    dscm: str | None = None
    opt_level: int | None = None
    std: str = "c++17"
    lineinfo: bool = True
    include_dirs: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = field(default=())

    @classmethod
    def build(
        cls,
        arch: Arch,
        defines: Mapping[str, object] | None = None,
        knobs: Mapping[str, object] | None = None,
        **kwargs: object,
    ) -> CompileOptions:
        """Options from macro values and option-knob values (names in :data:`OPTION_KNOBS`)."""
        norm_defines = tuple(sorted((k, macro_value(v)) for k, v in (defines or {}).items()))
        knob_values: dict[str, Any] = {}
        for name, value in (knobs or {}).items():
            if name not in OPTION_KNOBS:
                raise ValueError(f"unknown compiler option knob {name!r}")
            knob_values[name] = value
        if "maxrregcount" in knob_values:
            knob_values["maxrregcount"] = int(knob_values["maxrregcount"] or 0)
        if "opt_level" in knob_values:
            knob_values["opt_level"] = int(knob_values["opt_level"])
        for name in BOOL_KNOBS:
            if name in knob_values and knob_values[name] is not None:
                knob_values[name] = bool(knob_values[name])
        return cls(arch=arch, defines=norm_defines, **knob_values, **kwargs)  # type: ignore[arg-type]

    def ptxas_flags(self) -> list[str]:
        """Flags for ptxas itself (also passed to NVRTC behind ``-Xptxas``)."""
        flags = ["-v"]  # resource usage per kernel into the log: registers, smem, spills
        if self.dlcm:
            flags.append(f"-dlcm={self.dlcm}")
        if self.dscm:
            flags.append(f"-dscm={self.dscm}")
        if self.opt_level is not None:
            flags.append(f"-O{self.opt_level}")
        return flags

    def to_nvrtc_flags(self) -> list[str]:
        """The NVRTC command line, normalised (same options give the same list)."""
        flags = [f"-arch={self.arch.sm}", f"-std={self.std}"]
        if self.lineinfo:
            flags.append("-lineinfo")
        if self.fast_math:
            flags.append("--use_fast_math")
        for name, flag in (
            ("ftz", "--ftz"),
            ("prec_div", "--prec-div"),
            ("prec_sqrt", "--prec-sqrt"),
            ("fmad", "--fmad"),
        ):
            value = getattr(self, name)
            if value is not None:
                flags.append(f"{flag}={'true' if value else 'false'}")
        if self.maxrregcount:
            flags.append(f"--maxrregcount={self.maxrregcount}")
        for opt in self.ptxas_flags():
            flags += ["-Xptxas", opt]
        flags += [f"-D{name}={value}" for name, value in self.defines]
        flags += [f"-I{d}" for d in self.include_dirs]
        flags += list(self.extra_flags)
        return flags

    def portable_flags(self, language: str = "cuda") -> list[str]:
        """The NVRTC flags (ptxas flags for ``ptx``) that make this binary, for another
        machine's build: no include paths of this one, no ``-v`` (a report in the log, not a
        change to the code)."""
        if language == "ptx":
            flags = self.to_ptxas_flags()
        else:
            flags = replace(self, include_dirs=()).to_nvrtc_flags()
        out: list[str] = []
        for flag in flags:
            if flag != "-v":
                out.append(flag)
            elif out and out[-1] == "-Xptxas":
                out.pop()
        return out

    def to_ptxas_flags(self) -> list[str]:
        """The ptxas command line for hand-written PTX (no C++ front-end options apply)."""
        flags = [f"-arch={self.arch.sm}", *self.ptxas_flags()]
        if self.maxrregcount:
            flags.append(f"--maxrregcount={self.maxrregcount}")
        if self.lineinfo:
            flags.append("-lineinfo")
        flags += list(self.extra_flags)
        return flags


def macro_value(value: object) -> str:
    """Booleans become 1/0 so that ``#if NAME`` works; everything else is its text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
