"""The agent interface, in two halves, and nothing algorithm-specific.

An agent is a typed config plus `make(config, network_config, env_spec, run_shape) -> Agent`:

- the **actor half** (`ActorCore`, after Acme's actor core) is pure and jitted wherever it runs,
  on an actor's own device or inside a central inference server. It keeps *per-env* actor state
  (an RNG key, later an epsilon from a ladder or a recurrent state), initialised from the
  actor's identity, so a server can batch the requests of many actors and keep each one's state;
- the **learner half** (`LearnerCore`) owns its state, any pytree (params, optimizer state,
  target params, counters), updates it from a batch, says which params go to the actors and how
  its state is sharded over the learner mesh.

The registry entry (`AgentEntry.data`) names the data seam that feeds the learner
(`jaxrl_dist.data`): the on-policy queue or a replay. The runtime stores whatever `act` returns
as extras in the rollout without looking inside.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from jaxrl_dist.defaults import changed_field
from jaxrl_dist.schedules import scheduled_hparams
from jaxrl_dist.types import PyTree, Rollout

Metrics = dict[str, jax.Array]


class ActorIdentity(NamedTuple):
    """Who an actor is: its global index over all processes' actor threads, and their count
    (an Ape-X epsilon ladder reads both; later a seat)."""

    index: int
    count: int


class RunShape(NamedTuple):
    """What schedules are defined over: the run's env steps, and how many env steps the data
    seam inserts per update on average (batch x unroll for the on-policy queue; for a replay,
    that divided by the samples-per-insert ratio)."""

    total_env_steps: int
    env_steps_per_update: float

    @property
    def num_updates(self) -> int:
        return max(1, math.ceil(self.total_env_steps / self.env_steps_per_update))


@dataclasses.dataclass(frozen=True)
class ActorCore:
    """The actor half: pure functions, jitted by whoever runs them.

    Attributes:
      init_state: `init_state(identity, num_envs, key) -> state`, every leaf `[num_envs, ...]`:
        one row per env, so rows can be gathered by env id and batched across actors.
      act: `act(params, obs [B, ...], state [B, ...]) -> (action [B, ...], extras {name:
        [B, ...]}, state [B, ...])`, the behaviour policy; extras travel in the rollout.
      greedy_act: `greedy_act(params, obs [B, ...], state [B, ...]) -> (action [B, ...],
        state)` for evaluation (a recurrent policy carries its memory in `state`).
      env_action: `env_action(action [B, ...]) -> [B, ...]`, what the env receives for a policy
        action (a Gaussian sample clipped or squashed to the bounds); identity by default.
      start_episodes: `start_episodes(state, first [B] bool) -> state`, called by the runtime
        before every `act` with the envs whose observation starts an episode (the first after
        a reset): a recurrent policy resets its memory there. Identity by default.
      core_state: `core_state(state) -> [B, ...]` what the learner unrolls a recurrent core
        from; the runtime stores it in the rollout at each segment's `obs[0]`, after
        `start_episodes` (`Rollout.core_state`). `{}` by default (a memoryless policy).
      with_core_state: `with_core_state(state, core) -> state` holding `core` (what
        `core_state` gives) in place of its own: deterministic mode re-keys its actors every
        unroll and keeps their memories, and a resume puts back the memories it saved.
        Identity by default (a memoryless policy).
    """

    init_state: Callable[[ActorIdentity, int, jax.Array], PyTree]
    act: Callable[[PyTree, jax.Array, PyTree], tuple[jax.Array, dict[str, jax.Array], PyTree]]
    greedy_act: Callable[[PyTree, jax.Array, PyTree], tuple[jax.Array, PyTree]]
    env_action: Callable[[jax.Array], jax.Array] = lambda action: action
    start_episodes: Callable[[PyTree, jax.Array], PyTree] = lambda state, first: state
    core_state: Callable[[PyTree], PyTree] = lambda state: {}
    with_core_state: Callable[[PyTree, PyTree], PyTree] = lambda state, core: state


def evaluation_state(core: ActorCore, rows: int, key: jax.Array) -> PyTree:
    """A fresh per-env actor state for `rows` envs of an evaluation (actor 0 of 1)."""
    return core.init_state(ActorIdentity(0, 1), rows, key)


def env_policies(core: ActorCore) -> tuple[Callable, Callable]:
    """The jitted `greedy(params, obs [B, ...], state, first [B])` and `sample(params, obs,
    state, first)`, each returning (the env actions `[B, ...]` (`core.env_action` of the
    policy's choice), the next state); `first` marks the envs whose observation starts an
    episode. The state comes from `evaluation_state` and is carried from step to step."""

    return tuple(jax.jit(policy) for policy in _policies(core))


def _policies(core: ActorCore) -> tuple[Callable, Callable]:
    def greedy(params, obs, state, first):
        action, state = core.greedy_act(params, obs, core.start_episodes(state, first))
        return core.env_action(action), state

    def sample(params, obs, state, first):
        action, _, state = core.act(params, obs, core.start_episodes(state, first))
        return core.env_action(action), state

    return greedy, sample


def act_by_rows(
    core: ActorCore, params: PyTree, obs: Any, state: PyTree, greedy: jax.Array
) -> tuple[jax.Array, dict[str, jax.Array], PyTree]:
    """`core.act`, except that the rows where `greedy [B]` act by the policy's mode (Q-agents:
    epsilon 0) with zeros for their extras: a greedy seat among exploring ones. Both acts run
    on every row and each row keeps its own."""
    action, extras, sampled = core.act(params, obs, state)
    mode, after = core.greedy_act(params, obs, state)

    def pick(on_greedy: jax.Array, otherwise: jax.Array) -> jax.Array:
        rows = greedy.reshape(-1, *(1,) * (otherwise.ndim - 1))
        return jnp.where(rows, on_greedy, otherwise)

    extras = jax.tree.map(lambda e: pick(jnp.zeros_like(e), e), extras)
    return pick(mode, action), extras, jax.tree.map(pick, after, sampled)


def row_policies(core: ActorCore) -> tuple[Callable, Callable]:
    """`env_policies` acting for some rows of a larger per-row state: the jitted `greedy(params,
    obs [N, ...], state [R, ...], rows [N], first [N])` and `sample(...)`, each returning (the
    env actions `[N, ...]`, the state with rows `rows` advanced). Row `rows[i]` acts on
    `obs[i]` from its own memory (afresh where `first[i]`), so one state can serve many games
    or streams a few at a time; a padding row may repeat (its results are the caller's to
    drop). The state is donated."""

    def at_rows(policy: Callable) -> Callable:
        def step(params, obs, state, rows, first):
            picked = jax.tree.map(lambda s: s[rows], state)
            action, picked = policy(params, obs, picked, first)
            return action, jax.tree.map(lambda s, new: s.at[rows].set(new), state, picked)

        return jax.jit(step, donate_argnums=2)

    return tuple(at_rows(policy) for policy in _policies(core))


def _params(state: Any) -> PyTree:
    return state.params


def _with_params(state: Any, params: PyTree) -> Any:
    return state._replace(params=params)


def _hparams(state: Any) -> dict[str, jax.Array]:
    return getattr(state, "hparams", {})


def _with_hparams(state: Any, hparams: dict[str, jax.Array]) -> Any:
    return state._replace(hparams=hparams)


def _update_count(state: Any) -> jax.Array:
    return state.update_step


def replicated_state(mesh: jax.sharding.Mesh, abstract_state: PyTree) -> PyTree:
    """The default layout of a learner state: a full copy on every learner device."""
    return NamedSharding(mesh, PartitionSpec())


@dataclasses.dataclass(frozen=True)
class LearnerCore:
    """The learner half: pure functions the runtime jits on the learner mesh.

    Attributes:
      init: `init(key) -> state`, any pytree.
      update: `update(state, batch) -> (state, metrics)`, or `(state, metrics, priorities [B])`
        with `priorities=True` (a prioritised replay takes them back); `batch` is a `[T + 1, B]`
        `Rollout` from the data seam; metrics are scalars.
      actor_params: the params the actors and evaluation get, from the state.
      with_params: the state with other params (a warm start).
      hparams / with_hparams: the run-time hyperparameters in the state (`{name: [] float32}`,
        read traced by `update`, so a change needs no recompile) and a state with new ones.
      update_count: `update_count(state) -> [] int` updates applied (what schedules read).
      state_sharding: `state_sharding(mesh, abstract_state) -> shardings` (a sharding or a
        pytree of them); replicated by default.
      priorities: whether `update` returns priorities.
    """

    init: Callable[[jax.Array], PyTree]
    update: Callable[[PyTree, Rollout], tuple]
    actor_params: Callable[[PyTree], PyTree] = _params
    with_params: Callable[[PyTree, PyTree], PyTree] = _with_params
    hparams: Callable[[PyTree], dict[str, jax.Array]] = _hparams
    with_hparams: Callable[[PyTree, dict[str, jax.Array]], PyTree] = _with_hparams
    update_count: Callable[[PyTree], jax.Array] = _update_count
    state_sharding: Callable[[jax.sharding.Mesh, PyTree], Any] = replicated_state
    priorities: bool = False


@dataclasses.dataclass(frozen=True)
class Agent:
    """An agent's two halves.

    Attributes:
      actor, learner: the halves.
      hyperparams: names of the agent config's fields that a run may change while it goes on
        (they live in the learner state; see `LearnerCore.hparams`).
    """

    actor: ActorCore
    learner: LearnerCore
    hyperparams: tuple[str, ...] = ()

    def params_shapes(self) -> PyTree:
        """The acting params' shapes and dtypes (what params put into this agent must fit)."""
        state = jax.eval_shape(self.learner.init, jax.random.PRNGKey(0))
        return self.learner.actor_params(state)


class LearnerState(NamedTuple):
    """The learner state of the actor-critic agents (IMPALA, PPO); checkpointed whole.

    Attributes:
      params: network parameters (published to the actors after each update).
      opt_state: optimizer state; its step count drives learning-rate schedules.
      rng: `[2]` uint32 PRNG key for updates that sample (minibatch shuffles, ...).
      update_step: `[]` int32 number of updates applied.
      hparams: `{name: [] float32}` the hyperparameters that may change while the run goes on.
    """

    params: PyTree
    opt_state: PyTree
    rng: jax.Array
    update_step: jax.Array
    hparams: dict[str, jax.Array]


def bad_algo_field(config: Any, field: str, why: str) -> NoReturn:
    """Raises the one-line error for an agent config field (from `__post_init__`)."""
    raise ValueError(f"config.algo.{field}={getattr(config, field)!r} {why}")


def refuse_unread(config: Any, names: tuple[str, ...], read_only: str) -> None:
    """Raises the one-line error for the first of agent config fields `names` set away from its
    default, which the agent reads only `read_only` (e.g. "with optimizer='adam'")."""
    changed = changed_field(config, names)
    if changed is not None:
        name, _, default = changed
        bad_algo_field(config, name, f"is read only {read_only}; leave it at {default!r}")


def _no_check(algo_config: Any, train_config: Any) -> str | None:
    return None


class AgentEntry(NamedTuple):
    """A registry entry: the config class, the factory `make(config, network_config, env_spec,
    run_shape) -> Agent`, a check of the agent's config against the run's (one-line problem or
    None, run before anything is written), and the data seam that feeds its learner: "on_policy"
    (fresh rollouts, each learned from once), "replay" (uniform, whole segments), "prioritized"
    (n-step windows by priority) or "sequences" (whole segments by priority, R2D2); the last two
    learners return priorities (`jaxrl_dist.data`). `intrinsic`: `make` takes `intrinsic=`
    an `RND` and learns its reward with an intrinsic value head (`config.intrinsic`)."""

    config_cls: type
    make: Callable[..., Agent]
    check: Callable[[Any, Any], str | None] = _no_check
    data: str = "on_policy"
    intrinsic: bool = False


def with_schedules(core: LearnerCore, schedules: dict[str, str], num_updates: int) -> LearnerCore:
    """`core` whose update reads each scheduled run-time hyperparameter as its base value times
    its schedule at the update count (`jaxrl_dist.schedules`); the state keeps the base values
    (what a run-time change sets and a checkpoint saves). The values used are logged as
    `schedule/<name>`. No schedules: `core` itself."""
    if not schedules:
        return core
    apply = scheduled_hparams(schedules, num_updates)

    def update(state, batch):
        base = core.hparams(state)
        used = apply(base, core.update_count(state))
        new_state, metrics, *priorities = core.update(core.with_hparams(state, used), batch)
        metrics = {**metrics, **{f"schedule/{name}": used[name] for name in schedules}}
        return (core.with_hparams(new_state, base), metrics, *priorities)

    return dataclasses.replace(core, update=update)
