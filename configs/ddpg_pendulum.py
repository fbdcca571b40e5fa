"""DDPG on Pendulum-v1: `td3_pendulum.py`'s `:ddpg` variant (TD3 with one critic, no policy
delay and no target smoothing, as Fujimoto et al. 2018 ran DDPG); `:quick` its smoke run."""

import os

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    if variant not in (None, "quick"):
        raise ValueError(f"unknown variant {variant!r}; use ':quick' or no variant")
    name = "ddpg_quick" if variant == "quick" else "ddpg"
    return load_config_file(os.path.join(HERE, f"td3_pendulum.py:{name}"))
