"""The README's offline prompt-template experiment runs as printed and shows an effect: the
reader policy solves more with the feedback that lists failures, from the same first turns."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def walkthrough() -> str:
    start = README.index("### A prompt-template experiment, offline")
    (block,) = re.findall(r"```bash\n(.*?)```", README[start:README.index("\n#", start + 4)], re.DOTALL)
    return str(block)


def test_the_readme_walkthrough_shows_a_template_effect(tmp_path: Path) -> None:
    script = walkthrough()
    assert "--policy reader" in script and "agentenv compare" in script
    bindir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    proc = subprocess.run(["bash", "-e", "-c", script.replace("agentenv ", "agentenv -q ")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    compare = proc.stdout[proc.stdout.index("A: runs/terse"):]
    rows = {line.split()[0]: line.split() for line in compare.splitlines() if line.split()}
    assert rows["pass@1"][3] == "+0.000"               # the same first turns
    assert float(rows["solve_rate"][3]) > 0.2 and rows["solve_rate"][-1] == "*"
    assert rows["turns"][-1] == "*" and float(rows["turns"][3]) < 0
    assert "exactly 0" not in compare
