"""The Nature CNN alone on XLA:CPU: forward, forward + backward, and the same in a `lax.scan`
(README.md beside this file)."""

import time

import flax.linen as nn
import jax
import jax.numpy as jnp

BATCH = 256


class Nature(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x.astype(jnp.float32) / 255.0
        x = nn.relu(nn.Conv(32, (8, 8), (4, 4), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, (4, 4), (2, 2), padding="VALID")(x))
        x = nn.relu(nn.Conv(64, (3, 3), (1, 1), padding="VALID")(x))
        x = nn.relu(nn.Dense(512)(x.reshape(x.shape[0], -1)))
        return nn.Dense(6)(x)


def timed(fn, *args, repeats: int = 5) -> float:
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    model = Nature()
    x = jnp.zeros((BATCH, 84, 84, 4), jnp.uint8)
    params = model.init(jax.random.PRNGKey(0), x)

    def loss(p, x):
        return model.apply(p, x).sum()

    def scanned(p, xs):
        def body(total, x):
            return total + jax.tree.leaves(jax.grad(loss)(p, x))[0].sum(), None

        return jax.lax.scan(body, 0.0, xs)[0]

    for name, fn in (("fwd", jax.jit(model.apply)), ("fwd+bwd", jax.jit(jax.grad(loss)))):
        dt = timed(fn, params, x)
        print(f"{name}: {dt * 1000:.0f} ms per {BATCH} samples ({BATCH / dt:,.0f} samples/s)")
    dt = timed(jax.jit(scanned), params, jnp.zeros((4, *x.shape), jnp.uint8), repeats=1) / 4
    print(f"fwd+bwd in lax.scan: {dt * 1000:.0f} ms per {BATCH} samples")


if __name__ == "__main__":
    main()
