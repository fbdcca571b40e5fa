"""The Anakin program: acting and learning in one jitted function (Podracer's Anakin).

One update, per seed: `T` steps of a batch of `B` JAX envs in a `lax.scan` (the agent's actor
half choosing actions), which builds the same `[T + 1, B]` `Rollout` an EnvPool actor hands the
learner, then the agent's data flow (`data/device_flows.py`): the learner half's `update` on the
rollout, or the rollout into a replay on the device and updates on what it draws. `train(carry, n)`
runs `n` of them in a `lax.fori_loop` (a traced `n`: every chunk length shares one
compilation), vmapped over seeds (`num_seeds`, as PureJaxRL does) and jitted over the learner
mesh: the env axis `B` of everything per-env is split over the mesh's devices, the learner
state (and a replay) is replicated, and XLA inserts the reductions of the update's means (the
same function on 1 or N devices, as in the Sebulba learner).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from jaxrl_dist.agents.base import ActorIdentity, Agent, act_by_rows
from jaxrl_dist.data.device_flows import OnPolicyFlow
from jaxrl_dist.envs.jax_envs import EnvState, JaxEnv, TimeStep
from jaxrl_dist.learning.mesh import DATA_AXIS
from jaxrl_dist.types import PyTree, Rollout

ENV_KEY_PURPOSE, ACTOR_KEY_PURPOSE, DATA_KEY_PURPOSE = 11, 12, 13  # fold_in paths of a seed's key


class Acting(NamedTuple):
    """Everything per env (every leaf `[B, ...]`): the env states, the last time step (the next
    rollout's `obs[0]`, `reward[0]`, ...), the actor half's state, the running episode, and
    whether the last time step's obs starts an episode (a reset's: a recurrent policy resets
    its memory there)."""

    env: EnvState
    timestep: TimeStep
    actor: PyTree
    episode_return: jax.Array  # [B] float32
    episode_length: jax.Array  # [B] int32
    first: jax.Array  # [B] bool


class Totals(NamedTuple):
    """What the host reads between chunks: finished episodes since the last drain and the last
    update's metrics."""

    episodes: jax.Array  # [] int32
    return_sum: jax.Array  # [] float32
    length_sum: jax.Array  # [] float32
    metrics: dict[str, jax.Array]


class Carry(NamedTuple):
    """The whole training state of one seed: checkpointed whole, so a resume is exact.
    `shared`: the env's state shared by the whole batch (a board game's opponent pool);
    `data`: the data flow's state (a replay)."""

    learner: PyTree
    acting: Acting
    totals: Totals
    shared: PyTree = ()
    data: PyTree = ()


def _zero_totals(metrics: dict[str, Any]) -> Totals:
    zeros = {k: jnp.zeros(v.shape, v.dtype) for k, v in metrics.items()}
    return Totals(jnp.zeros((), jnp.int32), jnp.zeros((), jnp.float32), jnp.zeros(()), zeros)


class Program:
    """The pure functions of one Anakin run; `Anakin` (below) jits them over seeds and a mesh."""

    def __init__(
        self,
        agent: Agent,
        env: JaxEnv,
        num_envs: int,
        unroll_length: int,
        flow: Any = None,
        greedy: bool = False,
        greedy_rows: Any = None,
    ):
        """`flow`: the agent's data flow's device implementation (`data/device_flows.py`;
        None: one update per rollout); `greedy`: the agent acts by its policy's mode (Q-agents:
        epsilon 0), with zeros for the act's extras (`config.exploration_mask`);
        `greedy_rows`: `[num_envs]` bool, only those envs' streams do (a greedy seat's)."""
        self.agent, self.env, self.flow = agent, env, flow or OnPolicyFlow()
        self.num_envs, self.unroll_length, self.greedy = num_envs, unroll_length, greedy
        self.greedy_rows = greedy_rows

    # ------------------------------------------------------------------ start
    def init_learner(self, seed: jax.Array, warm: PyTree = None) -> PyTree:
        """A seed's fresh learner state: the learner half's `init(PRNGKey(seed))` (the Sebulba
        learner's params for the same seed) with the params `warm` where given (a warm
        start)."""
        learner = self.agent.learner.init(jax.random.PRNGKey(seed))
        if warm is not None:
            learner = self.agent.learner.with_params(learner, warm)
        return learner

    def init(
        self,
        seed: jax.Array,
        others: dict[str, PyTree] | None = None,
        warm: PyTree = None,
        learner: PyTree = None,
    ) -> Carry:
        """A seed's fresh carry: `init_learner(seed, warm)` (or `learner`, made so already),
        and `num_envs` envs reset with it: a game's league starts from its params and its
        first replies are theirs (`others`: the run's other agents' params by role, where a
        game seats them, `agents.py`)."""
        key = jax.random.PRNGKey(seed)
        learner = self.init_learner(seed, warm) if learner is None else learner
        params = self.agent.learner.actor_params(learner)
        shared = self.env.init_shared(params, *([others] if others is not None else []))
        env_keys = jax.random.split(jax.random.fold_in(key, ENV_KEY_PURPOSE), self.num_envs)
        env_state, timestep = self.env.reset(env_keys, shared, params)
        actor_key = jax.random.fold_in(key, ACTOR_KEY_PURPOSE)
        actor = self.agent.actor.init_state(ActorIdentity(0, 1), self.num_envs, actor_key)
        zeros_b = jnp.zeros((self.num_envs,))
        acting = Acting(
            env=env_state,
            timestep=timestep,
            actor=actor,
            episode_return=zeros_b,
            episode_length=zeros_b.astype(jnp.int32),
            first=jnp.ones((self.num_envs,), bool),
        )
        rollout = jax.eval_shape(lambda: self.unroll(params, acting, jnp.int32(0), shared)[1])
        data = self.flow.init(rollout, jax.random.fold_in(key, DATA_KEY_PURPOSE))
        # The metrics' shapes from the flow's learning step alone (on the rollout's shapes),
        # not the whole update: its unroll was traced just above.
        metrics = jax.eval_shape(
            lambda learner, data, rollout: self.flow.learn(
                self.agent.learner, learner, data, rollout, jnp.asarray(True), None
            )[2],
            learner,
            data,
            rollout,
        )
        carry = Carry(learner, acting, _zero_totals(metrics), shared, data)
        # No weak types (a gymnax state's Python ints): a checkpoint restores every leaf with
        # its dtype, and the program of a resumed run must be the fresh run's (one compile,
        # or a hit in the persistent compilation cache).
        return jax.tree.map(lambda x: x.astype(x.dtype), carry)

    # ------------------------------------------------------------------ one update
    def unroll(self, params: PyTree, acting: Acting, version: jax.Array, shared: PyTree):
        """`T` env steps -> (acting after them, the `[T + 1, B]` rollout, the steps' env info
        `[T, B]`, episodes finished, their summed return and length)."""
        core = self.agent.actor

        def one_step(carry, _):
            acting = carry
            obs = acting.timestep.obs
            actor_state = core.start_episodes(acting.actor, acting.first)
            if self.greedy_rows is not None:  # a greedy seat's streams among exploring ones
                action, extras, sampled = act_by_rows(
                    core, params, obs, actor_state, jnp.asarray(self.greedy_rows)
                )
            else:
                action, extras, sampled = core.act(params, obs, actor_state)
            if self.greedy:  # the sampled act's values go unused: XLA drops that work
                action, sampled = core.greedy_act(params, obs, actor_state)
                extras = jax.tree.map(jnp.zeros_like, extras)
            actor_state = sampled
            env_state, ts = self.env.step(acting.env, core.env_action(action), shared, params)
            # EpisodeTracker's rules: a reset step starts an episode at 0; others add.
            first = acting.env.needs_reset
            ret = jnp.where(first, 0.0, acting.episode_return + ts.reward)
            length = jnp.where(first, 0, acting.episode_length + 1)
            ended = jnp.logical_or(ts.terminated, ts.truncated)
            done = (ended.sum(), jnp.sum(ret * ended), jnp.sum(length * ended))
            acting = Acting(
                env=env_state,
                timestep=ts,
                actor=actor_state,
                episode_return=ret,
                episode_length=length,
                first=first,
            )
            return acting, (ts, action, extras, done)

        start = acting.timestep
        # the state row 0 acts from (after its resets): a recurrent learner unrolls from it
        core_state = core.core_state(core.start_episodes(acting.actor, acting.first))
        acting, (steps, action, extras, done) = jax.lax.scan(
            one_step, acting, None, self.unroll_length
        )
        with_first = lambda x0, xs: jnp.concatenate([x0[None], xs])  # noqa: E731
        rollout = Rollout(
            obs=jax.tree.map(with_first, start.obs, steps.obs),
            reward=with_first(start.reward, steps.reward),
            terminated=with_first(start.terminated, steps.terminated),
            truncated=with_first(start.truncated, steps.truncated),
            action=action,
            agent_extras=extras,
            policy_version=jnp.broadcast_to(version, action.shape[:2]).astype(jnp.int32),
            core_state=jax.tree.map(lambda x: x[None], core_state),
        )
        return acting, rollout, steps.info, jax.tree.map(jnp.sum, done)

    def _update(self, carry: Carry, ready: jax.Array):
        learner_core = self.agent.learner
        params = learner_core.actor_params(carry.learner)
        version = getattr(carry.learner, "update_step", jnp.zeros((), jnp.int32))
        acting, rollout, info, done = self.unroll(params, carry.acting, version, carry.shared)
        last = None if carry.totals is None else carry.totals.metrics
        learner, data, metrics = self.flow.learn(
            learner_core, carry.learner, carry.data, rollout, ready, last
        )
        shared = self.env.update_shared(carry.shared, info, learner_core.actor_params(learner))
        return learner, acting, metrics, done, shared, data

    def update(self, carry: Carry, ready: jax.Array) -> Carry:
        """One rollout of a seed and what its data flow learns from it (`ready`: the flow's
        `ready`, asked outside the seeds' vmap)."""
        learner, acting, metrics, (episodes, ret, length), shared, data = self._update(carry, ready)
        t = carry.totals
        totals = Totals(
            t.episodes + episodes.astype(jnp.int32),
            t.return_sum + ret,
            t.length_sum + length.astype(jnp.float32),
            metrics,
        )
        return Carry(learner, acting, totals, shared, data)

    def update_seeds(self, carry: Carry) -> Carry:
        """One update of every seed (`[S]` leaves); every seed's flow state fills alike, so
        the first seed's says whether the flow is ready, unbatched."""
        ready = self.flow.ready(jax.tree.map(lambda x: x[0], carry.data))
        return jax.vmap(self.update, in_axes=(0, None))(carry, ready)


def each_carry(fn: Any, carry: Any) -> Any:
    """`fn` applied to a carry, or to each of several agents' carries (a tuple, `agents.py`)."""
    return jax.tree.map(fn, carry, is_leaf=lambda x: isinstance(x, Carry))


def drained(carry: Any) -> Any:
    """The carry (or several agents' carries) with its episode sums cleared (after the host
    read them)."""

    def one(c: Carry) -> Carry:
        t = c.totals
        zero = jax.tree.map(jnp.zeros_like, (t.episodes, t.return_sum, t.length_sum))
        return c._replace(totals=Totals(*zero, t.metrics))

    return each_carry(one, carry)


def carry_shardings(mesh: jax.sharding.Mesh, abstract: Any) -> Any:
    """The shardings of a carry (or several agents' carries): per-env leaves split on `B` over
    the mesh's data axis, the rest replicated (a replay is whole on every device: see README)."""
    replicated = NamedSharding(mesh, PartitionSpec())
    per_env = NamedSharding(mesh, PartitionSpec(None, DATA_AXIS))

    def one(c: Carry) -> Carry:
        every = lambda tree, sharding: jax.tree.map(lambda _: sharding, tree)  # noqa: E731
        return Carry(
            learner=every(c.learner, replicated),
            acting=every(c.acting, per_env),
            totals=every(c.totals, replicated),
            shared=every(c.shared, replicated),
            data=every(c.data, replicated),
        )

    return each_carry(one, abstract)


class Anakin:
    """`Program` vmapped over `num_seeds` seeds and jitted over `mesh` (env axis split).

    Every carry leaf has a leading `[S]` seed axis; per-env leaves are `[S, B, ...]`, split over
    the mesh's data axis on `B`.
    """

    def __init__(self, program: Program, num_seeds: int, mesh: jax.sharding.Mesh):
        self.program, self.num_seeds, self.mesh = program, num_seeds, mesh
        # The carry's shapes come from the jitted init's own trace, which its first call reuses
        # (a separate `jax.eval_shape` traced the whole init, rollout and update, once more):
        # the call passes `warm` as this does (None: no warm start), for jit keys its traces
        # by the arguments as given, and an omitted default is another key (a second trace).
        self.init = jax.jit(self._init)
        abstract = self.init.eval_shape(jax.ShapeDtypeStruct((num_seeds,), jnp.uint32), None)
        self.sharding = self._shardings(abstract)
        self.abstract = jax.tree.map(
            lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
            abstract,
            self.sharding,
        )
        self.train = jax.jit(
            self._train,
            in_shardings=(self.sharding, None),
            out_shardings=self.sharding,
            donate_argnums=0,
        )
        self.drain = jax.jit(drained, in_shardings=(self.sharding,), out_shardings=self.sharding)

    def _init(self, seeds: jax.Array, warm: PyTree = None) -> Carry:
        """Every seed's fresh carry; `warm`: warm-start params (host arrays, the same for
        every seed; several agents: by name) or None."""
        # One seed after another (`lax.map`), not vmapped: a vmapped init batches the
        # orthogonal initialisers' LAPACK QR calls, and that program hung on XLA:CPU
        # (jax 0.10.2, 2 cores) while each part alone ran. Init runs once; speed is moot.
        carry = jax.lax.map(lambda seed: self.program.init(seed, warm=warm), seeds)
        return jax.lax.with_sharding_constraint(carry, self._shardings(carry))

    def _train(self, carry: Carry, num_updates: jax.Array) -> Carry:
        step = self.program.update_seeds
        return jax.lax.fori_loop(0, num_updates, lambda _, c: step(c), carry)

    def _shardings(self, abstract: Carry) -> Carry:
        return carry_shardings(self.mesh, abstract)
