"""A simultaneous-move multi-agent EnvPool task seen as one stream per (env, agent): one policy
shared by every agent, the agent's id in its observation.

EnvPool's multi-agent tasks (`Jumanji/LevelBasedForaging-v0`, `Jumanji/RobotWarehouse-v0`) step
every agent of an env at once: observations `{"agents_view": [n, agents, ...], "action_mask":
[n, agents, A]}`, one action per agent (`[n, agents]` indices, or `[n, agents, D]` for a
PettingZoo Parallel env's Box, whose mask is `[n, agents, 0]`), and a reward per env (shared
by the team) or per agent. `AgentStreams` turns each (env, agent) pair into a stream numbered
`env * agents + agent`: its observation `{AGENT_VIEW: [view..., one-hot agent id] float32,
ACTION_MASK: [A]}` (`jaxrl_dist.types`), its reward (the team's, or its own), the env's end
flags; the actor answers every stream of a `recv()` in one `send()`, which steps each env with
its agents' actions together. It speaks the async pool's protocol, so `Actor`, `SegmentBuffer`
and `EpisodeTracker` handle the streams as they handle envs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrl_dist.envs.seats import LEARNER
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

AGENTS_VIEW = "agents_view"  # EnvPool's (Jumanji's) per-agent observation key


def agent_rows(obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-env observations `{"agents_view": [n, agents, ...], "action_mask": [n, agents, A]}`
    -> one row per (env, agent): `{AGENT_VIEW: [n * agents, D + agents] float32, ACTION_MASK:
    [n * agents, A] bool}`, the agent's one-hot id after its flattened view."""
    view = np.asarray(obs[AGENTS_VIEW])
    n, agents = view.shape[:2]
    flat = view.reshape(n * agents, -1).astype(np.float32)
    ids = np.tile(np.eye(agents, dtype=np.float32), (n, 1))
    mask = np.asarray(obs["action_mask"], bool).reshape(n * agents, -1)
    return {AGENT_VIEW: np.concatenate([flat, ids], axis=1), ACTION_MASK: mask}


def agent_rewards(reward: np.ndarray, agents: int, team: bool) -> np.ndarray:
    """`[n]` (shared) or `[n, agents]` (per agent) rewards -> `[n, agents]`; `team` gives every
    agent the sum over agents (a shared reward stays as it is)."""
    reward = np.asarray(reward, np.float32)
    if reward.ndim == 1:
        return np.repeat(reward[:, None], agents, axis=1)
    if team:
        return np.repeat(reward.sum(axis=1, keepdims=True), agents, axis=1)
    return reward


class AgentStreams:
    """Streams per (env, agent) over a multi-agent EnvPool (see the module docstring).

    Args:
      pool: a multi-agent EnvPool, gymnasium API, any `batch_size <= num_envs`.
      agents: agents per env.
      team_reward: with per-agent rewards, every agent gets the team's sum instead.
      slots: who plays each agent of an env (several learning agents in one run,
        `config.sebulba.agent_slots` as one agent sees it): `LEARNER` (a stream, numbered `env *
        own + k` for its k-th own slot) or a name in `players`, whose actions the adapter
        takes itself (`Player.act(rows, legal_mask, games)` on the slot's rows, `games` numbered
        `env * agents + slot`; `end_game` at each episode's end); empty: every
        agent is a stream.
      players: `{name: Player}` for the slots the learner does not play.
    """

    def __init__(
        self,
        pool: Any,
        agents: int,
        team_reward: bool = False,
        slots: tuple[str, ...] = (),
        players: dict[str, Any] | None = None,
    ):
        self._pool, self._agents, self._team = pool, agents, team_reward
        slots = tuple(slots) or (LEARNER,) * agents
        if len(slots) != agents or LEARNER not in slots:
            raise ValueError(
                f"slots must name every one of {agents} agents, the learner among them"
            )
        self._own = np.array([i for i, s in enumerate(slots) if s == LEARNER])
        self._others = {i: (players or {})[s] for i, s in enumerate(slots) if s != LEARNER}
        self._pending: np.ndarray | None = None  # the other slots' moves: `_moves`
        self._return = np.zeros((pool.config["num_envs"], agents))  # this episode's, per agent
        self.config = {**pool.config, "num_envs": pool.config["num_envs"] * len(self._own)}

    def async_reset(self) -> None:
        self._pool.async_reset()

    def recv(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict]:
        """One pool result as stream rows: `(obs, reward, terminated, truncated, info)` with
        `info["env_id"]` the stream ids, `info["elapsed_step"]` and `info["agent"]`."""
        obs, reward, terminated, truncated, info = self._pool.recv()
        a, own = self._agents, self._own
        env_id = np.asarray(info["env_id"])
        every = agent_rows(obs)  # [n * a] rows, env-major
        rewards = agent_rewards(reward, a, self._team)  # [n, a]
        ended = np.logical_or(terminated, truncated)
        self._return[env_id] += rewards
        for slot, player in self._others.items():  # the other agents move now, as the learner
            at = np.arange(len(env_id)) * a + slot
            view, mask = every[AGENT_VIEW][at], every[ACTION_MASK][at]
            # Rows `env * a + slot`: an agent playing several slots of an env keeps a memory
            # for each (a recurrent player's).
            moves = np.asarray(player.act(view, mask, env_id * a + slot))
            self._moves(moves)[env_id, slot] = moves
            for env in env_id[ended]:  # its next move starts the env's next episode
                player.end_game(int(env) * a + slot, float(self._return[env, slot]))
        self._return[env_id[ended]] = 0.0
        keep = (np.arange(len(env_id))[:, None] * a + own).reshape(-1)
        k = len(own)
        rows = {
            "env_id": (env_id[:, None] * k + np.arange(k)).reshape(-1).astype(np.int32),
            "elapsed_step": np.repeat(np.asarray(info["elapsed_step"]), k),
            "agent": np.tile(own.astype(np.int32), len(env_id)),
        }
        reward = rewards[:, own].reshape(-1)
        ends = (np.repeat(np.asarray(terminated), k), np.repeat(np.asarray(truncated), k))
        return {key: v[keep] for key, v in every.items()}, reward, *ends, rows

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        """Actions for streams `env_id`: every stream of each env it names (with the other
        slots' moves taken at `recv`)."""
        action, stream = np.asarray(action), np.asarray(env_id)
        k = len(self._own)
        envs, own = np.divmod(stream, k)
        order = np.lexsort((own, envs))
        envs, own, action = envs[order], own[order], action[order]
        unique = np.unique(envs)
        if len(envs) != len(unique) * k or (own != np.tile(np.arange(k), len(unique))).any():
            raise ValueError("send() must answer every agent of each env it names together")
        full = self._moves(action)[unique].copy()
        full[:, self._own] = action.reshape(len(unique), k, *action.shape[1:])
        self._pool.send(full, unique)

    def _moves(self, like: np.ndarray) -> np.ndarray:
        """Every env's moves `[num_envs, agents, *action]` (the other slots' taken at `recv`),
        made on first use in the actions' layout: int32 indices, or float32 `[D]` vectors."""
        if self._pending is None:
            discrete = like.dtype.kind in "iub"
            shape = (self._pool.config["num_envs"], self._agents, *like.shape[1:])
            self._pending = np.zeros(shape, np.int32 if discrete else np.float32)
        return self._pending

    def close(self) -> None:
        self._pool.close()
