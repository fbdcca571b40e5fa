"""TD3 on MuJoCo through EnvPool (default HalfCheetah-v4), 1M env steps, one gradient step per
env step; `--config.env_id=Hopper-v4` (Walker2d-v4, Ant-v4) for the others.

`sac_mujoco.py`'s actors, replay (1M transitions, 4 gradient steps of 256 per learner call on
1,024 sampled transitions) and ReLU MLPs (256, 256), with CleanRL's `td3_continuous_action.py`
settings (Fujimoto et al. 2018 as their code runs now): Adam 3e-4 for both, discount 0.99,
Polyak rate 0.005, exploration noise 0.1, target noise 0.2 clipped at 0.5, a policy delay of
2, 25,000 uniform warm-up steps (the replay's `min_size`).
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    if variant not in (None, "quick"):
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    sac = load_config_file(os.path.join(HERE, "sac_mujoco.py" + (":quick" if variant else "")))
    c = ml_collections.ConfigDict(sac)
    c.algorithm = "td3"
    td3 = load_config_file(os.path.join(HERE, "td3_pendulum.py"))["algo"]  # CleanRL's TD3
    c.algo = {**td3, "minibatches": sac["algo"]["minibatches"]}
    if variant is None:
        c.replay = {**c.replay, "min_size": 25_000}
    return c
