"""Tests for jaxrl_dist.networks: shapes, dtypes, leading dims, bf16, config checks, sizes."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.config import ConfigError
from jaxrl_dist.config.cli import command_line_message
from jaxrl_dist.networks import NetworkConfig, make_actor_critic, resolve_torso
from jaxrl_dist.networks.torsos import frames_to_nhwc

IMAGE_SHAPE = (4, 84, 84)
# (torso, obs_shape, num_actions): CartPole-sized MLP and Atari-sized image torsos.
CASES = {
    "mlp": ((4,), 2),
    "nature_cnn": (IMAGE_SHAPE, 4),
    "impala_resnet": (IMAGE_SHAPE, 4),
}
B, T = 2, 3


def _obs(obs_shape: tuple[int, ...], lead: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """uint8 frames for image shapes (as EnvPool gives them), float32 vectors otherwise."""
    rng = np.random.default_rng(seed)
    if len(obs_shape) == 3:
        return rng.integers(0, 256, (*lead, *obs_shape), dtype=np.uint8)
    return rng.standard_normal((*lead, *obs_shape), dtype=np.float32)


def _fast_params(net, obs: np.ndarray, seed: int = 0):
    """Params shaped by `net.init` (traced only) but filled with NumPy He-normal draws.

    Compiling the CNNs' real `init` (one RNG stream per kernel) takes ~5-10 s on CPU; the
    forward-pass tests only need float32 weights of a sensible scale. `net.init` itself is run
    for the MLP (see `test_head_and_mlp_init_scales`).
    """
    rng = np.random.default_rng(seed)

    def fill(x: jax.ShapeDtypeStruct) -> np.ndarray:
        if len(x.shape) == 1:
            return np.zeros(x.shape, x.dtype)  # biases
        std = math.sqrt(2.0 / math.prod(x.shape[:-1]))  # He normal, fan-in = all but last dim
        return (std * rng.standard_normal(x.shape)).astype(x.dtype)

    return jax.tree.map(fill, jax.eval_shape(net.init, jax.random.key(0), obs))


@functools.cache
def _net_and_params(torso: str):
    """float32 network and its params, built once per torso."""
    obs_shape, num_actions = CASES[torso]
    net = make_actor_critic(NetworkConfig(torso=torso), obs_shape, num_actions)
    obs = _obs(obs_shape, (B,))
    params = (
        jax.jit(net.init)(jax.random.key(42), obs) if torso == "mlp" else _fast_params(net, obs)
    )
    return net, params


@functools.cache
def _jit_apply(torso: str):
    return jax.jit(_net_and_params(torso)[0].apply)


@pytest.mark.parametrize("lead", [(B,), (T, B)], ids=["B", "TB"])
@pytest.mark.parametrize("torso", list(CASES))
def test_output_shapes_and_dtypes(torso, lead):
    obs_shape, num_actions = CASES[torso]
    _, params = _net_and_params(torso)
    logits, value = _jit_apply(torso)(params, _obs(obs_shape, lead))
    assert logits.shape == (*lead, num_actions) and logits.dtype == jnp.float32
    assert value.shape == lead and value.dtype == jnp.float32
    assert np.all(np.isfinite(logits)) and np.all(np.isfinite(value))


@pytest.mark.parametrize("torso", list(CASES))
def test_time_batch_equals_per_step_batches(torso):
    obs_shape, _ = CASES[torso]
    _, params = _net_and_params(torso)
    apply = _jit_apply(torso)
    obs = _obs(obs_shape, (T, B), seed=1)
    logits, value = apply(params, obs)
    # Batch size changes XLA's kernels/summation order (and TF32 on GPU), so compare with a
    # tolerance relative to the output scale; mixing up slices gives O(1) differences.
    for t in range(T):
        logits_t, value_t = apply(params, obs[t])
        for got, want in ((logits[t], logits_t), (value[t], value_t)):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    # Different time steps got different inputs, so the outputs must differ too.
    assert not np.allclose(value[0], value[1])


def test_unbatched_obs_gives_scalar_value():
    net, params = _net_and_params("mlp")
    logits, value = net.apply(params, _obs((4,), ()))
    assert logits.shape == (2,) and value.shape == ()


def test_wrong_obs_shape_raises():
    net, params = _net_and_params("mlp")
    with pytest.raises(ValueError, match="obs_shape"):
        net.apply(params, jnp.zeros((B, 5)))


@pytest.mark.parametrize("torso", list(CASES))
def test_bfloat16_params_float32_outputs_close(torso):
    obs_shape, _ = CASES[torso]
    net16 = make_actor_critic(NetworkConfig(torso=torso, dtype="bfloat16"), *CASES[torso])
    params16 = jax.eval_shape(net16.init, jax.random.key(0), _obs(obs_shape, (B,)))
    assert {x.dtype for x in jax.tree.leaves(params16)} == {jnp.dtype(jnp.float32)}
    _, params32 = _net_and_params(torso)
    obs = _obs(obs_shape, (T, B), seed=2)
    # Same float32 weights through both compute dtypes.
    apply16 = jax.jit(functools.partial(net16.apply, capture_intermediates=True))
    (logits16, value16), state = apply16(params32, obs)
    logits32, value32 = _jit_apply(torso)(params32, obs)
    assert state["intermediates"]["torso"]["__call__"][0].dtype == jnp.bfloat16
    assert logits16.dtype == value16.dtype == jnp.float32
    for out16, out32 in ((logits16, logits32), (value16, value32)):
        scale = float(np.abs(out32).max())
        np.testing.assert_allclose(out16, out32, rtol=0.05, atol=0.05 * scale)
    assert not np.array_equal(value16, value32)  # really computed in bf16


def _param_tree_shapes(config: NetworkConfig, obs_shape, num_actions: int):
    net = make_actor_critic(config, obs_shape, num_actions)
    dummy = jax.ShapeDtypeStruct((1, *obs_shape), jnp.uint8 if len(obs_shape) == 3 else jnp.float32)
    return jax.eval_shape(net.init, jax.random.key(0), dummy)["params"]


def test_auto_picks_mlp_for_vectors_and_impala_for_frames():
    assert resolve_torso(NetworkConfig(), (4,)) == "mlp"
    assert resolve_torso(NetworkConfig(), IMAGE_SHAPE) == "impala_resnet"
    vec = _param_tree_shapes(NetworkConfig(), (4,), 2)["torso"]
    assert set(vec) == {"Dense_0", "Dense_1"} and vec["Dense_0"]["kernel"].shape == (4, 64)
    img = _param_tree_shapes(NetworkConfig(), IMAGE_SHAPE, 4)["torso"]
    assert set(img) == {"ImpalaStage_0", "ImpalaStage_1", "ImpalaStage_2", "Dense_0"}


@pytest.mark.parametrize(
    "field, value",
    [
        ("torso", "foo"),
        ("activation", "gelu"),
        ("dtype", "float16"),
        ("hidden_sizes", ()),
        ("hidden_sizes", (64, 0)),
        ("hidden_sizes", (64.0,)),
        ("hidden_sizes", "64"),
    ],
)
def test_bad_config_raises_naming_field(field, value):
    with pytest.raises(ValueError) as err:
        NetworkConfig(**{field: value})
    msg = str(err.value)
    assert f"network.{field}={value!r}" in msg and f"set config.network.{field}" in msg
    assert "\n" not in msg
    # On the command line (train.py) the fix names the override flag.
    assert f"set --config.network.{field}" in command_line_message(ConfigError(msg))


def test_config_error_lists_allowed_values():
    with pytest.raises(ValueError, match=r"'auto', 'mlp', 'nature_cnn', 'impala_resnet'"):
        NetworkConfig(torso="foo")


def test_hidden_sizes_list_is_normalised_to_tuple():
    assert NetworkConfig(hidden_sizes=[32, 32]).hidden_sizes == (32, 32)


@pytest.mark.parametrize(
    "torso, obs_shape",
    [("nature_cnn", (4,)), ("impala_resnet", (4,)), ("auto", (4, 4)), ("nature_cnn", (4, 20, 20))],
)
def test_torso_obs_shape_mismatch_raises(torso, obs_shape):
    with pytest.raises(ValueError, match="network.torso"):
        make_actor_critic(NetworkConfig(torso=torso), obs_shape, 2)


def test_impala_resnet_parameter_count():
    """Hand count for obs (4, 84, 84), 4 actions, channels (16, 32, 32), 2 blocks per stage.

    A 3x3 conv c_in -> c_out has 9 * c_in * c_out + c_out params. Each stage is one conv
    c_in -> c plus 2 residual blocks of 2 convs c -> c; every stage halves H, W rounding up
    (SAME max-pool, stride 2): 84 -> 42 -> 21 -> 11, so Dense 256 sees 11 * 11 * 32 inputs.
      stage 16: (9*4*16 + 16) + 4 * (9*16*16 + 16)  =   592 + 4 * 2320 =   9872
      stage 32: (9*16*32 + 32) + 4 * (9*32*32 + 32) =  4640 + 4 * 9248 =  41632
      stage 32: (9*32*32 + 32) + 4 * (9*32*32 + 32) =  9248 + 4 * 9248 =  46240
      dense:    3872 * 256 + 256                                        = 991488
      policy:   256 * 4 + 4 = 1028;  value: 256 + 1 = 257
      total                                                            = 1090517
    """

    def conv3x3(c_in: int, c_out: int) -> int:
        return 9 * c_in * c_out + c_out

    expected, c_in, size = 0, 4, 84
    for c in (16, 32, 32):
        expected += conv3x3(c_in, c) + 2 * 2 * conv3x3(c, c)
        c_in, size = c, math.ceil(size / 2)
    expected += (size * size * c_in) * 256 + 256  # Dense 256
    expected += 256 * 4 + 4  # policy logits
    expected += 256 + 1  # value
    assert size == 11 and expected == 1_090_517

    params = _param_tree_shapes(NetworkConfig(torso="impala_resnet"), IMAGE_SHAPE, 4)
    assert sum(x.size for x in jax.tree.leaves(params)) == expected


def test_head_and_mlp_init_scales():
    _, params = _net_and_params("mlp")
    p = params["params"]
    pol = np.asarray(p["policy_head"]["Dense_0"]["kernel"])  # [64, 2]: orthonormal columns
    np.testing.assert_allclose(pol.T @ pol, 0.01**2 * np.eye(2), atol=1e-8)
    val = np.asarray(p["value_head"]["Dense_0"]["kernel"])  # [64, 1]
    np.testing.assert_allclose(val.T @ val, [[1.0]], rtol=1e-5)
    hidden = np.asarray(p["torso"]["Dense_0"]["kernel"])  # [4, 64]: orthonormal rows
    np.testing.assert_allclose(hidden @ hidden.T, 2.0 * np.eye(4), atol=1e-5)
    for bias in (p["policy_head"]["Dense_0"]["bias"], p["torso"]["Dense_1"]["bias"]):
        assert not np.any(bias)


def test_frames_to_nhwc_transposes_and_scales():
    frames = np.arange(2 * 3 * 4 * 5, dtype=np.uint8).reshape(2, 3, 4, 5)  # [N, C, H, W]
    x = frames_to_nhwc(jnp.asarray(frames), jnp.float32)
    assert x.shape == (2, 4, 5, 3) and x.dtype == jnp.float32
    np.testing.assert_allclose(x, frames.transpose(0, 2, 3, 1) / 255.0, rtol=1e-6)
    assert float(frames_to_nhwc(jnp.full((1, 1, 1, 1), 255, jnp.uint8), jnp.float32).max()) == 1.0
