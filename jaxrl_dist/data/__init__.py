"""The data seam between acting and learning: actors write, the learner reads.

Four data flows (`flows.py`; an agent's `AgentEntry.data` names one): the on-policy queue
(`on_policy.py`), the uniform replay of segments (`replay.py`), the prioritized replay of n-step
transitions (`prioritized.py`) and the prioritized replay of whole sequences (`sequences.py`,
R2D2), each with its device implementation for the Anakin runtime where it has one
(`device_flows.py`). All count env steps where data enters and hand the learner `[T + 1, B]`
rollouts (the prioritized replay's `T` is its window, `n_step`), so the runtimes loop over a
reader and never know which.
"""

from jaxrl_dist.data.base import Batch, QueueItem
from jaxrl_dist.data.flows import DataFlow, get, register

__all__ = ["Batch", "DataFlow", "QueueItem", "get", "register"]
