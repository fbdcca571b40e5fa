"""The return of a uniformly random legal policy, measured as evaluations measure a run (the
first episode of each of `--episodes` envs, `[episodes, agents]` returns): the baseline a
learning figure is compared with.

    python benchmarks/random_policy.py --env-id Jumanji/LevelBasedForaging-v0 --episodes 1000
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from jaxrl_dist.envs import env_spec, make_env
from jaxrl_dist.envs.agents import agent_rewards
from jaxrl_dist.envs.games import random_legal
from jaxrl_dist.evaluation.base import EnvEpisodes


def random_returns(env_id: str, episodes: int, seed: int) -> np.ndarray:
    """`[episodes, agents]` returns of uniformly random legal actions (every action where the
    env has no mask)."""
    spec = env_spec(env_id, {})
    env = make_env(env_id, {}, episodes, episodes, seed=seed)
    choose = random_legal(np.random.default_rng(seed)).choose
    obs, _ = env.reset()
    first = EnvEpisodes(episodes)
    agents = spec.num_agents
    while not first.done:
        mask = (
            obs["action_mask"] if isinstance(obs, dict) else np.ones((episodes, spec.num_actions))
        )
        mask = np.asarray(mask, bool).reshape(episodes * agents, -1)
        action = choose(None, mask).reshape(episodes, agents) if agents > 1 else choose(None, mask)
        obs, reward, terminated, truncated, _ = env.step(action)
        if agents > 1:
            reward = agent_rewards(reward, agents, team=False)
        first.add(reward, np.logical_or(terminated, truncated))
    env.close()
    return first.result().returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", required=True)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    returns = random_returns(args.env_id, args.episodes, args.seed)
    record = {
        "env_id": args.env_id,
        "episodes": args.episodes,
        "seed": args.seed,
        "return": float(returns.mean()),
        "return_std": float(returns.std()),
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()
