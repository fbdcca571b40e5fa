"""pgx board games as learner streams with seats, for the Anakin runtime (the JAX `SeatedGame`).

`SeatedJaxGame` steps pgx 2.6.0's tic-tac-toe or connect four (EnvPool's `TicTacToe-v1` and
`ConnectFour-v1` are ports of them, so configs keep their EnvPool ids) with the rules of
`envs/seats.py`, inside jit:

- the learner sees one stream per seat it plays: its own view (`AGENT_VIEW`, the seat's pieces
  in plane 0, the other's in plane 1) with the legal-action mask (`ACTION_MASK`), the sum of its
  rewards since its last move, and the game's end with its final reward; the stream's next step
  is a reset step (reward 0, both flags False, the action ignored) that starts the next game,
  EnvPool's convention, so the program builds the same `Rollout` it builds for any env;
- the other seat is played inside the step by its role: "random", "heuristic", "perfect"
  (`envs/jax_players.py`), "pool" (a snapshot drawn per game from the league,
  `envs/jax_league.py`), "frozen" (the run's starting policy), in self-play the acting
  params themselves, or another agent of the run ("agent:NAME", `config.agents`: its own
  network with its current params, which the program puts in the shared state before each
  rollout); snapshot players act greedily where `exploration_mask` says so, other agents
  where theirs is off;
- a new game starts with n uniformly random legal moves, n uniform in [0, opening_plies];
- the first player of each game is drawn at random (pgx's and EnvPool's rule), and a seat is a
  player id, as on Sebulba.

One difference from Sebulba, by design: each stream has its own game. A self-play pattern
`("learner", "learner")` becomes two streams, each in its own game, the learner in one seat and
the other seat played by the same acting params (sampling, as a learner stream does) but not
learned from. Each stream meets the same opponent as on Sebulba; only the pairing of the two
seats' data in one game is gone.

Every env of the batch is a stream, so the batch shape never changes and everything is one
`vmap` over streams; each step costs at most one opponent move.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_dist.envs import jax_league
from jaxrl_dist.envs.jax_envs import EnvState, TimeStep
from jaxrl_dist.envs.jax_game_parts import (
    MEMORY_KEY_PURPOSE,
    NETWORK_ROLES,
    PGX_GAMES,
    AgentsShared,
    GameState,
    NetworkPlayer,
    Stream,
    evaluation_streams,
    game_spec,
    opening_problem,
)
from jaxrl_dist.envs.jax_players import scripted_choose, uniform_over
from jaxrl_dist.envs.seats import (
    AGENT_ROLE,
    FROZEN_ROLE,
    POOL_ROLE,
    SCRIPTED_ROLES,
    SNAPSHOT_ROLES,
)
from jaxrl_dist.types import ACTION_MASK, AGENT_VIEW, PyTree


class SeatedJaxGame:
    """Learner streams over pgx games (module docstring); the Anakin program's env seam
    (`envs/jax_envs.py`): batched `reset` and `step`, and the league as the state shared by
    the batch (`init_shared`, `update_shared`).

    Args:
      env_id: "TicTacToe-v1" or "ConnectFour-v1".
      streams: one `Stream` per env of the batch.
      player: how the network roles move (`NetworkPlayer`).
      opening_plies: the most random opening moves of a game.
      league: the opponent pool's rules, needed when a stream plays "pool".
      others: how each other agent of the run moves, by role ("agent:NAME"), needed when a
        stream plays one.
    """

    def __init__(
        self,
        env_id: str,
        streams: list[Stream],
        player: NetworkPlayer,
        opening_plies: int = 0,
        league: jax_league.LeagueRules | None = None,
        others: dict[str, NetworkPlayer] | None = None,
    ):
        import pgx

        problem = opening_problem(env_id, opening_plies)
        if problem:
            raise ValueError(problem)
        self.env_id, self.streams, self._player = env_id, streams, player
        self._pgx = pgx.make(PGX_GAMES[env_id])
        self.roles = tuple(sorted({s.opponent for s in streams}))
        if POOL_ROLE in self.roles and league is None:
            raise ValueError("a stream plays 'pool': give the league's rules")
        others = others or {}
        missing = [r for r in self.roles if r.startswith(AGENT_ROLE) and r not in others]
        if missing:
            raise ValueError(f"a stream plays {missing[0]!r}: give its player in `others`")
        self._others = {r: p for r, p in others.items() if r in self.roles}
        self._league = league if set(self.roles) & set(SNAPSHOT_ROLES) else None
        # Other agents' snapshots ("pool:NAME", "frozen:NAME"): played by NAME's network.
        self._agent_leagues = jax_league.AgentLeagues(self.roles, league)
        missing = [r for r in self._agent_leagues.agent_roles() if r not in others]
        if missing:
            raise ValueError(f"a stream plays {missing[0]!r}'s snapshots: give its player")
        self._league_players = {
            r: others[AGENT_ROLE + name] for r, (_, name) in self._agent_leagues.roles.items()
        }
        # The other agents whose params the shared state carries: played live or snapshotted.
        self._agent_params = sorted({*self._others, *self._agent_leagues.agent_roles()})
        self._opening = opening_plies
        self._scripted = {r: scripted_choose(r, env_id) for r in self.roles if r in SCRIPTED_ROLES}
        self.spec = game_spec(env_id)

    @property
    def seats(self) -> np.ndarray:
        """`[B]` the learner's seat in each stream."""
        return np.array([s.seat for s in self.streams], np.int32)

    def evaluation(
        self, num_games: int, opponent: str, others: dict[str, NetworkPlayer] | None = None
    ) -> SeatedJaxGame:
        """The same game for evaluations: `num_games` streams against `opponent` (scripted,
        or another agent whose player `others` holds, playing its policy's mode), the learner
        taking each seat in turn, no openings."""
        streams = evaluation_streams(num_games, opponent)
        if others:
            streams = [s._replace(greedy=True) for s in streams]
        return SeatedJaxGame(self.env_id, streams, self._player, others=others)

    # ------------------------------------------------------------------ the shared state
    def init_shared(self, params: PyTree, agents: dict[str, PyTree] | None = None) -> Any:
        """The league (snapshot 0 and the frozen policy: `params`), or () without one; with
        other agents' seats, `AgentsShared` of it and their params by role (`agents`)."""
        league = () if self._league is None else jax_league.init_league(self._league, params)
        if not self._agent_params:
            return league
        mine = {role: agents[role] for role in self._agent_params}
        return AgentsShared(league, mine, self._agent_leagues.init(agents))

    def with_agents(self, shared: Any, agents: dict[str, PyTree]) -> Any:
        """`shared` with the other agents' current params (`{"agent:NAME": params}`)."""
        if not self._agent_params:
            return shared
        return shared._replace(agents={role: agents[role] for role in self._agent_params})

    @property
    def follows_agents(self) -> bool:
        """Whether its streams play other agents' snapshots (`after_agents` takes them)."""
        return bool(self._agent_leagues)

    def after_agents(self, shared: Any) -> Any:
        """After an update of the run, `shared.agents` holding the other agents' params after
        theirs: a snapshot of each into its league when due."""
        leagues = self._agent_leagues.after_update(shared.leagues, shared.agents)
        return shared._replace(leagues=leagues)

    def update_shared(self, shared: Any, info: dict[str, jax.Array], params: PyTree) -> Any:
        """After an update: the rollout's finished pool games recorded (`info [T, B]`), a
        snapshot of `params` when due."""
        if self._league is None and not self._agent_leagues:
            return shared
        league = shared.league if self._agent_params else shared
        pool_game = info["pool_game"]
        if self._agent_leagues:  # the own pool's games apart from the other agents' pools'
            opponent = info["pool_opponent"]
            leagues = self._agent_leagues.record(
                shared.leagues, pool_game, opponent, info["game_return"]
            )
            shared = shared._replace(leagues=leagues)
            own = self.roles.index(POOL_ROLE) if POOL_ROLE in self.roles else -1
            pool_game = jnp.where(opponent == own, pool_game, -1)
        if self._league is not None:
            league = jax_league.record_games(league, pool_game, info["game_return"])
            league = jax_league.after_update(self._league, league, params)
        return shared._replace(league=league) if self._agent_params else league

    # ------------------------------------------------------------------ the batch
    def reset(self, keys: jax.Array, shared: Any, params: PyTree) -> tuple[EnvState, TimeStep]:
        """`[B]` streams at the learner's first move of a new game each."""
        table = {
            "seat": jnp.array([s.seat for s in self.streams], jnp.int32),
            "opponent": jnp.array([self.roles.index(s.opponent) for s in self.streams], jnp.int32),
            "greedy": jnp.array([s.greedy for s in self.streams], bool),
        }

        def one(key, seat, opponent, greedy):
            key, sub = jax.random.split(key)
            minus = jnp.full((), -1, jnp.int32)
            game = GameState(self._pgx.init(sub), seat, opponent, greedy, minus, minus)
            game = game._replace(**self._fresh_memory(sub))  # its shape: the reset renews it
            # A reset is the step after a game's end: one code path for both.
            return self._step(EnvState(game, jnp.ones((), bool), key), jnp.int32(0), shared, params)

        return jax.vmap(one)(keys, table["seat"], table["opponent"], table["greedy"])

    def step(
        self, state: EnvState, action: jax.Array, shared: Any, params: PyTree
    ) -> tuple[EnvState, TimeStep]:
        """`[B]` streams' next step: the learner's move and the reply, or a new game."""
        return jax.vmap(self._step, in_axes=(0, 0, None, None))(state, action, shared, params)

    # ------------------------------------------------------------------ one stream
    def _step(self, state: EnvState, action: jax.Array, shared: Any, params: PyTree):
        g, pgx_env = state.inner, self._pgx
        if self._agent_params:
            league, agents, leagues = shared.league, shared.agents, shared.leagues
        else:
            league, agents, leagues = shared, {}, {}
        key, k_new, k_open, k_pool, k_reply = jax.random.split(state.key, 5)
        reset = state.needs_reset
        moved = pgx_env.step(g.game, action)  # after a game's end: no effect, reward 0
        fresh, opened = self._new_game(k_new, k_open)
        game = _select(reset, fresh, moved)
        reward = jnp.where(reset, 0.0, moved.rewards[g.seat])
        plies = jnp.where(reset, opened, 1)
        snapshot, slot = g.snapshot, g.slot
        if self._league is not None and POOL_ROLE in self.roles:
            new_slot, new_id = jax_league.draw_slot(self._league, league, k_pool)
            is_pool = g.opponent == self.roles.index(POOL_ROLE)
            snapshot = jnp.where(reset, jnp.where(is_pool, new_id, -1), snapshot)
            slot = jnp.where(reset, new_slot, slot)
        if self._agent_leagues:  # a stream's opponent never changes: -1 stays for the rest
            draw = self._agent_leagues.draw
            snapshot, slot = draw(leagues, k_pool, g.opponent, reset, snapshot, slot)
        memory = _select(reset, self._fresh_memory(k_new), _memories(g))
        g = g._replace(game=game, snapshot=snapshot, slot=slot, **memory)
        # The other seat's reply (after a new game's opening, it may move first).
        theirs = ~game.terminated & ~game.truncated & (game.current_player != g.seat)
        reply, memory = self._reply(g, k_reply, league, params, agents, leagues)
        g = g._replace(**_select(theirs, memory, _memories(g)))
        replied = pgx_env.step(game, reply)
        game = _select(theirs, replied, game)
        reward = reward + jnp.where(theirs, replied.rewards[g.seat], 0.0)
        plies = plies + theirs.astype(jnp.int32)
        truncated = game.truncated & ~game.terminated
        ended = game.terminated | truncated
        # Both games' views are [own, other's] planes: the other player's view swaps them.
        view = jnp.where(
            game.current_player == g.seat, game.observation, game.observation[..., ::-1]
        )
        obs = {AGENT_VIEW: view.astype(jnp.int8), ACTION_MASK: game.legal_action_mask | ended}
        info = {
            "pool_game": jnp.where(ended, g.snapshot, -1).astype(jnp.int32),
            # Both games reward only their end: the last reward is the game's return.
            "game_return": jnp.where(ended, reward, 0.0),
            "plies": plies.astype(jnp.int32),
        }
        if self._agent_leagues:  # whose pool the game's snapshot is of
            info["pool_opponent"] = g.opponent
        timestep = TimeStep(obs, reward.astype(jnp.float32), game.terminated, truncated, info)
        return EnvState(g._replace(game=game), ended, key), timestep

    def _fresh_memory(self, new_game_key: jax.Array) -> dict[str, PyTree]:
        """A new game's opponent memories (`GameState.memory`, `.agents_memory`)."""
        key = jax.random.fold_in(new_game_key, MEMORY_KEY_PURPOSE)
        networked = any(r in NETWORK_ROLES for r in self.roles)
        return {
            "memory": self._player.init(key) if networked else (),
            "agents_memory": {
                r: p.init(key) for r, p in {**self._others, **self._league_players}.items()
            },
        }

    def _new_game(self, key: jax.Array, opening_key: jax.Array):
        """A new pgx game after its random opening; the opening's moves made."""
        game = self._pgx.init(key)
        if not self._opening:
            return game, jnp.zeros((), jnp.int32)
        count_key, move_key = jax.random.split(opening_key)
        n = jax.random.randint(count_key, (), 0, self._opening + 1)

        def move(i, game):
            a = uniform_over(game.legal_action_mask, jax.random.fold_in(move_key, i))
            return _select(i < n, self._pgx.step(game, a), game)

        return jax.lax.fori_loop(0, self._opening, move, game), n

    def _reply(
        self, g: GameState, key: jax.Array, league: Any, params: PyTree, agents: dict, leagues
    ) -> tuple[jax.Array, dict[str, PyTree]]:
        """The other seat's move in `g.game` (where it is that seat's turn) by its role, and
        the opponent's memories after it (`GameState.memory`, `.agents_memory`)."""
        view, legal = g.game.observation, g.game.legal_action_mask
        choices = {}
        for role, choose in self._scripted.items():
            choices[role] = choose(view, legal, key)
        obs = {AGENT_VIEW: view[None].astype(jnp.int8), ACTION_MASK: legal[None]}
        agents_memory = {}
        snapshots = self._agent_leagues.params
        players = {
            **{role: (player, agents[role]) for role, player in self._others.items()},
            **{
                role: (player, snapshots(leagues, role, g.slot))
                for role, player in self._league_players.items()
            },
        }
        for role, (player, its_params) in players.items():  # each its own network and params
            greedy = (
                g.greedy if any(s.greedy and s.opponent == role for s in self.streams) else None
            )
            mine = g.agents_memory[role]
            moved = _move(player, its_params, obs, key, mine, greedy)
            choices[role], agents_memory[role] = moved
        memory = g.memory
        networked = [r for r in self.roles if r in NETWORK_ROLES]
        if networked:
            move, memory = self._network_move(g, obs, key, league, params)
            choices.update({r: move for r in networked})
        action = jnp.zeros((), jnp.int32)
        for role, choice in choices.items():
            action = jnp.where(g.opponent == self.roles.index(role), choice, action)
        return action, {"memory": memory, "agents_memory": agents_memory}

    def _network_move(self, g: GameState, obs, key, league, params) -> tuple[jax.Array, PyTree]:
        """The move of the params the stream's network role plays: the acting params (self),
        the frozen policy, or the game's pool snapshot; sampled, or greedy for greedy seats."""
        if FROZEN_ROLE in self.roles:
            frozen = g.opponent == self.roles.index(FROZEN_ROLE)
            params = _select(frozen, league.frozen, params)
        if POOL_ROLE in self.roles:
            pool = g.opponent == self.roles.index(POOL_ROLE)
            snapshot = jax.tree.map(lambda s: s[g.slot], league.snapshots)
            params = _select(pool, snapshot, params)
        greedy = g.greedy if any(s.greedy for s in self.streams) else None
        return _move(self._player, params, obs, key, g.memory, greedy)


def _move(
    player: NetworkPlayer, params: PyTree, obs: PyTree, key: jax.Array, memory: PyTree, greedy
) -> tuple[jax.Array, PyTree]:
    """One move of `player` from `memory` with `key`: sampled, or its mode where `greedy`
    (None: never greedy); with the memory after it."""
    sampled, after = player.sample(params, obs, key, memory)
    if greedy is None:
        return sampled[0].astype(jnp.int32), after
    chosen, after_greedy = player.greedy(params, obs, key, memory)
    action = jnp.where(greedy, chosen[0], sampled[0]).astype(jnp.int32)
    return action, _select(greedy, after_greedy, after)


def _memories(g: GameState) -> dict[str, PyTree]:
    return {"memory": g.memory, "agents_memory": g.agents_memory}


def _select(pred: jax.Array, on_true: PyTree, on_false: PyTree) -> PyTree:
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)
