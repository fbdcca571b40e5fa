"""The central inference server: per-env state per (slot, env), batching, padding, params
versions, reset, server death and stop."""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl_dist.acting import server_client
from jaxrl_dist.acting.inference_server import InferenceServer
from jaxrl_dist.acting.params_store import ParamsStore
from jaxrl_dist.acting.policy_client import LocalClient, jit_inference_step
from jaxrl_dist.acting.server_client import ServerClient, ServerHandle
from jaxrl_dist.agents.base import ActorCore, ActorIdentity

DEVICE = jax.devices("cpu")[0]
ENVS = 4


def _init_state(identity, num_envs, key):
    return {"key": jax.random.split(key, num_envs), "count": jnp.zeros(num_envs, jnp.int32)}


def _act(params, obs, state):
    """action = obs.sum(-1) * w + count; extras: the count and a uniform from the env's key."""
    u = jax.vmap(jax.random.uniform)(state["key"])
    action = obs.sum(-1) * params["w"] + state["count"].astype(jnp.float32)
    keys = jax.vmap(lambda k: jax.random.split(k)[0])(state["key"])
    return action, {"count": state["count"], "u": u}, {"key": keys, "count": state["count"] + 1}


CORE = ActorCore(init_state=_init_state, act=_act, greedy_act=lambda p, o, s: (o.sum(-1), s))


def _params(version):
    return {"w": jnp.float32(version)}


def _store(*versions):
    store = ParamsStore([DEVICE])
    for v in versions:
        store.publish(_params(v), v)
    return store


@pytest.fixture
def stop():
    """The run's stop flag; set at the end of each test so every server thread ends."""
    flag = threading.Event()
    yield flag
    flag.set()


def _server(stop, store, index=0, slots=2, max_batch=8, timeout_ms=20.0, period=1, start=True):
    server = InferenceServer(
        index=index,
        core=CORE,
        store=store,
        device=DEVICE,
        slots=slots,
        envs_per_slot=ENVS,
        max_batch=max_batch,
        timeout_ms=timeout_ms,
        broadcast_period=period,
        stop=stop,
    )
    if start:
        server.start()
    return server


def _client(handle, slot, stop, seed=None):
    key = jax.random.PRNGKey(slot if seed is None else seed)
    return ServerClient(handle, slot, ActorIdentity(slot, 2), key, stop)


def _obs(n, value=1.0):
    return np.full((n, 3), value, np.float32)


def _ids(*ids):
    return np.array(ids, np.int32)


def _in_thread(fn):
    """Runs `fn()` in a thread; returns (thread, box) where box holds its result or error."""
    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


CALLS = [(0, 1, 2, 3), (1, 3), (0, 2), (2,), (0, 1, 2, 3), (3, 1), (0, 1, 2, 3)]


def test_concurrent_clients_match_local_clients(stop):
    store = _store(3)
    server = _server(stop, store, timeout_ms=5.0)
    handle = ServerHandle(server)
    rng = np.random.default_rng(0)
    obs = lambda n: rng.normal(size=(n, 3)).astype(np.float32)  # noqa: E731
    calls = {s: [(obs(len(ids)), _ids(*ids)) for ids in CALLS] for s in (0, 1)}

    def actor(slot):
        client = _client(handle, slot, stop)
        return [client.act(obs, ids) for obs, ids in calls[slot]]

    runs = [_in_thread(lambda s=s: actor(s)) for s in (0, 1)]
    for thread, _ in runs:
        thread.join(10)
    step = jit_inference_step(CORE)
    for slot, (_, box) in enumerate(runs):
        assert "error" not in box, box.get("error")
        local = LocalClient(
            step=step,
            core=CORE,
            store=store,
            device=DEVICE,
            identity=ActorIdentity(slot, 2),
            num_envs=ENVS,
            key=jax.random.PRNGKey(slot),
            stop=stop,
        )
        for (obs, ids), got in zip(calls[slot], box["result"], strict=True):
            want = local.act(obs, ids)
            assert got.version == want.version == 3
            np.testing.assert_allclose(got.action, want.action, rtol=1e-6)
            np.testing.assert_allclose(got.env_action, want.env_action, rtol=1e-6)
            np.testing.assert_array_equal(got.extras["count"], want.extras["count"])
            np.testing.assert_array_equal(got.extras["u"], want.extras["u"])
    # env 2 of each slot was asked in calls 0, 2, 3, 4, 6: its count advanced 0..4 on its own
    results = zip(runs[0][1]["result"], CALLS, strict=True)
    counts = [r.extras["count"][ids.index(2)] for r, ids in results if 2 in ids]
    assert counts == [0, 1, 2, 3, 4]
    assert server.stats()["rows"] == 2 * sum(map(len, CALLS))


def test_padding_compiles_the_step_once(stop):
    server = _server(stop, _store(0), max_batch=6, timeout_ms=1.0)
    client = _client(ServerHandle(server), 0, stop)
    for ids in [(0,), (0, 1), (1, 2, 3), (0, 1, 2, 3), (2,)]:
        result = client.act(_obs(len(ids)), _ids(*ids))
        assert result.action.shape == (len(ids),)
    assert server.step._cache_size() == 1
    assert server.stats()["padded_rows"] == 5 * 6 - 11
    with pytest.raises(ValueError, match="1..6 env ids"):
        server.submit(0, _obs(7), np.zeros(7, np.int32), 0)
    with pytest.raises(ValueError, match="not registered"):
        server.submit(1, _obs(1), _ids(0), 0)


def test_one_batch_serves_both_clients_when_they_fit(stop):
    server = _server(stop, _store(0), max_batch=2 * ENVS, timeout_ms=10_000.0)
    handle = ServerHandle(server)
    clients = [_client(handle, s, stop) for s in (0, 1)]
    runs = [_in_thread(lambda c=c: c.act(_obs(ENVS), _ids(0, 1, 2, 3))) for c in clients]
    for thread, box in runs:
        thread.join(10)
        assert box["result"].action.shape == (ENVS,)
    stats = server.stats()
    assert (stats["batches"], stats["requests"], stats["padded_rows"]) == (1, 2, 0)


def test_a_request_that_would_overflow_waits_for_the_next_batch(stop):
    server = _server(stop, _store(0), max_batch=6, timeout_ms=50.0, start=False)
    for slot in (0, 1):
        server.register(slot, ActorIdentity(slot, 2), jax.random.PRNGKey(slot))
    requests = [server.submit(s, _obs(ENVS), _ids(0, 1, 2, 3), 0) for s in (0, 1)]
    server.start()
    results = [r.wait(10) for r in requests]
    assert all(r is not None and r.action.shape == (ENVS,) for r in results)
    stats = server.stats()
    assert (stats["batches"], stats["requests"], stats["padded_rows"]) == (2, 2, 4)


def test_broadcast_period_and_min_version(stop):
    store = _store(0)
    server = _server(stop, store, period=3, timeout_ms=1.0)
    client = _client(ServerHandle(server), 0, stop)
    seen = []
    for v in range(6):
        if v:
            store.publish(_params(v), v)
        result = client.act(_obs(1), _ids(0))
        assert store.version - result.version <= 2
        np.testing.assert_allclose(result.action, 3.0 * result.version + v)  # w == version
        seen.append(result.version)
    assert seen == [0, 0, 0, 3, 3, 3]
    assert client.act(_obs(1), _ids(0), min_version=5).version == 5
    threading.Timer(0.2, lambda: store.publish(_params(6), 6)).start()
    assert client.act(_obs(1), _ids(0), min_version=6).version == 6
    assert server.stats()["refreshes"] == 4


def test_reset_reinitialises_only_its_slot(stop):
    server = _server(stop, _store(0), timeout_ms=1.0)
    handle = ServerHandle(server)
    c0, c1 = _client(handle, 0, stop), _client(handle, 1, stop)
    all_ids = _ids(0, 1, 2, 3)
    for _ in range(3):
        c0.act(_obs(ENVS), all_ids)
        c1.act(_obs(ENVS), all_ids)
    c0.reset(jax.random.PRNGKey(7))
    np.testing.assert_array_equal(c0.act(_obs(ENVS), all_ids).extras["count"], [0, 0, 0, 0])
    np.testing.assert_array_equal(c1.act(_obs(ENVS), all_ids).extras["count"], [3, 3, 3, 3])


def _fail_once(monkeypatch, server):
    def boom(batch):
        raise RuntimeError("boom")

    monkeypatch.setattr(server, "_run_batch", boom)


def test_a_pending_act_completes_on_the_restarted_server(stop, monkeypatch):
    store = _store(0)
    server = _server(stop, store, index=3, timeout_ms=1.0)
    handle = ServerHandle(server)
    client = _client(handle, 1, stop)
    assert client.act(_obs(2), _ids(0, 1)).extras["count"].tolist() == [0, 0]
    _fail_once(monkeypatch, server)
    thread, box = _in_thread(lambda: client.act(_obs(2), _ids(0, 1)))
    server.join(5)
    assert not server.is_alive() and "boom" in repr(server.error)
    time.sleep(0.3)  # the client keeps waiting for a new server
    assert thread.is_alive()
    new = _server(stop, store, index=3, timeout_ms=1.0)  # playing the supervisor
    handle.server = new
    thread.join(5)
    assert "error" not in box, box.get("error")
    result = box["result"]
    assert result.extras["count"].tolist() == [0, 0]  # fresh state on the new server
    assert new.stats()["requests"] == 1
    assert client.act(_obs(1), _ids(0)).extras["count"].tolist() == [1]


def test_act_raises_when_no_new_server_comes(stop, monkeypatch):
    monkeypatch.setattr(server_client, "DEAD_SERVER_TIMEOUT_S", 0.3)
    server = _server(stop, _store(0), index=7, timeout_ms=1.0)
    client = _client(ServerHandle(server), 0, stop)
    _fail_once(monkeypatch, server)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="inference server 7 died"):
        client.act(_obs(1), _ids(0))
    assert time.monotonic() - start < 3


def test_stop_releases_a_blocked_client(stop):
    server = _server(stop, _store(), timeout_ms=1.0)  # no params: it never serves
    idle = _server(stop, _store(0), index=1)  # no requests: waits for a first one
    client = _client(ServerHandle(server), 0, stop)
    thread, box = _in_thread(lambda: client.act(_obs(1), _ids(0)))
    time.sleep(0.3)
    assert thread.is_alive()
    stopped = time.monotonic()
    stop.set()
    thread.join(2)
    server.join(2)
    idle.join(2)
    assert box == {"result": None}
    assert not server.is_alive() and server.error is None
    assert not idle.is_alive() and idle.error is None
    assert time.monotonic() - stopped < 0.5


def test_dict_observations_are_batched_and_padded_leaf_by_leaf(stop):
    """A view and an action mask per row (a board game's): two slots in one padded batch, each
    gets the masked argmax of its own rows."""

    def act(params, obs, state):
        scores = jnp.where(obs["action_mask"], obs["agent_view"] * params["w"], -jnp.inf)
        return jnp.argmax(scores, axis=-1), {}, state

    core = ActorCore(
        init_state=_init_state, act=act, greedy_act=lambda p, o, s: (o["agent_view"], s)
    )
    server = InferenceServer(
        index=0,
        core=core,
        store=_store(1),
        device=DEVICE,
        slots=2,
        envs_per_slot=ENVS,
        max_batch=8,
        timeout_ms=50.0,
        broadcast_period=1,
        stop=stop,
    )
    rng = np.random.default_rng(0)
    requests = []
    for slot, n in ((0, 3), (1, 2)):  # 5 rows, 3 padded
        obs = {
            "agent_view": rng.normal(size=(n, 5)).astype(np.float32),
            "action_mask": rng.random((n, 5)) < 0.4,
        }
        obs["action_mask"][:, 4] = True  # every row has a legal action
        server.register(slot, ActorIdentity(slot, 2), jax.random.PRNGKey(slot))
        requests.append((obs, server.submit(slot, obs, _ids(*range(n)), 0)))
    server.start()
    for obs, request in requests:
        expected = np.argmax(np.where(obs["action_mask"], obs["agent_view"], -np.inf), axis=-1)
        np.testing.assert_array_equal(request.wait(10).action, expected)
    stats = server.stats()
    assert (stats["batches"], stats["padded_rows"]) == (1, 3)
