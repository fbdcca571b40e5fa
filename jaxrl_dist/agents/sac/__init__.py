"""Soft actor-critic with a learned temperature (Haarnoja et al. 2018): `config.py`,
`agent.py`; the losses are `jaxrl_dist.ops.continuous_control`'s and the parts it shares with
TD3 `agents/off_policy.py`'s. Its data flow is the replay of n-step windows (uniform unless
`prioritized`)."""

from jaxrl_dist.agents.sac.agent import make_sac, squashed_sample
from jaxrl_dist.agents.sac.config import RUNTIME_HPARAMS, SACConfig, check_sac

__all__ = ["RUNTIME_HPARAMS", "SACConfig", "check_sac", "make_sac", "squashed_sample"]
