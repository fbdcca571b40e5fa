"""What a one-agent run writes, as a shape: the items of its checkpoint steps, the key tree of
each JSON item (the packed state's leaf paths, shapes and dtypes included), the keys of
`metrics.jsonl` and the key tree of `summary.json`; values left out, so reruns agree.

`python tests/layouts.py` writes `tests/fixtures/one_agent_layouts.json` from the code of the
checkout; `tests/test_layouts.py` compares the code's runs with that file, so a change to what a
one-agent run writes shows up as a diff in review (issue 56: the count of agents appears at one
boundary, and a one-agent run's files stay as they were).
"""

import json
import os
import sys

from train_runs import ROOT, jsonl_records, train_main

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "one_agent_layouts.json")
# Each shipped one-agent shape once: the on-policy queue (IMPALA), replay (Rainbow), sequence
# replay and a recurrent core (R2D2), seats and an opponent pool (PPO on tic-tac-toe), and the
# same two on Anakin. `:quick` variants, cut to a few updates with one checkpoint at the end.
RUNS = {
    "impala_cartpole": ("configs/impala_cartpole.py:quick", "--config.total_env_steps=2000"),
    "rainbow_cartpole": ("configs/rainbow_cartpole.py:quick", "--config.total_env_steps=3000"),
    "r2d2_memory": ("configs/r2d2_memory.py:quick", "--config.total_env_steps=3000"),
    "ppo_tictactoe": ("configs/ppo_tictactoe.py:quick", "--config.total_env_steps=3000"),
    "anakin_ppo_cartpole": ("configs/anakin_ppo_cartpole.py:quick",),
    "anakin_ppo_tictactoe": ("configs/anakin_ppo_tictactoe.py:quick",),
}
# Values that are not a shape: keys under these are kept, what is below them is not.
OPAQUE = {"config", "env_kwargs", "eval_env_kwargs", "algo", "network"}


def key_tree(value, name: str = ""):
    """`value`'s dict keys, recursively; a list is its first element's tree; a leaf its type."""
    if isinstance(value, dict):
        if name in OPAQUE:
            return "dict"
        return {k: key_tree(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [key_tree(value[0], name)] if value and isinstance(value[0], dict) else "list"
    return type(value).__name__


def step_layout(step_dir: str) -> dict:
    """A checkpoint step's items and the key tree of each JSON one."""
    items = {}
    for item in sorted(os.listdir(step_dir)):
        path = os.path.join(step_dir, item)
        if not os.path.isdir(path):
            continue
        files = sorted(f for f in os.listdir(path) if not f.startswith("."))
        data = [f for f in files if f.endswith(".json") or f == "metadata"]
        tree = None
        for f in data:
            try:
                with open(os.path.join(path, f)) as fh:
                    raw = json.load(fh)
            except (ValueError, UnicodeDecodeError):
                continue
            # The packed state's leaves, whole: their paths, shapes and dtypes are the layout.
            leaves = item == "layout" and isinstance(raw, list)
            tree = [[r["path"], r["shape"], r["dtype"]] for r in raw] if leaves else key_tree(raw)
            break
        items[item] = tree if tree is not None else "binary"
    return items


def run_layout(workdir: str) -> dict:
    """The shape of everything a finished run wrote in `workdir` (module docstring)."""
    ckpt = os.path.join(workdir, "checkpoints")
    steps = sorted(int(s) for s in os.listdir(ckpt) if s.isdigit())
    with open(os.path.join(workdir, "summary.json")) as f:
        summary = json.load(f)
    keys = sorted({k for r in jsonl_records(workdir, "metrics.jsonl") for k in r})
    return {
        "checkpoint": step_layout(os.path.join(ckpt, str(steps[-1]))),
        "beside_steps": sorted(s for s in os.listdir(ckpt) if not s.isdigit()),
        "metrics_keys": keys,
        "summary": key_tree(summary),
    }


def layout_of(name: str, workdir: str) -> dict:
    config, *flags = RUNS[name]
    train_main(config, workdir, *flags, "--config.learning_curve=false")
    return run_layout(workdir)


if __name__ == "__main__":
    import tempfile

    names = sys.argv[1:] or list(RUNS)
    with tempfile.TemporaryDirectory() as tmp:
        layouts = {name: layout_of(name, os.path.join(tmp, name)) for name in names}
    old = json.load(open(FIXTURE)) if os.path.exists(FIXTURE) else {}
    os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
    with open(FIXTURE, "w") as f:
        json.dump({**old, **layouts}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {FIXTURE}: {', '.join(names)}")
