"""jaxrl_dist: JAX-first distributed reinforcement learning (Sebulba actors, sharded learners).

The Python API (README, "Python API"): `load_config`, `Trainer`, `Hooks`, `EvalReport`,
`EvalEpisode`, `RunResult`, `load_policy`, `evaluate` (-> `Evaluation`). They are imported on
first use, so `import jaxrl_dist` stays cheap (the CLI checks a config before it imports JAX).
"""

from jaxrl_dist._lazy import lazy_exports

__version__ = "0.1.0"

_API = {
    "load_config": "jaxrl_dist.config.cli",
    "Trainer": "jaxrl_dist.run.trainer",
    "Hooks": "jaxrl_dist.run.hooks",
    "EvalReport": "jaxrl_dist.run.hooks",
    "EvalEpisode": "jaxrl_dist.run.hooks",
    "RunResult": "jaxrl_dist.run.summary",
    "load_policy": "jaxrl_dist.checkpoints.policy",
    "evaluate": "jaxrl_dist.tools.evaluation",
    "Evaluation": "jaxrl_dist.tools.evaluation",
}
__all__ = sorted(_API)
__getattr__ = lazy_exports(__name__, _API)
