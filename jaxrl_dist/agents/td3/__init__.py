"""TD3 (Fujimoto et al. 2018), and DDPG as TD3 with one critic, no delay and no target
smoothing: `config.py`, `agent.py`; the losses are `jaxrl_dist.ops.continuous_control`'s and
the parts it shares with SAC `agents/off_policy.py`'s."""

from jaxrl_dist.agents.td3.agent import make_td3
from jaxrl_dist.agents.td3.config import RUNTIME_HPARAMS, TD3Config, check_td3

__all__ = ["RUNTIME_HPARAMS", "TD3Config", "check_td3", "make_td3"]
