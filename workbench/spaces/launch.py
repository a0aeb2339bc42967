"""Evaluate a space's launch geometry and work model for one config and shape."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.errors import ConfigError, ExpressionError
from workbench.spaces.model import Value
from workbench.spaces.space import MAX_PORTABLE_CLUSTER, Space


@dataclass(frozen=True)
class Launch:
    """Grid and block dimensions (always three) and dynamic shared memory in bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    cluster: tuple[int, int, int] | None = None

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def launch_geometry(space: Space, config: Mapping[str, Value]) -> Launch:
    """Grid, block and dynamic shared memory of ``config`` on ``space``'s shape and device.

    Raises:
        ConfigError: an expression fails, or gives a non-positive or non-integer dimension, or
            a cluster that does not divide the grid or holds more than 8 CTAs (the error names
            the space file's line of ``geometry.cluster``).
    """
    g = space.spec.geometry
    try:
        env = space.env(config)
        grid = _dims(env, g.grid, "grid")
        block = _dims(env, g.block, "block")
        shared = _int(g.shared_bytes.evaluate(env), "shared_bytes", minimum=0)
        cluster = None if g.cluster is None else _dims(env, g.cluster, "cluster")
    except ExpressionError as exc:
        raise ConfigError(f"{space.spec.name}: launch geometry: {exc}") from exc
    if cluster is not None:
        _check_cluster(space, grid, cluster)
    return Launch(grid, block, shared, cluster)


def then_geometry(space: Space, config: Mapping[str, Value]) -> Launch | None:
    """Grid, block and dynamic shared memory of the space's second kernel (``then``) for
    ``config``; None where the space has none or its ``when`` is false for ``config``.

    Raises:
        ConfigError: an expression fails, or gives a non-positive or non-integer dimension.
    """
    then = space.spec.then
    if then is None:
        return None
    g = then.geometry
    try:
        env = space.env(config)
        if not then.when.evaluate(env):
            return None
        grid = _dims(env, g.grid, "then.grid")
        block = _dims(env, g.block, "then.block")
        shared = _int(g.shared_bytes.evaluate(env), "then.shared_bytes", minimum=0)
    except ExpressionError as exc:
        raise ConfigError(f"{space.spec.name}: the then kernel's geometry: {exc}") from exc
    return Launch(grid, block, shared)


def _check_cluster(space: Space, grid: tuple[int, int, int], cluster: tuple[int, int, int]) -> None:
    """The driver launches whole clusters of at most 8 CTAs (without the non-portable opt-in):
    the space's launch limits make a config that breaks this invalid; this is the same rule
    for a launch made of any config, before anything reaches the driver."""
    g = space.spec.geometry
    line = f":{g.cluster_line}" if g.cluster_line else ""
    where = f"{space.spec.path.name}{line} [geometry.cluster]"
    for axis, n, c in zip("xyz", grid, cluster, strict=True):
        if n % c:
            raise ConfigError(
                f"{where}: cluster {cluster} does not divide grid {grid}: grid.{axis} = {n} is "
                f"not a multiple of cluster.{axis} = {c} (a launch runs whole clusters)"
            )
    if math.prod(cluster) > MAX_PORTABLE_CLUSTER:
        raise ConfigError(
            f"{where}: cluster {cluster} holds {math.prod(cluster)} CTAs, more than the portable "
            f"{MAX_PORTABLE_CLUSTER}"
        )


def work_counts(space: Space, config: Mapping[str, Value]) -> tuple[float, float]:
    """(operations, minimum bytes) of one launch, from the space's work model.

    Raises:
        ConfigError: an expression fails.
    """
    try:
        env = space.env(config)
        flops: Any = space.spec.work.flops.evaluate(env)  # (a number, or float() says why)
        nbytes: Any = space.spec.work.bytes.evaluate(env)
        return float(flops), float(nbytes)
    except (ExpressionError, TypeError, ValueError) as exc:
        raise ConfigError(f"{space.spec.name}: work model: {exc}") from exc


def _dims(env: Mapping[str, object], exprs: tuple, what: str) -> tuple[int, int, int]:
    values = [_int(e.evaluate(env), what) for e in exprs]
    while len(values) < 3:
        values.append(1)
    return (values[0], values[1], values[2])


def _int(value: object, what: str, minimum: int = 1) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{what} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{what} must be at least {minimum}, got {value}")
    return value


def work_precision(space: Space, config: Mapping[str, Value] | None = None) -> str:
    """Which compute ceiling a kernel's throughput is compared with (the roofline of tune,
    compare, the report and the event-timing profile), from its inputs' dtypes (for
    ``config``'s problem variant; the space's default when not given)."""
    config = config if config is not None else space.default_config()
    try:
        env = space.env(config)
    except ExpressionError:
        env = dict(config)  # (a variant's dtype reads parameters alone)
    dtypes = {i.dtype_for(env).value for i in space.spec.inputs}
    if space.spec.work.unit == "GB/s":
        return "fp32"
    for dtype, precision in (
        ("int8", "tensor_int8"),
        ("float8_e4m3", "tensor_fp8"),
        ("float8_e5m2", "tensor_fp8"),
        ("float16", "tensor_fp16"),
        ("bfloat16", "tensor_fp16"),
        ("float64", "fp64"),
    ):
        if dtype in dtypes:
            return precision
    return "fp32"
