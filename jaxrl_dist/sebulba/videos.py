"""GIFs of evaluation episodes during training (`config.video_every_evals`): one episode of the
evaluated params every that many evaluations, in `WORKDIR/videos/update_UUUUUUUU.gif` (the update
of the params), recorded as `scripts/evaluate.py --video` does."""

from __future__ import annotations

import os
from typing import Any

import jax

from jaxrl_dist.agents.base import Agent
from jaxrl_dist.checkpoints.policy import Policy, describe_policy
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.envs import derive_seed
from jaxrl_dist.run.video import pillow_problem, record_video, render_problem

VIDEO_SEED_PURPOSE = 6  # derive_seed path of the recorded episodes' env seeds
VIDEO_DIR = "videos"


def video_problem(config: TrainConfig) -> str | None:
    """One line when `video_every_evals` asks for GIFs this machine cannot make (the env does
    not render here, or Pillow is missing), else None."""
    if not config.video_every_evals:
        return None
    problem = pillow_problem() or render_problem(config.env_id, config.env_kwargs)
    if problem is None:
        return None
    # The messages of scripts/evaluate.py --video, in config terms.
    problem = problem.replace("drop --video", "set config.video_every_evals=0")
    return problem.replace("--video", f"config.video_every_evals={config.video_every_evals}")


class EvalVideos:
    """Records GIFs of one env's episode with given params (the policy is built once)."""

    def __init__(self, config: TrainConfig, agent: Agent, spec: Any, workdir: str):
        self._config, self._agent, self._spec = config, agent, spec
        self._dir = os.path.join(workdir, VIDEO_DIR)
        self._policy: Policy | None = None

    def record(self, params: Any, updates: int, greedy: bool) -> dict[str, Any]:
        """One episode with `params` (those of update `updates`) to a GIF; its summary."""
        if self._policy is None:
            description = describe_policy(self._config, self._spec)
            self._policy = Policy(params, self._agent, description, updates)
        else:
            self._policy.params = jax.device_put(params)
        path = os.path.join(self._dir, f"update_{updates:08d}.gif")
        seed = derive_seed(self._config.seed, VIDEO_SEED_PURPOSE, updates)
        return record_video(self._policy, path, greedy, seed)
