"""Recurrent cores with several streams per env (issue 57, item 2 on Sebulba): a seat's streams
in turn-based games, an agent's streams of a simultaneous-move env, and the other players of
those games (pool snapshots, other agents, checkpoints), each carrying a memory per stream or
per game that starts afresh at that stream's or game's start and never passes to another."""

import queue
import threading

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.acting.actor import Actor, ActorShared, ActorStats
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import LocalClient, jit_inference_step
from jaxrl_dist.acting.row_policy import RowPolicy
from jaxrl_dist.agents.base import ActorCore, ActorIdentity
from jaxrl_dist.agents.common import make_policy_model, sampling_actor, sequence_inputs
from jaxrl_dist.envs import env_spec, make_env
from jaxrl_dist.envs import games as g
from jaxrl_dist.envs.agents import AgentStreams
from jaxrl_dist.envs.games import Player
from jaxrl_dist.envs.seats import LEARNER, SeatedGame
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.threads import put_until_stopped
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

TTT, LBF = "TicTacToe-v1", "Jumanji/LevelBasedForaging-v0"


def _counting_core() -> ActorCore:
    """A core whose memory counts the moves since its row's episode started; its action is the
    count (the moves before this one) and its extras are empty."""

    def act(params, obs, state):
        return state["moves"], {}, {"moves": state["moves"] + 1}

    return ActorCore(
        init_state=lambda identity, rows, key: {"moves": jnp.zeros(rows, jnp.int32)},
        act=act,
        greedy_act=lambda params, obs, state: act(params, obs, state)[::2],
        start_episodes=lambda state, first: {"moves": jnp.where(first, 0, state["moves"])},
        core_state=lambda state: state,
    )


def test_a_row_policy_keeps_one_memory_per_game_and_restarts_it():
    policy = RowPolicy(_counting_core(), rows=4, greedy=True, key=jax.random.PRNGKey(0))
    obs = {AGENT_VIEW: np.zeros((4, 2), np.float32), ACTION_MASK: np.ones((4, 3), bool)}
    take = lambda at: {k: v[: len(at)] for k, v in obs.items()}  # noqa: E731
    act = lambda at: policy.act(None, take(at), np.array(at)).tolist()  # noqa: E731
    assert act([0, 2]) == [0, 0]  # every game starts afresh
    assert act([2, 0, 1]) == [1, 1, 0]  # any order; game 1 had not moved
    assert act([2]) == [2]
    policy.restart(2)  # game 2 ended: its next move starts the next one
    assert act([0, 1, 2, 3]) == [2, 1, 0, 0]
    policy.restart()
    assert act([3, 1]) == [0, 0]


class _Recording(Player):
    """A slot's player that moves 0 and hears each episode's end."""

    def __init__(self):
        self.ends: list[tuple[int, float]] = []

    def act(self, obs, legal_mask, games):
        return np.zeros(len(games), np.int32)

    def end_game(self, game, seat_return):
        self.ends.append((game, seat_return))


def test_another_agents_slot_hears_each_episode_end_with_its_return():
    """`AgentStreams`' other slots hear their env's episode ends (a recurrent player restarts
    its memory there), with the slot's summed reward; a slot's games are numbered `env *
    agents + slot`, so an agent playing several slots of an env keeps a memory for each."""
    player = _Recording()
    env = AgentStreams(
        make_env(LBF, {}, 4, 4, seed=0), 2, slots=(LEARNER, "b"), players={"b": player}
    )
    env.async_reset()
    rng = np.random.default_rng(0)
    returns, ends = np.zeros(4), []
    for _ in range(300):
        obs, reward, terminated, truncated, info = env.recv()
        env_of = info["env_id"]  # one learner stream per env
        returns[env_of] += reward  # a shared reward: the slot's too
        for e in env_of[terminated | truncated]:
            ends.append((int(e) * 2 + 1, float(returns[e])))  # slot 1 of 2
            returns[e] = 0.0
        env.send(g.random_legal(rng).choose(None, obs[ACTION_MASK]), env_of)
    env.close()
    assert len(ends) > 4 and player.ends == ends


def _stream_rollouts(make, spec, num_streams: int, count: int = 6, unroll: int = 8):
    """`count` rollouts (of 2 segments of `unroll` steps) of an LSTM policy's Python actor over
    the streams `make()` builds."""
    model = make_policy_model(
        NetworkConfig(torso="mlp", hidden_sizes=(16,), core="lstm", core_size=16), spec
    )
    params, core, device = model.init(jax.random.PRNGKey(2)), None, jax.devices()[0]
    core = sampling_actor(model)
    store = ParamsStore([device])
    store.publish(params, version=1)
    out, stop = queue.Queue(maxsize=2), threading.Event()
    client = LocalClient(
        step=jit_inference_step(core),
        core=core,
        store=store,
        device=device,
        identity=ActorIdentity(0, 1),
        num_envs=num_streams,
        key=jax.random.PRNGKey(1),
        stop=stop,
        pad_to=num_streams,
    )
    shared = ActorShared(
        lambda item: put_until_stopped(out, item, stop), stop, ActorStats(), unroll, 2
    )
    actor = Actor(0, make, client, shared)
    actor.start()
    try:
        rollouts = [out.get(timeout=60).rollout for _ in range(count)]
    finally:
        stop.set()
        actor.join(timeout=10)
    assert actor.error is None
    return model, params, rollouts


def _replay(model, params, rollouts) -> None:
    """The learner's unroll from each segment's stored core state gives the behaviour log-probs
    the actor stored: every stream carried its own memory and reset it at its own starts."""
    starts_inside = 0
    for rollout in rollouts:
        rollout = jax.tree.map(jnp.asarray, rollout)
        first, start = sequence_inputs(rollout)
        policy, _, _ = model.unroll(params, rollout.obs, first, start)
        replayed = model.dist.log_prob(jax.tree.map(lambda x: x[:-1], policy), rollout.action)
        np.testing.assert_allclose(replayed, rollout.agent_extras["log_prob"], atol=2e-5)
        starts_inside += int(first[1:-1].sum())
    assert starts_inside > 0, "episodes start inside segments"


def test_seat_streams_replay_exactly_on_the_learner():
    """Self-play games (two streams of one game) beside games against random in either seat:
    each stream's memory is its own seat's, across its games."""
    roles = [(LEARNER, LEARNER), (LEARNER, "random"), ("random", LEARNER)] * 2
    players = {"random": g.random_legal(np.random.default_rng(0))}
    make = lambda: SeatedGame(make_env(TTT, {}, 6, 3, seed=3), roles, players)  # noqa: E731
    _replay(*_stream_rollouts(make, env_spec(TTT, {}), num_streams=8))


def test_agent_streams_replay_exactly_on_the_learner():
    """Foraging's episodes last up to 100 steps: segments of 48 see them start."""
    make = lambda: AgentStreams(make_env(LBF, {}, 4, 2, seed=0), 2)  # noqa: E731
    _replay(*_stream_rollouts(make, env_spec(LBF, {}), num_streams=8, count=12, unroll=48))


def _counting_player():
    """A network player whose memory counts its moves in the game; it plays the first legal
    move."""
    from jaxrl_dist.envs.jax_game_parts import NetworkPlayer

    def move(params, obs, key, memory):
        action = jnp.argmax(obs[ACTION_MASK], axis=-1).astype(jnp.int32)
        return action, {"moves": memory["moves"] + 1}

    return NetworkPlayer(lambda key: {"moves": jnp.zeros((1,), jnp.int32)}, move, move)


def test_an_anakin_games_opponent_remembers_its_own_moves_in_that_game_only():
    """On Anakin the other seat's memory (self-play's acting params, another agent's network)
    lives in the stream's game state: at every step of every stream it has counted exactly the
    opponent's stones on the board, so it starts afresh with each game and advances only at
    the opponent's moves, whichever seat moved first."""
    from jaxrl_dist.envs.jax_games import SeatedJaxGame, Stream

    streams = [Stream(s, role) for role in ("self", "agent:b", "random") for s in (0, 1)] * 2
    others = {"agent:b": _counting_player()}
    game = SeatedJaxGame(TTT, streams, _counting_player(), others=others)
    shared = game.init_shared(None, {"agent:b": None})
    keys = jax.random.split(jax.random.PRNGKey(0), len(streams))
    state, ts = jax.jit(game.reset)(keys, shared, None)
    step = jax.jit(game.step)
    rng, ended = np.random.default_rng(0), 0
    for _ in range(40):
        action = g.random_legal(rng).choose(None, np.asarray(ts.obs[ACTION_MASK]))
        state, ts = step(state, jnp.asarray(action), shared, None)
        theirs = np.asarray(ts.obs[AGENT_VIEW])[..., 1].sum(axis=(1, 2))
        counted = {
            "self": np.asarray(state.inner.memory["moves"])[:, 0],
            "agent:b": np.asarray(state.inner.agents_memory["agent:b"]["moves"])[:, 0],
        }
        for b, stream in enumerate(streams):
            if stream.opponent in counted:
                assert counted[stream.opponent][b] == theirs[b], (b, stream)
        ended += int(np.asarray(ts.terminated | ts.truncated).sum())
    assert ended > len(streams)  # streams went through several games
