"""The Orbax wrapper: nothing accumulates per save (the soak's memory creep); the state is
stored packed, restores exactly, and older unpacked steps still read."""

import gc
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from jaxrl_dist.checkpoints.integrity import state_mismatch
from jaxrl_dist.checkpoints.store import (
    Checkpointer,
    abstract_like,
    restore_params,
    tree_digest,
)


def _live_lists() -> int:
    gc.collect()
    return sum(type(o) is list for o in gc.get_objects())


def test_saves_leave_no_python_objects_behind(tmp_path):
    """Orbax 0.12 reads TensorStore's metrics around every array save, and TensorStore 0.1.86
    leaks a list per metric per read (unpatched, 732 more lists after 30 saves of this state):
    a run checkpointing every few seconds grew ~60 MiB an hour. `orbax_items.py` turns it off."""
    params = {f"w{i}": jnp.full((8, 8), float(i)) for i in range(4)}
    state = {"params": params, "step": jnp.int32(0)}
    # The packed state needs no TensorStore; the replay item (deterministic mode's recorded
    # actions) is still written through it, so it carries the arrays here.
    replay = {f"a{i}": jnp.full((4, 8), i, jnp.int32) for i in range(4)}
    with Checkpointer(str(tmp_path / "checkpoints"), keep_latest=2) as ckpt:
        for step in range(10):  # warm-up: Orbax's and TensorStore's one-time state
            ckpt.save(step, state, {"updates": step}, replay)
        ckpt.wait()
        before = _live_lists()
        for step in range(10, 40):
            ckpt.save(step, state, {"updates": step}, replay)
        ckpt.wait()
        grown = _live_lists() - before
        assert ckpt.all_steps() == [38, 39]
    assert grown < 30, f"{grown} more live lists after 30 saves: something keeps one per save"
    restored = restore_params(str(tmp_path))
    assert float(restored["w3"][0, 0]) == 3.0


class _State(NamedTuple):
    params: dict
    opt_state: tuple
    rng: jax.Array
    key: jax.Array
    step: jax.Array


def _state(seed: int = 0) -> _State:
    rng = np.random.default_rng(seed)
    return _State(
        params={
            "w": jnp.asarray(rng.normal(size=(3, 5)), jnp.float32),
            "half": jnp.ones(4, "bfloat16"),
        },
        opt_state=(jnp.asarray(rng.normal(size=(3, 5)), jnp.float32), {"count": jnp.int32(9)}),
        rng=jnp.asarray([1, 2], jnp.uint32),
        key=jax.random.key(seed),
        step=jnp.int32(seed),
    )


def _bits(state: Any) -> str:
    plain = jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, state)
    return tree_digest(plain)


def _is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def test_state_is_stored_as_one_array_and_restores_exactly(tmp_path):
    """TensorStore keeps native memory per array written, so replicated leaves are packed: 9
    leaves of 4 dtypes (a typed key among them) go in as one file of bytes and come back
    bit-identical, in the caller's tree structure (a NamedTuple, not Orbax's dict)."""
    state = _state(3)
    with Checkpointer(str(tmp_path), keep_latest=2) as ckpt:
        ckpt.save(5, state, {"updates": 5})
        ckpt.wait()
        restored, meta = ckpt.restore(abstract_like(state))
    assert meta == {"updates": 5}
    assert isinstance(restored, _State) and _is_key(restored.key)
    assert _bits(restored) == _bits(state)
    # One plain file, no TensorStore array at all (nothing is sharded).
    assert "bytes" in os.listdir(tmp_path / "5" / "packed")
    assert not (tmp_path / "5" / "state").exists()
    assert state_mismatch(str(tmp_path), abstract_like(state)) is None
    wider = state._replace(params={**state.params, "w": jnp.zeros((3, 6))})
    assert state_mismatch(str(tmp_path), abstract_like(wider)) == (
        "params/w is float32[3, 5] in the checkpoint but float32[3, 6] with this config"
    )
    params = restore_params(str(tmp_path))
    np.testing.assert_array_equal(params["w"], np.asarray(state.params["w"]))


def test_steps_saved_before_packing_still_restore(tmp_path):
    """A run checkpointed by an earlier version (the state as Orbax's own tree, no `layout`)
    resumes and serves its params as before."""
    state = _state(1)._replace(key=jnp.asarray([0, 1], jnp.uint32))
    manager = ocp.CheckpointManager(str(tmp_path), options=ocp.CheckpointManagerOptions())
    manager.save(
        4,
        args=ocp.args.Composite(
            state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave({"updates": 4})
        ),
    )
    manager.wait_until_finished()
    manager.close()
    assert state_mismatch(str(tmp_path), abstract_like(state)) is None
    with Checkpointer(str(tmp_path), create=False) as ckpt:
        restored, meta = ckpt.restore(abstract_like(state))
    assert meta == {"updates": 4} and _bits(restored) == _bits(state)
    np.testing.assert_array_equal(restore_params(str(tmp_path))["w"], state.params["w"])


def test_a_run_and_its_step_split_at_the_last_at_sign_only_for_a_step():
    from jaxrl_dist.checkpoints.steps import split_step

    assert split_step("runs/a") == ("runs/a", "latest")
    assert split_step("runs/a@best") == ("runs/a", "best")
    assert split_step("runs/a@latest") == ("runs/a", "latest")
    assert split_step("runs/a@1200") == ("runs/a", "1200")
    assert split_step("runs/me@host/run") == ("runs/me@host/run", "latest")  # part of the path
    assert split_step("runs/a@b@40") == ("runs/a@b", "40")
    assert split_step("@best") == ("@best", "latest")  # no run before it: a path, not found
