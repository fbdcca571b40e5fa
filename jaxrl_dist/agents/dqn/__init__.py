"""The DQN family up to Rainbow (Hessel et al. 2018), SEED-style: every part a config switch.

`config.py` (hyperparameters), `targets.py` (a replay window's n-step target), `loss.py` (the
per-transition losses, priorities and importance weights) and `agent.py` (`make_rainbow`: the
epsilon-ladder actor half and the learner half). Its data flow is the prioritized replay
(`jaxrl_dist.data.prioritized`): n-step windows in, priorities back.
"""

from jaxrl_dist.agents.dqn.agent import DQNState, QModel, epsilon_ladder, make_rainbow
from jaxrl_dist.agents.dqn.config import RUNTIME_HPARAMS, RainbowConfig, check_rainbow
from jaxrl_dist.agents.dqn.loss import expected_q, importance_weights, transition_losses
from jaxrl_dist.agents.dqn.targets import NStepTarget, n_step_target

__all__ = [
    "RUNTIME_HPARAMS",
    "DQNState",
    "NStepTarget",
    "QModel",
    "RainbowConfig",
    "check_rainbow",
    "epsilon_ladder",
    "expected_q",
    "importance_weights",
    "make_rainbow",
    "n_step_target",
    "transition_losses",
]
