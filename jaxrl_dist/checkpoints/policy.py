"""A trained policy from a checkpoint, without the training script or its config file.

Every checkpoint's `meta["policy"]` (from `describe_policy`) holds what acting needs: the
algorithm's name, its config and the network config, the env spec, the env id and options, and
a format version. `load_policy(run_dir, "latest" | "best" | step)` rebuilds the algorithm from it,
restores the params of that step (for "best", the params the run's best evaluation played, in
`checkpoints/best/`) and returns a `Policy` whose `act` maps a batch of observations to env
actions. Checkpoints written before `meta["policy"]` existed are read through their
`meta["config"]` and EnvPool's spec of the env.

Errors are `FileNotFoundError` or `ValueError` with one line naming what is wrong and the fix.
Finding the step to read is `checkpoints/steps.py`'s.
"""

from __future__ import annotations

import json
from typing import Any

import jax
import numpy as np

from jaxrl_dist.agents.base import Agent, env_policies, evaluation_state
from jaxrl_dist.checkpoints.description import (  # re-exported: the names users import
    POLICY_FORMAT,
    agent_meta,
    build_agent,
    describe_policy,
    fit_params,
    policy_description,
    spec_from_json,
)
from jaxrl_dist.checkpoints.steps import (  # re-exported: scripts import them from here
    STEP_CHOICES,
    StepGoneError,
    checkpoint_dir,
    list_steps,
    locate_step,
    read_meta,
    read_step,
    resolve_step,
)
from jaxrl_dist.checkpoints.store import restore_params
from jaxrl_dist.config import TrainConfig, jsonable
from jaxrl_dist.config.moved import move_flat_fields
from jaxrl_dist.config.train import eval_env_of
from jaxrl_dist.envs import check_env, env_spec
from jaxrl_dist.envs.jax_envs import jax_env_problem, make_jax_env
from jaxrl_dist.envs.jax_game_parts import PGX_GAMES
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW, split_observation


class Policy:
    """The params of one checkpoint step and the agent that acts with them.

    Attributes:
      params: the network params, on the default device.
      agent: the `Agent` rebuilt from `description` (its actor half acts).
      description: the `describe_policy` dict it was built from.
      step: the checkpoint step (the run's update count when it was saved).
      meta: the checkpoint's meta (counters such as `env_steps`, the run config).
      directory: the checkpoint dir it was read from (None if built in memory).
      name: which agent of a run of several it is (`config.agents`), else None.
    """

    def __init__(
        self,
        params: Any,
        agent: Agent,
        description: dict[str, Any],
        step: int,
        *,
        meta: dict[str, Any] | None = None,
        directory: str | None = None,
        name: str | None = None,
    ):
        self.params = jax.device_put(params)  # once, not at every act call
        self.name = name
        self.agent = agent
        self.description = description
        self.step = step
        self.meta = meta or {}
        self.directory = directory
        self.spec = spec_from_json(description["env_spec"])
        self._greedy, self._sample = env_policies(agent.actor)
        self._init_state = jax.jit(
            lambda key, rows: evaluation_state(agent.actor, rows, key), static_argnums=1
        )

    @property
    def env_id(self) -> str:
        return self.description["env_id"]

    @property
    def env_kwargs(self) -> dict[str, Any]:
        return dict(self.description["env_kwargs"])

    @property
    def run_eval_env(self) -> tuple[str, dict[str, Any]]:
        """The env the run evaluated on (`config.eval_env`; its training env for a run that
        kept no config)."""
        run = self.meta.get("config") or {}
        return eval_env_of(
            self.env_id, self.env_kwargs, run.get("eval_env_id", ""), run.get("eval_env_kwargs")
        )

    def eval_env(
        self, env_id: str | None = None, env_kwargs: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The env to evaluate on, chosen from `env_id`/`env_kwargs` as `config.eval_env`
        chooses (`eval_env_of`), else the run's own (`run_eval_env`); ValueError (one line) if
        the env is refused or its spaces are not this policy's."""
        given = bool(env_id) or env_kwargs is not None
        if given:
            env = eval_env_of(self.env_id, self.env_kwargs, env_id or "", env_kwargs)
        else:
            env = self.run_eval_env
        flag = "--eval_env_id" if given else "config.eval_env_id"
        problem = check_env(*env)  # the training env too: a Python env's module may be missing
        spec_of = env_spec
        if plays_in_jax(*env, problem):
            problem, spec_of = None, lambda *e: make_jax_env(*e).spec
        if problem:
            raise ValueError(problem if env[0] == self.env_id else f"{flag}: {problem}")
        if env != (self.env_id, self.env_kwargs) and spec_of(*env) != self.spec:
            raise ValueError(
                f"{flag}: {env[0]} with {env[1]} has other spaces than the policy's env "
                f"{self.env_id}; evaluate on an env with the same spaces"
            )
        return env

    @property
    def run_slots(self) -> tuple[str, ...]:
        """The agent playing each of an env's agents in the run this policy is an agent of
        (`config.sebulba.agent_slots` of a simultaneous task shared by several agents), else ()."""
        # A run saved before the sections named it at the top (`config/moved.py`).
        run = move_flat_fields(self.meta.get("config") or {}, tell=False)
        slots = tuple((run.get("sebulba") or {}).get("agent_slots") or ())
        return slots if self.name is not None and self.name in slots else ()

    @property
    def eval_opponent(self) -> str:
        """Who the run evaluated against (a turn-based game's `config.seats.eval_opponent`)."""
        return self.description.get("seats", {}).get("eval_opponent", "random")

    @property
    def recurrent(self) -> bool:
        """Whether the policy carries a memory from step to step (a recurrent core): then
        act with `act_with_state` and a state from `initial_state`."""
        return self.description["network"].get("core", "none") != "none"

    def initial_state(self, batch: int, key: jax.Array | None = None) -> Any:
        """A fresh per-env state for `batch` envs (the memory an episode starts from, and the
        key stream of sampled actions; `key` defaults to `PRNGKey(0)`)."""
        key = jax.random.PRNGKey(0) if key is None else key
        return self._init_state(key, batch)

    def act(
        self,
        obs: Any,
        greedy: bool = True,
        key: jax.Array | None = None,
        action_mask: Any = None,
    ) -> np.ndarray:
        """Env actions for a batch of observations, each acted on alone (a memoryless policy;
        a recurrent one acts with `act_with_state`).

        Args:
          obs: `[B, *obs_shape]` observations as the env returns them, or a masked observation
            `{"agent_view": [B, *obs_shape], "action_mask": [B, A]}` (`jaxrl_dist.types`).
          greedy: the policy's mode (True) or a sample from it (False, needs `key`).
          key: a PRNG key for sampled actions.
          action_mask: `[B, A]` bool legal actions (a board game's), instead of a masked `obs`:
            an illegal action is never returned.

        Returns:
          `[B]` int actions (discrete) or `[B, action_dim]` floats within the env's bounds.
        """
        if self.recurrent:
            raise ValueError(
                f"this policy is recurrent (network.core={self.description['network']['core']!r})"
                ": act with policy.act_with_state(obs, state, first) from policy.initial_state(B)"
            )
        if not greedy and key is None:
            raise ValueError("sampled actions need a key: act(obs, greedy=False, key=PRNGKey(0))")
        obs = self._checked(obs, action_mask)
        rows = len(jax.tree.leaves(obs)[0])
        state = self.initial_state(rows, key)
        return self.act_with_state(obs, state, None, greedy)[0]

    def act_with_state(
        self,
        obs: Any,
        state: Any,
        first: Any = None,
        greedy: bool = True,
        action_mask: Any = None,
    ) -> tuple[np.ndarray, Any]:
        """Env actions for a batch of observations and the state to pass with the next ones.

        Args:
          obs, action_mask: as for `act`.
          state: from `initial_state(B)`, or the state the last call returned.
          first: `[B]` bool, the observations that start an episode (the first after a
            reset): the memory is reset there. None: no resets.
          greedy: the policy's mode (True) or a sample from it (False, with the state's keys).

        Returns:
          (`[B]` or `[B, action_dim]` actions as `act` returns them, the next state).
        """
        obs = self._checked(obs, action_mask)
        rows = len(jax.tree.leaves(obs)[0])
        first = np.zeros(rows, bool) if first is None else np.asarray(first, bool)
        if first.shape != (rows,):
            raise ValueError(f"first of shape {list(first.shape)}: give [B] bool with B = {rows}")
        policy = self._greedy if greedy else self._sample
        action, state = policy(self.params, obs, state, first)
        return np.asarray(action), state

    def _checked(self, obs: Any, action_mask: Any) -> Any:
        """`obs` as the agent reads it (a masked observation with `action_mask`), checked."""
        view, mask = split_observation(obs)
        mask = mask if action_mask is None else action_mask
        view = np.asarray(view)
        if view.shape[1:] != self.spec.obs_shape:
            raise ValueError(
                f"obs of shape {list(view.shape)} do not fit {self.env_id}: give a batch "
                f"[B, {', '.join(map(str, self.spec.obs_shape))}]"
            )
        if mask is None:
            return view
        mask = np.asarray(mask, bool)
        if mask.shape != (len(view), self.spec.num_actions):
            raise ValueError(
                f"action_mask of shape {list(mask.shape)}: give "
                f"[B, {self.spec.num_actions}] with B = {len(view)}"
            )
        return {AGENT_VIEW: view, ACTION_MASK: mask}


def load_policy(path: str, step: str | int = "latest", agent: str | None = None) -> Policy:
    """The policy of checkpoint `step` ("latest", "best" or a number) of the run at `path`
    (its work dir or checkpoints dir); of its agent `agent` where it had several
    (`config.agents`)."""
    return load_policy_at(*locate_step(path, step, agent), agent)


def policy_from_config(params: Any, config: TrainConfig) -> Policy:
    """The policy of `params` (the learner's acting params, as a checkpoint or `Policy.params`
    holds them) trained with `config`, built as `load_policy` builds a checkpoint's (step 0,
    no directory); ValueError (one line) when they do not fit its network."""
    if config.agents:
        raise ValueError(
            "config has several agents (config.agents): evaluate the run's directory with "
            "agent=NAME, or load_policy(run, agent=NAME)"
        )
    description = describe_policy(config, env_spec(config.env_id, config.env_kwargs))
    description = json.loads(json.dumps(description))  # as a checkpoint's meta holds it
    built = build_agent(description)
    params = fit_params(params, built, "the given params", "config.network")
    meta = {"config": jsonable(config)}  # its seed and evaluation env
    return Policy(params, built, description, 0, meta=meta)


def load_policy_at(directory: str, step: int, agent: str | None = None) -> Policy:
    """The policy of a listed `step` of a checkpoint dir (of agent `agent` where the run had
    several). Raises StepGoneError if the step was deleted since it was listed (a run keeps
    only its newest checkpoints), ValueError (one line) for an agent it does not have."""
    meta = read_meta(directory, step)
    description = policy_description(agent_meta(meta, step, agent), step)
    built = build_agent(description)
    params = read_step(
        directory, step, "the params", lambda: restore_params(directory, step, agent)
    )
    params = fit_params(params, built, f"the params of step {step}")
    return Policy(params, built, description, step, meta=meta, directory=directory, name=agent)


def plays_in_jax(env_id: str, env_kwargs: dict[str, Any], problem: str | None) -> bool:
    """Whether an evaluation plays `env_id` in JAX: `problem` (`check_env`'s for it) says
    neither EnvPool nor a Python source has it, and it is a JAX env (a gymnax env such as
    DeepSea-bsuite, or jax:module:factory). Where both have it (CartPole-v1) the policy plays
    EnvPool's, as Sebulba evaluates; a board game's pgx twin plays on EnvPool too."""
    if problem is None or env_id in PGX_GAMES:
        return False
    return jax_env_problem(env_id, env_kwargs) is None


__all__ = [
    "POLICY_FORMAT",
    "plays_in_jax",
    "STEP_CHOICES",
    "Policy",
    "StepGoneError",
    "build_agent",
    "checkpoint_dir",
    "describe_policy",
    "list_steps",
    "load_policy",
    "load_policy_at",
    "locate_step",
    "policy_description",
    "policy_from_config",
    "read_meta",
    "resolve_step",
]
