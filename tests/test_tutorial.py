"""The README's "Your own kernel" section, run as written on a copy of examples/rmsnorm: the
tutorial cannot rot without this failing."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.gpu import probe_gpu

ROOT = Path(__file__).resolve().parents[1]
WORKBENCH = [sys.executable, "-m", "workbench.cli.entry"]


def tutorial_commands() -> list[str]:
    """The commands of the bash block between the README's tutorial markers."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("<!-- tutorial:begin -->", 1)[1].split("<!-- tutorial:end -->", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_the_tutorial_starts_from_the_example_folder() -> None:
    first, *rest = tutorial_commands()
    assert first == "cp -r examples/rmsnorm my_kernel && cd my_kernel"
    assert rest and all(c.startswith("workbench ") for c in rest)


@pytest.mark.slow
def test_the_readme_tutorial_runs_as_written(tmp_path: Path) -> None:
    _, *commands = tutorial_commands()
    work = tmp_path / "my_kernel"
    shutil.copytree(ROOT / "examples" / "rmsnorm", work)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\n")  # the user's project
    outputs: list[str] = []
    for command in commands:
        argv = shlex.split(command)
        done = subprocess.run(
            [*WORKBENCH, *argv[1:]], cwd=work, capture_output=True, text=True, timeout=600
        )
        # `tune` without a GPU compiles, inspects and says how to tune: "needs a GPU" (3)
        expected = 3 if argv[1] == "tune" and not probe_gpu().available else 0
        assert done.returncode == expected, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs.append(done.stdout)
    check, compile_all, tune, diff, _ = outputs
    assert "reference ok on shape {'rows': 4, 'cols': 256}: y float32 (4, 256)" in check
    assert "valid configs:  105" in check
    assert "105 configs, 105 compiled, 0 failed" in compile_all
    assert "* the space's default config" in compile_all
    assert "To tune: run on a machine with a CUDA GPU" in tune
    assert "A: BLOCK=128 -> B: BLOCK=256" in diff and "+16 B" in diff  # shared memory grew
    index = json.loads((work / "out" / "index.json").read_text())
    (entry,) = index
    assert entry["config"]["BLOCK"] == 256
    assert {Path(f).suffix for f in entry["files"].values()} >= {".ptx", ".sass", ".cubin"}
    assert "LDG.E.128" in (work / "out" / entry["files"]["sass"]).read_text()
