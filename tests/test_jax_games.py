"""Board games inside jit (the Anakin runtime's): pgx's games step as EnvPool's ports do, the JAX
players choose as the NumPy ones, the JAX league keeps the host pool's rules, and the seated
streams keep `envs/seats.py`'s conventions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.acting.opponent_pool import OpponentPool
from jaxrl_dist.envs import games as g
from jaxrl_dist.envs import jax_league as league_ops
from jaxrl_dist.envs import jax_players, make_env
from jaxrl_dist.envs.jax_games import PGX_GAMES, SeatedJaxGame, Stream
from jaxrl_dist.evaluation.jax_envs import network_player
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW

GAMES = ["TicTacToe-v1", "ConnectFour-v1"]


def _pgx(env_id):
    import pgx

    return pgx.make(PGX_GAMES[env_id])


@pytest.mark.filterwarnings("ignore:.*player_id.*:DeprecationWarning")  # pgx's observe(s, id)
@pytest.mark.parametrize("env_id", GAMES)
def test_pgx_game_steps_as_the_envpool_port(env_id):
    """The same moves in EnvPool's port and in pgx: every player's view, the legal moves, the
    player to move, every player's reward and the end agree at every move, over many games
    (each draws its first player; pgx's is set to EnvPool's at each new game)."""
    n, rng = 16, np.random.default_rng(0)
    pool, game = make_env(env_id, {}, n, n, seed=3), _pgx(env_id)
    init, step = jax.jit(jax.vmap(game.init)), jax.jit(jax.vmap(game.step))
    observe = jax.jit(jax.vmap(game.observe, in_axes=(0, None)))
    obs, info = pool.reset()
    state, ends = init(jax.random.split(jax.random.PRNGKey(0), n)), 0
    rewards = ended = None  # the last move's, in pool rows
    for move in range(120):
        order = np.argsort(info["env_id"])  # pool rows -> games in id order
        new = np.asarray(info["elapsed_step"])[order] == 0
        fresh = init(jax.random.split(jax.random.PRNGKey(move), n))
        state = _where(new, fresh, state)
        state = state.replace(current_player=jnp.asarray(info["current_player"][order]))
        players = info["players"]
        for p in range(2):
            rows = np.flatnonzero(players["id"] == p)
            rows = rows[np.argsort(players["env_id"][rows])]
            mine = np.asarray(observe(state, jnp.int32(p)))
            np.testing.assert_array_equal(obs[rows].astype(bool), mine)
            # The wrapper's shortcut: the other player's view is the mover's, planes swapped.
            movers = np.asarray(state.observation)
            swapped = _where(np.asarray(state.current_player) == p, movers, movers[..., ::-1])
            np.testing.assert_array_equal(mine, swapped)
        np.testing.assert_array_equal(info["legal_action_mask"][order], state.legal_action_mask)
        if ended is not None:  # the last move's rewards and ends (a reset step has none)
            reward = np.zeros((n, 2), np.float32)
            reward[players["env_id"], players["id"]] = rewards
            np.testing.assert_array_equal(reward[~new], np.asarray(state.rewards)[~new])
            np.testing.assert_array_equal(ended[order][~new], np.asarray(state.terminated)[~new])
        legal = info["legal_action_mask"][order]
        action = np.array([rng.choice(np.flatnonzero(m)) for m in legal], np.int32)
        state = step(state, jnp.asarray(action))
        obs, rewards, ended, _, info = pool.step(action, np.sort(info["env_id"]))
        ends += int(np.sum(ended))
    assert ends >= n  # many games played to their end


def _where(select, a, b):
    """Rows of `a` where `select [n]`, else of `b` (arrays or pgx states)."""
    pick = lambda x, y: jnp.where(np.reshape(select, (-1, *[1] * (np.ndim(x) - 1))), x, y)  # noqa: E731
    return jax.tree.map(pick, a, b)


def test_the_jax_heuristic_chooses_among_the_numpy_heuristics_moves():
    rng = np.random.default_rng(1)
    for env_id, (h, w) in zip(GAMES, [(3, 3), (6, 7)], strict=True):
        rules, choose = g.RULES[env_id], jax.jit(jax.vmap(jax_players.heuristic(g.RULES[env_id])))
        cells = rng.integers(0, 3, (300, h, w))
        view = np.stack([cells == 1, cells == 2], axis=-1)
        legal = (
            ~(view.any(-1).reshape(300, -1)) if env_id == "TicTacToe-v1" else ~view.any(-1)[:, 0]
        )
        keep = legal.any(1)
        view, legal = view[keep], legal[keep]
        own, opp = view[..., 0], view[..., 1]
        wins = rules.wins(rules.place(own, own | opp)) & legal
        blocks = rules.wins(rules.place(opp, own | opp)) & legal
        preferred = np.where(wins.any(1, keepdims=True), wins, blocks)
        allowed = np.where(preferred.any(1, keepdims=True), preferred, legal)
        seen = np.zeros_like(allowed)
        for k in range(40):
            keys = jax.random.split(jax.random.PRNGKey(k), len(view))
            a = np.asarray(choose(jnp.asarray(view), jnp.asarray(legal), keys))
            assert allowed[np.arange(len(a)), a].all()
            seen[np.arange(len(a)), a] = True
        small = allowed.sum(1) <= 3  # 40 draws reach every move of a small set
        assert (seen[small] == allowed[small]).all() and wins.any() and blocks.any()


def test_the_jax_perfect_player_takes_only_best_moves_everywhere():
    positions = g._tictactoe_positions()
    views = np.zeros((len(positions), 9, 2), np.int8)
    for i, (own, opp) in enumerate(positions):
        views[i, :, 0], views[i, :, 1] = own >> np.arange(9) & 1, opp >> np.arange(9) & 1
    legal = views.sum(2) == 0
    views = views.reshape(-1, 3, 3, 2)
    keys = jax.random.split(jax.random.PRNGKey(0), len(views))
    a = np.asarray(jax.jit(jax.vmap(jax_players.perfect_tictactoe))(views, legal, keys))
    values = np.stack([g.tictactoe_action_values(v) for v in views])
    assert (values[np.arange(len(a)), a] == values.max(1)).all()


def _params(k):
    return {"w": jnp.full((2,), k, jnp.float32)}


@pytest.mark.parametrize("sampling", ["uniform", "latest", "pfsp"])
def test_the_league_keeps_the_host_pools_rules(sampling):
    """The same snapshots and results in the JAX league and the host `OpponentPool`: the same
    ids kept, records and sampling probabilities; a game against a dropped id records nothing."""
    rules = league_ops.LeagueRules(3, 2, sampling)
    league, host = league_ops.init_league(rules, _params(0)), OpponentPool(3, sampling)
    host.add(_params(0), 0)
    results = [(0, 1.0), (0, 1.0), (0, -1.0), (0, 0.0)]
    for u in range(1, 9):
        ids = np.array([sid for sid, _ in results] + [-1], np.int32)
        returns = np.array([r for _, r in results] + [1.0], np.float32)
        league = league_ops.record_games(league, jnp.asarray(ids), jnp.asarray(returns))
        for sid, r in results:
            host.record(sid, r)
        league = league_ops.after_update(rules, league, _params(u))
        if u % 2 == 0:
            host.add(_params(u), u)
        results = [(int(max(host.ids())), -1.0), (int(min(host.ids())), 1.0), (0, -1.0)]
    live = np.asarray(league.ids)
    assert sorted(live.tolist()) == host.ids() == [2, 3, 4]
    p = np.asarray(league_ops.probabilities(rules, league))
    for slot, sid in enumerate(live):
        rec = host.records()[int(sid)]
        assert np.asarray(league.record)[slot].tolist() == [
            rec["wins"],
            rec["draws"],
            rec["losses"],
        ]
        assert int(league.taken_at[slot]) == rec["update"]
        assert float(league.snapshots["w"][slot, 0]) == rec["update"]
        assert p[slot] == pytest.approx(host.probabilities()[int(sid)], rel=1e-5)
    draws = jax.vmap(lambda k: league_ops.draw_slot(rules, league, k)[0])(
        jax.random.split(jax.random.PRNGKey(0), 20_000)
    )
    assert np.abs(np.bincount(np.asarray(draws), minlength=3) / 20_000 - p).max() < 0.015


class _Core:
    """An actor half playing the first legal move greedily and the last when sampling."""

    @staticmethod
    def init_state(identity, n, key):
        return jnp.zeros((n,))

    @staticmethod
    def act(params, obs, state):
        last = obs[ACTION_MASK].shape[-1] - 1 - jnp.argmax(obs[ACTION_MASK][..., ::-1], -1)
        return last.astype(jnp.int32), {}, state

    @staticmethod
    def greedy_act(params, obs, state):
        return jnp.argmax(obs[ACTION_MASK], -1).astype(jnp.int32), state

    @staticmethod
    def start_episodes(state, first):
        return state

    @staticmethod
    def core_state(state):
        return {}

    @staticmethod
    def with_core_state(state, core):
        return state


def test_streams_see_their_own_turns_rewards_ends_and_reset_steps():
    streams = [
        Stream(0, "random"),
        Stream(1, "random"),
        Stream(0, "heuristic"),
        Stream(1, "self"),
        Stream(0, "pool", greedy=True),
        Stream(1, "frozen"),
        Stream(1, "perfect"),
        Stream(0, "pool"),
    ]
    rules = league_ops.LeagueRules(2, 1)
    env = SeatedJaxGame(
        "TicTacToe-v1", streams, network_player(_Core), opening_plies=2, league=rules
    )
    params = {"w": jnp.zeros(())}
    shared = env.init_shared(params)
    state, ts = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), 8), shared, params)
    step, rng = jax.jit(env.step), np.random.default_rng(0)
    after_end = np.zeros(8, bool)
    ends = 0
    for _ in range(200):
        game = state.inner.game
        ended = np.asarray(ts.terminated | ts.truncated)
        reward, plies = np.asarray(ts.reward), np.asarray(ts.info["plies"])
        assert (reward[~ended] == 0).all()  # the games reward their end only
        final = np.asarray(ts.obs[AGENT_VIEW])[ended].astype(bool)  # its own view at the end
        won, lost = g._tictactoe_wins(final[..., 0]), g._tictactoe_wins(final[..., 1])
        np.testing.assert_array_equal(reward[ended], won.astype(int) - lost)
        live = ~ended
        assert (np.asarray(game.current_player)[live] == env.seats[live]).all()  # its turn
        view = np.asarray(ts.obs[AGENT_VIEW])
        mine, theirs = view[..., 0].reshape(8, -1).sum(1), view[..., 1].reshape(8, -1).sum(1)
        assert ((mine == theirs) | (mine + 1 == theirs))[live].all()  # it moves next
        assert (plies[after_end] <= 3).all() and (plies[~after_end] <= 2).all()
        pool_game = np.asarray(ts.info["pool_game"])
        assert ((pool_game >= 0) == (ended & np.isin(np.arange(8), [4, 7])))[ended].all()
        mask = np.asarray(ts.obs[ACTION_MASK])
        action = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int32)
        state, ts = step(state, jnp.asarray(action), shared, params)
        after_end = ended
        first = np.asarray(ts.reward)[after_end], np.asarray(ts.terminated)[after_end]
        assert (first[0] == 0).all() and not first[1].any()  # a reset step
        ends += ended.sum()
    assert ends > 60
