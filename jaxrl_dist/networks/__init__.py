"""Networks: a torso (MLP, Nature CNN or IMPALA ResNet) plus policy/value heads (actor-critic)
or a Q head (`make_q_network`, the DQN family).

    net = make_actor_critic(NetworkConfig(), obs_shape=(4,), num_actions=2)
    params = net.init(key, obs)            # obs: [..., *obs_shape]
    logits, value = net.apply(params, obs)  # [..., num_actions] float32, [...] float32

Torsos: `MLPTorso` (PPO details, Huang et al. 2022), `NatureCNNTorso` (Mnih et al. 2015) and
`ImpalaResNetTorso` (Espeholt et al. 2018). Image observations are EnvPool's uint8
`[C, H, W]` frames; the torso converts them to NHWC in `[0, 1]`.
"""

from __future__ import annotations

import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl_dist.networks.config import (
    CONTINUOUS_FIELDS,
    NATURE_CNN_MIN_SIZE,
    TORSOS,
    NetworkConfig,
    is_positive_int,
)
from jaxrl_dist.networks.cores import (
    CORES,
    CoreSpec,
    RecurrentCore,
    check_user_core,
    initial_core_state,
    register_core,
)
from jaxrl_dist.networks.heads import (
    GaussianHead,
    HeadSpec,
    PolicyHead,
    UserHead,
    ValueHead,
    check_user_heads,
    register_head,
    user_head_fields,
)
from jaxrl_dist.networks.q_heads import QNetwork
from jaxrl_dist.networks.torsos import (
    TorsoSpec,
    check_user_torso,
    flatten_obs,
    make_torso,
    register_torso,
    torso_input,
    torso_width,
)

__all__ = [
    "ActorCritic",
    "CoreSpec",
    "HeadSpec",
    "NetworkConfig",
    "RecurrentActorCritic",
    "QNetwork",
    "core_input",
    "make_actor_critic",
    "make_q_network",
    "register_core",
    "register_head",
    "register_torso",
    "resolve_torso",
    "TorsoSpec",
]


def resolve_torso(
    config: NetworkConfig, obs_shape: tuple[int, ...], obs_dtype: Any = jnp.float32
) -> str:
    """The concrete torso name for `obs_shape` observations of `obs_dtype` (a user's torso is
    traced on them); raises ValueError if they do not fit."""
    torso = config.torso
    if torso == "auto":
        if len(obs_shape) not in (1, 3):
            raise ValueError(
                f"network.torso='auto' cannot pick a torso for obs_shape={obs_shape} "
                "(only rank 1 -> 'mlp' or [C, H, W] -> 'impala_resnet'); set config.network.torso"
            )
        torso = "mlp" if len(obs_shape) == 1 else "impala_resnet"
    if torso not in TORSOS:
        check_user_torso(
            config_torso(torso, config), config.torso, obs_shape, obs_dtype, config.normalize_obs
        )
        return torso
    if torso != "mlp" and len(obs_shape) != 3:
        raise ValueError(
            f"network.torso={torso!r} needs [C, H, W] image observations, got "
            f"obs_shape={obs_shape}; set config.network.torso='mlp'"
        )
    if torso == "nature_cnn" and min(obs_shape[1:]) < NATURE_CNN_MIN_SIZE:
        raise ValueError(
            f"network.torso='nature_cnn' needs H, W >= {NATURE_CNN_MIN_SIZE}, got "
            f"obs_shape={obs_shape}; set config.network.torso='impala_resnet'"
        )
    return torso


def config_torso(name: str, config: NetworkConfig, module_name: str = "torso") -> nn.Module:
    """The torso `name` with `config`'s MLP fields, dtype and LayerNorm, as `module_name`."""
    return make_torso(
        name,
        config.hidden_sizes,
        config.activation,
        config.compute_dtype,
        module_name,
        config.layer_norm,
    )


class ActorCritic(nn.Module):
    """A torso (shared, or one per head) with policy and value heads, over any leading dims.

    `__call__(obs [..., *obs_shape]) -> (policy [...], value [...] f32)`: `policy` is logits
    `[..., num_actions]` for discrete actions, or `{"mean", "log_std"}` `[..., action_dim]` when
    `continuous` (then `num_actions` is the action dimension). With `value_heads=2` the value
    is `[..., 2]`: the env reward's and, from a head of its own on the same features, an
    intrinsic reward's (`config.intrinsic`).
    Leading dims (e.g. `[B]` or `[T, B]`) are flattened to one batch dim for the torso and
    restored on the outputs. Build it with `make_actor_critic`, which validates the shapes.
    """

    config: NetworkConfig
    obs_shape: tuple[int, ...]
    num_actions: int
    torso_name: str
    continuous: bool = False
    value_heads: int = 1

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        lead, flat = flatten_obs(obs, self.obs_shape)
        features = config_torso(self.torso_name, self.config)(flat)
        value_features = features
        if not self.config.shared_torso:
            value_features = config_torso(self.torso_name, self.config, "value_torso")(flat)
        return _heads(self, features, value_features, lead)


class RecurrentActorCritic(ActorCritic):
    """A torso, a recurrent core (`config.core`) and the heads, over a sequence.

    `__call__(obs [T, B, *obs_shape], first [T, B] bool, state [B, ...]) -> (policy [T, B],
    value [T, B] f32, state [B, ...])`: `first[t]` marks an episode's first observation, where
    the core state is reset before it is read (`networks/cores.py`); `state` is the core's
    state before `obs[0]` and after `obs[T - 1]`: `{"core": ...}`, and `"value_core"` when the
    value head has a torso of its own (`shared_torso=False`). `ActorCritic`'s fields, and
    `core_input`: the torso's feature width, which a user's cell starts its carry for.
    """

    core_input: int = 0

    @nn.compact
    def __call__(self, obs: jax.Array, first: jax.Array, state):  # type: ignore[override]
        lead, flat = flatten_obs(obs, self.obs_shape)
        if len(lead) != 2 or tuple(first.shape) != lead:
            raise ValueError(f"a core unrolls obs [T, B, ...] with first [T, B], got {obs.shape}")
        streams = {"core": "torso"}
        if not self.config.shared_torso:
            streams["value_core"] = "value_torso"
        out, new_state = {}, {}
        for core_name, torso_name in streams.items():
            features = config_torso(self.torso_name, self.config, torso_name)(flat)
            core = RecurrentCore(self.config.core, self.config.core_size, name=core_name)
            new_state[core_name], seq = core(state[core_name], features.reshape((*lead, -1)), first)
            out[core_name] = seq.reshape((math.prod(lead), -1))
        policy, value = _heads(self, out["core"], out.get("value_core", out["core"]), lead)
        return policy, value, new_state

    @nn.nowrap  # no module context: a user's cell is built here as a module of its own
    def initial_state(self, batch: int) -> dict:
        """The core state of `batch` rows an episode starts from."""
        names = ("core",) if self.config.shared_torso else ("core", "value_core")
        config = self.config
        start = lambda: initial_core_state(config.core, batch, config.core_size, self.core_input)  # noqa: E731
        return {name: start() for name in names}


def _heads(module: nn.Module, features: jax.Array, value_features: jax.Array, lead: tuple):
    """The policy and value heads of an actor-critic `module` (called inside its compact
    `__call__`) on flat features, reshaped to the leading dims `lead`."""
    n, config = module.num_actions, module.config

    def head(role: str, outputs: tuple[int, ...], shipped: type, name: str) -> nn.Module:
        """The user's head `role`, or the shipped class's (`shipped(*outputs)`), as `name`."""
        if config.user_head:
            return UserHead(*user_head_fields(config, role, outputs), name=name)
        return shipped(*outputs, name=name)

    if module.continuous:
        policy = GaussianHead(
            n,
            config.state_dependent_std,
            config.log_std_init,
            user_head_fields(config, "policy", (n,)) if config.user_head else (),
            name="policy_head",
        )(features)
    else:
        policy = head("policy", (n,), PolicyHead, "policy_head")(features)
    value = head("value", (), ValueHead, "value_head")(value_features).reshape(lead)
    if module.value_heads == 2:
        intrinsic = head("intrinsic_value", (), ValueHead, "intrinsic_value_head")
        value = jnp.stack([value, intrinsic(value_features).reshape(lead)], axis=-1)
    policy = jax.tree.map(lambda x: x.reshape((*lead, n)), policy)
    return policy, value


def _refuse_unread(config: NetworkConfig, unread: tuple[str, ...], why: str) -> None:
    """ValueError (one line) for the first of fields `unread` set away from its default."""
    problem = config.unread_problem(unread, why)
    if problem:
        raise ValueError(problem)


def refuse_q_unread(config: NetworkConfig) -> None:
    """ValueError (one line) for a field a Q network does not read, set away from its default
    (`make_q_network`, R2D2's recurrent one)."""
    _refuse_unread(
        config, ("shared_torso", *CONTINUOUS_FIELDS), "a Q network has one torso and Q heads"
    )


def make_actor_critic(
    config: NetworkConfig,
    obs_shape: tuple[int, ...],
    num_actions: int,
    continuous: bool = False,
    value_heads: int = 1,
    obs_dtype: Any = jnp.float32,
) -> nn.Module:
    """Builds the actor-critic for `obs_shape` observations and `num_actions` discrete actions
    (or, with `continuous`, a Gaussian policy over `num_actions` action dimensions).

    Params: `{"torso", "policy_head", "value_head"}` (+ `"value_torso"` if not shared, `"core"`
    with a recurrent core: then it is a `RecurrentActorCritic`; `"intrinsic_value_head"` with
    `value_heads=2`), float32.
    """
    if value_heads not in (1, 2):
        raise ValueError(f"value_heads={value_heads!r} must be 1 or 2")
    obs_shape = tuple(int(d) for d in obs_shape)
    if not is_positive_int(num_actions):
        raise ValueError(f"num_actions={num_actions!r} must be a positive int")
    torso_name = resolve_torso(config, obs_shape, obs_dtype)
    if not continuous:
        _refuse_unread(config, CONTINUOUS_FIELDS, "the actions are discrete (a softmax head)")
    args = (config, obs_shape, int(num_actions), torso_name, continuous, value_heads)
    if not config.recurrent:
        net = ActorCritic(*args)
    else:
        width = core_input(config, torso_name, obs_shape, obs_dtype)
        net = RecurrentActorCritic(*args, core_input=width)
    if config.user_head:
        check_user_heads(net, config.head, *network_inputs(net, config, obs_shape, obs_dtype))
    return net


def network_inputs(
    net: nn.Module, config: NetworkConfig, obs_shape: tuple[int, ...], obs_dtype: Any
) -> tuple:
    """What `net.init` takes after its key, for 2 rows (one step of 2 with a core), as
    shapes."""
    obs = torso_input(obs_shape, obs_dtype, config.normalize_obs)
    if not config.recurrent:
        return (obs,)
    first = jax.ShapeDtypeStruct((1, 2), jnp.bool_)
    sequence = jax.ShapeDtypeStruct((1, *obs.shape), obs.dtype)
    return sequence, first, net.initial_state(2)


def core_input(
    config: NetworkConfig, torso_name: str, obs_shape: tuple[int, ...], obs_dtype: Any
) -> int:
    """The torso's feature width a user's core steps on, its cell checked on it (PartError, one
    line, when it does not fit); 0 for the shipped cores, which do not need it."""
    if config.core in CORES:
        return 0
    torso = config_torso(torso_name, config)
    width = torso_width(torso, obs_shape, obs_dtype, config.normalize_obs)
    check_user_core(config.core, config.core_size, width)
    return width


def refuse_shipped_head_options(config: NetworkConfig, **options: bool) -> None:
    """ValueError (one line) when a user's head (`config.head`) meets an algorithm option that
    shapes the shipped Q head (`dueling`, `noisy`: `config.algo`'s) turned on."""
    on = [name for name, value in options.items() if value]
    if config.user_head and on:
        fields = " and ".join(f"config.algo.{name}=True" for name in on)
        fixes = " and ".join(f"config.algo.{name}=False" for name in on)
        extra = " and explore by epsilon" if "noisy" in on else ""
        raise ValueError(
            f"{fields} shape{'s' * (len(on) == 1)} the shipped Q head, but config.network.head="
            f"{config.head!r} is yours; set {fixes}{extra} (or build it into your head)"
        )


def make_q_network(
    config: NetworkConfig,
    obs_shape: tuple[int, ...],
    num_actions: int,
    *,
    num_atoms: int = 1,
    dueling: bool = False,
    noisy: bool = False,
    sigma0: float = 0.5,
    obs_dtype: Any = jnp.float32,
) -> QNetwork:
    """The DQN-family network for `obs_shape` observations and `num_actions` actions: the
    config's torso and a `QHead` (`num_atoms > 1`: C51 logits `[..., A, K]`, else Q `[..., A]`).
    `config.shared_torso` and the Gaussian fields do not apply."""
    obs_shape = tuple(int(d) for d in obs_shape)
    if not is_positive_int(num_actions):
        raise ValueError(f"num_actions={num_actions!r} must be a positive int")
    refuse_q_unread(config)
    refuse_shipped_head_options(config, dueling=dueling, noisy=noisy)
    q = QNetwork(
        obs_shape=obs_shape,
        num_actions=int(num_actions),
        torso_name=resolve_torso(config, obs_shape, obs_dtype),
        hidden_sizes=config.hidden_sizes,
        activation=config.activation,
        dtype=config.compute_dtype,
        num_atoms=num_atoms,
        dueling=dueling,
        noisy=noisy,
        sigma0=sigma0,
        layer_norm=config.layer_norm,
        head=config.head,
    )
    if config.user_head:
        obs = torso_input(obs_shape, obs_dtype, config.normalize_obs)
        check_user_heads(q, config.head, obs)
    return q
