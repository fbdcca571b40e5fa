"""Rainbow's hyperparameters, each part a switch (Hessel et al. 2018, Table 1 for the defaults)."""

from __future__ import annotations

import dataclasses

from jaxrl_dist.agents.base import bad_algo_field, refuse_unread

LOSSES = ("huber", "l2")
TARGET_UPDATES = ("hard", "polyak")
# Fields a run may change while it goes on (`DQNState.hparams`; README, "Run-time changes").
RUNTIME_HPARAMS = ("learning_rate", "epsilon", "target_period", "n_step", "importance_exponent")


@dataclasses.dataclass(frozen=True)
class RainbowConfig:
    """The DQN family: every Rainbow part is a field, so plain DQN is Rainbow with them off.

    Defaults are the Rainbow paper's Atari settings (Hessel et al. 2018, Table 1): Adam lr
    6.25e-5 and eps 1.5e-4, discount 0.99, C51 with 51 atoms on [-10, 10], noisy nets with
    sigma0 0.5 and no epsilon, dueling, double Q, a hard target copy every 8,000 agent steps
    (2,000 updates at one update per 4 steps), importance exponent 0.4 annealed to 1. Multi-step
    returns, the priority exponent and the replay sizes are the data seam's
    (`config.replay.n_step`, `priority_exponent`, `capacity`, `min_size`, `samples_per_insert`).

    Attributes:
      anneal_lr: the learning rate decays linearly from the run-time `learning_rate` to 0 over
        the run's updates (as PPO's), so the greedy policy settles instead of flipping between
        near-tied actions at the end of a run; off in the paper.
      n_step: the return length the loss uses, at most the replay's window
        (`config.replay.n_step`); 0 = the whole window. Lowering it at run time needs no new
        windows (the loss stops the return early).
      num_atoms: 1 = expected-value Q-learning (`loss` applies); > 1 = C51 over `num_atoms`
        atoms evenly spaced on `[v_min, v_max]` (the loss is the cross-entropy).
      epsilon: exploration rate after `epsilon_decay_env_steps` (linear from `epsilon_start`,
        counted in env steps the learner has consumed: updates x env steps per update); each
        env `i` of `N` (over every process's actors) acts with `epsilon ** (1 + epsilon_alpha *
        i / (N - 1))`, the Ape-X ladder (Horgan et al. 2018: epsilon 0.4, alpha 7).
      target_period: updates between hard copies of the online params to the target params.
      target_tau: with `target_update="polyak"`, `target <- (1 - tau) target + tau online`
        after every update.
      importance_exponent: beta of the importance weights `(N P(i)) ** -beta / max_j`
        (Schaul et al. 2016), annealed linearly to 1 over the run when `anneal_importance`.
    """

    learning_rate: float = 6.25e-5  # run-time base rate (Adam)
    anneal_lr: bool = False
    adam_eps: float = 1.5e-4  # Adam's epsilon
    max_grad_norm: float = 0.0  # 0 disables clipping (the paper does not clip)
    discount: float = 0.99  # gamma
    double: bool = True  # double Q-learning targets
    dueling: bool = True  # dueling value/advantage heads
    num_atoms: int = 51
    v_min: float = -10.0  # C51's lowest atom
    v_max: float = 10.0  # C51's highest atom
    noisy: bool = True  # noisy-net layers in the head
    sigma0: float = 0.5  # noisy nets' initial noise scale
    n_step: int = 0
    loss: str = "huber"  # num_atoms == 1 only: "huber" (delta 1) or "l2" (half squared error)
    target_update: str = "hard"  # "hard" (a copy every target_period) or "polyak" (target_tau)
    target_period: int = 2_000
    target_tau: float = 0.005
    epsilon: float = 0.0
    epsilon_start: float = 1.0  # exploration rate before the decay
    epsilon_decay_env_steps: int = 0  # 0: epsilon from the start
    epsilon_alpha: float = 0.0  # 0: every env acts with the same epsilon
    importance_exponent: float = 0.4
    anneal_importance: bool = True  # importance_exponent linear to 1 over the run

    def __post_init__(self):
        if self.learning_rate <= 0:
            bad_algo_field(self, "learning_rate", "must be > 0")
        if not 0.0 <= self.discount <= 1.0:
            bad_algo_field(self, "discount", "must be in [0, 1]")
        if self.num_atoms < 1 or self.num_atoms == 2:
            bad_algo_field(self, "num_atoms", "must be 1 (no C51) or >= 3")
        if not self.v_min < self.v_max:
            bad_algo_field(self, "v_min", f"must be below config.algo.v_max={self.v_max}")
        if self.n_step < 0:
            bad_algo_field(self, "n_step", "must be >= 0 (0 = the replay's window)")
        if self.loss not in LOSSES:
            bad_algo_field(self, "loss", f"must be one of {LOSSES}")
        if self.target_update not in TARGET_UPDATES:
            bad_algo_field(self, "target_update", f"must be one of {TARGET_UPDATES}")
        if self.target_period < 1:
            bad_algo_field(self, "target_period", "must be >= 1")
        if not 0.0 < self.target_tau <= 1.0:
            bad_algo_field(self, "target_tau", "must be in (0, 1]")
        for field in ("epsilon", "epsilon_start", "importance_exponent"):
            if not 0.0 <= getattr(self, field) <= 1.0:
                bad_algo_field(self, field, "must be in [0, 1]")
        for field in ("max_grad_norm", "adam_eps", "sigma0", "epsilon_decay_env_steps"):
            if getattr(self, field) < 0:
                bad_algo_field(self, field, "must be >= 0")
        if self.epsilon_alpha < 0:
            bad_algo_field(self, "epsilon_alpha", "must be >= 0")
        if self.num_atoms == 1:
            refuse_unread(self, ("v_min", "v_max"), "with C51 (num_atoms > 1)")
        else:
            refuse_unread(self, ("loss",), "with num_atoms=1 (C51 uses its cross-entropy)")
        if not self.noisy:
            refuse_unread(self, ("sigma0",), "with noisy=True")
        if self.target_update == "hard":
            refuse_unread(self, ("target_tau",), "with target_update='polyak'")
        else:
            refuse_unread(self, ("target_period",), "with target_update='hard'")


def check_rainbow(config: RainbowConfig, train_config) -> str | None:
    """What does not fit the run (one line) or None: the return length against the replay's
    windows, and network options that have no meaning for a Q network."""
    window = train_config.replay.n_step
    if config.n_step > window:
        return (
            f"config.algo.n_step={config.n_step} is longer than the replay's windows "
            f"(config.replay.n_step={window}); set config.replay.n_step >= {config.n_step}"
        )
    if train_config.network.recurrent:
        return (
            f"config.network.core={train_config.network.core!r}: rainbow replays single "
            "n-step transitions, which hold no core state to start a recurrent core from; "
            "set config.network.core='none', or use config.algorithm='r2d2' (the recurrent "
            "Q agent: sequences with their core states, a burn-in)"
        )
    if train_config.network.normalize_obs:
        return (
            "config.network.normalize_obs=True is not supported by rainbow (its targets would "
            "move with the statistics); set config.network.normalize_obs=false"
        )
    return None
