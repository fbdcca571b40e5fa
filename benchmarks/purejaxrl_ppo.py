"""A minimal single-file PPO written the PureJaxRL way: the throughput baseline of Anakin.

After PureJaxRL's `ppo.py` (Lu et al. 2022, github.com/luchris429/purejaxrl): the whole training
run is one jitted function (the params' init a separate one, not timed), gymnax envs auto-reset
by gymnax's own `step`, separate actor and critic tanh MLPs (64, 64) with orthogonal init, GAE,
`UPDATE_EPOCHS` x `NUM_MINIBATCHES` Adam steps on shuffled samples, learning rate annealed per
minibatch step. Nothing else: no logging, evaluation, checkpoints or sharding, which is what the
library's Anakin runtime adds on top.

    python benchmarks/purejaxrl_ppo.py                  # 500k steps of CartPole-v1, 1 seed
    python benchmarks/purejaxrl_ppo.py --seeds 8        # 8 seeds vmapped in one program

Prints the compile time, the run time and env steps per second (all seeds), and the mean of the
last 10 updates' finished-episode returns per seed.
"""

from __future__ import annotations

import argparse
import time
from typing import NamedTuple

import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.linen.initializers import constant, orthogonal

CONFIG = {
    "ENV_NAME": "CartPole-v1",
    "LR": 2.5e-4,
    "NUM_ENVS": 4,
    "NUM_STEPS": 128,
    "TOTAL_TIMESTEPS": 500_000,
    "UPDATE_EPOCHS": 4,
    "NUM_MINIBATCHES": 4,
    "GAMMA": 0.99,
    "GAE_LAMBDA": 0.95,
    "CLIP_EPS": 0.2,
    "ENT_COEF": 0.01,
    "VF_COEF": 0.5,
    "MAX_GRAD_NORM": 0.5,
    "ANNEAL_LR": True,
}


class ActorCritic(nn.Module):
    action_dim: int

    @nn.compact
    def __call__(self, x):
        a = nn.tanh(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x))
        a = nn.tanh(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(a))
        logits = nn.Dense(self.action_dim, kernel_init=orthogonal(0.01))(a)
        c = nn.tanh(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(x))
        c = nn.tanh(nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0))(c))
        value = nn.Dense(1, kernel_init=orthogonal(1.0), bias_init=constant(0.0))(c)
        return logits, jnp.squeeze(value, axis=-1)


class Transition(NamedTuple):
    done: jax.Array
    action: jax.Array
    value: jax.Array
    reward: jax.Array
    log_prob: jax.Array
    obs: jax.Array
    episode_return: jax.Array  # the return of an episode that ended here, else 0


def make_train(config: dict):
    num_updates = config["TOTAL_TIMESTEPS"] // config["NUM_STEPS"] // config["NUM_ENVS"]
    minibatch_size = config["NUM_ENVS"] * config["NUM_STEPS"] // config["NUM_MINIBATCHES"]
    env, env_params = gymnax.make(config["ENV_NAME"])
    network = ActorCritic(env.action_space(env_params).n)

    def linear_schedule(count):
        frac = 1.0 - (count // (config["NUM_MINIBATCHES"] * config["UPDATE_EPOCHS"])) / num_updates
        return config["LR"] * frac

    def init(rng):
        _, init_rng, _ = jax.random.split(rng, 3)
        return network.init(init_rng, jnp.zeros(env.observation_space(env_params).shape))

    def train(rng, params):
        rng, _, reset_rng = jax.random.split(rng, 3)
        lr = linear_schedule if config["ANNEAL_LR"] else config["LR"]
        tx = optax.chain(
            optax.clip_by_global_norm(config["MAX_GRAD_NORM"]), optax.adam(lr, eps=1e-5)
        )
        opt_state = tx.init(params)
        keys = jax.random.split(reset_rng, config["NUM_ENVS"])
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)
        running = jnp.zeros(config["NUM_ENVS"])

        def update(runner, _):
            def env_step(runner, _):
                params, opt_state, env_state, obs, running, rng = runner
                rng, act_rng, step_rng = jax.random.split(rng, 3)
                logits, value = network.apply(params, obs)
                action = jax.random.categorical(act_rng, logits)
                log_prob = jax.nn.log_softmax(logits)[jnp.arange(action.shape[0]), action]
                keys = jax.random.split(step_rng, config["NUM_ENVS"])
                next_obs, env_state, reward, terminated, truncated, _ = jax.vmap(
                    env.step, in_axes=(0, 0, 0, None)
                )(keys, env_state, action, env_params)
                done = jnp.logical_or(terminated, truncated)
                running = running + reward
                ended = jnp.where(done, running, 0.0)
                running = jnp.where(done, 0.0, running)
                t = Transition(done, action, value, reward, log_prob, obs, ended)
                return (params, opt_state, env_state, next_obs, running, rng), t

            runner, traj = jax.lax.scan(env_step, runner, None, config["NUM_STEPS"])
            params, opt_state, env_state, last_obs, running, rng = runner
            _, last_value = network.apply(params, last_obs)

            def gae_step(carry, t):
                gae, next_value = carry
                delta = t.reward + config["GAMMA"] * next_value * (1 - t.done) - t.value
                gae = delta + config["GAMMA"] * config["GAE_LAMBDA"] * (1 - t.done) * gae
                return (gae, t.value), gae

            _, advantages = jax.lax.scan(
                gae_step, (jnp.zeros_like(last_value), last_value), traj, reverse=True
            )
            targets = advantages + traj.value

            def loss_fn(params, t, adv, target):
                logits, value = network.apply(params, t.obs)
                log_probs = jax.nn.log_softmax(logits)
                log_prob = jnp.take_along_axis(log_probs, t.action[:, None], axis=-1)[:, 0]
                clipped = t.value + (value - t.value).clip(-config["CLIP_EPS"], config["CLIP_EPS"])
                value_loss = 0.5 * jnp.maximum((value - target) ** 2, (clipped - target) ** 2)
                ratio = jnp.exp(log_prob - t.log_prob)
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                actor_loss = -jnp.minimum(
                    ratio * adv,
                    jnp.clip(ratio, 1.0 - config["CLIP_EPS"], 1.0 + config["CLIP_EPS"]) * adv,
                )
                entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, axis=-1)
                return (
                    actor_loss.mean()
                    + config["VF_COEF"] * value_loss.mean()
                    - config["ENT_COEF"] * entropy.mean()
                )

            def epoch(carry, _):
                params, opt_state, rng = carry
                rng, perm_rng = jax.random.split(rng)
                batch_size = minibatch_size * config["NUM_MINIBATCHES"]
                permutation = jax.random.permutation(perm_rng, batch_size)
                data = (traj, advantages, targets)
                flat = jax.tree.map(lambda x: x.reshape((batch_size, *x.shape[2:])), data)
                shuffled = jax.tree.map(lambda x: jnp.take(x, permutation, axis=0), flat)
                minibatches = jax.tree.map(
                    lambda x: x.reshape((config["NUM_MINIBATCHES"], -1, *x.shape[1:])), shuffled
                )

                def sgd(carry, mb):
                    params, opt_state = carry
                    grads = jax.grad(loss_fn)(params, *mb)
                    updates, opt_state = tx.update(grads, opt_state)
                    return (optax.apply_updates(params, updates), opt_state), None

                (params, opt_state), _ = jax.lax.scan(sgd, (params, opt_state), minibatches)
                return (params, opt_state, rng), None

            (params, opt_state, rng), _ = jax.lax.scan(
                epoch, (params, opt_state, rng), None, config["UPDATE_EPOCHS"]
            )
            episodes = traj.done.sum()
            mean_return = traj.episode_return.sum() / jnp.maximum(episodes, 1)
            return (params, opt_state, env_state, last_obs, running, rng), mean_return

        runner = (params, opt_state, env_state, obs, running, rng)
        runner, returns = jax.lax.scan(update, runner, None, num_updates)
        return runner[0], returns

    return init, train


def measure(config: dict, num_seeds: int, seed: int = 0) -> dict:
    """Compiles, then runs the whole training of `num_seeds` vmapped seeds once (timed)."""
    init, train = make_train(config)
    keys = jax.random.split(jax.random.PRNGKey(seed), num_seeds)
    # Each seed's params one after another (`lax.map`), as `anakin/program.py` does: a vmapped
    # orthogonal init batches LAPACK QR calls, and 8 seeds' program hung on XLA:CPU (jax
    # 0.10.2, 2 cores) now and then. PureJaxRL inits inside its vmapped `train`; the init is
    # the same work, and is not timed.
    params = jax.block_until_ready(jax.jit(lambda k: jax.lax.map(init, k))(keys))
    t0 = time.perf_counter()
    compiled = jax.jit(jax.vmap(train)).lower(keys, params).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, returns = jax.block_until_ready(compiled(keys, params))
    run_s = time.perf_counter() - t0
    steps = (config["TOTAL_TIMESTEPS"] // (config["NUM_STEPS"] * config["NUM_ENVS"])) * (
        config["NUM_STEPS"] * config["NUM_ENVS"]
    )
    return {
        "num_seeds": num_seeds,
        "env_steps_per_seed": steps,
        "compile_s": round(compile_s, 3),
        "run_s": round(run_s, 3),
        "sps": round(steps * num_seeds / run_s, 1),
        "final_return": [round(float(r), 1) for r in np.asarray(returns)[:, -10:].mean(axis=1)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1, help="seeds vmapped in one program")
    parser.add_argument("--total-timesteps", type=int, default=CONFIG["TOTAL_TIMESTEPS"])
    args = parser.parse_args()
    print(measure({**CONFIG, "TOTAL_TIMESTEPS": args.total_timesteps}, args.seeds))


if __name__ == "__main__":
    main()
