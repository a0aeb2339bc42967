"""benchmarks/space_listing.py: the table and JSON of listing library spaces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_it_lists_spaces_and_writes_what_it_measured(tmp_path: Path) -> None:
    out = tmp_path / "listing.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "space_listing.py"), "--kernels",
         "stream_scale", "reduce", "--repeats", "2", "--sample", "5", "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    rows = {r["kernel"]: r for r in doc["rows"]}
    assert set(rows) == {"stream_scale", "reduce"} and doc["machine"]["cpus"]
    # reduce: 32,832 valid float32 configs over its three operators, 10,944 with OP and DTYPE at
    # their defaults; 72,000 points per dtype, 86,400 for float16 (one more ITEMS value)
    assert rows["reduce"]["valid"] == 10_944 and rows["reduce"]["cartesian"] == 172_800
    for r in rows.values():
        assert len(r["list_seconds"]) == 2 and r["list_seconds_median"] > 0
        assert r["configs_per_second"] > 0 and r["sample_seconds"] > 0
    assert "reduce" in run.stdout and "wrote" in run.stdout
