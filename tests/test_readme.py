"""The README's code examples run as written."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python_block_after(heading: str) -> str:
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text[text.index(heading) :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_writing_an_algorithm_example_runs(tmp_path, monkeypatch):
    from jaxrl_dist import algorithms

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(algorithms, "REGISTRY", dict(algorithms.REGISTRY))
    namespace: dict = {}
    exec(compile(_python_block_after("## Writing an algorithm"), "README.md", "exec"), namespace)
    summary = namespace["summary"]
    assert summary["updates"] == namespace["config"].num_updates > 0
    assert summary["final_eval_return"] is not None
    assert (tmp_path / "runs" / "a2c_cartpole" / "summary.json").is_file()
