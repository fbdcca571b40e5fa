"""The algorithm interface: what the runtime and trainer need, and nothing algorithm-specific.

An algorithm is a typed config plus `make(config, network_config, env_spec, num_updates)`
returning an `Algorithm` of pure, jittable functions. The runtime jits `act` on each actor device
and `update` on the learner mesh; it stores whatever `act` returns in `Rollout.agent_extras`
without looking inside.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

import jax

from jaxrl_dist.types import PyTree, Rollout


class LearnerState(NamedTuple):
    """Everything the learner carries between updates (checkpointed whole).

    Attributes:
      params: network parameters (published to the actors after each update).
      opt_state: optimizer state; its step count drives learning-rate schedules.
      rng: `[2]` uint32 PRNG key for updates that sample (minibatch shuffles, ...).
      update_step: `[]` int32 number of updates applied.
      hparams: `{name: [] float32}` the hyperparameters that may change while the run goes on
        (`Algorithm.hyperparams`). The update reads them from here, traced, so a change needs no
        recompile, and a resume continues with the values the run had.
    """

    params: PyTree
    opt_state: PyTree
    rng: jax.Array
    update_step: jax.Array
    hparams: dict[str, jax.Array]


Metrics = dict[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """Pure functions an algorithm provides.

    Attributes:
      init: `init(key) -> LearnerState`.
      act: `act(params, obs [B, ...], key) -> (action [B, ...], extras {name: [B, ...]})`, the
        behaviour policy the actors run; `extras` are stored in the rollout (e.g. logits).
      greedy_act: `greedy_act(params, obs [B, ...]) -> action [B, ...]` for evaluation.
      update: `update(state, rollout [T+1, B]) -> (state, metrics)`; metrics are scalars.
      env_action: `env_action(action [B, ...]) -> [B, ...]`, what is sent to the environment for
        an action the policy chose (e.g. a Gaussian sample squashed or clipped to the bounds);
        the rollout stores the policy's action. Identity by default.
      hyperparams: names of the algorithm config's fields that `LearnerState.hparams` carries
        and a run may change while it goes on (learning rate, loss coefficients, clip ranges).
    """

    init: Callable[[jax.Array], LearnerState]
    act: Callable[[PyTree, jax.Array, jax.Array], tuple[jax.Array, dict[str, jax.Array]]]
    greedy_act: Callable[[PyTree, jax.Array], jax.Array]
    update: Callable[[LearnerState, Rollout], tuple[LearnerState, Metrics]]
    env_action: Callable[[jax.Array], jax.Array] = lambda action: action
    hyperparams: tuple[str, ...] = ()


def bad_algo_field(config: Any, field: str, why: str) -> NoReturn:
    """Raises the one-line error for an algorithm config field (from `__post_init__`)."""
    raise ValueError(
        f"config.algo.{field}={getattr(config, field)!r} {why}; "
        f"fix it with --config.algo.{field}=..."
    )


def _no_check(algo_config: Any, train_config: Any) -> str | None:
    return None


class AlgorithmEntry(NamedTuple):
    """A registry entry: the config class, the factory, and a check of the algorithm's config
    against the run's (one-line problem or None), run before anything is written."""

    config_cls: type
    make: Callable[..., Algorithm]
    check: Callable[[Any, Any], str | None] = _no_check
