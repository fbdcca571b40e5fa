"""PettingZoo envs (`pettingzoo:module:factory`) as EnvPool's games and multi-agent tasks.

- **AEC** (turn-based): `AecStepper` returns what an EnvPool game returns per game: every
  seat's observation `[P, ...]` (seat `s` is `possible_agents[s]`), every seat's reward of the
  step `[P]`, the game's end, and `extra = {"current_player", "legal_action_mask"}`; one action
  per step, the player to move's. `process_pool.ProcessPool` stacks games as EnvPool does
  (`info["players"]`), so `envs/seats.py` seats them: self-play, pools, masks and the scripted
  random player work unchanged. Agents that are done before the game ends are stepped with
  `None`, as PettingZoo asks.
- **Parallel** (simultaneous): `ParallelStepper` returns `{"agents_view": [agents, ...],
  "action_mask": [agents, A]}` and per-agent rewards `[agents]`; one action per agent: the
  layout of EnvPool's multi-agent tasks, which `envs/agents.py` turns into one stream per
  (env, agent) (`config.sebulba.agents_per_env`).

PettingZoo classic's observation `{"observation", "action_mask"}` is understood: the view is
`"observation"`, the legal moves `"action_mask"`; other envs' observations are the view and
every action is legal. Every agent must have the same spaces; an AEC game's actions Discrete,
a Parallel env's Discrete or a Box of rank 1 (its rows then hold a mask of width 0). A Parallel
env's agent that leaves before the episode's end keeps its last observation, with reward 0,
until the episode ends. The episode ends when every agent
is done; `terminated` if any agent terminated, else `truncated`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrl_dist.envs.spaces import SpaceAdapter, checked, spaces_problem

AGENTS_VIEW = "agents_view"  # envs/agents.py's key, written here without importing JAX
MASK = "action_mask"


def is_parallel(env: Any) -> bool:
    from pettingzoo.utils.env import ParallelEnv

    return isinstance(env, ParallelEnv)


def _split_space(space: Any) -> tuple[Any, bool]:
    """(the view's space, whether observations are classic's {"observation", "action_mask"})."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict) and {"observation", MASK} <= set(space.spaces):
        return space["observation"], True
    return space, False


def pettingzoo_problem(env: Any) -> str | None:
    """Why a PettingZoo env cannot be learned on (one phrase), or None."""
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if not isinstance(env, AECEnv | ParallelEnv):
        return f"made a {type(env).__name__}, not a PettingZoo AECEnv or ParallelEnv"
    agents = list(env.possible_agents)
    if len(agents) < 2:
        return f"has {len(agents)} agent(s); a single-agent env runs as gymnasium:ID"
    first = (env.observation_space(agents[0]), env.action_space(agents[0]))
    for agent in agents[1:]:
        if (env.observation_space(agent), env.action_space(agent)) != first:
            return (
                f"gives agent {agent!r} other spaces than {agents[0]!r}; every agent needs the same"
            )
    view, _ = _split_space(first[0])
    if not hasattr(first[1], "n") and not is_parallel(env):
        return (
            f"has {type(first[1]).__name__} actions; a turn-based (AEC) PettingZoo game needs "
            "Discrete ones (its seats take legal-move masks); a Parallel env may have a Box"
        )
    return spaces_problem(view, first[1])


def pettingzoo_spec(env: Any) -> Any:
    """The `EnvSpec` of one seat's (AEC) or one agent's (Parallel) view."""
    agents = list(env.possible_agents)
    view, _ = _split_space(env.observation_space(agents[0]))
    spec = SpaceAdapter(view, env.action_space(agents[0])).spec()
    if is_parallel(env):  # one stream per agent: its flattened view and one-hot id (agents.py)
        row = (int(np.prod(spec.obs_shape)) + len(agents),)
        return spec._replace(obs_shape=row, obs_dtype=np.dtype(np.float32), num_agents=len(agents))
    return spec._replace(num_players=len(agents))


class _Views:
    """Every agent's observation as the agent's arrays, and its legal moves."""

    def __init__(self, env: Any):
        self.env = env
        self.agents = list(env.possible_agents)
        view, self.classic = _split_space(env.observation_space(self.agents[0]))
        self.adapter = SpaceAdapter(view, env.action_space(self.agents[0]))
        self.num_actions = int(getattr(env.action_space(self.agents[0]), "n", 0))

    def view(self, raw: Any) -> np.ndarray:
        return checked(self.adapter, raw["observation"] if self.classic else raw)

    def mask(self, raw: Any) -> np.ndarray:
        if self.classic:
            return np.asarray(raw[MASK], bool)
        return np.ones(self.num_actions, bool)


class AecStepper(_Views):
    """A turn-based PettingZoo game (module doc)."""

    players = property(lambda self: len(self.agents))

    def _observe(self) -> tuple[np.ndarray, dict]:
        env = self.env
        # Agents that left the game keep their last observation (PettingZoo does not promise
        # to observe them).
        self._last.update({agent: env.observe(agent) for agent in env.agents})
        raws = [self._last[agent] for agent in self.agents]
        to_move = env.agent_selection
        extra = {
            "current_player": self.agents.index(to_move),
            "legal_action_mask": self.mask(raws[self.agents.index(to_move)]),
        }
        return np.stack([self.view(raw) for raw in raws]), extra

    def reset(self, seed: int | None) -> tuple:
        self.env.reset(seed=seed)
        self._last = {}
        obs, extra = self._observe()
        return obs, np.zeros(len(self.agents), np.float32), False, False, extra

    def _done(self, agent: str) -> bool:
        env = self.env
        return bool(env.terminations.get(agent, False) or env.truncations.get(agent, False))

    def step(self, action: Any) -> tuple:
        env = self.env
        reward = np.zeros(len(self.agents), np.float32)
        env.step(self.adapter.env_action(action))
        terminated = False  # seen on the way: an env may drop the agents that are done
        while True:
            for s, agent in enumerate(self.agents):
                reward[s] += float(env.rewards.get(agent, 0.0))
            terminated = terminated or any(env.terminations.values())
            over = not env.agents or all(self._done(a) for a in env.agents)
            if over or not self._done(env.agent_selection):
                break
            env.step(None)  # an agent done before the game's end: PettingZoo's dead step
        terminated = over and terminated
        obs, extra = self._observe()
        if over:
            extra["legal_action_mask"] = np.ones_like(extra["legal_action_mask"])
        return obs, reward, bool(terminated), bool(over and not terminated), extra


class ParallelStepper(_Views):
    """A simultaneous-move PettingZoo env (module doc)."""

    players = 1

    def _rows(self, observations: dict) -> dict[str, np.ndarray]:
        # An agent that left before the episode's end has no observation: its last one stands.
        self._last = {**getattr(self, "_last", {}), **observations}
        raws = [self._last[agent] for agent in self.agents]
        views = np.stack([self.view(raw) for raw in raws])
        return {AGENTS_VIEW: views, MASK: np.stack([self.mask(raw) for raw in raws])}

    def reset(self, seed: int | None) -> tuple:
        self._last = {}
        observations, _ = self.env.reset(seed=seed)
        return self._rows(observations), np.zeros(len(self.agents), np.float32), False, False, None

    def step(self, action: Any) -> tuple:
        actions = {a: self.adapter.env_action(x) for a, x in zip(self.agents, action, strict=True)}
        actions = {a: x for a, x in actions.items() if a in self.env.agents}
        observations, rewards, terminations, truncations, _ = self.env.step(actions)
        reward = np.array([rewards.get(a, 0.0) for a in self.agents], np.float32)
        done = [terminations.get(a, False) or truncations.get(a, False) for a in self.agents]
        over = not self.env.agents or all(done)
        terminated = over and any(terminations.values())
        truncated = over and not terminated
        return self._rows(observations), reward, bool(terminated), bool(truncated), None


def pettingzoo_stepper(env: Any) -> Any:
    return ParallelStepper(env) if is_parallel(env) else AecStepper(env)
