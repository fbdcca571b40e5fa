"""The Python API and writing-an-agent guides' code runs as written (the README's own: in
`test_docs.py`)."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _first_python_block(page: str) -> str:
    with open(os.path.join(ROOT, "docs", "guides", page)) as f:
        return re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)


def test_writing_an_agent_example_runs(tmp_path, monkeypatch):
    from jaxrl_dist import agents
    from jaxrl_dist.agents.base import RunShape

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(agents, "REGISTRY", dict(agents.REGISTRY))
    namespace: dict = {}
    block = _first_python_block("writing-an-agent.md")
    exec(compile(block, "writing-an-agent.md", "exec"), namespace)
    result, config = namespace["result"], namespace["config"]
    updates = RunShape(config.total_env_steps, config.steps_per_update).num_updates
    assert result.updates == updates > 0
    assert result.final_eval_return is not None
    assert (tmp_path / "runs" / "a2c_cartpole" / "summary.json").is_file()


def test_python_api_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the example names configs/ relative to the repository
    block = _first_python_block("python-api.md")
    block = block.replace('"runs/api_example"', repr(str(tmp_path / "api_example")))
    namespace: dict = {}
    exec(compile(block, "python-api.md", "exec"), namespace)
    result, best = namespace["result"], namespace["best"]
    assert result.env_steps == 20_160 and result.episodes > 0 and result.sps > 0
    # The metric is the worst episode's return, and save_best saw the best one.
    assert best["metric"] == result.best_eval_metric == result.summary["best_eval"]["metric"]
    assert result.best_checkpoint.endswith(f"/{result.summary['best_eval']['updates']}")
    changes = result.summary["hparam_changes"]
    assert [c["values"] for c in changes] == [{"learning_rate": 3e-4}]
    assert (tmp_path / "api_example" / "learning_curve.png").is_file()
