"""A Rainbow agent of two that learns while acting greedily (`exploration_mask`, issue 40): every
move it makes, in its own actors and in the PPO agent's, is its greedy policy's with the params it
acted with; its opponent-pool snapshots still explore. (Moved out of `test_two_agents.py`.)"""

from typing import Any, NamedTuple

import jax
import numpy as np
import pytest

from jaxrl_dist.acting import fleet, seat_pools
from jaxrl_dist.checkpoints.policy import policy_from_config
from jaxrl_dist.config.agents import agent_view
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW, pad_rows

CONFIG = "configs/two_agents_tictactoe.py:quick"


class Acted(NamedTuple):
    """One act of a run's actor step or snapshot player: who acted ("actor", "agent" for another
    agent's seat in an agent's actors, "pool"), with which core, whether greedily, the params,
    the observations `{AGENT_VIEW: [n, ...], ACTION_MASK: [n, A]}` and the actions `[n]`."""

    who: str
    core: Any
    greedy: bool
    params: Any
    obs: dict
    action: Any


def _record_acts(monkeypatch: pytest.MonkeyPatch) -> list[Acted]:
    """Records every act of the actors' jitted steps and of the snapshot players (the other
    agents' seats and the opponent pools) in the runs started after it."""
    acts: list[Acted] = []
    real_step = fleet.jit_inference_step

    def jit_inference_step(core, greedy=False):
        step = real_step(core, greedy)

        def recorded(params, obs, rows, first, state):
            out = step(params, obs, rows, first, state)
            acts.append(Acted("actor", core, greedy, params, jax.tree.map(np.array, obs), out[0]))
            return out

        return recorded

    def players(module, who):
        real = module.snapshot_policy

        def snapshot_policy(core, device, rows, greedy, key):
            policy = real(core, device, rows, greedy, key)
            act = policy.act_masked

            def recorded(params, view, legal_mask, games):
                action = act(params, view, legal_mask, games)
                obs = {AGENT_VIEW: np.array(view), ACTION_MASK: np.array(legal_mask, bool)}
                acts.append(Acted(who, core, greedy, params, obs, action))
                return action

            policy.act_masked = recorded
            return policy

        monkeypatch.setattr(module, "snapshot_policy", snapshot_policy)

    monkeypatch.setattr(fleet, "jit_inference_step", jit_inference_step)
    players(fleet, "agent")
    players(seat_pools, "pool")
    return acts


def _greedy_mismatches(policy, acts: list[Acted], chunk: int = 64) -> tuple[int, int]:
    """(rows whose action differs from `policy`'s greedy action on the same observations with
    the same params, rows compared): `policy.act(greedy=True)`, the policy evaluation plays."""
    differ = rows = 0
    for act in acts:
        policy.params = act.params
        n = len(act.obs[ACTION_MASK])
        padded = pad_rows(act.obs, -(-n // chunk) * chunk)  # one compiled shape
        chunks = [jax.tree.map(lambda x, i=i: x[i : i + chunk], padded) for i in range(0, n, chunk)]
        greedy = np.concatenate([policy.act(c, greedy=True) for c in chunks])[:n]
        differ += int(np.sum(greedy != np.asarray(act.action)[:n]))
        rows += n
    return differ, rows


def test_a_learning_agent_without_exploration_acts_greedily_everywhere(monkeypatch, tmp_path):
    """`exploration_mask=(False, True)`: Rainbow learns from replay while acting greedily. Every
    move it makes in its own actors and in PPO's (as PPO's opponent) is its greedy policy's on
    the same observations with the params it acted with, while it learns (several versions).
    Its opponent-pool snapshots still explore (the mask is the agent's, as on Anakin), and the
    same comparison finds their epsilon moves: what it checks can fail."""
    acts = _record_acts(monkeypatch)
    config = load_config(
        CONFIG, exploration_mask="(False, True)", total_env_steps=2000, eval_episodes=2
    )
    trainer = Trainer(config, str(tmp_path / "greedy"), quiet=True)
    summary = trainer.run().summary
    lanes = {lane.name: lane for lane in trainer.engine.lanes}
    rb = lanes["rb"]
    assert summary["agents"]["rb"]["updates"] > 0 and summary["agents"]["ppo"]["updates"] > 0
    policy = policy_from_config(rb.eval_params(), agent_view(config, 0).config)
    by_rb = [a for a in acts if a.core is rb.agent.actor]
    own = [a for a in by_rb if a.who == "actor"]
    in_ppos = [a for a in by_rb if a.who == "agent"]
    pool = [a for a in by_rb if a.who == "pool"]
    assert all(a.greedy for a in own + in_ppos) and not any(a.greedy for a in pool)
    assert len({id(a.params) for a in own}) > 2  # it acted with several versions as it learned
    differ, rows = _greedy_mismatches(policy, own)
    assert differ == 0 and rows > 1000
    differ, rows = _greedy_mismatches(policy, in_ppos)
    assert differ == 0 and rows > 100
    differ, rows = _greedy_mismatches(policy, pool)
    assert differ > 0.01 * rows and rows > 50  # epsilon moves are seen
    # PPO, which explores, samples in its own actors.
    ppo = [a for a in acts if a.core is lanes["ppo"].agent.actor and a.who == "actor"]
    assert ppo and not any(a.greedy for a in ppo)
