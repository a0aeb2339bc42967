"""References for the quantize family: int8, fp8 E4M3 and MX (OCP microscaling) formats.

The formulas are the standard ones, written once here and once in
``kernels_cu/quantize_common.cuh``, with the same float32 operations in the same order, so that
codes, scales and zero points match bit for bit:

- symmetric int8: ``scale = max|x| / 127``, ``q = clamp(rint(x / scale), -127, 127)``;
- asymmetric int8: ``lo = min(min x, 0)``, ``hi = max(max x, 0)``, ``scale = (hi - lo) / 255``,
  ``zp = clamp(rint(-128 - lo / scale), -128, 127)``, ``q = clamp(rint(x / scale) + zp, -128,
  127)``;
- fp8 E4M3: ``scale = max|x| / 448``, ``q = e4m3(clamp(x / scale, -448, 448))``;
- a range of zero (an all-zero group) takes ``scale = 1``.

``rint`` rounds half to even. Divisions are IEEE float32 divisions, on both sides: ``x * (1 /
scale)`` rounds twice and gives a different code for some ``x`` (the tests show one).

MX (OCP Microscaling Formats (MX) Specification v1.0, section 6.3, "conversion": shared
exponent ``floor(log2(max|V_i|)) - emax_elem``, ``X = 2^shared``, elements ``V_i / X`` encoded
in the element format with normal numbers clamped to its largest magnitude): blocks of 32
elements along a row; ``emax_elem`` is 8 for E4M3 (448 = 1.75 * 2^8) and 0 for INT8, whose
elements carry 6 fraction bits (largest 127 / 64 = 1.98 * 2^0). The element parameters follow
microsoft/microxcaling (``mx/formats.py``: int8 ``emax = 0``, fp8_e4m3 ``emax = 8``, max 448;
``mx/mx_ops.py``: an all-zero block uses ``log2`` of the smallest normal, ``-126``, and shared
exponents below ``-127`` are clamped to ``-127``). INT8 elements are clamped to ``[-127, 127]``
(microxcaling's sign-magnitude view; ``-128`` is never produced). The E8M0 scale byte is
``shared + 127``. Elements are rounded half to even.

Per-tensor and per-channel scales need a reduction over the whole tensor or over columns; the
``quantize_static`` space takes them as calibrated inputs (static quantization), and
:func:`static_rows` quantizes with the given values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from workbench.references import ReferenceCall

E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = np.float32(448.0)
INT8_SYMMETRIC = (-127, 127)
INT8_ASYMMETRIC = (-128, 127)
MX_BLOCK = 32
MX_EMAX_ELEM = {"int8": 0, "fp8": 8}


@dataclass(frozen=True)
class Quantized:
    """Codes (int8 or float8_e4m3fn, shape of x), one scale per group, one zero point per group."""

    codes: np.ndarray
    scales: np.ndarray  #: float32, or uint8 E8M0 for MX
    zero_points: np.ndarray | None  #: int32 (asymmetric int8 only)


# ---- element encoders ------------------------------------------------------------------------


def encode_int8(v: np.ndarray, qmin: int, qmax: int) -> np.ndarray:
    """``clamp(rint(v), qmin, qmax)`` as int8; rint rounds half to even, the clamp is in float."""
    return np.clip(np.rint(v), qmin, qmax).astype(np.int8)


def encode_e4m3(v: np.ndarray) -> np.ndarray:
    """float32 to E4M3 (round to nearest even), saturating to +-448 as ``cvt.rn.satfinite``.

    ml_dtypes rounds to nearest even but turns values past 464 into NaN: clamp first (the same
    result, since 448 < |v| <= 464 rounds to 448 anyway).
    """
    return np.clip(np.asarray(v, np.float32), -E4M3_MAX, E4M3_MAX).astype(E4M3)


# ---- scales ---------------------------------------------------------------------------------


def _positive_or_one(value: np.ndarray, divisor: float) -> np.ndarray:
    """``value / divisor`` (float32 division), or 1 where ``value`` is 0."""
    value = np.asarray(value, np.float32)
    return np.where(value > 0, value / np.float32(divisor), np.float32(1)).astype(np.float32)


def symmetric_scale(amax: np.ndarray, qmax: float) -> np.ndarray:
    """``max|x| / qmax`` in float32 (127 for int8, 448 for E4M3); 1 for an all-zero group."""
    return _positive_or_one(amax, qmax)


def asymmetric_params(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale and zero point of int8 with ``[qmin, qmax] = [-128, 127]`` for a range with 0 in it."""
    lo = np.minimum(np.asarray(lo, np.float32), np.float32(0))
    hi = np.maximum(np.asarray(hi, np.float32), np.float32(0))
    scale = _positive_or_one(hi - lo, 255)
    zp = np.clip(np.rint(np.float32(-128) - lo / scale), -128, 127)
    return scale, zp.astype(np.float32)


def mx_shared_exponent(amax: np.ndarray, elem: str) -> np.ndarray:
    """``floor(log2(amax)) - emax_elem``, at least -127; -126 - emax_elem for a zero block."""
    amax = np.asarray(amax, np.float32)
    _, ex = np.frexp(amax)  # amax = m * 2^ex with 0.5 <= m < 1
    floor_log2 = np.where(amax > 0, ex.astype(np.int32) - 1, -126)
    return np.maximum(floor_log2 - MX_EMAX_ELEM[elem], -127).astype(np.int32)


# ---- quantize -------------------------------------------------------------------------------


def quantize_groups(x: np.ndarray, group: int, fmt: str, symmetric: bool = True) -> Quantized:
    """Quantize the rows of ``x`` [M, K] in groups of ``group`` consecutive elements.

    Args:
        x: the input (fp16 or fp32; computed in float32, which holds fp16 exactly).
        group: elements per scale; ``K`` for per-token scales (``K % group == 0``).
        fmt: ``int8``, ``fp8`` (E4M3), ``mxint8`` or ``mxfp8`` (``group`` must be 32).
        symmetric: int8 only; ``False`` adds a zero point per group.

    Returns:
        Codes [M, K], scales [M, K // group] and zero points (asymmetric) [M, K // group].
    """
    x = np.asarray(x, np.float32)
    m, k = x.shape
    if k % group:
        raise ValueError(f"K = {k} is not a multiple of the group size {group}")
    if not symmetric and fmt != "int8":
        raise ValueError("zero points: int8 only")
    g = x.reshape(m, k // group, group)
    if fmt in ("mxint8", "mxfp8"):
        if group != MX_BLOCK:
            raise ValueError("MX blocks hold 32 elements")
        elem = fmt[2:]
        shared = mx_shared_exponent(np.max(np.abs(g), axis=-1), elem)
        factor = np.ldexp(np.float32(1), -shared).astype(np.float32)[..., None]  # 2^-shared
        v = g * factor  # exact unless below the smallest normal float (then every code is 0)
        if elem == "fp8":
            codes = encode_e4m3(v)
        else:
            codes = encode_int8(v * np.float32(64), *INT8_SYMMETRIC)  # 6 fraction bits
        return Quantized(codes.reshape(m, k), (shared + 127).astype(np.uint8), None)
    if symmetric:
        qmax = 127 if fmt == "int8" else 448
        scale = symmetric_scale(np.max(np.abs(g), axis=-1), qmax)
        v = g / scale[..., None]
        codes = encode_int8(v, *INT8_SYMMETRIC) if fmt == "int8" else encode_e4m3(v)
        return Quantized(codes.reshape(m, k), scale, None)
    scale, zp = asymmetric_params(np.min(g, axis=-1), np.max(g, axis=-1))
    codes = encode_int8(np.rint(g / scale[..., None]) + zp[..., None], *INT8_ASYMMETRIC)
    return Quantized(codes.reshape(m, k), scale, zp.astype(np.int32))


def quantize_with_scales(
    x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, fmt: str
) -> np.ndarray:
    """Quantize with given scales (and zero points) that broadcast against ``x``."""
    v = np.asarray(x, np.float32) / np.asarray(scale, np.float32)
    if fmt == "fp8":
        return encode_e4m3(v)
    if zero_point is None:
        return encode_int8(v, *INT8_SYMMETRIC)
    return encode_int8(np.rint(v) + np.asarray(zero_point, np.float32), *INT8_ASYMMETRIC)


# ---- dequantize -----------------------------------------------------------------------------


def dequantize_codes(
    codes: np.ndarray,
    scale: np.ndarray,
    zero_point: np.ndarray | None = None,
) -> np.ndarray:
    """``(q - zp) * scale`` (int8) or ``e4m3(q) * scale`` in float32, one multiply; ``scale``
    and ``zero_point`` broadcast against ``codes``."""
    if codes.dtype == E4M3:
        v = codes.astype(np.float32)
    else:
        v = codes.astype(np.float32)
        if zero_point is not None:
            v = v - np.asarray(zero_point, np.float32)
    return (v * np.asarray(scale, np.float32)).astype(np.float32)


def dequantize_mx(codes: np.ndarray, e8m0: np.ndarray) -> np.ndarray:
    """MX codes [M, K] and E8M0 bytes [M, K // 32] back to float32 (0xFF is NaN)."""
    m, k = codes.shape
    e = e8m0.astype(np.int32) - 127
    if codes.dtype == E4M3:
        v = codes.astype(np.float32)
    else:
        v = codes.astype(np.float32)
        e = e - 6  # 6 fraction bits
    with np.errstate(over="ignore"):  # past the float range: inf, as on the GPU
        factor = np.ldexp(np.float32(1), e).astype(np.float32)
        factor = np.where(e8m0 == 0xFF, np.float32(np.nan), factor)
        out = v.reshape(m, k // MX_BLOCK, MX_BLOCK) * factor[..., None]
    return out.reshape(m, k).astype(np.float32)


# ---- quantization error ---------------------------------------------------------------------


@dataclass(frozen=True)
class QuantError:
    """How far ``dequantize(quantize(x))`` is from ``x``."""

    sqnr_db: float  #: 10 log10(sum x^2 / sum (x - x_hat)^2); inf when there is no error
    max_abs: float  #: max |x - x_hat|


def quantization_error(x: np.ndarray, x_hat: np.ndarray) -> QuantError:
    """SQNR in dB and max abs error, accumulated in float64.

    Raises:
        ValueError: the shapes differ, or ``x`` is all zeros with an error (SQNR undefined).
    """
    x = np.asarray(x, np.float64)
    x_hat = np.asarray(x_hat, np.float64)
    if x.shape != x_hat.shape:
        raise ValueError(f"shapes differ: {x.shape} and {x_hat.shape}")
    noise = float(np.sum((x - x_hat) ** 2))
    signal = float(np.sum(x**2))
    max_abs = float(np.max(np.abs(x - x_hat))) if x.size else 0.0
    if noise == 0.0:
        return QuantError(float("inf"), max_abs)
    if signal == 0.0:
        raise ValueError("SQNR is undefined for an all-zero signal with an error")
    return QuantError(float(10.0 * np.log10(signal / noise)), max_abs)


def roundtrip_error(x: np.ndarray, group: int, fmt: str, symmetric: bool = True) -> QuantError:
    """The error of quantizing ``x`` [M, K] in groups and dequantizing to float32."""
    q = quantize_groups(x, group, fmt, symmetric)
    if fmt.startswith("mx"):
        x_hat = dequantize_mx(q.codes, q.scales)
    else:
        rep = np.repeat(q.scales, group, axis=1)
        zp = None if q.zero_points is None else np.repeat(q.zero_points, group, axis=1)
        x_hat = dequantize_codes(q.codes, rep, zp)
    return quantization_error(np.asarray(x, np.float32), x_hat)


# ---- references for the space files ---------------------------------------------------------


def _group_size(config: Mapping[str, object], fmt: str, k: int) -> int:
    if fmt.startswith("mx"):
        return MX_BLOCK
    if config["GRANULARITY"] == "token":
        return k
    return int(config["G"])  # type: ignore[call-overload]


def _rows(call: ReferenceCall, fmt: str) -> dict[str, np.ndarray]:
    x = call.inputs["x"]
    symmetric = bool(call.config.get("SYMMETRIC", True))
    q = quantize_groups(x, _group_size(call.config, fmt, x.shape[1]), fmt, symmetric)
    zp = q.zero_points.reshape(-1) if q.zero_points is not None else np.zeros(1, np.int32)
    return {"q": q.codes, "scale": q.scales.reshape(-1), "zero_point": zp}


def quantize_rows(call: ReferenceCall) -> dict[str, np.ndarray]:
    """quantize (quantize_int8, quantize_fp8, quantize_f32): fp16 or fp32 input to int8 or E4M3
    codes (``OUT``), dynamic per-token / per-group (codes, scales, zero points: zeros(1) when
    symmetric)."""
    return _rows(call, str(call.config["OUT"]))


def mx_rows(call: ReferenceCall) -> dict[str, np.ndarray]:
    """quantize_mx: MXINT8 / MXFP8 (``ELEM``) codes and E8M0 scale bytes."""
    out = _rows(call, "mx" + str(call.config["ELEM"]))
    del out["zero_point"]
    return out


def _broadcast(values: np.ndarray, gran: str, shape: tuple[int, int], group: int) -> np.ndarray:
    """Per-element view [M, K] of the scales (or zero points) of one granularity."""
    m, k = shape
    values = np.asarray(values).reshape(-1)
    if gran == "tensor":
        return np.broadcast_to(values[:1].reshape(1, 1), shape)
    if gran == "channel":
        return np.broadcast_to(values[:k].reshape(1, k), shape)
    if gran == "token":
        return np.broadcast_to(values[:m].reshape(m, 1), shape)
    if gran == "group":
        return np.repeat(values[: m * (k // group)].reshape(m, k // group), group, axis=1)
    raise ValueError(f"unknown granularity {gran!r}")


def static_rows(call: ReferenceCall) -> dict[str, np.ndarray]:
    """quantize_static: int8 / E4M3 (``OUT``) with given per-tensor or per-channel scales."""
    x = call.inputs["x"]
    gran, fmt = str(call.config["GRANULARITY"]), str(call.config["OUT"])
    symmetric = bool(call.config.get("SYMMETRIC", True))
    scale = _broadcast(call.inputs["scale"], gran, x.shape, 1)
    zp = None if symmetric else _broadcast(call.inputs["zero_point"], gran, x.shape, 1)
    return {"q": quantize_with_scales(x, scale, zp, fmt)}


def _dequantize(call: ReferenceCall, codes: np.ndarray) -> dict[str, np.ndarray]:
    gran = str(call.config["GRANULARITY"])
    out_dtype = np.float16 if call.config["OUT"] == "float16" else np.float32
    if gran == "mx":
        x = dequantize_mx(codes, np.asarray(call.inputs["e8m0"]).reshape(codes.shape[0], -1))
        return {"out": x.astype(out_dtype)}
    group = int(call.config.get("G", 1))
    scale = _broadcast(call.inputs["scale"], gran, codes.shape, group)
    symmetric = bool(call.config.get("SYMMETRIC", True))
    zp = None if symmetric else _broadcast(call.inputs["zero_point"], gran, codes.shape, group)
    return {"out": dequantize_codes(codes, scale, zp).astype(out_dtype)}


def dequantize(call: ReferenceCall) -> dict[str, np.ndarray]:
    """dequantize (dequantize_int8, dequantize_fp8): int8 or E4M3 codes (``ELEM``), or MXINT8 /
    MXFP8 elements, to fp16 / fp32."""
    q = np.asarray(call.inputs["q"])
    if call.config["ELEM"] == "int8":
        return _dequantize(call, q.astype(np.int8, copy=False))
    return _dequantize(call, q.astype(E4M3))
