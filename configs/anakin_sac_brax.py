"""SAC on a Brax env (default HalfCheetah, the positional backend) in the Anakin runtime: the
Brax physics, the actor, the replay and the learner in one jitted program.

The env is `jax:jaxrl_dist.envs.brax_envs:make` (`pip install 'jaxrl_dist[brax]'`);
`--config.env_kwargs="{'env_name': 'hopper'}"` for another of Brax's envs. `sac_mujoco.py`'s
agent, network, replay (1M transitions, 5,000 uniform warm-up steps) and CleanRL's
hyperparameters, acted by 8 envs x 4 steps per rollout and learned from at one gradient step of
256 per env step (`anakin_sac_pendulum.py`'s layout). Brax's HalfCheetah is not MuJoCo's
HalfCheetah-v4 (another simulator, other contacts): its returns are not comparable with
`sac_mujoco.py`'s. `:quick` is a smoke run on Brax's physics-free `fast` env.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    if variant not in (None, "quick"):
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    suffix = f":{variant}" if variant else ""
    c = ml_collections.ConfigDict(
        load_config_file(os.path.join(HERE, "anakin_sac_pendulum.py" + suffix))
    )
    c.env_id = "jax:jaxrl_dist.envs.brax_envs:make"
    c.env_kwargs = {"env_name": "halfcheetah", "backend": "positional"}
    if variant == "quick":
        c.env_kwargs = {"env_name": "fast", "max_episode_steps": 100}
        return c
    mujoco = load_config_file(os.path.join(HERE, "sac_mujoco.py"))
    c.algo = {**mujoco["algo"], "minibatches": 1}
    c.replay = {**mujoco["replay"], "batch_size": 256, "samples_per_insert": 256.0}
    c.total_env_steps = 1_000_000
    c.eval_every_updates = 2_500  # rollouts of 32 steps: every 80,000 env steps
    c.eval_episodes = 10
    c.checkpoint_every_updates = 2_500
    c.log_every_updates = 250
    return c
