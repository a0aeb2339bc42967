"""The import layers (pyproject.toml's [tool.importlinter] contracts) hold: cli -> report ->
profile/regress -> fleet -> search -> compare -> store -> runners -> static -> compiler/analysis
-> spaces -> the small pieces; CLI commands do not import each other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is not installed (dev extra)")
def test_the_import_contracts_are_kept() -> None:
    done = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout
