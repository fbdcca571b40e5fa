"""EnvPool factory (gymnasium API), spaces and per-env episode statistics."""

from __future__ import annotations

import difflib
import functools
import warnings
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from jaxrl_dist.envs.agents import AGENTS_VIEW
from jaxrl_dist.envs.observation import (
    OBS_INDICES,
    ObservationSubset,
    obs_indices_problem,
    split_obs_indices,
)
from jaxrl_dist.envs.source import POOL, EnvSource, PoolOptions

# EnvPool builds gymnasium Box spaces (float64 bounds) inside recv(); gymnasium then warns on every
# new pool. Harmless and not ours to fix: silence exactly that message.
warnings.filterwarnings("ignore", message=r".*precision lowered by casting to float32")


class EnvSpec(NamedTuple):
    """What the networks and the runtime need to know about an environment.

    Discrete actions: `num_actions > 0`, `action_dim == 0`. Continuous (a Box of rank 1):
    `num_actions == 0`, `action_dim` dimensions within `[action_low, action_high]`. A turn-based
    game (`num_players > 1`) describes one player's view; a simultaneous-move task
    (`num_agents > 1`, `envs/agents.py`) one agent's row: its flattened view and one-hot id.
    """

    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    num_actions: int
    action_dim: int = 0
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    num_players: int = 1
    num_agents: int = 1

    @property
    def continuous(self) -> bool:
        return self.action_dim > 0


def _envpool():
    with warnings.catch_warnings():  # gymnasium warns about float64 Box bounds on import
        warnings.simplefilter("ignore")
        import envpool

        return envpool


@functools.cache
def _registered_envs() -> tuple[str, ...]:
    return tuple(_envpool().list_all_envs())


def check_env(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """Returns a one-line problem with `env_id`/`env_kwargs`, or None if EnvPool accepts them."""
    envs = _registered_envs()
    if env_id not in envs:
        close = difflib.get_close_matches(env_id, envs, n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        return f"config.env_id={env_id!r} is not an EnvPool env{hint}; see envpool.list_all_envs()"
    fields = _envpool().make_spec(env_id).config._fields
    env_kwargs, indices = split_obs_indices(env_kwargs)
    for key in env_kwargs:
        if key not in fields or key in ("num_envs", "batch_size", "seed", "num_threads"):
            close = difflib.get_close_matches(key, fields, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            return (
                f"config.env_kwargs.{key} is not an option of {env_id}{hint}; "
                "num_envs, batch_size, seed and num_threads are set by the runtime "
                f"({OBS_INDICES} is jaxrl_dist's own)"
            )
    steps = env_kwargs.get("max_episode_steps")
    if steps is not None and (not isinstance(steps, int) or steps <= 0):
        return f"config.env_kwargs.max_episode_steps={steps!r} must be a positive int"
    try:
        spec = env_spec(env_id, env_kwargs)
    except (TypeError, ValueError, RuntimeError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"config.env_kwargs={env_kwargs!r} rejected by EnvPool for {env_id}: {first}"
    if spec.num_actions <= 0 and spec.action_dim <= 0:
        return f"config.env_id={env_id!r}: only Discrete and rank-1 Box action spaces are supported"
    return obs_indices_problem(indices, spec.obs_shape)


# How to leave the XLA actor loop: a config in env groups (impala_atari.py's) needs one group too.
PYTHON_LOOP_FIX = "config.sebulba.actor_loop='python' with config.sebulba.env_groups_per_actor=1"
XLA_PLATFORMS = ("cpu", "gpu")  # where EnvPool registers its XLA calls (its xla_template.py)


def xla_device_problem(platforms: Iterable[str]) -> str | None:
    """Why actors on devices of these `platforms` cannot run the XLA actor loop, or None:
    EnvPool's XLA calls exist for CPUs and CUDA GPUs only (a TPU actor would fail to compile)."""
    other = sorted(set(platforms) - set(XLA_PLATFORMS))
    if not other:
        return None
    return (
        "config.sebulba.actor_loop='xla' runs EnvPool's XLA calls on the actor devices, which "
        "EnvPool "
        f"provides for CPUs and CUDA GPUs only, not {'/'.join(other)}; use {PYTHON_LOOP_FIX}"
    )


def xla_loop_problem(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """Why `env_id` cannot run the XLA actor loop, or None. EnvPool's XLA interface hands XLA
    buffers of the env's own dtypes, which JAX declares in its canonical ones: without
    `jax_enable_x64` a float64 observation or action (MuJoCo) would be read as float32."""
    import jax

    if OBS_INDICES in env_kwargs:
        return (
            "config.sebulba.actor_loop='xla' steps EnvPool inside XLA, where "
            f"config.env_kwargs.obs_indices cannot cut the observations; use {PYTHON_LOOP_FIX}"
        )
    if jax.config.jax_enable_x64:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = _envpool().make_spec(env_id, **env_kwargs)
    wide = sorted(
        {str(np.dtype(entry[0])) for entry in (*spec._state_spec, *spec._action_spec)}
        & {"float64", "int64", "uint64"}
    )
    if wide:
        return (
            f"config.sebulba.actor_loop='xla' cannot step {env_id}: its observations or actions "
            "are "
            f"{'/'.join(wide)}, which JAX without x64 cannot pass through EnvPool's XLA "
            f"interface; use {PYTHON_LOOP_FIX}"
        )
    return None


def env_spec(env_id: str, env_kwargs: dict[str, Any]) -> EnvSpec:
    env_kwargs, indices = split_obs_indices(env_kwargs)
    spec = _pool_spec(env_id, env_kwargs)
    if indices is not None and len(spec.obs_shape) == 1:
        spec = spec._replace(obs_shape=(len(indices),))
    return spec


def _pool_spec(env_id: str, env_kwargs: dict[str, Any]) -> EnvSpec:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec = _envpool().make_spec(env_id, **env_kwargs)
        obs_space = spec.observation_space
        act_space = spec.action_space
    num_actions = int(getattr(act_space, "n", 0))
    players = int(getattr(spec.config, "max_num_players", 1))
    views = getattr(obs_space, "spaces", {}).get(AGENTS_VIEW)
    if views is not None:  # simultaneous moves: every agent of an env acts at once
        agents = views.shape[0]
        row = (int(np.prod(views.shape[1:])) + agents,)
        return EnvSpec(
            row, np.dtype(np.float32), int(np.max(act_space.high)) + 1, num_agents=agents
        )
    if num_actions or len(act_space.shape) != 1:
        obs = (tuple(obs_space.shape), np.dtype(obs_space.dtype))
        return EnvSpec(*obs, num_actions, num_players=players)
    low = tuple(float(x) for x in np.broadcast_to(act_space.low, act_space.shape))
    high = tuple(float(x) for x in np.broadcast_to(act_space.high, act_space.shape))
    return EnvSpec(
        tuple(obs_space.shape),
        np.dtype(obs_space.dtype),
        num_actions=0,
        action_dim=act_space.shape[0],
        action_low=low,
        action_high=high,
    )


def make_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    num_envs: int,
    batch_size: int,
    *,
    seed: int,
    num_threads: int = 0,
    thread_affinity_offset: int = -1,
):
    """An EnvPool in the gymnasium API. Env `i` is seeded with `seed + i` by EnvPool.

    With `batch_size < num_envs` the pool is asynchronous: `recv()` returns the first
    `batch_size` envs to finish, identified by `info["env_id"]`. `thread_affinity_offset >= 0`
    pins the pool's C++ thread `i` to core `offset + i` (EnvPool's own option).
    `env_kwargs["obs_indices"]` cuts the observations (`envs/observation.py`).
    """
    env_kwargs, indices = split_obs_indices(env_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pool = _envpool().make(
            env_id,
            env_type="gymnasium",
            num_envs=num_envs,
            batch_size=batch_size,
            seed=seed,
            num_threads=num_threads or batch_size,
            thread_affinity_offset=thread_affinity_offset,
            **env_kwargs,
        )
    return pool if indices is None else ObservationSubset(pool, indices)


def derive_seed(seed: int, *path: int) -> int:
    """A 31-bit seed for `path` (e.g. (purpose, actor)) derived from the run seed: reproducible,
    and distinct streams for distinct paths (never `os.urandom`)."""
    state = np.random.SeedSequence([seed, *path]).generate_state(1)[0]
    return int(state) & 0x7FFF_FFFF


class EpisodeTracker:
    """Running return and length per env; reports finished episodes.

    Uses `info["reward"]` (the unclipped game reward EnvPool's Atari reports) when present, so the
    logged return is the game score even when the learner sees clipped rewards. Rewards may carry
    an agents axis (`[B, agents]`); returns then do too.
    """

    def __init__(self, num_envs: int):
        self._num_envs = num_envs
        self._return: np.ndarray | None = None  # [num_envs, *agents], shaped by the first reward
        self._length = np.zeros(num_envs, np.int64)

    def update(
        self,
        env_ids: np.ndarray,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        info: dict[str, Any],
    ) -> tuple[np.ndarray, np.ndarray]:
        """Adds one `recv()` result; returns (returns `[done, *agents]`, lengths `[done]`) of the
        episodes it ended."""
        raw = np.asarray(info.get("reward", reward), np.float64)
        if self._return is None:
            self._return = np.zeros((self._num_envs, *raw.shape[1:]), np.float64)
        first = info["elapsed_step"] == 0  # reset step: a new episode starts here
        self._return[env_ids[first]] = 0.0
        self._length[env_ids[first]] = 0
        keep = (~first).reshape(-1, *[1] * (raw.ndim - 1))
        self._return[env_ids] += np.where(keep, raw, 0.0)
        self._length[env_ids] += ~first
        done = env_ids[np.logical_or(terminated, truncated)]
        return self._return[done].copy(), self._length[done].copy()


def atari_protocol() -> dict[str, Any]:
    """EnvPool Atari options for the evaluation protocol of Machado et al. 2018 ("Revisiting the
    ALE"); a fresh dict each call, so a config may change it.

    - sticky actions: repeat_action_probability=0.25 (Machado Sec. 5.2), in place of no-op
      starts (noop_max=1 turns those off);
    - minimal action set (full_action_space=False), as in IMPALA (Espeholt et al. 2018);
    - no loss-of-life signal (episodic_life=False): an episode is a whole game (Machado Sec. 5.3);
    - episodes capped at 108,000 frames = 27,000 agent steps;
    - rewards clipped to [-1, 1] for learning (IMPALA Sec. 5.3); logged returns are game scores.
    EnvPool's defaults supply frame skip 4 with max-pooling and 84x84 grayscale frames stacked 4
    deep (Mnih et al. 2015).
    """
    return {
        "repeat_action_probability": 0.25,
        "noop_max": 1,
        "full_action_space": False,
        "episodic_life": False,
        "reward_clip": True,
        "max_episode_steps": 27_000,
    }


def _make_pool(
    env_id: str, env_kwargs: dict[str, Any], num_envs: int, batch_size: int, options: PoolOptions
) -> Any:
    threads, offset = options.num_threads, options.thread_affinity_offset
    return make_env(
        env_id,
        env_kwargs,
        num_envs,
        batch_size,
        seed=options.seed,
        num_threads=threads,
        thread_affinity_offset=offset,
    )


ENVPOOL_SOURCE = EnvSource(
    "envpool",
    POOL,
    (),
    check=check_env,
    make=_make_pool,
    spec=env_spec,
    xla_loop_problem=xla_loop_problem,
    noun="an EnvPool env",
)
