"""IMPALA's hyperparameters (Espeholt et al. 2018, Table D.1)."""

from __future__ import annotations

import dataclasses

from jaxrl_dist.agents.base import bad_algo_field, refuse_unread

OPTIMIZERS = ("rmsprop", "adam")
# Fields a run may change while it goes on (`LearnerState.hparams`; README, "Run-time changes").
RUNTIME_HPARAMS = (
    "learning_rate",
    "entropy_cost",
    "baseline_cost",
    "clip_rho_threshold",
    "clip_pg_rho_threshold",
)


@dataclasses.dataclass(frozen=True)
class ImpalaConfig:
    """IMPALA hyperparameters; defaults are the paper's Atari settings (Table D.1, Espeholt et
    al. 2018): RMSProp lr 6e-4 annealed linearly to 0, decay 0.99, epsilon 0.01, gradient norm
    clipped at 40, discount 0.99, entropy cost 0.01, baseline cost 0.5, rho-bar = c-bar = 1."""

    learning_rate: float = 6e-4  # run-time base rate
    anneal_lr: bool = True  # linear decay to 0 over the run's updates
    optimizer: str = "rmsprop"  # "rmsprop" or "adam"
    rmsprop_decay: float = 0.99  # RMSProp's second-moment decay
    rmsprop_eps: float = 0.01  # RMSProp's epsilon
    adam_eps: float = 1e-8  # Adam's epsilon
    max_grad_norm: float = 40.0  # 0 disables clipping
    discount: float = 0.99  # gamma
    lambda_: float = 1.0  # V-trace trace coefficient scale
    clip_rho_threshold: float = 1.0  # rho-bar
    clip_pg_rho_threshold: float = 1.0  # rho-bar of the policy-gradient advantage
    baseline_cost: float = 0.5  # value loss weight
    entropy_cost: float = 0.01  # entropy bonus weight
    reward_scale: float = 1.0  # rewards are multiplied by this for learning (values in those units)

    def __post_init__(self):
        if self.learning_rate <= 0:
            bad_algo_field(self, "learning_rate", "must be > 0")
        if self.optimizer not in OPTIMIZERS:
            bad_algo_field(self, "optimizer", f"must be one of {OPTIMIZERS}")
        if not 0.0 <= self.discount <= 1.0:
            bad_algo_field(self, "discount", "must be in [0, 1]")
        if not 0.0 <= self.lambda_ <= 1.0:
            bad_algo_field(self, "lambda_", "must be in [0, 1]")
        if self.reward_scale <= 0:
            bad_algo_field(self, "reward_scale", "must be > 0")
        if not 0.0 <= self.rmsprop_decay < 1.0:
            bad_algo_field(self, "rmsprop_decay", "must be in [0, 1)")
        for field in ("clip_rho_threshold", "clip_pg_rho_threshold"):
            if getattr(self, field) <= 0:
                bad_algo_field(self, field, "must be > 0")
        for field in ("max_grad_norm", "baseline_cost", "entropy_cost", "rmsprop_eps", "adam_eps"):
            if getattr(self, field) < 0:
                bad_algo_field(self, field, "must be >= 0")
        if self.optimizer == "adam":
            refuse_unread(self, ("rmsprop_decay", "rmsprop_eps"), "with optimizer='rmsprop'")
        else:
            refuse_unread(self, ("adam_eps",), "with optimizer='adam'")
