"""The examples of `docs/guides/your-own-environment.md`, each saved as a script and run."""

import os
import re
import subprocess
import sys

import pytest
from train_runs import ROOT

# ----------------------------------------------------------------------------- the guide
GUIDE = os.path.join(ROOT, "docs", "guides", "your-own-environment.md")
GUIDE_PRINTS = ["1.0", "5.0", "True", "[1.0, 1.0, 1.0, 1.0]"]  # what each example prints last


@pytest.mark.parametrize("index", range(len(GUIDE_PRINTS)))
def test_the_guides_examples_run_as_scripts(tmp_path, index):
    """Each Python block of docs/guides/your-own-environment.md, saved as a script and run
    from the checkout (its runs written under tmp_path): it prints what its comment says."""
    with open(GUIDE) as f:
        block = re.findall(r"```python\n(.*?)```", f.read(), re.S)[index]
    block = block.replace('"runs/', f'"{tmp_path}/')
    script = tmp_path / "example.py"
    script.write_text(block)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == GUIDE_PRINTS[index], out.stdout[-2000:]
