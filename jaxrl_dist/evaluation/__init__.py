"""Evaluation: the `Evaluator` protocol and its result (`base.py`), players keyed by env kind
(`pools.py`: EnvPool and Python pools; `xla_loop.py`: inside the XLA actor loop; `jax_envs.py`:
JAX envs), the one several-agent round-robin (`round_robin.py`, with `agents.py`'s pool
players and slot evaluator), named opponents (`opponents.py`) and GIFs (`video.py`).

Below the run shell and the engines: the shell runs an `Evaluator` (blocking or beside training),
each engine builds its own from here, and `jaxrl_dist.evaluate` plays a saved policy with the
same players, importing no engine.
"""
