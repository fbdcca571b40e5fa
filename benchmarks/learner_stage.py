"""The learner stage of `stages.py`, alone: synthetic batches of the real shapes, updates per
second with the batch resident on the learner devices and with the trainer's host transfer and
publish, FLOPs per update from XLA's cost analysis and, on a GPU, MFU against the datasheet peak
and a measured matmul."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist import agents
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.agents.base import ActorIdentity, Agent, RunShape
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.data import flows
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.learning.learner import Learner, host_metrics
from jaxrl_dist.run.preflight import config_agent
from jaxrl_dist.sebulba.engine import SebulbaEngine
from jaxrl_dist.types import Rollout

# Dense datasheet peaks (FLOP/s) per compute dtype; float32 convolutions and matmuls run as TF32
# on the tensor cores under JAX's default precision on these GPUs.
DATASHEET_PEAK_FLOPS = {
    "H100": {"bfloat16": 989.4e12, "float32": 494.7e12},
    "H200": {"bfloat16": 989.4e12, "float32": 494.7e12},
    "A100": {"bfloat16": 312e12, "float32": 156e12},
}


def build(config: TrainConfig):
    """(env spec, devices, agent) for `config`, as the trainer builds them."""
    spec, devices = SebulbaEngine.machine(config)
    entry = agents.get(config.algorithm)
    shape = RunShape(config.total_env_steps, flows.get(entry.data).env_steps_per_update(config))
    agent = config_agent(config, spec, shape)
    return spec, devices, agent


def synthetic_rollout(agent: Agent, spec: EnvSpec, params, unroll: int, batch: int, seed: int):
    """A host `[T + 1, B]` rollout of the real shapes and dtypes: random observations (uint8
    frames or floats), actions and extras from the policy itself (the actor half stepped over
    the unroll from a fresh per-env state), sparse episode ends."""
    rng = np.random.default_rng(seed)
    shape = (unroll + 1, batch, *spec.obs_shape)
    if np.issubdtype(spec.obs_dtype, np.integer):
        obs = rng.integers(0, 256, shape, dtype=np.uint8).astype(spec.obs_dtype)
    else:
        obs = rng.standard_normal(shape).astype(np.float32)
    core = agent.actor

    def act(params, obs):
        state = core.init_state(ActorIdentity(0, 1), batch, jax.random.PRNGKey(seed))

        def step(state, obs_t):
            action, extras, state = core.act(params, obs_t, state)
            return state, (action, extras)

        return jax.lax.scan(step, state, obs)[1]

    action, extras = jax.device_get(jax.jit(act)(params, jnp.asarray(obs[:-1])))
    ends = rng.random((unroll + 1, batch)) < 0.01
    terminated = ends & (rng.random(ends.shape) < 0.5)
    return Rollout(
        obs=obs,
        reward=rng.integers(0, 2, (unroll + 1, batch)).astype(np.float32),
        terminated=terminated,
        truncated=ends & ~terminated,
        action=np.asarray(action),
        agent_extras={k: np.asarray(v) for k, v in extras.items()},
        policy_version=np.zeros((unroll, batch), np.int32),
    )


def _timed_updates(step, seconds: float, max_in_flight: int) -> tuple[int, float]:
    """Calls `step(n)` (n updates, then a sync) in growing chunks for about `seconds`."""
    done, n, start = 0, 1, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step(n)
        done += n
        n = min(2 * n, max_in_flight)
    return done, time.perf_counter() - start


def update_flops(agent: Agent, state, batch) -> float | None:
    """XLA's FLOP count of one update, from the CPU compilation of the same function (the GPU
    backend hands convolutions to cuDNN, whose FLOPs its cost analysis may not count)."""
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=cpu), (state, batch)
    )
    cost = jax.jit(agent.learner.update).lower(*abstract).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    flops = (cost or {}).get("flops")
    return float(flops) if flops and flops > 0 else None


def matmul_flops_per_s(dtype: str, n: int = 8192, reps: int = 20) -> float:
    """Measured rate of a large square matmul on the default device: the practical ceiling."""
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.dtype(dtype))
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.dtype(dtype))
    f = jax.jit(lambda a, b: a @ b)
    f(a, b).block_until_ready()
    start = time.perf_counter()
    for _ in range(reps):
        out = f(a, b)
    out.block_until_ready()
    return 2 * n**3 * reps / (time.perf_counter() - start)


def datasheet_peak(device: jax.Device, dtype: str) -> float | None:
    for name, peaks in DATASHEET_PEAK_FLOPS.items():
        if name in device.device_kind:
            return peaks.get(dtype)
    return None


def learner_alone(config: TrainConfig, seconds: float) -> dict:
    """Updates/s and samples/s on synthetic batches, resident and with the host transfer."""
    spec, devices, agent = build(config)
    learner = Learner(agent.learner, devices, config.seed)
    state = learner.init_state()
    host_batch = synthetic_rollout(
        agent,
        spec,
        learner.actor_params(state),
        config.unroll_length,
        config.batch_size,
        config.seed,
    )
    flops = update_flops(agent, state, host_batch)
    device_batch = learner.put_batch(host_batch)
    store = ParamsStore(devices.actor_devices)
    box = {"state": state}

    def resident(n):
        for _ in range(n):
            box["state"], metrics, _ = learner.update(box["state"], device_batch)
        jax.block_until_ready(metrics)

    def with_transfer(n):  # as the trainer drives it: transfer, update, metrics, publish
        for i in range(n):
            box["state"], metrics, _ = learner.update(box["state"], learner.put_batch(host_batch))
            host_metrics(metrics)
            store.publish(learner.actor_params(box["state"]), i)

    resident(2)  # compile
    out = {"flops_per_update": flops, "batch": config.batch_size, "unroll": config.unroll_length}
    # XLA:CPU's cross-device collectives can deadlock with many updates in flight on several
    # (fake) CPU devices (seen: an all-gather rendezvous timing out after 40 s); wait for each.
    device = devices.learner_mesh.devices.flat[0]
    in_flight = 1 if device.platform == "cpu" and devices.num_learner_devices > 1 else 64
    for name, step in (("resident", resident), ("with_transfer", with_transfer)):
        n, elapsed = _timed_updates(step, seconds / 2, in_flight)
        out[f"{name}_updates_per_s"] = n / elapsed
        out[f"{name}_samples_per_s"] = n * config.steps_per_update / elapsed
    if flops and device.platform == "gpu":
        achieved = flops * out["resident_updates_per_s"] / devices.num_learner_devices
        dtype = config.network.dtype
        out["achieved_flops_per_s_per_device"] = achieved
        out["matmul_flops_per_s"] = matmul_flops_per_s(dtype)
        out["mfu_vs_measured_matmul"] = achieved / out["matmul_flops_per_s"]
        peak = datasheet_peak(device, dtype)
        if peak:
            out["datasheet_peak_flops_per_s"] = peak
            out["mfu"] = achieved / peak
    return out
