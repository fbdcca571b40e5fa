"""The Nature CNN alone on XLA:CPU: forward, forward + backward, the same in a `lax.scan`, and
in an SGD loop that carries the params, rolled and unrolled (README.md beside this file)."""

import functools
import time

import jax
import jax.numpy as jnp

from jaxrl_dist.networks.torsos import NatureCNNTorso

BATCH = 256


def timed(fn, *args, repeats: int = 5) -> float:
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(repeats):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / repeats


def main() -> None:
    model = NatureCNNTorso()  # the library's own torso: EnvPool's uint8 [N, C, H, W] frames
    x = jnp.zeros((BATCH, 4, 84, 84), jnp.uint8)
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
    xs = jnp.zeros((4, *x.shape), jnp.uint8)
    dt = timed(jax.jit(scanned), params, xs, repeats=1) / 4
    print(f"fwd+bwd in lax.scan: {dt * 1000:.0f} ms per {BATCH} samples")

    def sgd(p, xs, unroll):  # the params carried by the loop, as in an SGD loop
        def body(p, x):
            return jax.tree.map(lambda a, b: a - 1e-3 * b, p, jax.grad(loss)(p, x)), None

        return jax.lax.scan(body, p, xs, unroll=unroll)[0]

    for unroll in (1, 4):
        loop = jax.jit(functools.partial(sgd, unroll=unroll))
        dt = timed(loop, params, xs, repeats=1) / 4
        print(f"SGD loop, unroll={unroll}: {dt * 1000:.0f} ms per {BATCH} samples")


if __name__ == "__main__":
    main()
