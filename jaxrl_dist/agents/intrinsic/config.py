"""The `intrinsic` section: a learned reward added to (or, in pre-training, replacing) the env's.

Defaults are Burda et al. 2018's ("Exploration by Random Network Distillation", Table 5):
extrinsic and intrinsic advantages weighted 2 and 1, an intrinsic discount of 0.99 on
non-episodic returns, Adam at 1e-4 for the predictor, trained on a quarter of each batch,
observations whitened and clipped to [-5, 5]. Two differences: the predictor takes one Adam step
per learner update (the paper's code adds its loss to every PPO minibatch's: 16 steps a rollout
at 4 epochs x 4 minibatches), so at the same rate novelty fades more slowly here; and image
frames are not whitened (`rnd.py`).
"""

from __future__ import annotations

import dataclasses

METHODS = ("none", "rnd")


def _bad(field: str, value, why: str):
    raise ValueError(f"config.intrinsic.{field}={value!r} {why}")


@dataclasses.dataclass(frozen=True)
class IntrinsicConfig:
    """An intrinsic reward for an actor-critic agent (PPO, IMPALA), with its own value head.

    Attributes:
      method: "none" or "rnd" (random network distillation: the reward is the error of a
        predictor trained to match a fixed random network on the next observation).
      pretraining: learn from the intrinsic reward alone: the env's reward is replaced by 0
        for learning (episode returns are still logged); a later run warm-starts from it
        (`config.warm_start`) and fine-tunes on the task.
      ext_coef, int_coef: weights of the extrinsic and intrinsic advantages (in pre-training
        the extrinsic one weighs 0: `advantage_weights`). PPO normalises its advantages, so
        only their ratio matters there; IMPALA does not, so they also scale its policy
        gradient against its entropy and baseline costs (`ext_coef=1` keeps a tuned IMPALA's).
      discount: the intrinsic returns' discount; they run on across episode ends
        (non-episodic), as in the paper.
      learning_rate: the predictor's Adam step size.
      hidden_sizes: the widths of the target's MLP (vector observations; the predictor has one
        more layer of the last width); image frames go through the run's image torso.
      embedding_size: the width of the target's output, the predictor's regression target.
      update_proportion: the share of each batch's observations the predictor trains on.
      obs_clip: whitened observations are clipped to [-obs_clip, obs_clip].
    """

    method: str = "none"
    pretraining: bool = False
    ext_coef: float = 2.0
    int_coef: float = 1.0
    discount: float = 0.99
    learning_rate: float = 1e-4
    hidden_sizes: tuple[int, ...] = (256, 256)
    embedding_size: int = 512
    update_proportion: float = 0.25
    obs_clip: float = 5.0

    def __post_init__(self):
        if self.method not in METHODS:
            _bad("method", self.method, f"must be one of {METHODS}")
        if self.method == "none":  # the other fields would be silently ignored
            for field in dataclasses.fields(self):
                value = getattr(self, field.name)
                if field.name != "method" and value != field.default:
                    _bad(
                        field.name,
                        value,
                        "needs an intrinsic reward; set config.intrinsic.method='rnd'",
                    )
            return
        for field in ("ext_coef", "int_coef"):
            if getattr(self, field) < 0:
                _bad(field, getattr(self, field), "must be >= 0")
        if not 0.0 <= self.discount <= 1.0:
            _bad("discount", self.discount, "must be in [0, 1]")
        if self.learning_rate <= 0:
            _bad("learning_rate", self.learning_rate, "must be > 0")
        sizes = self.hidden_sizes
        if (
            not isinstance(sizes, tuple | list)
            or not sizes
            or not all(isinstance(s, int) and s > 0 for s in sizes)
        ):
            _bad("hidden_sizes", sizes, "must be a non-empty tuple of positive ints")
        object.__setattr__(self, "hidden_sizes", tuple(sizes))
        if self.embedding_size < 1:
            _bad("embedding_size", self.embedding_size, "must be >= 1")
        if not 0 < self.update_proportion <= 1:
            _bad("update_proportion", self.update_proportion, "must be in (0, 1]")
        if self.obs_clip <= 0:
            _bad("obs_clip", self.obs_clip, "must be > 0")
        if self.pretraining and self.int_coef == 0:
            _bad("int_coef", 0.0, "with pretraining=True leaves nothing to learn from; set it > 0")
        if self.ext_coef == 0 and self.int_coef == 0:
            _bad("ext_coef", 0.0, "and config.intrinsic.int_coef=0 leave the policy no advantage")

    @property
    def enabled(self) -> bool:
        return self.method != "none"

    @property
    def advantage_weights(self) -> tuple[float, float]:
        """(extrinsic, intrinsic) weights of the policy's advantage. In pre-training the env's
        reward is hidden, so its advantage (its head's noise, until the head learns 0) weighs
        nothing."""
        return (0.0 if self.pretraining else self.ext_coef, self.int_coef)
