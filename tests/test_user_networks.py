"""A torso, a core and heads of the user's own in every built-in agent (issue 57):
`network.torso` / `.core` / `.head = "MODULE:FACTORY"` or a `register_torso` / `register_core`
/ `register_head` name, built inside each agent's network (IMPALA, PPO, Rainbow, R2D2, RND's
predictor and target; the core in the recurrent ones; a head for each of the agent's heads),
trained on both engines, saved in the policy description and rebuilt by
`load_policy`; LayerNorm on the shipped torsos; one-line refusals. (A user's cell acting step
by step equals the learner's unroll and resets to its own start, `test_recurrent.py`; it
resumes a deterministic run exactly, `test_recurrent_runs.py`.)"""

import contextlib
import dataclasses
import io
import os
import re
import runpy
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_refusal import assert_refused
from train_runs import ROOT

from jaxrl_dist import agents
from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.intrinsic.config import IntrinsicConfig
from jaxrl_dist.checkpoints.description import build_agent
from jaxrl_dist.checkpoints.policy import load_policy
from jaxrl_dist.config.cli import parse_args
from jaxrl_dist.envs import EnvSpec
from jaxrl_dist.networks import (
    NetworkConfig,
    make_actor_critic,
    make_q_network,
    register_torso,
)

ATTENTION = "my_nets:attention_torso"  # the guide's module (`my_nets` below)
GUIDE = os.path.join(ROOT, "docs", "guides", "your-own-network.md")
CARTPOLE = EnvSpec((4,), np.dtype(np.float32), 2)
# The algorithms' own sections, as each config file sets them (defaults otherwise).
CONFIGS = {
    "impala": "impala_cartpole.py",
    "ppo": "ppo_cartpole.py",
    "rainbow": "rainbow_cartpole.py",
    "r2d2": "r2d2_memory.py",
    "sac": "sac_pendulum.py",
    "td3": "td3_pendulum.py",
}
CONTINUOUS_ONLY = ("sac", "td3")


def _torso_params(tree) -> list[set]:
    """The names right under each `torso` key in `tree` (a learner state's fields, optimiser
    moments included)."""
    torsos: dict = {}
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        keys = [getattr(k, "key", getattr(k, "name", None)) for k in path]
        if "torso" in keys:
            i = keys.index("torso")
            torsos.setdefault(tuple(map(str, keys[:i])), set()).add(keys[i + 1])
    return list(torsos.values())


def _guide_blocks() -> list[str]:
    with open(GUIDE) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert len(blocks) == 3, "the guide's blocks moved: update this test"
    return blocks


@pytest.fixture(scope="module")
def my_nets(tmp_path_factory):
    """The guide's first block saved as `my_nets.py` in a folder on the path, as a user's own
    module; the folder."""
    folder = tmp_path_factory.mktemp("guide")
    (folder / "my_nets.py").write_text(_guide_blocks()[0])
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))


@pytest.mark.parametrize("algorithm", [*CONFIGS, "ppo+rnd"])
def test_every_agent_builds_the_users_torso_inside_its_network(my_nets, algorithm):
    """Each agent's learner params hold the user's module under `torso` (RND's predictor and
    target too), and the agent acts on a batch of observations."""
    name = algorithm.split("+")[0]
    config, _ = parse_args(
        ["--config", os.path.join(ROOT, "configs", CONFIGS[name]), "--workdir", "unused"]
    )
    network = dataclasses.replace(config.network, torso=ATTENTION)  # R2D2's: an LSTM after it
    intrinsic = IntrinsicConfig(method="rnd") if algorithm.endswith("rnd") else None
    shape = RunShape(10_000, 64.0)
    spec = PENDULUM if name in CONTINUOUS_ONLY else CARTPOLE
    agent = agents.make_agent(name, config.algo, network, spec, shape, intrinsic, 4)
    state = agent.learner.init(jax.random.PRNGKey(0))
    torsos = _torso_params(state)
    assert torsos and all("FeatureAttention_0" in t for t in torsos), algorithm
    # the agent's, RND's predictor and target; SAC's and TD3's policy, critics (and targets)
    assert len(torsos) >= (3 if intrinsic or name in CONTINUOUS_ONLY else 1)


def test_layer_norm_sits_before_each_activation_of_the_shipped_torsos():
    net = make_actor_critic(NetworkConfig(layer_norm=True, hidden_sizes=(8, 8)), (4,), 2)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((3, 4)))["params"]
    assert set(params["torso"]) == {"Dense_0", "Dense_1", "LayerNorm_0", "LayerNorm_1"}
    image = make_actor_critic(NetworkConfig(torso="impala_resnet", layer_norm=True), (4, 10, 10), 3)
    frames = jnp.zeros((2, 4, 10, 10), jnp.uint8)
    assert "LayerNorm_0" in image.init(jax.random.PRNGKey(0), frames)["params"]["torso"]


def test_a_registered_torso_builds_by_its_name_and_no_shipped_name_is_replaced():
    register_torso("five_features", lambda spec: nn.Dense(5))
    net = make_actor_critic(NetworkConfig(torso="five_features"), (4,), 2)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))["params"]
    assert params["torso"]["Dense_0"]["kernel"].shape == (4, 5)
    with pytest.raises(ValueError, match="register_torso"):
        register_torso("mlp", lambda spec: nn.Dense(5))


def test_the_start_up_check_traces_the_torso_on_the_envs_dtype():
    """MinAtar's bool frames: a torso that flips their bits is accepted on them, and refused in
    one line on float32 observations, which it cannot take."""
    config = NetworkConfig(torso="user_networks:inverted_bits")
    net = make_actor_critic(config, (10, 10, 4), 3, obs_dtype=np.dtype(bool))
    frames = jnp.zeros((2, 10, 10, 4), bool)
    assert "InvertedBits_0" in net.init(jax.random.PRNGKey(0), frames)["params"]["torso"]
    with pytest.raises(ValueError) as refused:
        make_actor_critic(config, (10, 10, 4), 3, obs_dtype=np.dtype(np.float32))
    message = str(refused.value)
    assert "\n" not in message and "fails on observations [2, 10, 10, 4] float32" in message


def test_layer_norm_reaches_the_q_networks_torso():
    config = NetworkConfig(layer_norm=True, hidden_sizes=(8,))
    q = make_q_network(config, (4,), 2)
    assert "LayerNorm_0" in q.init(jax.random.PRNGKey(0), jnp.zeros((3, 4)))["params"]["torso"]


@pytest.fixture(scope="module")
def guide(my_nets):
    """The guide's three Python blocks as a user runs them, each saved as a script beside
    `my_nets.py` and run (in this process, from that folder, with the checkout's configs): the
    module, a PPO run with the attention torso and an LSTM on the memory task, and an Anakin
    run with the registered CNN on MinAtar. Their printed lines and the folder."""
    folder = my_nets
    os.symlink(os.path.join(ROOT, "configs"), folder / "configs")
    printed, cwd = [], os.getcwd()
    try:
        os.chdir(folder)
        for i, block in enumerate(_guide_blocks()):
            (folder / f"block{i}.py").write_text(block)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                runpy.run_path(str(folder / f"block{i}.py"), run_name="__main__")
            printed.append(out.getvalue().strip().splitlines()[-1])
    finally:
        os.chdir(cwd)
    return folder, printed


def test_the_guides_examples_print_what_it_says(guide):
    _, printed = guide
    want = "['FeatureAttention_0'] ['WindowAttention_0'] ['MLPHead_0']"
    assert printed == ["defined", want, "True"]


def test_load_policy_rebuilds_the_torso_and_the_core_after_it(guide):
    folder, _ = guide
    policy = load_policy(str(folder / "runs" / "memory_attention"))
    network = policy.description["network"]
    assert (network["torso"], network["core"]) == (ATTENTION, "my_nets:window_attention")
    assert _torso_params(policy.params) == [{"FeatureAttention_0"}]
    state = policy.initial_state(3)  # the window's carry, per env
    assert state["core"]["core"]["steps"].shape == (3, 8, 64)
    actions, after = policy.act_with_state(np.zeros((3, 2), np.float32), state, np.ones(3, bool))
    assert np.asarray(actions).shape == (3,)
    np.testing.assert_array_equal(after["core"]["core"]["seen"][:, -1], 1.0)  # one step seen
    minatar = load_policy(str(folder / "runs" / "minatar_cnn"))  # registered in this process
    assert _torso_params(minatar.params) == [{"SmallCNN_0"}]
    assert set(minatar.params["net"]["params"]["core"]) == {"MGUCell_0"}
    described = dict(minatar.description, network={**network, "core": "unregistered_cell"})
    with pytest.raises(ValueError) as refused:  # a process that did not register the core
        build_agent(described)
    assert "register_core('unregistered_cell', factory)" in str(refused.value)


def test_a_policy_whose_torso_does_not_import_is_refused_in_one_line(guide):
    """`scripts/evaluate.py` in a process where `my_nets` is not on the path."""
    folder, _ = guide
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    evaluate = os.path.join(ROOT, "scripts", "evaluate.py")
    run = str(folder / "runs" / "memory_attention")
    out = subprocess.run(
        [sys.executable, evaluate, run, "--episodes", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    err = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(err) == 1, out.stderr[-2000:]
    assert "cannot be built in this process" in err[0] and "'my_nets'" in err[0], err


BAD = [
    ("no_such_module:make", "cannot import module 'no_such_module'"),
    ("user_networks:no_such_factory", "has no callable 'no_such_factory'"),
    ("user_networks:", "write MODULE:FACTORY"),
    ("user_networks:not_a_module", "returned str, not a flax.linen Module"),
    ("unregistered", "nor a torso registered in this process"),
]
CORE_CONFIG = os.path.join(ROOT, "configs", "ppo_lstm_memory.py:quick")
BAD_CORES = [
    ("no_such_module:cell", "cannot import module 'no_such_module'"),
    ("user_networks:not_a_module", "returned str, not a flax.linen Module"),
    ("unregistered_cell", "nor a core registered in this process"),
    ("user_networks:no_initialize_carry", "fails on a carry of 2 rows and features [2, 64]"),
    ("user_networks:growing_carry", "a step must return the carry it was given"),
    ("user_networks:unflattened_outputs", "to outputs (2, 64, 2); a step returns"),
]


def test_a_torso_that_does_not_fit_the_observations_names_the_shapes(tmp_path, capsys):
    config = os.path.join(ROOT, "configs", "anakin_ppo_breakout_minatar.py:quick")
    flags = ["--config.network.torso=user_networks:frames_unflattened"]
    assert_refused(
        config, flags, "to (2, 10, 10, 8); a torso returns features [N, F]", tmp_path, capsys
    )


@pytest.mark.parametrize("algorithm", ["impala", "ppo", "r2d2"])
def test_every_recurrent_agent_builds_the_users_cell_and_starts_from_its_carry(algorithm):
    """The learner's params hold the cell under `core`, and an actor's per-env state starts
    from the cell's own carry (not zeros)."""
    config, _ = parse_args(
        ["--config", os.path.join(ROOT, "configs", CONFIGS[algorithm]), "--workdir", "unused"]
    )
    network = dataclasses.replace(
        config.network, core="user_networks:leaky_memory", core_size=16, shared_torso=True
    )
    agent = agents.make_agent(algorithm, config.algo, network, CARTPOLE, RunShape(100, 64.0))
    state = agent.learner.init(jax.random.PRNGKey(0))
    cores = [p for p, _ in jax.tree_util.tree_flatten_with_path(state)[0] if "'core'" in str(p)]
    assert cores and all("LeakyMemory_0" in str(p) for p in cores)
    actor = agent.actor.init_state(ActorIdentity(0, 1), 3, jax.random.PRNGKey(1))
    memory = agent.actor.core_state(actor)
    memory = memory.get("core", memory)  # an actor-critic's policy core; R2D2's is the carry
    np.testing.assert_array_equal(memory["sum"], np.full((3, 64), 0.5, np.float32))


PENDULUM = EnvSpec((3,), np.dtype(np.float32), 0, 1, (-2.0,), (2.0,))
# (algorithm, the algo fields a user's head asks for, the env, its heads: each holds the head)
HEADED = [
    ("impala", {}, CARTPOLE, {"policy_head", "value_head"}),
    ("ppo", {}, PENDULUM, {"policy_head", "value_head"}),  # the Gaussian's mean
    ("ppo+rnd", {}, CARTPOLE, {"policy_head", "value_head", "intrinsic_value_head"}),
    ("rainbow", {"noisy": False, "dueling": False}, CARTPOLE, {"head"}),  # C51: [A, K]
    ("r2d2", {"dueling": False}, CARTPOLE, {"head"}),
    ("td3", {}, PENDULUM, {"policy_head"}),  # its critics' heads: test_off_policy_runs.py
]


@pytest.mark.parametrize(("algorithm", "algo", "spec", "heads"), HEADED, ids=[h[0] for h in HEADED])
def test_every_agent_builds_the_users_head_for_each_of_its_heads(algorithm, algo, spec, heads):
    """Each of the agent's heads holds the user's module, fed the head's output shape (the
    policy's logits or mean, a value, C51's logits per action and atom); the agent acts."""
    name = algorithm.split("+")[0]
    config, _ = parse_args(
        ["--config", os.path.join(ROOT, "configs", CONFIGS[name]), "--workdir", "unused"]
    )
    network = dataclasses.replace(config.network, head="user_networks:mlp_head")
    intrinsic = IntrinsicConfig(method="rnd") if algorithm.endswith("rnd") else None
    algo_config = dataclasses.replace(config.algo, **algo)
    agent = agents.make_agent(name, algo_config, network, spec, RunShape(100, 64.0), intrinsic, 4)
    params = agent.learner.actor_params(agent.learner.init(jax.random.PRNGKey(0)))
    paths = [
        "/".join(str(getattr(k, "key", k)) for k in path)
        for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]
    ]
    for head in heads:  # under each head: the user's module (and a Gaussian's log-std) only
        under = {p.split(f"{head}/", 1)[1] for p in paths if f"/{head}/" in f"/{p}"}
        assert under and all(
            u.startswith(("MLPHead_0/", "mean/MLPHead_0/")) or u == "log_std" for u in under
        ), (head, under)
    state = agent.actor.init_state(ActorIdentity(0, 1), 2, jax.random.PRNGKey(1))
    obs = jnp.zeros((2, *spec.obs_shape), jnp.float32)
    state = agent.actor.start_episodes(state, jnp.ones(2, bool))
    action, *_ = agent.actor.act(params, obs, state)
    assert action.shape == ((2, 1) if spec.continuous else (2,))


BAD_HEADS = [
    ("user_networks:three_outputs", "to (2, 3) for the policy head, which must be (2, 2)"),
    ("user_networks:not_a_module", "returned str, not a flax.linen Module"),
    ("no_such_module:head", "cannot import module 'no_such_module'"),
    ("unregistered_head", "nor a head registered in this process"),
]


CARTPOLE_QUICK = os.path.join(ROOT, "configs", "ppo_cartpole.py:quick")
BAD_PARTS = [
    *(("torso", CARTPOLE_QUICK, *bad) for bad in BAD),
    *(("core", CORE_CONFIG, *bad) for bad in BAD_CORES),
    *(("head", CARTPOLE_QUICK, *bad) for bad in BAD_HEADS),
]


@pytest.mark.parametrize(
    ("part", "config", "value", "needle"), BAD_PARTS, ids=[f"{b[0]}={b[2]}" for b in BAD_PARTS]
)
def test_a_part_that_cannot_be_built_or_does_not_fit_is_one_line_exit_2_nothing_written(
    tmp_path, capsys, part, config, value, needle
):
    assert_refused(config, [f"--config.network.{part}={value}"], needle, tmp_path, capsys)


def test_a_head_of_yours_with_rainbows_noisy_dueling_head_is_refused_naming_both(tmp_path, capsys):
    config = os.path.join(ROOT, "configs", "rainbow_cartpole.py:quick")
    flags = ["--config.network.head=user_networks:mlp_head"]
    needle = "set --config.algo.dueling=False and --config.algo.noisy=False and explore by eps"
    assert_refused(config, flags, needle, tmp_path, capsys)
