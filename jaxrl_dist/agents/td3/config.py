"""TD3's hyperparameters (Fujimoto et al. 2018), and DDPG as TD3 with its three additions off."""

from __future__ import annotations

import dataclasses

from jaxrl_dist.agents.base import bad_algo_field, refuse_unread
from jaxrl_dist.agents.off_policy import check_replayed_run, check_shared_fields

# Fields a run may change while it goes on (`ContinuousState.hparams`).
RUNTIME_HPARAMS = (
    "actor_learning_rate",
    "critic_learning_rate",
    "target_tau",
    "exploration_noise",
    "target_noise",
)


@dataclasses.dataclass(frozen=True)
class TD3Config:
    """Twin delayed DDPG: a deterministic tanh policy explored with Gaussian noise, clipped
    double-Q critics (`num_critics`), the policy and the targets updated every `policy_delay`
    critic updates, and the target policy's action smoothed by clipped noise.

    Defaults are the paper's as its authors' code runs them now (Adam 3e-4 for both, the
    paper's Table 3 says 1e-3), with CleanRL's `td3_continuous_action.py`: discount 0.99,
    Polyak rate 0.005, exploration noise 0.1, target noise 0.2 clipped at 0.5, a delay of 2;
    batch 256 and one gradient step per env step are the replay's (`config.batch_size`,
    `config.replay.samples_per_insert`), and the warm-up of uniform actions lasts while the
    replay fills to `config.replay.min_size` (25,000 in the paper).

    DDPG (Lillicrap et al. 2016, as Fujimoto et al. ran it) is `num_critics=1, policy_delay=1,
    target_noise=0` (`configs/ddpg_*.py`).

    Attributes:
      exploration_noise: the behaviour policy's Gaussian noise scale, in `[-1, 1]` units.
      target_noise, target_noise_clip: the target policy smoothing's noise scale and clip.
      policy_delay: critic updates per policy (and target) update.
      minibatches, warmup, prioritized, importance_exponent: as `SACConfig`'s (the policy
        delay counts minibatch steps).
    """

    actor_learning_rate: float = 3e-4
    critic_learning_rate: float = 3e-4
    adam_eps: float = 1e-8
    max_grad_norm: float = 0.0  # 0 disables clipping
    discount: float = 0.99
    target_tau: float = 0.005
    num_critics: int = 2
    policy_delay: int = 2
    exploration_noise: float = 0.1
    target_noise: float = 0.2
    target_noise_clip: float = 0.5
    minibatches: int = 1
    warmup: bool = True
    prioritized: bool = False
    importance_exponent: float = 0.4

    def __post_init__(self):
        rates = ("actor_learning_rate", "critic_learning_rate")
        check_shared_fields(self, rates, ("exploration_noise", "target_noise"))
        if self.policy_delay < 1:
            bad_algo_field(self, "policy_delay", "must be >= 1 (critic updates per policy update)")
        if not self.target_noise_clip > 0:
            bad_algo_field(self, "target_noise_clip", "must be > 0")
        if self.target_noise == 0:
            refuse_unread(self, ("target_noise_clip",), "with target_noise > 0")


def check_td3(config: TD3Config, train_config) -> str | None:
    """What does not fit the run (one line) or None: its minibatches against the learner's
    batch, and the network options TD3 cannot read."""
    return check_replayed_run("td3", config, train_config)
