"""TD3 on Pendulum-v1 (EnvPool classic control), SEED-style: `sac_pendulum.py`'s actors,
replay (one gradient step per env step at batch 256, 1,000 uniform warm-up steps) and ReLU MLPs
(256, 256); `:ddpg` (or `configs/ddpg_pendulum.py`) is DDPG on the same settings.

Hyperparameters: CleanRL's `td3_continuous_action.py` (Fujimoto et al. 2018 as their code
runs now): Adam 3e-4 for both, discount 0.99, Polyak rate 0.005, exploration noise 0.1, target
noise 0.2 clipped at 0.5, a policy delay of 2 (CleanRL's warm-up is 25,000 steps for MuJoCo's
1M). A random policy scores about -1,250 per 200-step episode.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))
TD3 = {
    "actor_learning_rate": 3e-4,
    "critic_learning_rate": 3e-4,
    "discount": 0.99,
    "target_tau": 0.005,
    "exploration_noise": 0.1,
    "target_noise": 0.2,
    "target_noise_clip": 0.5,
    "policy_delay": 2,
}
# TD3's three additions off (Fujimoto et al.'s DDPG): one critic, no delay, no smoothing.
DDPG = {**TD3, "num_critics": 1, "policy_delay": 1, "target_noise": 0.0}
del DDPG["target_noise_clip"]


def get_config(variant=None):
    variants = (None, "quick", "ddpg", "ddpg_quick")
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; use one of {variants[1:]} or none")
    quick = ":quick" if variant in ("quick", "ddpg_quick") else ""
    c = ml_collections.ConfigDict(load_config_file(os.path.join(HERE, "sac_pendulum.py" + quick)))
    c.algorithm = "td3"
    c.algo = dict(DDPG if variant in ("ddpg", "ddpg_quick") else TD3)
    return c
