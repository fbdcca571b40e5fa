"""The data flow is a seam: a flow defined and registered in this file, and an agent that names
it, run end to end on both engines, resume included, with nothing else in the library changed.

The flow learns from every rollout twice in a row: on Sebulba its data seam hands each batch to
two updates (the second one counting no env steps) and holds the batch in between, which a
checkpoint keeps; on Anakin its device piece makes two updates of each rollout."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_runs import interrupted_run

from jaxrl_dist import agents
from jaxrl_dist.agents.base import AgentEntry
from jaxrl_dist.agents.impala import ImpalaConfig, make_impala
from jaxrl_dist.agents.ppo import PPOConfig, check_ppo, make_ppo
from jaxrl_dist.checkpoints.store import Checkpointer
from jaxrl_dist.config.cli import load_config
from jaxrl_dist.data import Batch, DataFlow, flows, snapshot
from jaxrl_dist.data.on_policy import OnPolicyQueue
from jaxrl_dist.run.trainer import Trainer


class TwiceQueue(OnPolicyQueue):
    """The on-policy queue, each batch read twice in a row."""

    restored: list = []  # every snapshot a resume gave back (the test reads it)

    def __init__(self, stop_reading, **kwargs):
        super().__init__(stop_reading=stop_reading, **kwargs)
        self._stop_reading = stop_reading
        self._held: Batch | None = None

    def read(self, updates: int) -> Batch | None:
        if self._held is None:
            self._held = super().read(updates)
            return self._held
        if self._stop_reading.is_set():  # a stop keeps the held batch for the checkpoint
            return None
        batch, self._held = self._held, None
        return batch._replace(env_steps=0, dropped=0)

    def snapshot(self) -> dict[str, np.ndarray]:
        if self._held is None:
            return {}
        leaves, treedef = jax.tree.flatten(self._held.data)
        return snapshot.ring_arrays(treedef, [np.asarray(x) for x in leaves])

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        TwiceQueue.restored.append(arrays)
        if arrays:
            treedef, leaves = snapshot.rings_from_arrays(arrays)
            self._held = Batch(jax.tree.unflatten(treedef, leaves), 0)


class TwiceOnDevice:
    """Two updates on each rollout, inside the Anakin program."""

    def init(self, rollout, key):
        return ()

    def ready(self, data):
        return jnp.asarray(True)

    def learn(self, core, learner, data, rollout, ready, last_metrics):
        learner = core.update(learner, rollout)[0]
        learner, metrics = core.update(learner, rollout)[:2]
        return learner, data, metrics


class Twice(DataFlow):
    replays = True  # a batch is kept across updates

    def env_steps_per_update(self, config) -> float:
        return config.unroll_length * config.batch_size / 2

    def saves(self, config, obs_shape) -> bool:
        return True

    def host(self, config, *, num_processes, process_index, stop_writers, stop_reading):
        return TwiceQueue(
            stop_reading,
            maxsize=config.sebulba.queue_size * config.sebulba.num_actor_threads,
            items_per_batch=config.process_batch_size(num_processes)
            // config.rollout_segments(num_processes),
            max_policy_lag=0,
            in_actor_order=False,
            stop_writers=stop_writers,
        )

    def device(self, config):
        return TwiceOnDevice()


@pytest.fixture(autouse=True)
def twice_agent():
    flows.register("twice", Twice())
    agents.register("impala_twice", AgentEntry(ImpalaConfig, make_impala, data="twice"))
    agents.register("ppo_twice", AgentEntry(PPOConfig, make_ppo, check_ppo, data="twice"))
    yield
    del flows.FLOWS["twice"], agents.REGISTRY["impala_twice"], agents.REGISTRY["ppo_twice"]
    TwiceQueue.restored.clear()


def test_a_registered_flow_runs_on_sebulba_and_a_resume_takes_its_held_batch_back(tmp_path):
    config = load_config("configs/impala_cartpole.py:quick", algorithm="impala_twice")
    steps_per_batch = config.batch_size * config.unroll_length
    config = load_config(
        "configs/impala_cartpole.py:quick",
        algorithm="impala_twice",
        total_env_steps=6 * steps_per_batch,
    )
    workdir = str(tmp_path / "run")
    cut = interrupted_run(config, workdir, stop_at_env_steps=3 * steps_per_batch)
    # Update 2k + 1 reads a fresh batch and holds it, 2k + 2 learns from it again.
    assert cut.updates % 2 == 1 and cut.env_steps == (cut.updates + 1) // 2 * steps_per_batch
    with Checkpointer(cut.checkpoint_dir, create=False) as ckpt:
        held = snapshot.from_bytes(ckpt.restore_data(cut.updates))
    assert held and all(name.startswith(snapshot.RING) for name in held)
    resumed = Trainer(config, workdir, resume=True, quiet=True).run()
    (given_back,) = TwiceQueue.restored
    assert given_back.keys() == held.keys()
    assert all(np.array_equal(given_back[k], held[k]) for k in held)
    # The update after the resume learned from the held batch (no env steps): the sixth batch
    # is read by update 11, which ends the run (without it, update 10 would have).
    assert resumed.env_steps == 6 * steps_per_batch and resumed.updates == 11


def test_a_registered_flow_runs_on_anakin_and_resumes_bit_identically(tmp_path):
    config = load_config(
        "configs/anakin_ppo_cartpole.py:quick",
        algorithm="ppo_twice",
        checkpoint_every_updates=4,
        total_env_steps=4 * 128 * 16,
    )
    whole = Trainer(config, str(tmp_path / "whole"), quiet=True).run()
    # Two learner updates per rollout: the learner's own count is twice the run's.
    assert whole.updates == 16 and whole.summary["learner_updates"] == 32
    cut = interrupted_run(config, str(tmp_path / "cut"), 6 * 4 * 128)
    assert cut.updates < 16
    resumed = Trainer(config, str(tmp_path / "cut"), resume=True, quiet=True).run()
    assert resumed.summary["state_sha256"] == whole.summary["state_sha256"]
    assert resumed.summary["params_sha256"] == whole.summary["params_sha256"]
