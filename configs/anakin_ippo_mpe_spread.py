"""IPPO on JaxMARL's MPE simple spread (`MPE_simple_spread_v3`, 3 agents, 3 landmarks) in the
Anakin runtime: one PPO policy shared by the agents, a stream per (env, agent)
(`envs/jax_marl.py`), in one jitted program.

JaxMARL's own IPPO settings for MPE (`baselines/IPPO/config/ippo_ff_mpe.yaml`): 16 envs (48
agent streams) x 128 steps a rollout, Adam 2.5e-4 annealed, 4 epochs of 4 minibatches, clip
0.2, GAE 0.95, discount 0.99, entropy 0.01, value cost 0.5, gradient norm 0.5, separate 64-64
tanh actor and critic. Env steps count agent steps here: JaxMARL's 10M env steps are 30M.
Differences: each agent's observation ends with its one-hot id (as for every multi-agent env
of this library), and minibatches split the streams rather than single transitions.
Evaluated greedily, 96 agent-episodes (32 envs).
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    c = ml_collections.ConfigDict()
    c.runtime = "anakin"
    c.algorithm = "ppo"
    c.env_id = "jaxmarl:MPE_simple_spread_v3"
    c.env_kwargs = {}
    c.seed = 0
    c.anakin = {"num_seeds": 1}
    c.batch_size = 16 * 3  # agent streams per seed: 16 envs of 3 agents
    c.unroll_length = 128
    c.total_env_steps = 30_000_000  # agent steps: 10M env steps
    c.stop_at_eval_return = None
    c.eval_every_updates = 100
    c.eval_episodes = 96
    c.eval_envs = 96
    c.eval_mode = "greedy"
    c.checkpoint_every_updates = 0
    c.log_every_updates = 50
    # CleanRL's PPO settings, which are JaxMARL's IPPO settings too (the docstring's list).
    ppo = load_config_file(os.path.join(HERE, "anakin_ppo_cartpole.py"))
    c.network, c.algo = dict(ppo["network"]), dict(ppo["algo"])
    if variant == "quick":
        c.learning_curve = False
        c.total_env_steps = 48 * 128 * 4
        c.eval_every_updates = 2
        c.eval_episodes = 12
        c.eval_envs = 12
        c.log_every_updates = 1
    elif variant is not None:
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    return c
