"""R2D2 (Kapturowski et al. 2019): recurrent Q-learning from prioritized replayed sequences.

`config.py` (hyperparameters and the run checks) and `agent.py` (`make_r2d2`: the
epsilon-ladder actor half over a recurrent Q network, and the burn-in, n-step, value-rescaled
sequence learner). Its data flow is the sequence replay (`jaxrl_dist.data.sequences`): whole
segments with their stored core state in, one priority per sequence back.
"""

from jaxrl_dist.agents.r2d2.agent import (
    RecurrentQModel,
    make_r2d2,
    recurrent_q_model,
    sequence_priorities,
    sequence_td_errors,
)
from jaxrl_dist.agents.r2d2.config import RUNTIME_HPARAMS, R2D2Config, check_r2d2

__all__ = [
    "RUNTIME_HPARAMS",
    "R2D2Config",
    "RecurrentQModel",
    "check_r2d2",
    "make_r2d2",
    "recurrent_q_model",
    "sequence_priorities",
    "sequence_td_errors",
]
