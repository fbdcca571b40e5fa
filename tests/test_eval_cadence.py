"""Evaluation scheduled in training episodes (`eval_every_episodes`, rbgame's `test_freq`), on
fewer envs than episodes (`eval_envs`, rbgame's `num_test_envs`), and the `on_eval_episode`
hook called for every episode in the order they finished: the sharing rule on made-up steps,
then runs of both engines through the trainer."""

import numpy as np
import pytest

from jaxrl_dist import EvalEpisode, Hooks, Trainer, load_config
from jaxrl_dist.evaluation.base import EnvEpisodes, finishing_order


def test_envs_play_fixed_shares_and_a_reset_step_counts_for_no_episode():
    """5 episodes on 2 envs: env 0 plays episodes 0, 2, 4 and env 1 episodes 1, 3."""
    episodes = EnvEpisodes(5, 2)
    steps = [  # (reward [2], done [2])
        ([1, 10], [False, True]),  # env 1's episode 1 ends (length 1)
        ([1, 99], [True, False]),  # env 0's episode 0 ends (length 2); env 1 resets
        ([99, 10], [False, False]),  # env 0 resets; env 1's episode 3 begins
        ([1, 10], [True, True]),  # episodes 2 (length 1) and 3 (length 2) end: env 1 is done
        ([99, 5], [False, True]),  # env 0 resets; env 1 plays on, counted nowhere
        ([1, 5], [False, False]),
        ([1, 5], [True, False]),  # episode 4 ends (length 2)
    ]
    for i, (reward, done) in enumerate(steps):
        assert not episodes.done, i
        episodes.add(np.array(reward), np.array(done))
    assert episodes.done
    result = episodes.result()
    np.testing.assert_array_equal(result.returns[:, 0], [2, 10, 1, 20, 2])
    np.testing.assert_array_equal(result.lengths, [2, 1, 1, 2, 2])
    # Ends at steps 2, 1, 4, 4, 7 (a reset step between an env's episodes): ties by index.
    np.testing.assert_array_equal(finishing_order(result.lengths, 5, 2), [1, 0, 2, 3, 4])
    # Two seeds' evaluations one after the other: each its own envs.
    twice = np.concatenate([result.lengths, result.lengths])
    np.testing.assert_array_equal(finishing_order(twice, 5, 2), [1, 6, 0, 5, 2, 3, 7, 8, 4, 9])


# Sebulba: 16 updates of 320 CartPole steps (early episodes ~20 steps: about 16 an update, so
# every 40 episodes never crosses two marks in one update). Anakin: 16 updates of 512 steps.
RUNS = {
    "sebulba": ("configs/impala_cartpole.py:quick", 320 * 16),
    "anakin": ("configs/anakin_ppo_cartpole.py:quick", 512 * 16),
}


@pytest.mark.parametrize("engine", list(RUNS))
def test_evaluations_every_n_episodes_on_fewer_envs_call_a_hook_per_episode(tmp_path, engine):
    path, steps = RUNS[engine]
    every = 40
    config = load_config(
        path,
        total_env_steps=steps,
        eval_every_updates=0,
        eval_every_episodes=every,
        eval_episodes=5,
        eval_envs=2,
    )
    seen: list[tuple[int, int]] = []  # (updates, episodes) after every update
    episodes: list[EvalEpisode] = []
    reports = []
    trainer = Trainer(config, str(tmp_path / engine), quiet=True)

    def on_iteration(num_episodes, num_env_steps):
        seen.append((num_env_steps, num_episodes))

    def on_eval(report):
        reports.append((report, episodes[-5:]))

    trainer.hooks = Hooks(
        on_iteration=on_iteration, on_eval=on_eval, on_eval_episode=episodes.append
    )
    trainer.run()
    # An evaluation follows each update whose episodes crossed a multiple of `every`, and one
    # more at the end (unless the last update was evaluated).
    crossed = [
        steps_now
        for (steps_now, now), (_, before) in zip(seen, [(0, 0), *seen[:-1]], strict=True)
        if now // every > before // every
    ]
    assert len(crossed) >= 3
    at = [report.env_steps for report, _ in reports]
    assert at[: len(crossed)] == crossed and len(at) - len(crossed) in (0, 1)
    for report, calls in reports:
        assert len(episodes) == 5 * len(reports)
        # Every episode once, in the order they finished, with the report's numbers.
        assert sorted(e.index for e in calls) == list(range(5))
        order = finishing_order(report.lengths, 5, 2)
        assert [e.index for e in calls] == order.tolist()
        assert [e.num_collected_episodes for e in calls] == [1, 2, 3, 4, 5]
        assert calls[-1].num_collected_steps == report.lengths.sum()
        for e in calls:
            np.testing.assert_array_equal(e.returns, report.returns[e.index])
            assert e.length == report.lengths[e.index] and e.num_env_steps == report.env_steps
        # CartPole pays 1 a step: the second episodes of an env count no reset step.
        np.testing.assert_array_equal(report.returns[:, 0], report.lengths)
