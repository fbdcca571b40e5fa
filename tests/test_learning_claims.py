"""Each headline agent learns near its claim (issue 55): one run of its headline config, on a seed
whose first crossings in the claim's sweeps (quiet and under load, where both exist) were at or
near their median, must reach the claimed
return within about 3 times the sweep's median env steps (the config's own budget where that is
smaller), and end with a policy that scored it (a stop on the target ends with the params that
met it). The bound is read from the results file the README's claim cites, so a claim and its
test cannot drift apart; a run that takes longer, or ends below the target, fails.

Sebulba's runs are asynchronous, so their steps to the target vary from run to run (the sweeps
give the spread: `docs/results/learning.md`); Anakin's are a pure function of the seed. Where a
claim's sweeps have runs past the bound, the test tries several seeds and passes on the first
that holds; a learner that does not learn misses on every one. The two agents: 2 of 40 sweep
runs crossed after 3x the median, three seeds (a false failure about 1 in 8,000). IMPALA: 7 of
40 (17.5%), five seeds (about 1 in 6,000 at the sweeps' rate): with three (1 in 200), the full
suite on 2 busy cores missed on all three once (CI at 8d35f05: 453.9, 473.6 and 447.0 at best,
each seed at the median in both sweeps), so the rate under the suite's load is above the sweeps'.
"""

from __future__ import annotations

import json
import os

import pytest

from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.run.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results", "cpu", "learning")
FACTOR = 3  # the bound: this many times the claim's median env steps to its target

# agent: (config, the claim's results file, the seeds tried in turn, overrides the sweep used)
CLAIMS = {
    # Seeds that crossed at the median (24,000 steps) in both sweeps, tried in turn.
    "impala": ("impala_cartpole.py", "impala_cartpole_issue55", (0, 3, 4, 6, 7), ()),
    "ppo": ("ppo_cartpole.py", "ppo_cartpole_issue55", (7,), ()),
    # Seed 2 crosses at 17,136 steps in both sweeps (the median 85,112): the fast seed keeps
    # the suite's time; its bound is still 3x the median (capped at the config's budget).
    "rainbow": ("rainbow_cartpole.py", "rainbow_cartpole_issue55", (2,), ()),
    # 4 of the sweep's 5 seeds crossed (seed 0 peaked at 471.3): one seed alone missed about
    # one run in five; the next two crossed at its median too.
    "r2d2": ("r2d2_memory.py", "r2d2_memory", (1, 4, 2), ()),
    "anakin_ppo": ("anakin_ppo_cartpole.py", "anakin_ppo_cartpole", (1,), ()),
    "central_server": (
        "impala_cartpole.py",
        "impala_cartpole_central",
        (0, 1, 2),
        # As the sweep ran (e582ada), when the Python actor loop was the default: the XLA
        # loop runs inference inside its unroll, with no server to call.
        (
            "--config.sebulba.inference.client=server",
            "--config.sebulba.num_actor_threads=2",
            "--config.sebulba.actor_loop=python",
        ),
    ),
    "two_agents": (
        "two_agents_foraging.py",
        "two_agents_foraging_issue55",
        (2, 4, 6),
        ("--config.stop_at_eval_return=0.5",),
    ),
}


def claim_bound(name: str, budget: int) -> tuple[float, int]:
    """(the claim's target, the env steps its test may take): `FACTOR` x the median of its
    sweep's first crossings, at most the config's `budget`."""
    with open(os.path.join(RESULTS, name + ".json")) as f:
        sweep = json.load(f)
    median = sweep["aggregate"]["env_steps_to_target"]["median"]
    return sweep["target"], int(min(FACTOR * median, budget))


# Claims whose runs' time goes into XLA running their programs (R2D2's recurrent burn-in and
# sequence updates), compiled at XLA's default level, as their sweeps ran (`xla_level.py`):
# under the suite's load R2D2's took 47 s at the suite's level 0 and 32 s at level 2. The
# others' time is the actors' and the envs', and level 0's cheaper compile wins.
OPTIMISED_CLAIMS = ("r2d2",)


@pytest.mark.parametrize(
    "agent",
    [pytest.param(a, marks=pytest.mark.optimised) if a in OPTIMISED_CLAIMS else a for a in CLAIMS],
)
def test_each_headline_agent_learns_near_its_claim(agent, tmp_path):
    config_file, claim, seeds, overrides = CLAIMS[agent]
    missed = []
    for seed in seeds:
        outcome = _run_to_claim(config_file, claim, seed, overrides, str(tmp_path / str(seed)))
        if outcome is None:
            return
        missed.append(outcome)
    pytest.fail(f"{agent}: no seed reached its claim: {missed}")


def _run_to_claim(config_file, claim, seed, overrides, workdir):
    """None if a run of `seed` reaches the claim's target within its bound and ends with a
    policy that scored it; else what it did instead."""
    path = os.path.join(ROOT, "configs", config_file)
    argv = ["--config", path, "--workdir", "unused", f"--config.seed={seed}", *overrides]
    config, _ = parse_args([*argv, "--config.learning_curve=false"])
    target, bound = claim_bound(claim, config.total_env_steps)
    config, _ = parse_args(
        [*argv, "--config.learning_curve=false", f"--config.total_env_steps={bound}"]
    )
    summary = Trainer(config, workdir, quiet=True).run().summary
    reached = summary["env_steps_to_target"]
    if reached is not None and reached <= bound and summary["final_eval_return"] >= target:
        return None
    evals = [(e["env_steps"], round(e["return"], 3)) for e in summary["evals"]]
    return {"seed": seed, "bound": bound, "final": summary["final_eval_return"], "evals": evals}
