"""The engine seam's edges (`run/engine.py`): a third engine written here, registered with
`register_engine`, runs a short run through the shell (checks, checkpoints, evaluation, logs,
run-time hyperparameters, the summary and an exact resume) with nothing in the library changed.

`LoopEngine` is the smallest engine there is: one thread steps one sync EnvPool with the agent's
actor half for `unroll_length` steps, and the learner half updates on that rollout, every step
of the run. No actor threads, no data seam, no mesh beyond one device."""

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
from train_runs import ROOT

from jaxrl_dist.agents.base import ActorIdentity
from jaxrl_dist.checkpoints.store import tree_digest
from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.engine_sections import SebulbaConfig
from jaxrl_dist.config.engines import register_engine
from jaxrl_dist.envs import check_env, env_spec, make_env
from jaxrl_dist.evaluation.base import eval_setup
from jaxrl_dist.evaluation.pools import make_evaluator
from jaxrl_dist.run.engine import Engine, Ready, Saved, Stepped
from jaxrl_dist.run.preflight import learner_devices
from jaxrl_dist.types import Rollout

IMPALA = os.path.join(ROOT, "configs", "impala_cartpole.py")


class LoopEngine(Engine):
    """Act, step, update, on one thread (module docstring)."""

    name = "loop"
    uses = {  # noqa: RUF012  the run fields it honours beyond the shell's
        "unroll_length": "the rollout's steps",
        "batch_size": "the envs stepped together",
    }
    refuses = {}  # noqa: RUF012

    @classmethod
    def machine(cls, config):
        problem = check_env(config.env_id, config.env_kwargs)
        if problem:
            raise ConfigError(problem)
        return env_spec(config.env_id, config.env_kwargs), learner_devices(config)

    def __init__(self, config, prepared, cluster, stop_requested):
        super().__init__(config, prepared, cluster, stop_requested)
        ((self._name, self._agent),) = self.agents.items()  # one agent: the test's run
        b, self._t = config.batch_size, config.unroll_length
        self._env = make_env(config.env_id, config.env_kwargs, b, b, seed=config.seed)
        core = self._agent.actor
        self._act = jax.jit(lambda p, o, s, f: core.act(p, o, core.start_episodes(s, f)))
        self._update = jax.jit(self._agent.learner.update)
        self._key = jax.random.PRNGKey(config.seed)
        self.state = None

    def saved_abstract(self):
        shapes = jax.eval_shape(self._agent.learner.init, jax.random.PRNGKey(0))
        return self.layout.tree({self._name: shapes})

    def begin(self, ckpt, resume):
        b = self.config.batch_size
        actor = self._agent.actor.init_state(ActorIdentity(0, 1), b, self._key)
        obs, _ = self._env.reset()
        self._carry = (obs, np.zeros(b, np.float32), np.ones(b, bool), actor)
        if resume:
            saved, meta = ckpt.restore(self.saved_abstract())
            self.state = self.layout.lanes_of(saved)[self._name]
            return meta
        self.state = self._agent.learner.init(self._key)
        return None

    def saved(self, step):
        return Saved(self.layout.tree({self._name: self.state}))

    def policy_params(self):
        return self.layout.params({self._name: self._agent.learner.actor_params(self.state)})

    def eval_params(self):
        return jax.tree.map(jnp.copy, self.policy_params())

    def digests(self):
        return tree_digest(self.policy_params()), tree_digest(self.state)

    def hparams(self):
        return self.layout.keyed(self._name, self._agent.learner.hparams(self.state))

    def set_hparams(self, hparams):
        mine = self.layout.mine(self._name, hparams)
        self.state = self._agent.learner.with_hparams(self.state, mine)

    def evaluator(self, in_background, workdir):
        setup = eval_setup(self.config, self._agent.actor, jax.local_devices()[0])
        return make_evaluator(setup), None

    def prepare(self, budget, at_update):
        return Ready()

    def advance(self, updates, at_update, ready=1):
        params = self._agent.learner.actor_params(self.state)
        obs, reward, first, actor = self._carry
        rows = {"obs": [obs], "reward": [reward], "terminated": [], "truncated": []}
        actions, extras, episodes = [], [], 0
        for _ in range(self._t):
            action, extra, actor = self._act(params, obs, actor, first)
            obs, reward, terminated, truncated, info = self._env.step(np.asarray(action))
            first = info["elapsed_step"] == 0
            episodes += int(np.sum(terminated | truncated))
            actions.append(action)
            extras.append(extra)
            rows["obs"].append(obs)
            rows["reward"].append(reward)
            rows["terminated"].append(terminated)
            rows["truncated"].append(truncated)
        ends = np.zeros_like(rows["terminated"][0])
        rollout = Rollout(
            obs=np.stack(rows["obs"]),
            reward=np.stack(rows["reward"]).astype(np.float32),
            terminated=np.stack([ends, *rows["terminated"]]),
            truncated=np.stack([ends, *rows["truncated"]]),
            action=np.stack(actions),
            agent_extras=jax.tree.map(lambda *x: np.stack(x), *extras),
            policy_version=np.zeros((self._t, len(ends)), np.int32),
        )
        self._carry = (obs, reward, first, actor)
        self.state, metrics = self._update(self.state, rollout)[:2]
        metrics = {k: float(v) for k, v in metrics.items()}
        return Stepped(metrics, env_steps=rollout.action.size, episodes=episodes)

    def log_record(self, metrics, counters):
        return {
            **{f"losses/{k}": v for k, v in metrics.items()},
            "charts/updates": counters.updates,
        }

    def stop(self):
        self._env.close()


def test_a_third_engine_runs_through_the_shell_and_resumes(tmp_path):
    from jaxrl_dist import Trainer, load_config, load_policy

    register_engine("loop", LoopEngine)
    overrides = {
        "runtime": "loop",
        "total_env_steps": 2560,
        "batch_size": 8,
        "unroll_length": 20,
        "eval_every_updates": 4,
        "log_every_updates": 4,
        "eval_episodes": 4,
        "checkpoint_every_updates": 8,
        "learning_curve": False,
    }
    # Its Sebulba section back at the defaults: the loop engine reads none of it (refused).
    config = dataclasses.replace(load_config(IMPALA, **overrides), sebulba=SebulbaConfig())
    workdir = str(tmp_path / "loop")
    trainer = Trainer(config, workdir, quiet=True)
    trainer.set_hyperparams(learning_rate=5e-4)
    run = trainer.run()
    assert run.summary["runtime"] == "loop" and run.summary["updates"] == 16
    assert run.summary["env_steps"] == 2560
    assert len(run.summary["checkpoint_steps"]) >= 2
    assert np.isfinite(run.summary["final_eval_return"])
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        keys = set().union(*(json.loads(line) for line in f))
    assert {"losses/loss", "charts/updates", "eval/return"} <= keys
    assert run.summary["hparam_changes"][0]["values"] == {"learning_rate": 5e-4}
    policy = load_policy(workdir)
    assert policy.step == 16
    # Resumed for twice the steps: it goes on from update 16 with the saved params.
    longer = dataclasses.replace(config, total_env_steps=5120)
    resumed = Trainer(longer, workdir, quiet=True, resume=True).run()
    assert resumed.summary["resumed_from_update"] == 16 and resumed.summary["updates"] == 32
    assert resumed.summary["initial_params_sha256"] == run.summary["params_sha256"]
    # What the loop engine does not read is refused: Sebulba's section.
    try:
        Trainer(load_config(IMPALA, **overrides), str(tmp_path / "refused"))
    except ConfigError as e:
        assert str(e).startswith("config.sebulba.") and "config.runtime='loop'" in str(e)
    else:
        raise AssertionError("the loop engine accepted config.sebulba's fields")
