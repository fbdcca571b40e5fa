"""A running job told to load params from a checkpoint or to change its replay settings
(`run/control.py`: pytorchrl's `set_weights` and `update_storage_parameter`), through
`control.json` and `Trainer.control`: checked as at the start (a bad request is rejected in one
line and the run goes on), applied between updates on both engines, logged, and (the replay
settings) kept across a resume."""

import json

import pytest

from jaxrl_dist import Hooks, Trainer, load_config
from jaxrl_dist.checkpoints.store import restore_params, tree_digest
from jaxrl_dist.run import hparams
from jaxrl_dist.run.hparams import HyperparamError

ANAKIN_PPO = "configs/anakin_ppo_cartpole.py:quick"
RAINBOW = "configs/rainbow_cartpole.py:quick"


@pytest.fixture(scope="module")
def ppo_source(tmp_path_factory):
    """An Anakin PPO CartPole run of 4 updates: params to load (and, for Rainbow, params of
    another network)."""
    workdir = str(tmp_path_factory.mktemp("control") / "ppo_source")
    Trainer(load_config(ANAKIN_PPO, total_env_steps=2048), workdir, quiet=True).run()
    return workdir


def _watch_loads(trainer):
    """Records the digest of the params each load put in (the state right after it)."""
    loaded, load = [], trainer.engine.load_params

    def watched(name, params):
        load(name, params)
        loaded.append((name, tree_digest(trainer.engine.policy_params())))

    trainer.engine.load_params = watched
    return loaded


def test_anakin_loads_params_into_a_running_job_and_refuses_replay_settings(tmp_path, ppo_source):
    config = load_config(ANAKIN_PPO, total_env_steps=512 * 6, log_every_updates=1)
    trainer = Trainer(config, str(tmp_path / "run"), quiet=True)
    loaded = _watch_loads(trainer)
    refused = []

    def on_iteration(episodes, env_steps):
        if env_steps == 512 * 2:
            trainer.control({"load_params": ppo_source + "@latest", "learning_rate": 1e-3})
            with pytest.raises(HyperparamError) as e:
                trainer.control({"replay.samples_per_insert": 2.0})
            refused.append(str(e.value))

    trainer.hooks = Hooks(on_iteration=on_iteration)
    summary = trainer.run().summary
    source = tree_digest(restore_params(ppo_source))
    assert loaded == [("learner", source)]  # every seed's learner: the first seed's checked
    (change,) = summary["hparam_changes"]
    assert change["updates"] == 2 and change["source"] == "control"
    assert change["values"] == {"learning_rate": 1e-3, "load_params": f"{ppo_source}@4"}
    assert "cannot change while a run goes on" in refused[0] and "\n" not in refused[0]


def test_sebulba_replay_settings_and_loads_through_control_json(
    tmp_path, ppo_source, monkeypatch, capsys
):
    monkeypatch.setattr(hparams, "POLL_EVERY_S", 0.0)  # poll before every update: no timing
    source = str(tmp_path / "source")
    Trainer(load_config(RAINBOW, total_env_steps=1200), source, quiet=True).run()
    workdir = tmp_path / "run"
    control = workdir / "control.json"
    requests = [  # (request, why it is rejected, or None)
        ({"load_params": ppo_source}, "its params do not match this config's network"),
        ({"load_params": str(tmp_path / "nothing")}, "holds no checkpoint"),
        ({"replay.priority_exponent": 2}, "must be in [0, 1]"),
        ({"replay.capacity": 5}, "replay.capacity cannot change at run time"),
        ({"replay.samples_per_insert": 2.0, "replay.priority_exponent": 0.3}, None),
        ({"load_params": source + "@999"}, "step 999 is not a checkpoint"),
        ({"load_params": source}, None),
    ]
    config = load_config(RAINBOW, total_env_steps=3000, log_every_updates=1)
    trainer = Trainer(config, str(workdir), quiet=True)
    loaded = _watch_loads(trainer)

    def on_iteration(episodes, env_steps):  # another process writing the file, one at a time
        if trainer.hparams.has_pending or control.exists() or not requests:
            return
        control.write_text(json.dumps(requests[0][0]))
        asked.append(requests.pop(0))

    asked = []
    trainer.hooks = Hooks(on_iteration=on_iteration)
    summary = trainer.run().summary
    err = capsys.readouterr().err
    assert not requests
    for _, why in asked:
        assert why is None or why in err, (why, err)
    assert err.count("control.json rejected") == 5, err
    data = trainer.engine.lanes[0].data
    assert data._limiter._spi == 2 and data._alpha == 0.3  # the config's: 8 and 0.5
    assert loaded == [("learner", tree_digest(restore_params(source)))]
    changes = summary["hparam_changes"]
    assert [c["values"] for c in changes] == [
        {"replay.samples_per_insert": 2.0, "replay.priority_exponent": 0.3},
        {"load_params": f"{source}@{summary_updates(source)}"},
    ]
    records = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
    assert any(r.get("hparams/replay.samples_per_insert") == 2.0 for r in records)

    # A resume puts back the settings in force at the checkpoint, the limiter as it was (a
    # limiter rebuilt at the config's ratio from those counts would hold the learner back
    # for thousands of inserts: `test_replay.py` checks the offset exactly), and learns on.
    before = summary["updates"]
    config = load_config(RAINBOW, total_env_steps=3600, log_every_updates=1)
    resumed = Trainer(config, str(workdir), resume=True, quiet=True)
    summary = resumed.run().summary
    data = resumed.engine.lanes[0].data
    assert data._limiter._spi == 2 and data._alpha == 0.3
    assert summary["updates"] > before and len(summary["hparam_changes"]) == 2


def summary_updates(workdir):
    with open(f"{workdir}/summary.json") as f:
        return json.load(f)["updates"]
