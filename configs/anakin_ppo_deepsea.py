"""PPO on bsuite's DeepSea (gymnax `DeepSea-bsuite`, a 12 x 12 grid) in the Anakin runtime: the
hard-exploration task of the intrinsic-reward guide (docs/guides/intrinsic-rewards.md).

The agent starts top left and falls one row per step; the treasure (+1) is bottom right, at the
end of twelve "right" moves in a row, each costing 0.01 / 12; "left" is free. A random policy
finds the treasure once in 4,096 episodes, and a policy that follows the small costs learns to
go left and never sees it: PPO alone scores 0 on every seed (at 10 x 10 an early lucky find
let it through on 2 of 10). The agent is `anakin_ppo_cartpole.py`'s (PureJaxRL's CartPole
PPO), evaluated every 5k env steps.

Variants:
  (none)     PPO alone.
  :rnd       PPO with RND (`config.intrinsic`, Burda et al. 2018's defaults).
  :pretrain  PPO on RND's reward alone (`intrinsic.pretraining`), 100k steps, no target:
             fine-tune with `:rnd --config.warm_start=RUN` (the guide's commands).
  :quick     a few updates of `:rnd`, for tests.
"""

import os

import ml_collections

from jaxrl_dist.config.cli import load_config_file

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = (None, "rnd", "pretrain", "quick")


def get_config(variant=None):
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; use ':rnd', ':pretrain', ':quick' or none")
    c = ml_collections.ConfigDict(load_config_file(os.path.join(HERE, "anakin_ppo_cartpole.py")))
    c.env_id = "DeepSea-bsuite"  # gymnax's
    c.env_kwargs = {"size": 12}
    c.total_env_steps = 600_000
    c.stop_at_eval_return = 0.9  # the treasure, less at most 0.01 of move costs
    c.eval_every_updates = 10  # every 5k env steps
    if variant is not None:
        c.intrinsic = {"method": "rnd"}
    if variant == "pretrain":
        c.intrinsic.pretraining = True
        c.total_env_steps = 100_000
        c.stop_at_eval_return = None
    elif variant == "quick":
        c.learning_curve = False
        c.total_env_steps = 4_096
        c.stop_at_eval_return = None
        c.eval_every_updates = 0
        c.eval_episodes = 4
        c.log_every_updates = 4
    return c
