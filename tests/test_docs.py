"""The documentation: the site builds with no warning, its generated pages hold what they
are generated from, and the commands and code in the README and the docs run.

What runs how:
- the README's tour: its `scripts/train.py`, `evaluate.py` and `plot.py` commands as written,
  the training one on a smaller step budget, and its two Python blocks; every other
  `evaluate.py` and `plot.py` command of the docs on a CartPole run, on the tour's run; the
  board-game evaluations on a quick tic-tac-toe run;
- the commands of the scripts no other test runs (`actor_step.py`, `sps_pairs.py`,
  `best_writes.py`, `launch_local.py`), each on a smaller budget; the other benchmark scripts'
  commands run small in their own tests (`test_benchmarks.py`, `test_learning_harness.py`,
  `test_gpu_check.py`, `test_soak.py`);
- every other `python scripts/train.py ...` line of the README and the docs: checked up to the
  start of training (its config file, every `--config.` override and flag parsed and
  validated, as the script does before it writes anything), and each config it names run
  small by a test of its own; the long runs themselves are the learning and benchmark results
  the pages report;
- every Python block of the docs: the getting-started page's (on the tour's run), the learner
  functions guide's, the Python API and writing-an-agent guides' (`test_readme.py`), and
  your-own-environment's, each run as a script (`test_own_env_guide.py`).
"""

import glob
import json
import os
import re
import shlex
import subprocess
import sys

from jaxrl_dist.config.cli import parse_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = [
    os.path.join(ROOT, "README.md"),
    *sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)),
]


def _text(path: str) -> str:
    with open(path) as f:
        return f.read()


def _blocks(path: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _text(path), re.S)


def _bash_lines():
    """(page, line) of every command line in the docs' bash blocks: continued lines joined,
    comments dropped."""
    for path in PAGES:
        for block in _blocks(path, "bash"):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.split("#")[0].strip()
                if line:
                    yield os.path.relpath(path, ROOT), line


def _train_commands() -> list[tuple[str, list[str]]]:
    """(page, argv) of every `python scripts/train.py` command in a bash block."""
    return [
        (page, shlex.split(line.split("&&")[0])[2:])
        for page, line in _bash_lines()
        if line.startswith("python scripts/train.py")
    ]


def _run_commands(scripts: tuple[str, ...], runs: tuple[str, ...] = ("runs/c",)) -> set[str]:
    """Every bash-block line of the docs that runs one of `scripts` on a run whose path starts
    with one of `runs` (`runs/c`: `runs/cp` or `runs/cartpole`, CartPole), without its
    comment."""
    return {
        line
        for _, line in _bash_lines()
        if any(f"python {s} {r}" in line for s in scripts for r in runs)
    }


def test_the_site_builds_strict_with_its_generated_pages(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]
    import dataclasses

    from jaxrl_dist.agents import REGISTRY
    from jaxrl_dist.config.sections import leaf_paths
    from jaxrl_dist.config.train import TrainConfig

    reference = (site / "reference" / "config" / "index.html").read_text()
    names = [n for n in leaf_paths(TrainConfig) if n != "algo"]
    shipped = [e for e in REGISTRY.values() if e.make.__module__.startswith("jaxrl_dist.")]
    assert len(shipped) >= 4  # (other tests register agents of their own in this process)
    for entry in shipped:
        names += [f"algo.{f.name}" for f in dataclasses.fields(entry.config_cls)]
    missing = [n for n in names if f"<code>{n}</code>" not in reference and n != "algo"]
    assert not missing, missing
    home = (site / "index.html").read_text()
    assert "A short tour" in home and 'href="getting-started/"' in home
    plots = site / "results" / "img" / "cpu" / "learning"
    assert (plots / "impala_cartpole_issue37.png").is_file()  # the benchmarks' own files
    api = (site / "reference" / "api" / "index.html").read_text()
    assert "vtrace_td_error_and_advantage" in api and "load_policy" in api


def test_every_train_command_in_the_docs_parses(monkeypatch):
    from jaxrl_dist.config import ConfigError

    monkeypatch.chdir(ROOT)
    commands = _train_commands()
    assert len(commands) >= 20, commands  # the extractor found them
    stale = []
    for page, argv in commands:
        try:
            parse_args(argv)  # what the script checks before it writes anything
        except ConfigError as e:
            stale.append((page, " ".join(argv), str(e)))
    assert not stale, stale


def test_the_readme_tour_runs_as_written(tmp_path, monkeypatch):
    """Train (a smaller budget), resume with a larger one, evaluate the best step, plot."""
    monkeypatch.chdir(tmp_path)
    os.symlink(os.path.join(ROOT, "configs"), tmp_path / "configs")
    (tour,) = [b for b in _blocks(PAGES[0], "bash") if "--resume" in b]
    lines = [line for line in tour.splitlines() if line.strip()]
    assert len(lines) == 4, lines
    for line in lines:
        argv = shlex.split(line)
        if "scripts/train.py" in line:
            total = "8192" if "--resume" in line else "4096"
            argv = [a for a in argv if not a.startswith("--config.total_env_steps")]
            argv += [
                f"--config.total_env_steps={total}",
                "--config.eval_every_updates=4",
                "--quiet",
            ]
        _run_here(argv[1:])
    assert (tmp_path / "runs" / "cp" / "summary.json").is_file()
    assert glob.glob(str(tmp_path / "runs" / "cp" / "eval" / "best_*_greedy.json"))
    assert (tmp_path / "runs" / "cp" / "learning_curve.png").is_file()
    # Every other evaluate.py and plot.py command of the docs on a CartPole run, on this one.
    others = _run_commands(("scripts/evaluate.py", "scripts/plot.py")) - set(lines)
    assert len(others) >= 4, others  # the extractor found them
    for line in others:
        _run_here(shlex.split(line.replace("runs/cartpole", "runs/cp"))[1:])
    assert (tmp_path / "cartpole.gif").is_file()  # --video's
    assert (tmp_path / "runs" / "cp" / "validation.jsonl").is_file()  # --follow's
    # The getting-started page reads a run's log: here, this run's.
    (reader,) = _blocks(os.path.join(ROOT, "docs", "getting-started.md"), "python")
    reader = reader.replace("runs/cartpole/", "runs/cp/")
    namespace: dict = {}
    exec(compile(reader, "getting-started.md", "exec"), namespace)
    assert namespace["evals"] and namespace["evals"][-1][0] == 8192


def test_the_readme_python_blocks_run(tmp_path, monkeypatch):
    ops, run = _blocks(PAGES[0], "python")
    namespace: dict = {}
    exec(compile(ops, "README.md", "exec"), namespace)
    assert namespace["out"].pg_advantage.shape == namespace["adv"].shape == (5,)
    monkeypatch.chdir(ROOT)
    run = run.replace('"runs/from_python"', repr(str(tmp_path / "from_python")))
    namespace = {}
    exec(compile(run, "README.md", "exec"), namespace)
    result = namespace["result"]
    assert result.env_steps > 0 and result.final_eval_return is not None
    assert os.path.isdir(result.latest_checkpoint)
    evaluation = namespace["evaluation"]
    assert evaluation.returns.shape == (8, 1) and evaluation.policy.step == result.updates


def test_the_readme_is_a_front_page_that_starts_with_the_two_setup_commands():
    first = _blocks(PAGES[0], "bash")[:2]
    assert first[0].startswith("python -m pip install -e . && python scripts/train.py")
    assert first[1].strip() == "python -m pip install -e '.[test]' && python -m pytest -q"
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        assert first[1].strip() in f.read()  # CI runs the README's test command
    assert len(_text(PAGES[0]).splitlines()) <= 200


def test_the_learner_functions_guide_runs():
    page = os.path.join(ROOT, "docs", "guides", "learner-functions.md")
    (block,) = _blocks(page, "python")
    namespace: dict = {}
    exec(compile(block, "learner-functions.md", "exec"), namespace)
    assert namespace["out"].pg_advantage.shape == namespace["adv"].shape == (8,)
    assert namespace["td"].shape == (4,)


def test_every_python_block_of_the_docs_is_run_by_a_test():
    run_here = {"README.md": 2, "getting-started.md": 1, "learner-functions.md": 1}
    run_in_test_readme = {"python-api.md": 1, "writing-an-agent.md": 1}
    run_in_test_own_env_guide = {"your-own-environment.md": 4}
    run_in_test_agents_config = {"several-agents.md": 1}
    run_in_test_user_networks = {"your-own-network.md": 3}
    found = {os.path.basename(p): len(_blocks(p, "python")) for p in PAGES}
    want = {
        **run_here,
        **run_in_test_readme,
        **run_in_test_own_env_guide,
        **run_in_test_agents_config,
        **run_in_test_user_networks,
    }
    assert {k: v for k, v in found.items() if v} == want


def _doc_line(script: str, needle: str = "") -> list[str]:
    """The argv of the docs' one command line that runs `script` (and holds `needle`)."""
    (line,) = {line for _, line in _bash_lines() if f"python {script}" in line and needle in line}
    return shlex.split(line)[1:]


def _smaller(argv: list[str], changes: dict[str, str]) -> list[str]:
    """`argv` with each flag of `changes` (`"--pairs"`) given its smaller value, added where
    the command does not set it."""
    out = list(argv)
    for flag, value in changes.items():
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def _run_small(argv: list[str], cwd: str) -> subprocess.CompletedProcess:
    """`python ARGV` from `cwd` (`argv[0]` a script path in the checkout); it must exit 0."""
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, argv[0]), *argv[1:]],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (" ".join(argv), proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


def _run_here(argv: list[str]) -> None:
    """`python ARGV` for the three user scripts, through the script's own `main` in this
    process, from the current directory (the script's parsing, checks, files and exit code,
    without a cold process's imports: a few seconds each); it must return 0."""
    from jaxrl_dist.tools.evaluate_cli import main as evaluate
    from jaxrl_dist.tools.plotting import main as plot
    from jaxrl_dist.tools.train_cli import main as train

    mains = {"scripts/train.py": train, "scripts/evaluate.py": evaluate, "scripts/plot.py": plot}
    assert mains[argv[0]](argv[1:]) == 0, " ".join(argv)


def test_the_docs_benchmark_and_launch_commands_run_small(tmp_path):
    """The docs' commands for scripts no other test runs, each on a smaller budget: the
    inference-step split, before/after pairs of two source trees (here both this one; whole
    training runs among them), what a best write costs, and two processes launched on this
    machine."""
    os.symlink(os.path.join(ROOT, "configs"), tmp_path / "configs")
    step = _doc_line("benchmarks/actor_step.py")
    out = tmp_path / "actor_step.json"
    small = _smaller(step, {"--batches": "16", "--calls": "3", "--out": str(out)})
    _run_small([*small, "--allow-dirty"], tmp_path)  # a working tree may differ from HEAD
    assert out.is_file()
    for what in ("impala_xla", "anakin_ppo"):
        pairs = _doc_line("benchmarks/sps_pairs.py", f"--what {what} --pairs 10")
        small = {"--old": ROOT, "--new": ROOT, "--pairs": "1", "--seconds": "0.5"}
        small |= {"--steps": "4096", "--out-dir": str(tmp_path / "pairs")}
        _run_small([*_smaller(pairs, small), "--allow-dirty"], tmp_path)
    # A pair of whole training runs (evaluation beside training, best saves off and on): each
    # new run's share of its window spent writing bests, read from its summary.
    pairs = _doc_line("benchmarks/sps_pairs.py", "--env-steps 1000000")
    small = {"--old": ROOT, "--new": ROOT, "--pairs": "1", "--env-steps": "19200"}
    small |= {"--out-dir": str(tmp_path / "pairs")}
    _run_small([*_smaller(pairs, small), "--allow-dirty"], tmp_path)
    (pair,) = json.loads((tmp_path / "pairs" / f"{pairs[-1]}.json").read_text())["pairs"]
    assert "old_best_saves_share" not in pair and 0 < pair["new_best_saves_share"] < 0.5
    assert len(os.listdir(tmp_path / "pairs")) >= 3 * 2
    writes = _doc_line("benchmarks/best_writes.py", "impala_cartpole")
    small = [*_smaller(writes, {"--out-dir": str(tmp_path / "writes")}), "--allow-dirty"]
    _run_small([*small, "--", "--config.total_env_steps=3200"], tmp_path)
    result = json.loads((tmp_path / "writes" / f"{writes[-1]}.json").read_text())
    assert result["best_saves"]["written"] >= 1 and result["seconds_per_write"] > 0
    launch = _doc_line("scripts/launch_local.py")
    launch += ["--config.total_env_steps=3200", "--config.sebulba.actor_loop=python", "--quiet"]
    _run_small(launch, tmp_path)
    assert (tmp_path / "runs" / "cp_2proc" / "summary.json").is_file()


def test_the_docs_game_evaluations_run_on_a_tictactoe_run(tmp_path, monkeypatch):
    """`evaluate.py` against the random, heuristic and perfect players, as the board-game and
    Anakin guides give it, on a quick tic-tac-toe run (Anakin's: its params play on EnvPool)."""
    from train_runs import train_main

    train_main("configs/anakin_ppo_tictactoe.py:quick", str(tmp_path / "runs" / "ttt"))
    monkeypatch.chdir(tmp_path)
    lines = _run_commands(("scripts/evaluate.py",), runs=("runs/ttt", "runs/anakin_ttt"))
    assert len(lines) == 2, lines
    for line in lines:
        _run_here(shlex.split(line.replace("runs/anakin_ttt", "runs/ttt"))[1:])
    assert len(os.listdir(tmp_path / "runs" / "ttt" / "eval")) >= 1


def test_every_config_the_docs_train_is_run_small_by_a_test():
    """The long training commands' small variants: each config file they name is run (its
    `:quick` variant or a smaller budget) by a test of its own."""
    named = {
        os.path.basename(argv[argv.index("--config") + 1].split(":")[0])
        for _, argv in _train_commands()
    }
    others = [
        p
        for p in glob.glob(os.path.join(ROOT, "tests", "*.py"))
        if os.path.basename(p) != "test_docs.py"
    ]
    text = "".join(_text(p) for p in others)
    # a path to the file (`configs/x.py`, `"configs", "x.py"`), not a longer name holding it
    used = lambda name: re.search(rf'configs(/|", ")"?{re.escape(name)}\b', text)  # noqa: E731
    assert not sorted(c for c in named if not used(c))
