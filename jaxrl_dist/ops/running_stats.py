"""Running mean and variance of observations, for observation normalisation.

The statistics are a `RunningStats` NamedTuple of float32 arrays, so they can live in the
params pytree, cross devices and be checkpointed. Updates follow OpenAI baselines'
`RunningMeanStd.update_from_moments`: the moments of each batch are combined with the running
ones by the parallel algorithm of Chan et al. 1979 ("Updating Formulae and a Pairwise
Algorithm for Computing Sample Variances"), starting from `count = 1e-4`, mean 0, var 1.
"""

from typing import NamedTuple

import chex
import jax.numpy as jnp

Array = chex.Array


class RunningStats(NamedTuple):
    """Running moments of values shaped `[*shape]`.

    Attributes:
        mean: running mean `[*shape]` float32.
        var: running (population) variance `[*shape]` float32.
        count: number of samples seen `[]` float32 (plus the initial pseudo-count `1e-4`).
    """

    mean: Array
    var: Array
    count: Array


def init_running_stats(shape: tuple[int, ...]) -> RunningStats:
    """Mean 0, var 1 and pseudo-count `1e-4` over `[*shape]`, as baselines' `RunningMeanStd`."""
    return RunningStats(
        mean=jnp.zeros(shape, jnp.float32),
        var=jnp.ones(shape, jnp.float32),
        count=jnp.asarray(1e-4, jnp.float32),
    )


def _batch_moments(x: Array, mask: Array, lead: int) -> tuple[Array, Array, Array]:
    """Masked mean `[*shape]`, variance `[*shape]` and count `[]` over the `lead` first axes."""
    axes = tuple(range(lead))
    weights = jnp.reshape(mask, mask.shape + (1,) * (x.ndim - lead))
    count = jnp.sum(mask)
    denominator = jnp.where(count > 0, count, 1.0)  # An all-masked batch changes nothing.
    # `where`, not a product, so that masked entries (even inf or nan) contribute exactly 0.
    mean = jnp.sum(jnp.where(weights > 0, weights * x, 0.0), axis=axes) / denominator
    sq_dev = jnp.where(weights > 0, weights * jnp.square(x - mean), 0.0)
    return mean, jnp.sum(sq_dev, axis=axes) / denominator, count


def update_running_stats(stats: RunningStats, x: Array, mask: Array | None = None) -> RunningStats:
    """Combines the moments of a batch `x` with `stats` (Chan et al.'s parallel algorithm).

    Args:
        stats: the running statistics over `[*shape]`.
        x: a batch `[N..., *shape]`, any number of leading batch dims (e.g. `[T, B, *shape]`).
        mask: `[N...]` 0/1 weights, or None for all ones; entries with weight 0 count for
            nothing.

    Returns:
        The updated `RunningStats`, float32.
    """
    x = jnp.asarray(x, jnp.float32)
    shape = stats.mean.shape
    lead = x.ndim - len(shape)
    if lead < 0 or x.shape[lead:] != shape:
        raise ValueError(f"x {x.shape} must be shaped [N..., *{shape}].")
    mask = jnp.ones(x.shape[:lead], jnp.float32) if mask is None else mask
    chex.assert_shape(mask, x.shape[:lead])
    batch_mean, batch_var, batch_count = _batch_moments(x, jnp.asarray(mask, jnp.float32), lead)

    delta = batch_mean - stats.mean
    total = stats.count + batch_count
    weight = batch_count / total
    mean = stats.mean + delta * weight
    # M2 / total with M2 = var count + batch_var batch_count + delta^2 count batch_count / total,
    # written as an increment so that an all-masked batch (weight 0) leaves `var` bit-exact.
    var = stats.var + weight * (batch_var - stats.var + jnp.square(delta) * (stats.count / total))
    return RunningStats(mean=mean, var=var, count=total)


def normalize(stats: RunningStats, x: Array, clip: float = 10.0, eps: float = 1e-8) -> Array:
    """`(x - mean) / sqrt(var + eps)` clipped to `[-clip, clip]`, float32 `[..., *shape]`."""
    x = jnp.asarray(x, jnp.float32)
    normalized = (x - stats.mean) / jnp.sqrt(stats.var + eps)
    return jnp.clip(normalized, -clip, clip)
