"""TD3 on gymnax Pendulum-v1 in the Anakin runtime: `anakin_sac_pendulum.py`'s layout (8 envs x
4 steps a rollout, one gradient step of 256 per env step from the device replay) with
`td3_pendulum.py`'s agent (CleanRL's TD3 settings); `:ddpg` is DDPG on the same settings.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))


def get_config(variant=None):
    variants = (None, "quick", "ddpg", "ddpg_quick")
    if variant not in variants:
        raise ValueError(f"unknown variant {variant!r}; use one of {variants[1:]} or none")
    quick = ":quick" if variant in ("quick", "ddpg_quick") else ""
    td3 = load_config_file(
        os.path.join(HERE, "td3_pendulum.py") + (f":{variant}" if variant else "")
    )
    c = ml_collections.ConfigDict(
        load_config_file(os.path.join(HERE, "anakin_sac_pendulum.py" + quick))
    )
    c.algorithm = "td3"
    c.algo = td3["algo"]
    return c
