"""Evaluation episodes as animated GIFs: `scripts/evaluate.py --video` (one episode of a saved
policy), and during training (`config.sebulba.video_every_evals`, `EvalVideos`: one episode of the
evaluated params every that many evaluations, in `WORKDIR/videos/update_UUUUUUUU.gif`, the update
of the params); and the checks that say beforehand whether the env renders and Pillow is there."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import jax
import numpy as np

from jaxrl_dist.agents.base import Agent
from jaxrl_dist.checkpoints.policy import Policy, describe_policy
from jaxrl_dist.config import TrainConfig
from jaxrl_dist.envs import derive_seed

VIDEO_MAX_FRAMES = 1000  # a GIF holds every frame in memory: cap long (Atari) episodes
VIDEO_MAX_SIDE = 320  # frames are scaled down to this many pixels on their longer side
VIDEO_FRAME_MS = 40  # 25 frames a second (GIF delays are in 10 ms units)

_RENDER_PROBE = """
import sys, json, warnings
warnings.simplefilter("ignore")
from jaxrl_dist.envs import make_env
kwargs = {**json.loads(sys.argv[2]), "render_mode": "rgb_array"}
env = make_env(sys.argv[1], kwargs, 1, 1, seed=0)
env.reset()
frames = env.render()
env.close()
assert frames is not None and frames.ndim == 4 and frames.size > 0, "no frame"
"""


def pillow_problem() -> str | None:
    if importlib.util.find_spec("PIL") is None:  # only --video needs it
        return "--video needs Pillow; install it with pip install pillow"
    return None


def render_problem(env_id: str, env_kwargs: dict[str, Any]) -> str | None:
    """None if `env_id` (EnvPool, or a Python env) renders here as RGB frames, else one line
    saying it does not.

    Probed in a child process: MuJoCo without an OpenGL context ends the whole process from C
    (it cannot be caught), and toy-text envs raise "render not implemented".
    """
    try:
        with tempfile.TemporaryDirectory() as scratch:  # MuJoCo leaves MUJOCO_LOG.TXT in cwd
            probe = subprocess.run(
                [sys.executable, "-c", _RENDER_PROBE, env_id, json.dumps(env_kwargs)],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=scratch,
            )
    except subprocess.TimeoutExpired:
        return f"--video: {env_id} did not render a frame within 120 s; drop --video"
    if probe.returncode == 0:
        return None
    # Python's traceback ends on stderr; MuJoCo prints its fatal error on stdout.
    lines = [ln.strip() for ln in probe.stderr.splitlines() if ln.strip()] or [
        ln.strip() for ln in probe.stdout.splitlines() if ln.strip()
    ]
    why = lines[-1][:200] if lines else f"exit status {probe.returncode}"
    return f"--video: {env_id} does not render here ({why}); drop --video"


def record_video(policy: Policy, path: str, greedy: bool, seed: int) -> dict[str, Any]:
    """Plays one episode on a rendering env and writes it to `path` as an animated GIF.

    Returns `{path, frames, return, length, cut}`: `frames` rendered (the reset's and one per
    step; the GIF writer merges identical neighbours, adding up their delays), `cut` if the
    episode passed `VIDEO_MAX_FRAMES` frames (the GIF then ends there).
    """
    from jaxrl_dist.envs import make_env

    env = make_env(
        policy.env_id, {**policy.env_kwargs, "render_mode": "rgb_array"}, 1, 1, seed=seed
    )
    state = policy.initial_state(1, jax.random.PRNGKey(seed))  # a recurrent policy's memory
    try:
        obs, _ = env.reset()
        frames = [_gif_frame(env.render()[0])]
        total, done = 0.0, False
        while not done and len(frames) < VIDEO_MAX_FRAMES:
            action, state = policy.act_with_state(obs, state, greedy=greedy)
            obs, reward, terminated, truncated, info = env.step(action)
            total += float(info.get("reward", reward)[0])  # the game score where EnvPool has it
            done = bool(terminated[0] or truncated[0])
            frames.append(_gif_frame(env.render()[0]))  # the terminal state included
    finally:
        env.close()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=VIDEO_FRAME_MS, loop=0)
    length = len(frames) - 1
    return {"path": path, "frames": len(frames), "return": total, "length": length, "cut": not done}


def _gif_frame(rgb: np.ndarray) -> Any:
    """`[H, W, 3]` uint8 -> a PIL palette image at most VIDEO_MAX_SIDE on its longer side (a
    palette image is a third of the RGB's memory, and the GIF's format anyway)."""
    from PIL import Image

    image = Image.fromarray(np.ascontiguousarray(rgb))
    scale = VIDEO_MAX_SIDE / max(image.size)
    if scale < 1:
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.BILINEAR)
    return image.quantize(256)


VIDEO_SEED_PURPOSE = 6  # derive_seed path of the recorded episodes' env seeds
VIDEO_DIR = "videos"


def video_problem(config: TrainConfig) -> str | None:
    """One line when `video_every_evals` asks for GIFs this machine cannot make (the env does
    not render here, or Pillow is missing), else None."""
    if not config.sebulba.video_every_evals:
        return None
    problem = pillow_problem() or render_problem(config.env_id, config.env_kwargs)
    if problem is None:
        return None
    # The messages of scripts/evaluate.py --video, in config terms.
    problem = problem.replace("drop --video", "set config.sebulba.video_every_evals=0")
    return problem.replace(
        "--video", f"config.sebulba.video_every_evals={config.sebulba.video_every_evals}"
    )


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
