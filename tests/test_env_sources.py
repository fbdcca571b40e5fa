"""Env sources are a seam (`envs/registry.py`): a source of host pools and a source of JAX envs,
each defined and registered in this file with nothing in the library changed, trained through
`scripts/train.py`'s main on the engine that steps its kind, and evaluated; and the registry's
refusals, in one line."""

import numpy as np
import pytest
from own_envs import JaxCorridor
from train_runs import ROOT, train_main

from jaxrl_dist.envs import JAX, POOL, EnvSource, EnvSpec, register_env_source
from jaxrl_dist.envs.registry import find_source
from jaxrl_dist.envs.source import kind_problem

PPO = f"{ROOT}/configs/ppo_cartpole.py"
ANAKIN = f"{ROOT}/configs/anakin_ppo_cartpole.py"


# ----------------------------------------------------------------------------- a pool source
class ChainPool:
    """`num_envs` chains of `length` cells in EnvPool's protocol, stepped in numpy: action 1
    moves right, 0 left; the last cell ends the episode with reward 1, `max_steps` truncates
    it; the step after an end is a reset step (reward 0, both flags False, `elapsed_step` 0).
    `recv` returns the envs of the oldest `send` (of `batch_size` envs; all at `async_reset`,
    in batches)."""

    def __init__(self, length: int, num_envs: int, batch_size: int, max_steps: int = 20):
        self.config = {"num_envs": num_envs, "batch_size": batch_size, "num_threads": 1}
        self._length, self._max = length, max_steps
        self._cell = np.zeros(num_envs, np.int32)
        self._t = np.zeros(num_envs, np.int32)
        self._ended = np.ones(num_envs, bool)  # the first step of every env is a reset step
        self._ready: list[tuple] = []

    def _observe(self, ids, reward, terminated, truncated):
        obs = np.eye(self._length, dtype=np.float32)[self._cell[ids]]
        info = {"env_id": ids.astype(np.int32), "elapsed_step": self._t[ids].copy()}
        return obs, reward, terminated, truncated, info

    def _step(self, ids: np.ndarray, action: np.ndarray) -> tuple:
        ids = np.asarray(ids)
        reset = self._ended[ids]
        moved = np.clip(self._cell[ids] + 2 * np.asarray(action) - 1, 0, self._length - 1)
        self._cell[ids] = np.where(reset, 0, moved)
        self._t[ids] = np.where(reset, 0, self._t[ids] + 1)
        terminated = ~reset & (self._cell[ids] == self._length - 1)
        truncated = ~reset & ~terminated & (self._t[ids] >= self._max)
        self._ended[ids] = terminated | truncated
        return self._observe(ids, terminated.astype(np.float32), terminated, truncated)

    def async_reset(self) -> None:
        n, b = self.config["num_envs"], self.config["batch_size"]
        for start in range(0, n, b):
            ids = np.arange(start, start + b)
            self._ended[ids] = True
            self._ready.append(self._step(ids, np.zeros(b, np.int32)))

    def send(self, action, env_id) -> None:
        self._ready.append(self._step(env_id, action))

    def recv(self) -> tuple:
        return self._ready.pop(0)

    def reset(self, **_) -> tuple:
        ids = np.arange(self.config["num_envs"])
        self._ended[:] = True
        obs, *_, info = self._step(ids, np.zeros(len(ids), np.int32))
        return obs, info

    def step(self, action, env_id=None) -> tuple:
        ids = np.arange(self.config["num_envs"]) if env_id is None else np.asarray(env_id)
        return self._step(ids, action)

    def close(self) -> None:
        pass


def _chain_length(env_id: str) -> int:
    return int(env_id.removeprefix("chain:"))


def _chain_problem(env_id: str, env_kwargs: dict) -> str | None:
    if not env_id.removeprefix("chain:").isdigit() or _chain_length(env_id) < 2:
        return f"config.env_id={env_id!r}: write chain:LENGTH, LENGTH >= 2"
    return None


def _chain_spec(env_id: str, env_kwargs: dict) -> EnvSpec:
    return EnvSpec(obs_shape=(_chain_length(env_id),), obs_dtype=np.float32, num_actions=2)


def _chain_pool(
    env_id: str, env_kwargs: dict, num_envs: int, batch_size: int, options
) -> ChainPool:
    return ChainPool(_chain_length(env_id), num_envs, batch_size, **env_kwargs)


CHAIN = EnvSource("chain", POOL, ("chain:",), _chain_problem, _chain_pool, spec=_chain_spec)


# ----------------------------------------------------------------------------- a JAX source
def _corridor(env_id: str, env_kwargs: dict):
    env = JaxCorridor(length=int(env_id.removeprefix("corridor:")), **env_kwargs)
    return env, env.default_params


def _corridor_problem(env_id: str, env_kwargs: dict) -> str | None:
    if not env_id.removeprefix("corridor:").isdigit():
        return f"config.env_id={env_id!r}: write corridor:LENGTH"
    return None


CORRIDOR = EnvSource("corridor", JAX, ("corridor:",), _corridor_problem, _corridor)


@pytest.fixture(autouse=True)
def _registered():
    register_env_source(CHAIN)
    register_env_source(CORRIDOR)


def test_a_registered_pool_source_trains_on_sebulba_and_evaluates(tmp_path):
    """`chain:5` (this file's numpy pool) through the whole Sebulba run: its actors step the
    source's pools, its evaluator plays them, and `jaxrl_dist.evaluate` plays the saved policy
    on a fresh one."""
    import jaxrl_dist

    workdir = str(tmp_path / "chain")
    summary = train_main(
        PPO,
        workdir,
        "--config.env_id=chain:5",
        "--config.stop_at_eval_return=1.0",
        "--config.eval_every_updates=4",
        "--config.learning_curve=false",
    )
    assert summary["best_eval_return"] == 1.0
    assert jaxrl_dist.evaluate(f"{workdir}@best", episodes=4).mean_return == 1.0


def test_a_registered_jax_source_trains_on_anakin(tmp_path):
    """`corridor:8` (the JAX corridor behind a source of this file) in Anakin's program, two
    seeds vmapped, each reaching the corridor's optimum."""
    summary = train_main(
        ANAKIN,
        str(tmp_path / "corridor"),
        "--config.env_id=corridor:8",
        "--config.anakin.num_seeds=2",
        "--config.total_env_steps=60000",
        "--config.stop_at_eval_return=1.0",
        "--config.eval_every_updates=4",
        "--config.algo.learning_rate=1e-3",
        "--config.algo.anneal_lr=false",
        "--config.algo.entropy_cost=0.03",
        "--config.learning_curve=false",
    )
    assert [s["best_eval_return"] for s in summary["seeds"]] == [1.0] * 2, summary["seeds"]


def test_each_source_answers_for_its_ids_and_the_wrong_engine_is_named():
    assert find_source("chain:5", POOL) is CHAIN and find_source("chain:5", JAX) is CHAIN
    assert find_source("CartPole-v1", POOL).name == "envpool"
    assert find_source("CartPole-v1", JAX).name == "gymnax"
    assert find_source("gymnasium:CartPole-v1", JAX).name == "gymnasium"
    assert kind_problem("chain:5", CHAIN, POOL) is None
    assert "set config.runtime='sebulba'" in kind_problem("chain:5", CHAIN, JAX)
    assert "set config.runtime='anakin'" in kind_problem("corridor:3", CORRIDOR, POOL)


def test_the_shipped_checks_route_through_the_registry():
    from jaxrl_dist.envs import check_env, env_spec, xla_loop_problem
    from jaxrl_dist.envs.jax_envs import jax_env_problem

    assert check_env("chain:x", {}) == "config.env_id='chain:x': write chain:LENGTH, LENGTH >= 2"
    assert env_spec("chain:6", {}).obs_shape == (6,)
    assert "use config.sebulba.actor_loop='python'" in xla_loop_problem("chain:6", {})
    assert jax_env_problem("corridor:x", {}) == "config.env_id='corridor:x': write corridor:LENGTH"
    assert "runtime='anakin'" in check_env("corridor:4", {})


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        (EnvSource("bad", "gpu", ("bad:",), _chain_problem, _chain_pool), "use POOL or JAX"),
        (EnvSource("bad", POOL, ("bad",), _chain_problem, _chain_pool), "end it in ':'"),
        (
            EnvSource("bad", POOL, ("gymnasium:",), _chain_problem, _chain_pool),
            "source 'gymnasium' has",
        ),
        (EnvSource("bad", POOL, (), _chain_problem, _chain_pool), "give it prefixes"),
    ],
)
def test_a_bad_source_is_refused_in_one_line(source, needle):
    find_source("CartPole-v1", POOL)  # the shipped sources registered
    with pytest.raises(ValueError, match=needle) as raised:
        register_env_source(source)
    assert "\n" not in str(raised.value)
