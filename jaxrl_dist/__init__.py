"""jaxrl_dist: JAX-first distributed reinforcement learning (Sebulba actors, sharded learners)."""

__version__ = "0.1.0"
