"""SAC's hyperparameters (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
Applications", Table 1 for the defaults)."""

from __future__ import annotations

import dataclasses

from jaxrl_dist.agents.base import bad_algo_field, refuse_unread
from jaxrl_dist.agents.off_policy import check_replayed_run, check_shared_fields

# Fields a run may change while it goes on (`ContinuousState.hparams`); `alpha` only when the
# temperature is fixed (`autotune=False`).
RUNTIME_HPARAMS = ("actor_learning_rate", "critic_learning_rate", "target_tau")


@dataclasses.dataclass(frozen=True)
class SACConfig:
    """Soft actor-critic with a learned temperature: twin critics with Polyak-averaged targets,
    a tanh-squashed Gaussian policy, the temperature learned towards `target_entropy`.

    Defaults are the paper's (Table 1): Adam at 3e-4 for the policy, the critics and the
    temperature, discount 0.99, Polyak rate 0.005 after every update, two critics; batch 256
    and one gradient step per env step are the replay's (`config.batch_size`,
    `config.replay.samples_per_insert`), and the warm-up of uniform actions lasts while the
    replay fills to `config.replay.min_size`.

    Attributes:
      num_critics: the critics whose minimum bootstraps the target (2: clipped double-Q).
      autotune: learn the temperature (the paper's second version); False keeps `alpha` fixed
        (then a run-time hyperparameter).
      alpha: the temperature: fixed, or the learned one's start.
      target_entropy: the entropy the temperature aims at; None = `-D` (`-|A|`, the paper's).
        Measured in `[-1, 1]^D`, where the policy's actions live.
      minibatches: gradient steps per learner call: the learner's batch (`config.batch_size`,
        `config.replay.batch_size` on Anakin) splits into this many minibatches, one step each
        in one `lax.scan`, so a CPU learner is not held back by a call per step (batch 1,024
        and 4 minibatches: four steps at the paper's 256).
      warmup: act uniformly in the action box until the first update (while the replay fills).
      prioritized: priorities `|TD error|` written back to the replay and importance weights
        by `importance_exponent` (Schaul et al. 2016); False samples uniformly.
    """

    actor_learning_rate: float = 3e-4
    critic_learning_rate: float = 3e-4
    alpha_learning_rate: float = 3e-4
    adam_eps: float = 1e-8
    max_grad_norm: float = 0.0  # 0 disables clipping
    discount: float = 0.99
    target_tau: float = 0.005
    num_critics: int = 2
    autotune: bool = True
    alpha: float = 1.0
    target_entropy: float | None = None
    minibatches: int = 1
    warmup: bool = True
    prioritized: bool = False
    importance_exponent: float = 0.4

    def __post_init__(self):
        rates = ("actor_learning_rate", "critic_learning_rate", "alpha_learning_rate")
        check_shared_fields(self, rates, ())
        if not self.alpha > 0:
            bad_algo_field(self, "alpha", "must be > 0 (the temperature)")
        if not self.autotune:
            refuse_unread(self, ("alpha_learning_rate", "target_entropy"), "with autotune=True")

    def runtime_hparams(self) -> tuple[str, ...]:
        """The fields a run may change while it goes on."""
        return (*RUNTIME_HPARAMS, "alpha_learning_rate" if self.autotune else "alpha")


def check_sac(config: SACConfig, train_config) -> str | None:
    """What does not fit the run (one line) or None: its minibatches against the learner's
    batch, and the network options SAC cannot read."""
    if train_config.replay.n_step > 1:
        return (
            f"config.replay.n_step={train_config.replay.n_step}: sac's soft return over several "
            "steps needs each step's -alpha log pi and an off-policy correction, which a "
            "replayed window does not hold; set config.replay.n_step=1"
        )
    return check_replayed_run("sac", config, train_config)
