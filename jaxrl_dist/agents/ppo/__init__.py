"""PPO (asynchronous, decoupled for stale data): `config.py`, `loss.py`, `agent.py`."""

from jaxrl_dist.agents.ppo.agent import make_ppo
from jaxrl_dist.agents.ppo.config import ESTIMATORS, RUNTIME_HPARAMS, PPOConfig, check_ppo
from jaxrl_dist.agents.ppo.loss import advantages_and_targets, ppo_loss

__all__ = [
    "ESTIMATORS",
    "RUNTIME_HPARAMS",
    "PPOConfig",
    "advantages_and_targets",
    "check_ppo",
    "make_ppo",
    "ppo_loss",
]
