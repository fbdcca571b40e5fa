"""PPO's hyperparameters (Huang et al. 2022's Atari/CartPole settings)."""

from __future__ import annotations

import dataclasses

from jaxrl_dist.agents.base import bad_algo_field

ESTIMATORS = ("gae", "vtrace")
# Fields a run may change while it goes on (`LearnerState.hparams`; README, "Run-time changes").
RUNTIME_HPARAMS = ("learning_rate", "entropy_cost", "value_cost", "clip_eps")


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters; defaults follow Huang et al. 2022's Atari/CartPole settings."""

    learning_rate: float = 2.5e-4  # run-time base rate
    anneal_lr: bool = True  # linear decay to 0 over the run's optimizer steps
    adam_eps: float = 1e-5  # Adam's epsilon
    max_grad_norm: float = 0.5  # 0 disables clipping
    num_epochs: int = 4  # passes over each batch
    num_minibatches: int = 4  # must divide config.batch_size (envs per update)
    discount: float = 0.99  # gamma
    gae_lambda: float = 0.95  # GAE's lambda
    advantage_estimator: str = "gae"  # "gae" | "vtrace" (corrects stale rollouts, as APPO)
    clip_eps: float = 0.1  # the ratio clip
    clip_value: bool = True  # clip the value update like the policy's
    value_cost: float = 0.5  # value loss weight
    entropy_cost: float = 0.01  # entropy bonus weight
    normalize_advantages: bool = True  # per minibatch
    reward_scale: float = 1.0  # rewards are multiplied by this for learning (values in those units)
    max_behaviour_weight: float = 1.0  # cap on pi_old / mu for rollouts a few updates stale

    def __post_init__(self):
        for field in ("learning_rate", "clip_eps"):
            if getattr(self, field) <= 0:
                bad_algo_field(self, field, "must be > 0")
        for field in ("num_epochs", "num_minibatches"):
            if getattr(self, field) < 1:
                bad_algo_field(self, field, "must be >= 1")
        for field in ("discount", "gae_lambda"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                bad_algo_field(self, field, "must be in [0, 1]")
        if self.reward_scale <= 0:
            bad_algo_field(self, "reward_scale", "must be > 0")
        if self.max_behaviour_weight <= 0:
            bad_algo_field(self, "max_behaviour_weight", "must be > 0")
        for field in ("max_grad_norm", "value_cost", "entropy_cost", "adam_eps"):
            if getattr(self, field) < 0:
                bad_algo_field(self, field, "must be >= 0")
        if self.advantage_estimator not in ESTIMATORS:
            bad_algo_field(self, "advantage_estimator", f"must be one of {ESTIMATORS}")


def check_ppo(config: PPOConfig, train_config) -> str | None:
    """Minibatches split the learner batch's envs: num_minibatches must divide batch_size."""
    if train_config.batch_size % config.num_minibatches:
        return (
            f"config.algo.num_minibatches={config.num_minibatches} does not divide "
            f"config.batch_size={train_config.batch_size}; make batch_size a multiple of it"
        )
    return None
