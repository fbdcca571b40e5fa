"""The Sebulba runtime: devices and mesh, actor threads, params publishing, the sharded learner.

Nothing here knows which algorithm runs: it calls the `Algorithm`'s pure functions.
"""

from jaxrl_dist.runtime.actor import Actor, ActorStats, start_actors
from jaxrl_dist.runtime.learner import Learner
from jaxrl_dist.runtime.mesh import Devices, select_devices
from jaxrl_dist.runtime.params_store import ParamsStore

__all__ = [
    "Actor",
    "ActorStats",
    "Devices",
    "Learner",
    "ParamsStore",
    "select_devices",
    "start_actors",
]
