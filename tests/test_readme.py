"""The README's two commands are the ones CI and users run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bash_blocks(text: str) -> list[str]:
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_readme_has_exactly_the_main_job_and_the_test_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text())
    assert len(blocks) == 2, blocks
    main_job, tests = blocks
    assert "blockfuse report" in main_job
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command_in_the_interpreter():
    tests = _bash_blocks((ROOT / "README.md").read_text())[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines()
    assert "export TRITON_INTERPRET=1" in ci


def test_the_scripts_index_lists_exactly_the_scripts_folder():
    index = (ROOT / "scripts" / "README.md").read_text()
    listed = re.findall(r"^\| `([^`]+)` \|", index, flags=re.M)
    present = sorted(p.name for p in (ROOT / "scripts").iterdir() if p.name != "README.md")
    assert len(listed) == len(set(listed)), "a script listed twice in scripts/README.md"
    assert sorted(listed) == present, (set(present) - set(listed), set(listed) - set(present))
