"""The first H200 lease's ``workbench compare gemm_int8``, rebuilt from its JSON (kept as the
run wrote it beside the run's gemm_int8 recordings, ``tuning_spaces/recordings/gemm_int8/
compare/``, which a replayed tune stores) and the run's ``ceilings.json`` in ``tests/data/h200/``:
each contender's median time per shape, the workbench's work model of the shape, and the roofs
the run had. Nothing is retyped: every figure is read from those files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from workbench.compare.problems import classify
from workbench.compare.table import ContenderEntry, ShapeComparison, Status
from workbench.devices import DEVICES, device_for
from workbench.roofline import Ceilings, CeilingSource, datasheet_ceilings, measured_ceilings
from workbench.spaces import Space, load_kernel
from workbench.spaces.registry import builtin_spaces_dir
from workbench.spaces.targets import resolve_arches

H200_RUN = Path(__file__).parent / "data" / "h200"
COMPARE_JSON = (
    builtin_spaces_dir() / "recordings/gemm_int8/compare/gemm_int8-nvidia-h200-2026-12-04.json"
)
CEILINGS_JSON = H200_RUN / "ceilings.json"


def recorded_doc() -> dict[str, Any]:
    return json.loads(COMPARE_JSON.read_text())


def recorded_int8_compare() -> list[ShapeComparison]:
    """The recorded comparison, one :class:`ShapeComparison` per shape, under the run's roofs
    (its measured ceilings, then the H200 datasheet), not yet raised to any contender."""
    doc = recorded_doc()
    roofs = Ceilings(measured_ceilings(CEILINGS_JSON)).add(datasheet_ceilings(DEVICES["h200"]))
    # the roofs of the recorded run: the same figures (the live run named its datasheet source
    # after the driver's limits), and the measured ones to the letter
    assert sorted(c.label.split(" (")[0] for c in roofs) == sorted(
        label.split(" (")[0] for label in doc["ceilings"]
    )
    assert {c.label for c in roofs if c.source is CeilingSource.MEASURED} <= set(doc["ceilings"])
    spec = load_kernel("gemm_int8", [])
    arch = resolve_arches(spec, None)[0]
    out = []
    for s in doc["shapes"]:
        space = Space(spec, shape={**spec.default_shape, **s["shape"]}, arch=arch,
                      device=device_for(arch))  # fmt: skip
        p = classify(space, {**spec.default_config(), **s["config"]})
        assert (p.ops, p.min_bytes) == (s["work"]["ops"], s["work"]["min_bytes"])
        entries = [
            ContenderEntry(r["name"], r["title"], Status(r["status"]), r["reason"], r["median_ms"],
                  library=r["library"], verify_max_error=r["verify_max_error"], ops=p.ops,
                  nbytes=p.min_bytes)
            for r in s["results"]
        ]  # fmt: skip
        out.append(
            ShapeComparison(
                p, s["precision"], s["config"], s["config_origin"], entries[0],
                tuple(entries[1:]), (), roofs,
            )
        )  # fmt: skip
    return out
