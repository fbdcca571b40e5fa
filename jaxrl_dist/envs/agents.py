"""A simultaneous-move multi-agent EnvPool task seen as one stream per (env, agent): one policy
shared by every agent, the agent's id in its observation.

EnvPool's multi-agent tasks (`Jumanji/LevelBasedForaging-v0`, `Jumanji/RobotWarehouse-v0`) step
every agent of an env at once: observations `{"agents_view": [n, agents, ...], "action_mask":
[n, agents, A]}`, one action per agent (`[n, agents]`), and a reward per env (shared by the
team) or per agent. `AgentStreams` turns each (env, agent) pair into a stream numbered
`env * agents + agent`: its observation `{AGENT_VIEW: [view..., one-hot agent id] float32,
ACTION_MASK: [A]}` (`jaxrl_dist.types`), its reward (the team's, or its own), the env's end
flags; the actor answers every stream of a `recv()` in one `send()`, which steps each env with
its agents' actions together. It speaks the async pool's protocol, so `Actor`, `SegmentBuffer`
and `EpisodeTracker` handle the streams as they handle envs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
    """

    def __init__(self, pool: Any, agents: int, team_reward: bool = False):
        self._pool, self._agents, self._team = pool, agents, team_reward
        self.config = {**pool.config, "num_envs": pool.config["num_envs"] * agents}

    def async_reset(self) -> None:
        self._pool.async_reset()

    def recv(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict]:
        """One pool result as stream rows: `(obs, reward, terminated, truncated, info)` with
        `info["env_id"]` the stream ids, `info["elapsed_step"]` and `info["agent"]`."""
        obs, reward, terminated, truncated, info = self._pool.recv()
        a = self._agents
        env_id = np.asarray(info["env_id"])
        rows = {
            "env_id": (env_id[:, None] * a + np.arange(a)).reshape(-1).astype(np.int32),
            "elapsed_step": np.repeat(np.asarray(info["elapsed_step"]), a),
            "agent": np.tile(np.arange(a, dtype=np.int32), len(env_id)),
        }
        reward = agent_rewards(reward, a, self._team).reshape(-1)
        ends = (np.repeat(np.asarray(terminated), a), np.repeat(np.asarray(truncated), a))
        return agent_rows(obs), reward, *ends, rows

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        """Actions for streams `env_id`: every agent of each env whose streams it names."""
        action, stream = np.asarray(action), np.asarray(env_id)
        envs, agent = np.divmod(stream, self._agents)
        order = np.lexsort((agent, envs))
        envs, agent, action = envs[order], agent[order], action[order]
        unique = np.unique(envs)
        if (
            len(envs) != len(unique) * self._agents
            or (agent != np.tile(np.arange(self._agents), len(unique))).any()
        ):
            raise ValueError("send() must answer every agent of each env it names together")
        self._pool.send(action.reshape(len(unique), self._agents).astype(np.int32), unique)

    def close(self) -> None:
        self._pool.close()
