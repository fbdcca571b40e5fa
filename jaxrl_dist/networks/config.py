"""`NetworkConfig`: what `config.network` says of an agent's network (its torso, core and heads,
the shipped ones or the user's by name), checked field by field at construction."""

from __future__ import annotations

import dataclasses
import numbers

import jax.numpy as jnp

from jaxrl_dist.defaults import changed_field
from jaxrl_dist.networks.cores import CORES, core_factory
from jaxrl_dist.networks.heads import SHIPPED_HEADS, head_factory
from jaxrl_dist.networks.torsos import ACTIVATIONS, SHIPPED_TORSOS, torso_factory

TORSOS = ("auto", *SHIPPED_TORSOS)
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
# Nature CNN uses VALID convs: 8/4 -> 4/2 -> 3/1 needs H, W >= 36 to leave a 1x1 map.
NATURE_CNN_MIN_SIZE = 36


def _not_one_of(field: str, value: object, allowed: tuple) -> ValueError:
    return ValueError(
        f"network.{field}={value!r} is not one of {allowed}; "
        f"set config.network.{field} to one of them"
    )


def is_positive_int(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x > 0


CORE_SIZE = 128  # the recurrent core's default width
# Fields only a Gaussian policy head reads (continuous actions).
CONTINUOUS_FIELDS = ("state_dependent_std", "log_std_init", "tanh_squash")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Network choice, validated on construction.

    Attributes:
      torso: "auto" | "mlp" | "nature_cnn" | "impala_resnet", or a torso of the user's own:
        "MODULE:FACTORY" (imported) or a name given to `register_torso` (`networks/torsos.py`).
        "auto" picks "mlp" for rank-1 observations and "impala_resnet" for `[C, H, W]` (uint8)
        frames.
      hidden_sizes: MLP torso layer widths (ignored by the image torsos).
      activation: "tanh" | "relu", the MLP torso's activation.
      dtype: "float32" | "bfloat16" torso compute dtype. Params stay float32 and the heads
        compute in float32, so outputs are float32 either way.
      shared_torso: one torso feeds both heads (IMPALA's design). False gives the value head a
        torso of its own, so value-loss gradients cannot disturb the policy's features
        (separate actor and critic, as in Huang et al. 2022's PPO for vector observations).
      state_dependent_std: continuous actions: log-std from the features instead of one learned
        vector.
      log_std_init: continuous actions: the initial log-std.
      tanh_squash: continuous actions: the env action is tanh of the Gaussian sample, mapped to
        the action bounds (else the sample is clipped to them).
      normalize_obs: normalise observations by running mean/variance kept with the params (and
        so checkpointed), updated by the learner from each batch.
      core: "none" | "lstm" | "gru", a recurrent core between the torso and the heads
        (`networks/cores.py`): the policy remembers within an episode. With
        `shared_torso=False` the value head has a torso and a core of its own. Or a recurrent
        cell of the user's own: "MODULE:FACTORY" or a name given to `register_core`.
      core_size: the core's state width (a user's cell is told it: `CoreSpec.core_size`).
      layer_norm: a LayerNorm before each of the shipped torsos' Dense activations (the MLP's
        every layer, the image torsos' last), as PQN's networks; a user's torso is told it
        (`TorsoSpec.layer_norm`).
      head: "default" (the algorithm's own output layers) or heads of the user's own:
        "MODULE:FACTORY" or a name given to `register_head` (`networks/heads.py`), built once
        per head of the agent (policy, value, Q).
    """

    torso: str = "auto"
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    dtype: str = "float32"
    shared_torso: bool = True
    state_dependent_std: bool = False
    log_std_init: float = 0.0
    tanh_squash: bool = False
    normalize_obs: bool = False
    core: str = "none"
    core_size: int = CORE_SIZE
    layer_norm: bool = False
    head: str = "default"

    def __post_init__(self) -> None:
        if not isinstance(self.torso, str):
            raise _not_one_of("torso", self.torso, TORSOS)
        if self.torso not in TORSOS:
            torso_factory(self.torso)  # ValueError (one line) if there is none to build
        if not isinstance(self.layer_norm, bool):
            raise ValueError(
                f"network.layer_norm={self.layer_norm!r} is not a bool; set "
                "config.network.layer_norm to True or False"
            )
        if not isinstance(self.head, str):
            raise _not_one_of("head", self.head, SHIPPED_HEADS)
        if self.head not in SHIPPED_HEADS:
            head_factory(self.head)  # ValueError (one line) if there is none to build
        if not isinstance(self.core, str):
            raise _not_one_of("core", self.core, CORES)
        if self.core not in CORES:
            core_factory(self.core)  # ValueError (one line) if there is none to build
        if not is_positive_int(self.core_size):
            raise ValueError(
                f"network.core_size={self.core_size!r} is not a positive int; "
                "set config.network.core_size to e.g. 128"
            )
        if self.core == "none" and self.core_size != CORE_SIZE:  # nothing would read it
            raise ValueError(
                f"network.core_size={self.core_size!r} is read only with a recurrent core; set "
                f"config.network.core='lstm' (or 'gru', or a cell of yours), or leave it at "
                f"{CORE_SIZE}"
            )

        if self.activation not in ACTIVATIONS:
            raise _not_one_of("activation", self.activation, tuple(ACTIVATIONS))
        if self.dtype not in DTYPES:
            raise _not_one_of("dtype", self.dtype, tuple(DTYPES))
        sizes = self.hidden_sizes
        if not isinstance(sizes, tuple | list) or not sizes or not all(map(is_positive_int, sizes)):
            raise ValueError(
                f"network.hidden_sizes={sizes!r} is not a non-empty tuple of positive ints; "
                "set config.network.hidden_sizes to e.g. (64, 64)"
            )
        object.__setattr__(self, "hidden_sizes", tuple(sizes))  # lists from CLI -> hashable

    def unread_problem(self, unread: tuple[str, ...], why: str) -> str | None:
        """One line naming the first of fields `unread` (which this run's network does not read:
        `why`) set away from its default, or None."""
        changed = changed_field(self, unread)
        if changed is None:
            return None
        name, value, default = changed
        return f"config.network.{name}={value!r} is not read: {why}; leave it at {default!r}"

    @property
    def compute_dtype(self) -> jnp.dtype:
        return DTYPES[self.dtype]

    @property
    def recurrent(self) -> bool:
        return self.core != "none"

    @property
    def user_head(self) -> bool:
        """The heads are the user's (`head`), not the algorithm's."""
        return self.head not in SHIPPED_HEADS
