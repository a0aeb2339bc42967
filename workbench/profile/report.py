"""Read an ``.ncu-rep`` file into plain data, with no GPU: one :class:`KernelProfile` per
profiled launch.

``ncu_report`` (the ``ncu-report`` wheel) does the reading. It is lenient: a file that is not a
report loads as a context with zero ranges, and a truncated one loads the kernels that were
complete before the cut, or kernels with no metrics at all. :func:`load_report` therefore also
walks the file's block chain (:func:`check_container`) and refuses a file whose blocks do not
end exactly at the end of the file.

Metric values: NaN (an incomplete profile, e.g. a kernel whose replay failed) and infinity (a
ratio over zero, as the H800 report's ``lts__average_gcomp_input_sector_success_rate.pct``)
become None and the name is listed in :attr:`KernelProfile.nan`; string metrics go to
``strings``.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.profile.chips import chip_for_id, chip_for_name
from workbench.profile.errors import ReportError
from workbench.profile.nvperf import is_ncu_side

#: File magic of every Nsight Compute report.
MAGIC = b"NVR\x00"
#: The file-header version of the reports the block walk was checked on (ncu 2021-2025).
KNOWN_FORMAT_VERSIONS = frozenset({7})
#: ``BlockHeader`` field holding the payload size (protobuf field number).
_PAYLOAD_SIZE_FIELD = 5


@dataclass(frozen=True)
class KernelProfile:
    """One profiled kernel launch of a report.

    Attributes:
        index: position in the report (ranges in order, then launches).
        function_name: Nsight Compute's short name (``Kernel`` for every CUTLASS kernel).
        demangled_name: the full demangled signature.
        mangled_name: the symbol (tells apart kernels that share a short name).
        device: ``device__attribute_display_name``.
        chip: the Perfworks chip name, when known (``GA100``).
        cc: compute capability as an integer (80, 90).
        metrics: numeric metrics; None where the report holds NaN or infinity.
        strings: string-valued metrics.
        nan: names whose value is not finite.
        nvtx: the NVTX push/pop ranges around the launch, ``domain@range`` from outer to inner.
    """

    index: int
    function_name: str
    demangled_name: str
    mangled_name: str
    device: str | None
    chip: str | None
    cc: int | None
    metrics: Mapping[str, float | None]
    strings: Mapping[str, str] = field(default_factory=dict)
    nan: tuple[str, ...] = ()
    nvtx: tuple[str, ...] = ()

    def value(self, name: str) -> float | None:
        """The value of ``name``; None if absent or NaN."""
        return self.metrics.get(name)

    def missing(self, names: Iterable[str]) -> list[str]:
        """The names among ``names`` with no finite value here."""
        return [n for n in names if self.metrics.get(n) is None and n not in self.strings]

    @property
    def complete(self) -> bool:
        """False for an incomplete profile: most hardware counters NaN, as a replay that did
        not finish leaves them (device attributes and launch statistics do not count)."""
        counters = [n for n in self.metrics if not is_ncu_side(n)]
        bad = [n for n in self.nan if not is_ncu_side(n)]
        return bool(counters) and len(bad) < len(counters) / 2

    def matches(self, name: str) -> bool:
        """True when ``name`` is this kernel's mangled, demangled or short name, or a
        substring of the demangled name."""
        return name in (self.mangled_name, self.function_name) or name in self.demangled_name


@dataclass(frozen=True)
class Report:
    """A whole report file."""

    path: Path
    sha256: str
    kernels: tuple[KernelProfile, ...]

    def find(self, name: str) -> list[KernelProfile]:
        """Kernels matching ``name`` (see :meth:`KernelProfile.matches`)."""
        return [k for k in self.kernels if k.matches(name)]


def check_container(path: Path) -> str | None:
    """Walk the report's blocks; return what is wrong, or None when the chain is whole.

    Layout (Nsight Compute report format, as found in the public reports): ``NVR\\0``, a
    little-endian u32 size and the file header (protobuf, field 1 = format version), then
    blocks of a u32 size, a block header (protobuf) and a payload whose size is the header's
    field 5. Only formats in :data:`KNOWN_FORMAT_VERSIONS` are walked; others pass.
    """
    data = path.read_bytes()
    if len(data) < 8 or data[:4] != MAGIC:
        return "not an Nsight Compute report (no NVR file magic)"
    (size,) = struct.unpack_from("<I", data, 4)
    header = _varints(data[8 : 8 + size])
    if header is None or 8 + size > len(data):
        return "damaged file header"
    if header.get(1) not in KNOWN_FORMAT_VERSIONS:
        return None  # a format this walk does not know: let ncu_report judge
    pos, blocks = 8 + size, 0
    while pos < len(data):
        if pos + 4 > len(data):
            return f"truncated: a block size is cut at byte {pos} of {len(data)}"
        (size,) = struct.unpack_from("<I", data, pos)
        fields = _varints(data[pos + 4 : pos + 4 + size])
        if fields is None or pos + 4 + size > len(data):
            return f"truncated or damaged: block {blocks + 1} header at byte {pos} of {len(data)}"
        pos += 4 + size + fields.get(_PAYLOAD_SIZE_FIELD, 0)
        blocks += 1
    if pos != len(data):
        return f"truncated: block {blocks} ends at byte {pos}, past the end ({len(data)} bytes)"
    return None


def _varints(buf: bytes) -> dict[int, int] | None:
    """The varint fields of a protobuf message (others skipped); None if it does not parse."""
    out: dict[int, int] = {}
    i = 0
    try:
        while i < len(buf):
            key, i = _varint(buf, i)
            number, wire = key >> 3, key & 7
            if wire == 0:
                out[number], i = _varint(buf, i)
            elif wire == 2:
                length, i = _varint(buf, i)
                i += length
            elif wire in (1, 5):
                i += 8 if wire == 1 else 4
            else:
                return None
        return out if i == len(buf) else None
    except IndexError:
        return None


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def load_report(path: Path | str) -> Report:
    """Read every kernel launch of a report.

    Raises:
        ReportError: the file is missing, not a report, truncated or damaged, holds no
            kernel, or the ``ncu-report`` package is not installed.
    """
    path = Path(path)
    if path.is_dir():
        raise ReportError(path, "a directory, not a report file (.ncu-rep)")
    if not path.is_file():
        raise ReportError(path, "no such file")
    problem = check_container(path)
    if problem is not None:
        raise ReportError(path, problem)
    try:
        import ncu_report
    except ImportError as exc:
        raise ReportError(
            path, f"cannot read reports: the ncu-report package is missing ({exc})"
        ) from exc
    try:
        context = ncu_report.load_report(str(path))
    except Exception as exc:  # ncu_report raises plain exceptions for unreadable files
        raise ReportError(path, f"ncu_report cannot load it: {exc}") from exc
    kernels: list[Any] = []
    for r in range(context.num_ranges()):
        launches = context.range_by_idx(r)
        for a in range(launches.num_actions()):
            kernels.append(_kernel(len(kernels), launches.action_by_idx(a)))
    if not kernels:
        raise ReportError(path, "holds no profiled kernel (not a report, or an empty one)")
    if all(not k.metrics for k in kernels):
        raise ReportError(path, "holds kernels without any metric (damaged or truncated)")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Report(path, digest, tuple(kernels))


def _kernel(index: int, action: Any) -> KernelProfile:
    metrics: dict[str, float | None] = {}
    strings: dict[str, str] = {}
    nan: list[str] = []
    for name in action.metric_names():
        metric = action.metric_by_name(name)
        if metric is None:
            continue
        if metric.kind() == metric.ValueKind_STRING:
            strings[name] = metric.as_string()
            continue
        value = float(metric.as_double())
        if not math.isfinite(value):  # NaN (failed replay) or inf (a ratio over zero)
            nan.append(name)
            metrics[name] = None
        else:
            metrics[name] = value
    chip_id = metrics.get("device__attribute_chip")
    major = metrics.get("device__attribute_compute_capability_major")
    minor = metrics.get("device__attribute_compute_capability_minor")
    cc = int(major) * 10 + int(minor or 0) if major is not None else None
    device = strings.get("device__attribute_display_name")
    chip = chip_for_id(int(chip_id) if chip_id is not None else None, cc)
    if chip is None and device:
        chip = chip_for_name(device, cc)
    return KernelProfile(
        index=index,
        function_name=action.name(),
        demangled_name=action.name(action.NameBase_DEMANGLED),
        mangled_name=action.name(action.NameBase_MANGLED),
        device=device,
        chip=chip,
        cc=cc,
        metrics=metrics,
        strings=strings,
        nan=tuple(nan),
        nvtx=_nvtx(action),
    )


def _nvtx(action: Any) -> tuple[str, ...]:
    state = action.nvtx_state()
    if state is None:
        return ()
    ranges: list[Any] = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        ranges.extend(f"{domain.name()}@{r}" for r in domain.push_pop_ranges())
    return tuple(ranges)
