"""Named opponents for evaluating the learner in a turn-based game.

- "random", "heuristic", "perfect": the scripted players of `envs/games.py`;
- "checkpoint:PATH" or "checkpoint:PATH@STEP": the greedy policy of another run's checkpoint
  (PATH a work dir or checkpoints dir; STEP latest, the default, best or a number), acting
  with its own agent, so a PPO learner can meet a Rainbow checkpoint;
- "pool:ID" or "pool:latest": a snapshot of the opponent pool saved in the checkpoint being
  evaluated (`scripts/evaluate.py` only: a run's own evaluations have no checkpoint yet),
  acting greedily with the evaluated policy's agent.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxrl_dist.acting.opponent_pool import OpponentPool, role_arrays
from jaxrl_dist.acting.row_policy import ParamsPlayer, RowPolicy
from jaxrl_dist.checkpoints.policy import Policy, load_policy
from jaxrl_dist.checkpoints.store import Checkpointer
from jaxrl_dist.config.sections import CHECKPOINT_OPPONENT, names_checkpoint
from jaxrl_dist.data import snapshot as npz
from jaxrl_dist.envs.games import Player, scripted_player
from jaxrl_dist.envs.seats import POOL_ROLE, SCRIPTED_ROLES

CHECKPOINT = CHECKPOINT_OPPONENT
POOL = POOL_ROLE + ":"
NAMES = f"{', '.join(SCRIPTED_ROLES)}, {CHECKPOINT}PATH[@STEP] or {POOL}ID|latest"


def is_opponent_name(name: str) -> bool:
    """Whether `name` has one of the forms above (not whether its checkpoint exists)."""
    pool = name.startswith(POOL) and len(name) > len(POOL)
    return name in SCRIPTED_ROLES or names_checkpoint(name) or pool


def named_player(name: str, env_id: str, num_games: int, rng: np.random.Generator) -> Player:
    """The opponent `name` (a scripted one or a checkpoint) for `num_games` games of `env_id`;
    ValueError (one line) naming what is wrong."""
    if name.startswith(CHECKPOINT):
        return policy_player(checkpoint_policy(name, env_id), num_games)
    if name.startswith(POOL):
        raise ValueError(
            f"opponent {name!r}: pool snapshots are evaluated from a checkpoint, "
            "with scripts/evaluate.py RUN --opponent pool:ID"
        )
    if not is_opponent_name(name):
        raise ValueError(f"unknown opponent {name!r}; use {NAMES}")
    return scripted_player(name, env_id, rng)


def checkpoint_policy(name: str, env_id: str) -> Policy:
    """The policy "checkpoint:PATH[@STEP]" names, checked to play `env_id`."""
    path, _, step = name[len(CHECKPOINT) :].rpartition("@")
    if not path:  # no "@": all of it is the path
        path, step = step, "latest"
    try:
        policy = load_policy(path, step)
    except (FileNotFoundError, ValueError) as e:
        raise ValueError(f"opponent {name!r}: {str(e).splitlines()[0]}") from None
    if policy.env_id != env_id:
        raise ValueError(f"opponent {name!r} was trained on {policy.env_id}, not {env_id}")
    return policy


def pool_policy(policy: Policy, name: str) -> Policy:
    """The snapshot "pool:ID" (or "pool:latest") of the opponent pool saved with `policy`'s
    checkpoint, as a `Policy` of the same agent."""
    which = name[len(POOL) :]
    pool = saved_pool(policy)
    ids = pool.ids()
    if which == "latest":
        sid = ids[-1]
    elif which.isdigit() and int(which) in ids:
        sid = int(which)
    else:
        raise ValueError(
            f"opponent {name!r}: step {policy.step}'s pool holds snapshots "
            f"{', '.join(map(str, ids))}; give pool:ID or pool:latest"
        )
    return Policy(
        pool.params(sid),
        policy.agent,
        policy.description,
        policy.step,
        meta=policy.meta,
        directory=policy.directory,
    )


def saved_pool(policy: Policy) -> OpponentPool:
    """The opponent pool (role "pool") that `policy`'s checkpoint step saved."""
    with Checkpointer(policy.directory, create=False) as ckpt:
        saved = ckpt.restore_data(policy.step, "pool")
    mine = {} if saved is None else role_arrays(npz.from_bytes(saved), POOL_ROLE)
    if not mine:
        raise ValueError(
            f"checkpoint step {policy.step} saved no opponent pool (its run's "
            "config.seats.games never names 'pool')"
        )
    pool = OpponentPool(capacity=len(mine["ids"]) or 1)
    pool.restore_arrays(mine, policy.params)
    return pool


def policy_player(policy: Policy, num_games: int) -> Player:
    """`policy` acting greedily over the legal moves of `num_games` games, a memory per game
    (a recurrent policy's)."""
    key = jax.random.PRNGKey(0)  # greedy: the key streams go unused
    return ParamsPlayer(RowPolicy(policy.agent.actor, num_games, True, key), policy.params)
