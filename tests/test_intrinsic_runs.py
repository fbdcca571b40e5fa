"""Intrinsic rewards (`config.intrinsic`, RND) in whole runs: on Sebulba (PPO logged and
evaluated with its two-headed params, IMPALA pre-trained then fine-tuned), on Anakin (a resume
of two vmapped seeds, bit-identical), the guide's pre-train / fine-tune / evaluate commands run
small, and the refusals. The parts: `test_intrinsic.py`."""

import json
import os
import shlex

import pytest
from cli_refusal import assert_refused
from train_runs import jsonl_records, train_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEEPSEA = "configs/anakin_ppo_deepsea.py"
GUIDE = os.path.join(ROOT, "docs", "guides", "intrinsic-rewards.md")


def test_ppo_with_rnd_on_sebulba_logs_it_and_evaluates_its_two_headed_params(tmp_path):
    """Sebulba (EnvPool CartPole): the intrinsic reward and head are logged; the checkpoint's
    description rebuilds the two-headed network for evaluation."""
    import jaxrl_dist

    workdir = str(tmp_path / "ppo_rnd")
    summary = train_main("configs/ppo_cartpole.py:quick", workdir, "--config.intrinsic.method=rnd")
    assert summary["updates"] > 0
    logged = [r for r in jsonl_records(workdir, "metrics.jsonl") if "losses/predictor_loss" in r]
    assert logged and all(r["losses/intrinsic_reward"] > 0 for r in logged)
    assert all("losses/intrinsic_value_mean" in r for r in logged)
    result = jaxrl_dist.evaluate(workdir, episodes=2)
    assert result.returns.shape == (2, 1)
    assert "intrinsic_value_head" in result.policy.params["net"]["params"]


def test_impala_pretrains_on_sebulba_and_a_warm_start_fine_tunes_it(tmp_path):
    pre = str(tmp_path / "pre")
    flags = ["--config.intrinsic.method=rnd", "--config.total_env_steps=3200"]
    train_main(
        "configs/impala_cartpole.py:quick", pre, *flags, "--config.intrinsic.pretraining=true"
    )
    fine = str(tmp_path / "fine")
    summary = train_main(
        "configs/impala_cartpole.py:quick", fine, *flags, f"--config.warm_start={pre}@latest"
    )
    assert summary["updates"] > 0
    pre_summary = _json(pre, "summary")
    # The same seed: it starts from pre's last params, not its first, and with its own head.
    start = summary["initial_params_sha256"]
    assert start not in (pre_summary["initial_params_sha256"], pre_summary["params_sha256"])
    assert _json(pre, "config")["intrinsic"]["pretraining"]


def test_anakin_rnd_resumes_bit_identically(tmp_path):
    """The RND state (predictor, target, statistics, the returns' filter) of two vmapped seeds
    is checkpointed with the learner's and taken back by a resume."""
    from train_runs import interrupted_run

    from jaxrl_dist.config.cli import load_config
    from jaxrl_dist.run.trainer import Trainer

    steps = {"total_env_steps": 16 * 512, "checkpoint_every_updates": 5, "log_every_updates": 4}
    steps["anakin.num_seeds"] = 2  # RND's state vmapped over seeds
    config = load_config(f"{DEEPSEA}:quick", **steps)
    whole = Trainer(config, str(tmp_path / "whole"), quiet=True).run()
    cut = interrupted_run(config, str(tmp_path / "cut"), 6 * 512)
    assert 6 <= cut.updates < 16
    resumed = Trainer(config, str(tmp_path / "cut"), resume=True, quiet=True).run()
    assert resumed.updates == whole.updates == 16
    assert resumed.summary["state_sha256"] == whole.summary["state_sha256"]


def _guide_lines(script: str) -> list[list[str]]:
    """The intrinsic-reward guide's bash lines that run `script`: the script's arguments."""
    text = open(GUIDE).read()
    blocks = text.split("```bash\n")[1:]
    lines = [line for b in blocks for line in b.split("```")[0].replace("\\\n", " ").splitlines()]
    return [shlex.split(line)[2:] for line in lines if line.startswith(f"python {script}")]


def test_the_guides_pretrain_fine_tune_and_evaluate_commands_run_small(tmp_path, monkeypatch):
    """The guide's pre-training, its fine-tune (a warm start) and the evaluation of the fine-tuned
    run, as written, each on a smaller step budget (Anakin, DeepSea)."""
    from jaxrl_dist.tools.evaluate_cli import main as evaluate
    from jaxrl_dist.tools.train_cli import main as train

    monkeypatch.chdir(tmp_path)
    os.symlink(os.path.join(ROOT, "configs"), tmp_path / "configs")
    trains = _guide_lines("scripts/train.py")
    (pretrain,) = [argv for argv in trains if argv[1].endswith(":pretrain")]
    (fine_tune,) = [argv for argv in trains if any("warm_start" in a for a in argv)]
    for argv in (pretrain, fine_tune):
        assert train([*argv, "--config.total_env_steps=2048", "--config.eval_every_updates=2"]) == 0
    (evaluation,) = _guide_lines("scripts/evaluate.py")
    assert evaluate(evaluation) == 0
    pre_dir, fine_dir = (argv[argv.index("--workdir") + 1] for argv in (pretrain, fine_tune))
    pre, fine = ({n: _json(d, n) for n in ("summary", "config")} for d in (pre_dir, fine_dir))
    assert pre["config"]["intrinsic"]["pretraining"]
    assert not fine["config"]["intrinsic"]["pretraining"]
    # The same seed: without the warm start the fine-tune would start from pre's first params;
    # it starts from pre's last, but for the intrinsic head (fresh, as its RND).
    start = fine["summary"]["initial_params_sha256"]
    assert start not in (pre["summary"]["initial_params_sha256"], pre["summary"]["params_sha256"])
    assert os.listdir(os.path.join(fine_dir, "eval"))


def _json(workdir: str, name: str) -> dict:
    with open(os.path.join(workdir, f"{name}.json")) as f:
        return json.load(f)


@pytest.mark.parametrize(
    ("config", "overrides", "needle"),
    [
        (
            "configs/rainbow_cartpole.py",
            ["--config.intrinsic.method=rnd"],
            "config.intrinsic.method='rnd' needs an agent with a value head",
        ),
        ("configs/ppo_cartpole.py", ["--config.intrinsic.method=icm"], "config.intrinsic.method"),
        (
            "configs/ppo_cartpole.py",
            ["--config.intrinsic.pretraining=true"],
            "needs an intrinsic reward; set --config.intrinsic.method='rnd'",
        ),
        (
            "configs/ppo_cartpole.py",
            ["--config.intrinsic.method=rnd", "--config.intrinsic.int_coef=-1"],
            "config.intrinsic.int_coef=-1.0 must be >= 0",
        ),
        (
            "configs/ppo_cartpole.py",
            ["--config.intrinsic.method=rnd", "--config.intrinsic.update_proportion=0"],
            "update_proportion",
        ),
        (
            "configs/two_agents_tictactoe.py",
            ["--config.agents.rb.intrinsic.method=rnd"],
            "agents.rb.intrinsic.method='rnd' needs an agent with a value head",
        ),
        (
            "configs/ppo_cartpole.py",
            [
                "--config.intrinsic.method=rnd",
                "--config.intrinsic.pretraining=true",
                "--config.intrinsic.int_coef=0",
            ],
            "leaves nothing to learn from",
        ),
        (
            "configs/ppo_cartpole.py",
            [
                "--config.intrinsic.method=rnd",
                "--config.intrinsic.ext_coef=0",
                "--config.intrinsic.int_coef=0",
            ],
            "leave the policy no advantage",
        ),
    ],
)
def test_bad_intrinsic_sections_are_refused_in_one_line(
    tmp_path, capsys, config, overrides, needle
):
    assert_refused(config, overrides, needle, tmp_path, capsys)


def test_a_warm_start_without_the_intrinsic_head_is_refused(tmp_path, capsys):
    plain = str(tmp_path / "plain")
    train_main(f"{DEEPSEA}:quick", plain, "--config.intrinsic.method=none")
    assert_refused(
        f"{DEEPSEA}:quick",
        [f"--config.warm_start={plain}"],
        "config.intrinsic's value head",
        tmp_path,
        capsys,
    )
