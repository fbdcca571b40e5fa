"""R2D2's hyperparameters (Kapturowski et al. 2019, Table 2 for the defaults)."""

from __future__ import annotations

import dataclasses

from jaxrl_dist.agents.base import bad_algo_field
from jaxrl_dist.agents.dqn.config import RainbowConfig

# Fields a run may change while it goes on (`DQNState.hparams`; README, "Run-time changes").
RUNTIME_HPARAMS = ("learning_rate", "epsilon", "target_period", "importance_exponent")


@dataclasses.dataclass(frozen=True)
class R2D2Config(RainbowConfig):
    """Recurrent Q-learning from replayed sequences: `RainbowConfig`'s fields (scalar Q-values:
    no C51, no noisy layers) with R2D2's defaults, and its own.

    Defaults: Adam lr 1e-4 and eps 1e-3, discount 0.997, 5-step double-Q targets, dueling, a
    target copy every 2,500 updates, the Ape-X ladder (epsilon 0.4, alpha 7), importance
    exponent 0.6 (not annealed), burn-in 40 of 80-step sequences, priorities
    `eta * max |td| + (1 - eta) * mean |td|` with eta 0.9, the invertible value rescaling
    `h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x` with eps 1e-3 instead of reward clipping.

    Attributes:
      n_step: the return length (>= 1), cut where the sequence ends (the target bootstraps
        from the value of the sequence's last observation, unless an episode ended before).
      burn_in: the first `burn_in` steps of each sequence only unroll the core (online and
        target networks each from the stored state, without gradient); the loss and the
        priorities are over the rest.
      priority_eta: the weight of the max in a sequence's priority.
      value_rescaling: learn `h`-rescaled values (R2D2); False learns raw returns.
      rescaling_eps: the `eps` of `h`.
    """

    learning_rate: float = 1e-4
    adam_eps: float = 1e-3
    discount: float = 0.997
    num_atoms: int = 1
    noisy: bool = False
    n_step: int = 5
    loss: str = "l2"
    target_period: int = 2_500
    epsilon: float = 0.4
    epsilon_start: float = 0.4
    epsilon_alpha: float = 7.0
    importance_exponent: float = 0.6
    anneal_importance: bool = False
    burn_in: int = 40
    priority_eta: float = 0.9
    value_rescaling: bool = True
    rescaling_eps: float = 1e-3

    def __post_init__(self):
        super().__post_init__()
        if self.num_atoms != 1:
            bad_algo_field(self, "num_atoms", "must be 1: r2d2 learns expected Q-values")
        if self.noisy:
            bad_algo_field(self, "noisy", "must be False: r2d2 explores with the epsilon ladder")
        if self.n_step < 1:
            bad_algo_field(self, "n_step", "must be >= 1")
        if self.burn_in < 0:
            bad_algo_field(self, "burn_in", "must be >= 0 (0: no burn-in)")
        if not 0.0 <= self.priority_eta <= 1.0:
            bad_algo_field(self, "priority_eta", "must be in [0, 1]")
        if self.rescaling_eps <= 0:
            bad_algo_field(self, "rescaling_eps", "must be > 0")


def check_r2d2(config: R2D2Config, train_config) -> str | None:
    """What does not fit the run (one line) or None."""
    network, unroll = train_config.network, train_config.unroll_length
    if not network.recurrent:
        return "r2d2 learns a recurrent Q network; set config.network.core='lstm' (or 'gru')"
    if config.burn_in >= unroll:
        return (
            f"config.algo.burn_in={config.burn_in} leaves nothing to learn from sequences of "
            f"config.unroll_length={unroll}; make burn_in smaller than unroll_length"
        )
    if network.normalize_obs:
        return (
            "config.network.normalize_obs=True is not supported by r2d2 (its targets would "
            "move with the statistics); set config.network.normalize_obs=false"
        )
    return None
