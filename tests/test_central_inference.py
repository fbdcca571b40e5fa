"""The central inference server inside real runs: it serves several actor threads, learns, is
restarted within the restart budget when it fails, and is deterministic in lockstep mode; R2D2
(each env's LSTM state kept in the server) and tic-tac-toe's seats act through it as through
local inference, answer for answer."""

import functools
import json
import os
import threading
from typing import Any, NamedTuple

import jax
import numpy as np
import pytest

from jaxrl_dist.acting import inference_server
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import ActResult, LocalClient, jit_inference_step
from jaxrl_dist.acting.server_client import ServerClient
from jaxrl_dist.config.cli import _build, load_config_file, parse_args
from jaxrl_dist.errors import RunError
from jaxrl_dist.run.trainer import Trainer
from jaxrl_dist.types import ACTION_MASK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARTPOLE = os.path.join(ROOT, "configs", "impala_cartpole.py")
SERVER = [
    "--config",
    f"{CARTPOLE}:quick",
    "--workdir",
    "unused",
    "--config.sebulba.inference.client=server",
    "--config.sebulba.num_actor_threads=2",
    "--config.log_every_updates=2",
    "--config.sebulba.actor_loop=python",
    "--config.sebulba.async_envs=true",  # the XLA loop has no server
]


def _config(*overrides):
    return parse_args([*SERVER, *overrides])[0]


def _records(workdir):
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_a_server_batches_two_actors(tmp_path):
    """Learning through the server: `test_learning_claims.py`."""
    work = str(tmp_path / "run")
    config = _config("--config.total_env_steps=12800", "--config.sebulba.inference.timeout_ms=50")
    result = Trainer(config, work, quiet=True).run()
    assert result.stop_reason == "total_env_steps reached" and result.env_steps >= 12_800
    logged = [r for r in _records(work) if "inference/envs_per_batch" in r]
    assert logged
    # Two actors of 16 envs per recv() and a 50 ms window: batches hold both actors' requests.
    assert max(r["inference/requests_per_batch"] for r in logged) > 1.5
    assert max(r["inference/envs_per_batch"] for r in logged) > 16


def test_a_failed_server_is_restarted_within_the_budget(tmp_path, monkeypatch):
    original = inference_server.InferenceServer._run_batch
    failures = {"left": 1}

    def fail_once(self, *args, **kwargs):
        if failures["left"] and self._counts["batches"] >= 5:
            failures["left"] -= 1
            raise RuntimeError("injected inference failure")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(inference_server.InferenceServer, "_run_batch", fail_once)
    summary = Trainer(_config(), str(tmp_path / "run"), quiet=True).run().summary
    assert failures["left"] == 0 and summary["actor_restarts"] == 1
    assert summary["stop_reason"] == "total_env_steps reached"


def test_a_server_that_keeps_failing_spends_the_budget(tmp_path, monkeypatch):
    def always_fail(self, *args, **kwargs):
        raise RuntimeError("injected inference failure")

    monkeypatch.setattr(inference_server.InferenceServer, "_run_batch", always_fail)
    config = _config("--config.sebulba.actor_max_restarts=2")
    with pytest.raises(RunError, match="inference server 0 stopped.*restart budget is spent"):
        Trainer(config, str(tmp_path / "run"), quiet=True).run()
    with open(tmp_path / "run" / "summary.json") as f:
        assert json.load(f)["actor_restarts"] == 2


def test_lockstep_through_the_server_is_deterministic(tmp_path):
    overrides = (
        "--config.deterministic=true",
        "--config.sebulba.async_envs=false",
        "--config.sebulba.envs_per_actor=8",
        "--config.batch_size=16",
        "--config.total_env_steps=3200",
        "--config.sebulba.env_epoch_updates=4",
    )
    config = _config(*overrides)
    first = Trainer(config, str(tmp_path / "a"), quiet=True).run().summary
    second = Trainer(config, str(tmp_path / "b"), quiet=True).run().summary
    assert first["updates"] == second["updates"] == 10
    assert first["params_sha256"] == second["params_sha256"]


# ----------------------------------------------------------------------------- R2D2 and seats
class Call(NamedTuple):
    """One request an actor sent the server (host copies) and the server's answer."""

    obs: Any
    env_ids: np.ndarray
    first: np.ndarray | None
    result: ActResult


class ServerTraffic:
    """Records, during a run, every actor's requests to the inference server with the answers
    (one stream per client and reset: its identity, key and calls) and the params of every
    published version, so the answers can be played again through local inference."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.streams: list[dict] = []
        self.params: dict[int, Any] = {}
        self._by_client: dict[int, dict] = {}
        real_reset, real_act, real_publish = (
            ServerClient.reset,
            ServerClient.act,
            ParamsStore.publish,
        )

        def reset(client, key):
            real_reset(client, key)
            server = client._server  # each agent's own: its policy, greedy or not, its params
            stream = {"identity": client._identity, "key": key, "calls": [], "server": server}
            self.streams.append(stream)
            self._by_client[id(client)] = stream

        def act(client, obs, env_ids, min_version=0, first=None):
            result = real_act(client, obs, env_ids, min_version, first)
            if result is not None:
                copy = None if first is None else np.array(first)
                call = Call(jax.tree.map(np.array, obs), np.array(env_ids), copy, result)
                self._by_client[id(client)]["calls"].append(call)
            return result

        def publish(store, params, version):
            real_publish(store, params, version)
            self.params[id(store), version] = jax.device_get(params)

        monkeypatch.setattr(ServerClient, "reset", reset)
        monkeypatch.setattr(ServerClient, "act", act)
        monkeypatch.setattr(ParamsStore, "publish", publish)

    @property
    def calls(self) -> list[Call]:
        return [call for stream in self.streams for call in stream["calls"]]

    def replay_locally(self, config: Any, server_store: ParamsStore | None = None) -> int:
        """Plays every stream's requests (those of the server reading `server_store`, if
        given) again through a `LocalClient` (the actor's own inference) of the server's policy
        from the same per-env state and key, with the params the server used, and asserts the
        same actions, extras and recurrent core states; returns the rows compared."""
        device = jax.local_devices()[0]
        pad = config.recv_rows if config.seats.enabled else 0
        rows = 0
        for stream in self.streams:
            server = stream["server"]
            if server_store is not None and server._store is not server_store:
                continue
            core, store = server._core, ParamsStore([device])
            step = jit_inference_step(core, server.greedy)
            local = LocalClient(
                step=step,
                core=core,
                store=store,
                device=device,
                identity=stream["identity"],
                num_envs=config.streams_per_actor,
                key=stream["key"],
                stop=threading.Event(),
                pad_to=pad,
            )
            for call in stream["calls"]:
                served = call.result
                if store.version != served.version:
                    params = self.params[id(server._store), served.version]
                    store.publish(params, served.version)
                got = local.act(call.obs, call.env_ids, 0, call.first)
                np.testing.assert_array_equal(got.action, served.action)
                close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
                jax.tree.map(
                    close, (got.extras, got.core_state), (served.extras, served.core_state)
                )
                rows += len(call.env_ids)
        return rows


def _memory(core_state: Any) -> np.ndarray:
    """`[B]` each row's recurrent state's absolute sum (0: a fresh state)."""
    return sum(np.abs(x).reshape(len(x), -1).sum(axis=1) for x in jax.tree.leaves(core_state))


def _most_requests_per_batch(workdir) -> float:
    return max(
        r["inference/requests_per_batch"]
        for r in _records(workdir)
        if "inference/requests_per_batch" in r
    )


def _served_run(monkeypatch, tmp_path, config_path, *overrides):
    """A run through the server with its traffic recorded: (trainer, summary, traffic)."""
    traffic = ServerTraffic(monkeypatch)
    args = [*SERVER, "--config.sebulba.inference.timeout_ms=50", *overrides]
    args[1] = config_path
    trainer = Trainer(parse_args(args)[0], str(tmp_path / "run"), quiet=True)
    summary = trainer.run().summary
    return trainer, summary, traffic


def test_r2d2_through_the_server_acts_as_local_inference_with_each_envs_memory(
    monkeypatch, tmp_path
):
    """R2D2's LSTM state per env lives in the server, across batches that mix both actors'
    requests. Deterministic mode refuses recurrent cores, so the run is not compared with a
    local one; instead every answer the server gave (actions and the core state each env acted
    from, which the segments store) is played again through each actor's local inference from
    the same start: the same, row for row."""
    config = os.path.join(ROOT, "configs", "r2d2_memory.py:quick")
    trainer, summary, traffic = _served_run(
        monkeypatch, tmp_path, config, "--config.total_env_steps=2400"
    )
    assert summary["stop_reason"] == "total_env_steps reached" and summary["updates"] > 0
    assert _most_requests_per_batch(tmp_path / "run") > 1  # batches held both actors' requests
    assert len({stream["identity"].index for stream in traffic.streams}) == 2
    # The memory is carried: after the first steps most rows act from a non-zero LSTM state.
    remembered = np.concatenate([_memory(c.result.core_state) > 0 for c in traffic.calls[4:]])
    assert remembered.mean() > 0.9
    assert len(traffic.params) > 2  # answers came from several versions of the params
    lane = trainer.engine.lanes[0]
    assert traffic.replay_locally(lane.config) >= 2000


def test_seats_through_the_server_serve_every_learner_stream_legally(monkeypatch, tmp_path):
    """Tic-tac-toe's seats (self-play and scripted opponents, the learner in either seat)
    through the server: each actor's requests carry only the streams whose turn it is (a
    varying number of rows), every learner stream of both seats is served, every action is
    legal, and every answer equals local inference's on the same requests (deterministic mode
    refuses seats, so the run is not compared with a local one)."""
    config = os.path.join(ROOT, "configs", "ppo_tictactoe.py:quick")
    trainer, summary, traffic = _served_run(
        monkeypatch, tmp_path, config, "--config.total_env_steps=1600"
    )
    assert summary["stop_reason"] == "total_env_steps reached" and summary["updates"] > 0
    assert _most_requests_per_batch(tmp_path / "run") > 1
    lane = trainer.engine.lanes[0]
    streams = lane.config.streams_per_actor
    for stream in traffic.streams:
        calls = stream["calls"]
        assert set(np.concatenate([c.env_ids for c in calls])) == set(range(streams))
        assert len({len(c.env_ids) for c in calls}) > 2  # whoever's turn it is
        for call in calls:
            legal = np.asarray(call.obs[ACTION_MASK], bool)
            assert legal[np.arange(len(legal)), call.result.action].all()
    assert traffic.replay_locally(lane.config) >= 1500


def test_several_agents_each_act_through_their_own_server(monkeypatch, tmp_path):
    """Two agents in tic-tac-toe (`two_agents_tictactoe.py`), each through its own inference
    server: Rainbow acting by its policy's mode while it learns (`exploration_mask`), PPO with an
    LSTM. Every answer of each server equals local inference of that agent's policy on the same
    requests (greedy for Rainbow; the memory of each stream for PPO)."""
    raw = load_config_file(os.path.join(ROOT, "configs", "two_agents_tictactoe.py:quick"))
    rb, ppo = (dict(a) for a in raw["agents"])
    ppo["network"] = {**ppo["network"], "core": "lstm", "core_size": 16}
    raw.update(agents=(rb, ppo), exploration_mask=(False, True), total_env_steps=3200)
    raw["sebulba"] = {**raw["sebulba"], "inference": {"client": "server", "timeout_ms": 50}}
    traffic = ServerTraffic(monkeypatch)
    trainer = Trainer(_build(raw, {}), str(tmp_path / "run"), quiet=True)
    summary = trainer.run().summary
    assert summary["stop_reason"] == "total_env_steps reached"
    greedy = {s["server"].greedy for s in traffic.streams}
    assert greedy == {True, False}  # each agent's server: its own policy
    for lane in trainer.engine.lanes:
        assert traffic.replay_locally(lane.config, lane.store) >= 300, lane.config.algorithm
