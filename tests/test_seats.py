"""Seats on EnvPool's turn-based games: the per-seat streams `SeatedGame` makes, and the scripted
players (random, heuristic, perfect tic-tac-toe) checked against rules worked out here and the
game's known statistics."""

import queue
import threading

import jax
import numpy as np
import pytest

from jaxrl_dist.acting.actor import Actor, ActorShared, ActorStats
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import LocalClient, jit_inference_step
from jaxrl_dist.agents.base import ActorIdentity, RunShape
from jaxrl_dist.agents.ppo import PPOConfig, make_ppo
from jaxrl_dist.envs import env_spec, make_env
from jaxrl_dist.envs import games as g
from jaxrl_dist.envs.seats import LEARNER, SeatedGame, same_roles
from jaxrl_dist.networks import NetworkConfig
from jaxrl_dist.threads import put_until_stopped
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

TTT, C4 = "TicTacToe-v1", "ConnectFour-v1"


def _seated(env_id, learner_seats, opponents, games=12, batch=5, seed=1):
    """Every game with the learner in `learner_seats` and `opponents[seat]` in the others."""
    roles = [LEARNER if s in learner_seats else f"seat{s}" for s in range(2)]
    players = {f"seat{s}": player for s, player in opponents.items()}
    env = SeatedGame(
        make_env(env_id, {}, games, batch, seed=seed), same_roles(games, roles), players
    )
    env.async_reset()
    return env


def _play(env, policy, episodes):
    """Steps until `episodes` streams ended; every recv() result, in order."""
    results, ended = [], 0
    while ended < episodes:
        obs, reward, terminated, truncated, info = env.recv()
        results.append((obs, reward, terminated, truncated, info))
        ended += int(np.sum(terminated | truncated))
        env.send(
            policy.act(obs[AGENT_VIEW], info["legal_action_mask"], info["env_id"]), info["env_id"]
        )
    env.close()
    return results


def _outcomes(results):
    return np.array([r[i] for _, r, te, tr, _ in results for i in np.flatnonzero(te | tr)])


def _line(plane) -> bool:
    return bool(g._tictactoe_wins(plane.astype(bool)))


@pytest.mark.parametrize("learner_seats", [(0, 1), (1,)])
def test_each_stream_is_an_ordinary_env_of_its_seat(learner_seats):
    """Per stream: its seat's view at its own turns (legal mask = empty cells, reward 0), then a
    final observation whose reward is the seat's result, then the next game from elapsed 0."""
    rng = np.random.default_rng(0)
    opponents = {} if len(learner_seats) == 2 else {0: g.random_legal(rng)}
    results = _play(_seated(TTT, learner_seats, opponents), g.random_legal(rng), 600)
    last: dict[int, tuple] = {}  # stream -> (elapsed, ended) of its previous observation
    for obs, reward, terminated, truncated, info in results:
        assert not truncated.any()
        for i, stream in enumerate(info["env_id"]):
            own, opp = obs[AGENT_VIEW][i, ..., 0], obs[AGENT_VIEW][i, ..., 1]
            elapsed, ended = int(info["elapsed_step"][i]), bool(terminated[i])
            assert info["seat"][i] == learner_seats[stream % len(learner_seats)]
            previous = last.get(stream)
            if previous is None or previous[1]:  # a new game for this stream
                assert elapsed == 0 and reward[i] == 0.0
            else:
                assert elapsed == previous[0] + 1
            if ended:
                result = {1.0: _line(own), -1.0: _line(opp), 0.0: (own | opp).all()}
                assert result[float(reward[i])], (reward[i], own, opp)
            else:
                assert reward[i] == 0.0 and not _line(own) and not _line(opp)
                np.testing.assert_array_equal(info["legal_action_mask"][i], ~(own | opp).ravel())
                assert own.sum() <= opp.sum() <= own.sum() + 1  # the seat is the one to move
            last[stream] = (elapsed, ended)
    if len(learner_seats) == 2:  # self-play: both seats' results of a game arrive together
        for _, reward, terminated, _, info in results:
            done = np.flatnonzero(terminated)
            games_done = info["env_id"][done] // 2
            for game in np.unique(games_done):
                pair = reward[done][games_done == game]
                assert len(pair) == 2 and pair.sum() == 0.0


def test_random_against_random_matches_the_game_statistics():
    """Random tic-tac-toe: the first mover wins 58.5%, the second 28.8%, 12.7% draws; with a
    random first mover each seat wins 43.7% and draws 12.7%."""
    rng = np.random.default_rng(1)
    outcomes = _outcomes(
        _play(_seated(TTT, (0,), {1: g.random_legal(rng)}), g.random_legal(rng), 3000)
    )
    assert abs(np.mean(outcomes == 1.0) - 0.4365) < 0.035
    assert abs(np.mean(outcomes == 0.0) - 0.127) < 0.025


def test_the_perfect_player_never_loses_and_draws_itself():
    assert g.tictactoe_value(0, 0) == 0  # tic-tac-toe is a draw
    rng = np.random.default_rng(2)
    for seats in ((0,), (1,)):
        other = 1 - seats[0]
        against_random = _outcomes(
            _play(_seated(TTT, seats, {other: g.random_legal(rng)}), g.perfect_tictactoe(rng), 400)
        )
        assert (against_random >= 0).all() and np.mean(against_random == 1) > 0.8
    draws = _outcomes(
        _play(_seated(TTT, (0,), {1: g.perfect_tictactoe(rng)}), g.perfect_tictactoe(rng), 60)
    )
    assert (draws == 0).all()


def _minimax_but_first_reply_lowest(views, legal):
    """Deterministic: minimax (first best move), except the first reply takes the lowest free
    cell, which loses to some openings."""
    values = np.stack([g.tictactoe_action_values(v) for v in views])
    best = np.argmax(np.where(legal, values, -3), axis=1)
    return np.where(views.sum(axis=(1, 2, 3)) == 1, np.argmax(legal, axis=1), best)


def test_exact_losses_against_perfect_play_match_sampled_games():
    first, second = g.tictactoe_exact_losses(_minimax_but_first_reply_lowest)
    assert first == 0.0 and 0.2 < second < 0.8  # plays first perfectly; some replies lose
    assert g.tictactoe_exact_losses(lambda views, legal: np.argmax(legal, axis=1)) == (1.0, 1.0)
    rng = np.random.default_rng(5)
    policy = g.ScriptedPlayer(_minimax_but_first_reply_lowest)
    outcomes = _outcomes(_play(_seated(TTT, (0,), {1: g.perfect_tictactoe(rng)}), policy, 1500))
    # EnvPool picks the first mover at random: half the games are each case.
    expected, se = (first + second) / 2, 0.5 / np.sqrt(len(outcomes))
    assert abs(np.mean(outcomes < 0) - expected) < 4 * se


def test_action_values_by_hand():
    view = np.zeros((3, 3, 2), bool)
    view[0, 0, 0] = view[0, 1, 0] = True  # X X .   (X, the mover, is plane 0)
    view[1, 0, 1] = view[1, 1, 1] = True  # O O .
    values = g.tictactoe_action_values(view)
    assert values[2] == 1  # completing the top row wins
    assert (values[[6, 7, 8]] == -1).all()  # anything but 2 or 5 lets O complete its row
    assert (values[[0, 1, 3, 4]] == -2).all()  # occupied


def test_the_heuristic_wins_if_it_can_and_blocks_if_it_must():
    rng = np.random.default_rng(3)
    ttt = g.heuristic(g.RULES[TTT], rng)
    view = np.zeros((2, 3, 3, 2), bool)
    view[0, 0, :2, 0] = True  # own X X . on top, and an O O . threat: winning comes first
    view[0, 1, :2, 1] = True
    view[1, 2, 0, 0] = True  # own X in a corner; O O . threat in the middle row: block it
    view[1, 1, :2, 1] = True
    legal = ~(view[..., 0] | view[..., 1]).reshape(2, 9)
    for _ in range(20):
        np.testing.assert_array_equal(ttt.act(view, legal, None), [2, 5])
    c4 = g.heuristic(g.RULES[C4], rng)
    board = np.zeros((2, 6, 7, 2), bool)
    board[0, 3:, 4, 0] = True  # three own stacked in column 4: drop the fourth
    board[0, 5, :3, 1] = True  # the opponent's three on the bottom row (winning comes first)
    board[1, 5, 1:4, 1] = True  # the opponent's three on the bottom row, both ends open
    board[1, 4, 1, 0] = True
    legal = np.ones((2, 7), bool)
    for _ in range(20):
        a = c4.act(board, legal, None)
        assert a[0] == 4 and a[1] in (0, 4)


def test_bad_roles_are_refused_in_one_line():
    pool = make_env(TTT, {}, 2, 2, seed=0)
    with pytest.raises(ValueError, match="roles must name every seat of each of the pool's 2"):
        SeatedGame(pool, same_roles(3, (LEARNER, LEARNER)), {})
    with pytest.raises(ValueError, match=r"roles name players \['bot'\] that are not in players"):
        SeatedGame(pool, same_roles(2, (LEARNER, "bot")), {})
    with pytest.raises(ValueError, match="no seat is played by the learner"):
        SeatedGame(pool, same_roles(2, ("r", "r")), {"r": g.random_legal(np.random.default_rng())})
    env = SeatedGame(pool, same_roles(2, (LEARNER, LEARNER)), {})
    env.async_reset()
    _, _, _, _, info = env.recv()
    waiting = set(info["env_id"].tolist())
    stray = next(s for s in range(4) if s not in waiting)
    with pytest.raises(ValueError, match=f"stream {stray} was not waiting for an action"):
        env.send(np.zeros(1, np.int32), np.array([stray]))
    env.close()


class _Recording(g.Player):
    """Random moves; remembers every game end it hears."""

    def __init__(self, rng):
        self._random, self.ends = g.random_legal(rng), []

    def act(self, obs, legal_mask, games):
        return self._random.act(obs, legal_mask, games)

    def end_game(self, game, seat_return):
        self.ends.append((game, seat_return))


def test_games_of_one_pool_can_have_their_own_roles():
    """Self-play, the learner against random in either seat, and a game with no learner seat
    (played wholly inside) in one pool; each finished game is recorded, players hear theirs."""
    rng = np.random.default_rng(4)
    roles = [(LEARNER, LEARNER)] * 3 + [(LEARNER, "r"), ("r", LEARNER)] * 2 + [("r", "r")]
    recording = _Recording(rng)
    env = SeatedGame(make_env(TTT, {}, len(roles), 3, seed=5), roles, {"r": recording})
    assert env.config["num_envs"] == 3 * 2 + 4
    env.async_reset()
    results = _play(env, g.random_legal(rng), 300)
    seats_of_stream = {}
    for _, _, _, _, info in results:
        seats_of_stream.update(zip(info["env_id"].tolist(), info["seat"].tolist(), strict=True))
    assert seats_of_stream == {0: 0, 1: 1, 2: 0, 3: 1, 4: 0, 5: 1, 6: 0, 7: 1, 8: 0, 9: 1}
    finished = env.finished
    assert {r.game for r in finished} == set(range(len(roles)))
    heard = sorted(recording.ends)
    expected = sorted(
        (r.game, float(r.returns[s]))
        for r in finished
        for s, name in enumerate(r.roles)
        if name == "r"
    )
    assert heard == expected
    for r in finished:
        assert r.roles == roles[r.game] and r.returns.sum() == 0.0 and 5 <= r.length <= 9
        assert sorted(r.returns.tolist()) in ([-1.0, 1.0], [0.0, 0.0])
        assert (r.length == 9) or (r.returns != 0).any()  # a draw fills the board


def test_an_actor_thread_plays_seats_with_a_masked_agent():
    """The unchanged actor loop on a SeatedGame (self-play and games against random in one
    pool), acting with PPO on masked observations: rollouts hold the views and masks, every
    action taken at a move is legal, results are +-1 or 0 and each is followed by a reset step."""
    spec = env_spec(TTT, {})
    agent = make_ppo(PPOConfig(), NetworkConfig(torso="mlp"), spec, RunShape(1, 1))
    device = jax.devices()[0]
    store = ParamsStore([device])
    store.publish(agent.learner.actor_params(agent.learner.init(jax.random.PRNGKey(0))), 1)
    roles = [(LEARNER, LEARNER), (LEARNER, "random"), ("random", LEARNER)] * 2
    players = {"random": g.random_legal(np.random.default_rng(0))}
    out, stop, stats = queue.Queue(maxsize=1), threading.Event(), ActorStats()
    client = LocalClient(
        step=jit_inference_step(agent.actor),
        core=agent.actor,
        store=store,
        device=device,
        identity=ActorIdentity(0, 1),
        num_envs=8,
        key=jax.random.PRNGKey(1),
        stop=stop,
    )
    shared = ActorShared(lambda item: put_until_stopped(out, item, stop), stop, stats, 6, 4)
    actor = Actor(
        0, lambda: SeatedGame(make_env(TTT, {}, 6, 3, seed=3), roles, players), client, shared
    )
    actor.start()
    rollouts = [out.get(timeout=60).rollout for _ in range(8)]
    stop.set()
    actor.join(timeout=10)
    assert actor.error is None
    ends = 0
    for r in rollouts:
        assert set(r.obs) == {AGENT_VIEW, ACTION_MASK} and r.obs[AGENT_VIEW].shape == (
            7,
            4,
            3,
            3,
            2,
        )
        ended = r.terminated | r.truncated
        t, b = np.nonzero(~ended[:-1])  # moves (not the ignored reply to a final observation)
        assert r.obs[ACTION_MASK][t, b, r.action[t, b]].all()
        assert set(np.unique(r.reward[ended])) <= {-1.0, 0.0, 1.0}
        np.testing.assert_array_equal(r.reward[1:][ended[:-1]], 0.0)  # the next game's start
        ends += int(ended.sum())
    assert ends > 0 and stats.drain()["episode_returns"]


@pytest.mark.parametrize("plies", [0, 3])
def test_random_openings_start_games_from_0_to_k_moves_in_no_stream(plies):
    """A stream's first view of a game holds the opening's stones: from 0 to `plies` (both
    seats' first views together), every count in range seen; with none, the board is empty or
    holds the one stone of the seat that moved first."""
    env = SeatedGame(
        make_env(TTT, {}, 16, 16, seed=3),
        same_roles(16, [LEARNER, LEARNER]),
        {},
        plies,
        np.random.default_rng(0),
    )
    env.async_reset()
    first_stones = []  # per game, stones on the board at each stream's first view
    results = _play(env, g.random_legal(np.random.default_rng(1)), 400)
    for obs, _, _, _, info in results:
        for view, first in zip(obs[AGENT_VIEW], info["elapsed_step"] == 0, strict=True):
            if first:
                first_stones.append(int(view.sum()))
    seen = set(first_stones)
    assert seen == set(range(plies + 2)), seen  # + the other seat's first move


def _gathered_or_synced(gather: bool, games: int = 8) -> SeatedGame:
    """The learner in seat 0 of every game against random, its pool gathered from
    one-game recv()s (`gather`) or a synchronous pool of every game."""
    pool = make_env(TTT, {}, games, 1 if gather else games, seed=4)
    players = {"seat1": g.random_legal(np.random.default_rng(5))}
    env = SeatedGame(pool, same_roles(games, (LEARNER, "seat1")), players, gather=gather)
    env.async_reset()
    return env


def test_a_gathered_pool_is_a_synchronous_one_and_can_hold_a_stream():
    """Synchronous collection's seated pool (`gather=True`: one game per EnvPool recv()) gives
    a synchronous pool's results to the last row, in game order; and a stream the actor holds
    (no action sent) pauses its game alone while the other games play on."""
    policy = g.random_legal(np.random.default_rng(6))
    synced, gathered = _gathered_or_synced(False), _gathered_or_synced(True)
    for _ in range(60):
        a, b = synced.recv(), gathered.recv()
        jax.tree.map(np.testing.assert_array_equal, a, b)
        action = policy.act(a[0][AGENT_VIEW], a[4]["legal_action_mask"], a[4]["env_id"])
        synced.send(action, a[4]["env_id"])
        gathered.send(action, b[4]["env_id"])
    synced.close()
    obs, *_, info = gathered.recv()
    held = info["env_id"] == 0
    assert held.any()  # (these seeds: stream 0 is waiting in this round)
    held_obs, held_mask = obs[AGENT_VIEW][held], info["legal_action_mask"][held]
    gathered.send(
        policy.act(obs[AGENT_VIEW][~held], info["legal_action_mask"][~held], None),
        info["env_id"][~held],
    )
    seen = set()
    for _ in range(10):  # stream 0 waits; the others go on
        obs, *_, info = gathered.recv()
        assert 0 not in info["env_id"]
        seen.update(info["env_id"].tolist())
        gathered.send(policy.act(obs[AGENT_VIEW], info["legal_action_mask"], None), info["env_id"])
    assert seen == set(range(1, 8))
    # Stream 0 moves again (a legal move from its held view) and its game comes back.
    gathered.send(policy.act(held_obs, held_mask, None), np.zeros(1, np.int32))
    back = set()
    for _ in range(3):
        obs, *_, info = gathered.recv()
        back.update(info["env_id"].tolist())
        gathered.send(policy.act(obs[AGENT_VIEW], info["legal_action_mask"], None), info["env_id"])
    assert 0 in back
    gathered.close()
