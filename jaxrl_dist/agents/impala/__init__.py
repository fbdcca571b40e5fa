"""IMPALA: actor-critic with V-trace off-policy correction (Espeholt et al. 2018).

`config.py` (hyperparameters), `loss.py` (the pure loss over `[T + 1, B]` rollouts) and
`agent.py` (`make_impala`: the actor and learner halves).

Episode boundaries (see `jaxrl_dist.types`): a terminated transition bootstraps from zero; a
truncated one bootstraps from the value of its final observation (EnvPool returns the final
observation at the step that ends the episode) and cuts the trace there; the reset transition that
follows an episode end is masked out of every loss term.
"""

from jaxrl_dist.agents.impala.agent import make_impala, make_optimizer
from jaxrl_dist.agents.impala.config import OPTIMIZERS, RUNTIME_HPARAMS, ImpalaConfig
from jaxrl_dist.agents.impala.loss import impala_loss

__all__ = [
    "OPTIMIZERS",
    "RUNTIME_HPARAMS",
    "ImpalaConfig",
    "impala_loss",
    "make_impala",
    "make_optimizer",
]
