"""The README's Python example runs as it stands (in a scratch directory holding the example
corpus)."""

import re
import shutil
import subprocess
import sys

from conftest import REPO


def test_readme_example_runs(tmp_path):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert blocks, "README.md has no ```python block"
    example = blocks[0]
    assert len(example.strip().splitlines()) == 5, example
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "corpus.jsonl", tmp_path / "examples")
    done = subprocess.run(
        [sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the example prints nothing"
