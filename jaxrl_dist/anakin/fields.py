"""What the Anakin engine does with the run fields the shell leaves to it (`run/fields.py`:
`SHELL_FIELDS` are honoured alike by every engine), and the fields it refuses: the Sebulba
runtime's actors, EnvPools, queues and inference servers have no counterpart in one jitted
program."""

USES = {
    "num_seeds": "seeds vmapped in one program",
    "unroll_length": "T, steps per rollout",
    "batch_size": "envs per seed",
    "learner_device_ids": "the mesh the env axis is split over",
    "deterministic": "the GPU XLA flags (the program is otherwise deterministic)",
    # As the agent's data flow reads them (it refuses the ones it does not: `DataFlow.reads`).
    "replay.capacity": "the device replay's size",
    "replay.min_size": "learning starts",
    "replay.samples_per_insert": "updates per rollout",
    "replay.n_step": "prioritized windows",
    "replay.priority_exponent": "priorities",
    "replay.priority_epsilon": "priorities",
    "replay.save": "always saved with the carry (False is refused)",
    "replay.batch_size": "transitions per update",
    "seats": "pgx games: roles, masks, the league, openings, scripted evaluation",
    "agents": "several agents' carries in one program, updated in lockstep (`agents.py`)",
    "learning_mask": "per agent: off keeps its carry as it started",
    "exploration_mask": "per agent: off acts by its policy's mode (Q: epsilon 0)",
    "max_updates_per_s": "chunks of at most a second's updates, paced between chunks",
}

_NO_ACTORS = "no actor threads: the envs step inside the jitted program"
REFUSES = {
    "num_actor_threads": _NO_ACTORS,
    "envs_per_actor": "config.batch_size counts a seed's envs",
    "async_envs": "JAX envs step together",
    "env_threads_per_actor": "no EnvPool",
    "actor_loop": _NO_ACTORS,
    "env_groups_per_actor": _NO_ACTORS,
    "actor_hang_timeout_s": _NO_ACTORS,
    "env_start_timeout_s": "no worker processes: JAX envs step inside the jitted program",
    "env_thread_affinity_offset": "no EnvPool",
    "queue_size": "no queue: each rollout is learned from in the program",
    "max_policy_lag": "the policy lag is 0",
    "actor_max_restarts": _NO_ACTORS,
    "actor_restart_window_s": _NO_ACTORS,
    "actor_device_ids": "acting runs on the learner mesh",
    "sync_collection": "collection is synchronous by construction",
    "fraction_samples": "collection is synchronous by construction",
    "video_every_evals": "JAX envs do not render",
    "env_epoch_updates": "resumes are exact from the carry",
    "inference.client": "inference runs inside the program",
    "inference.batch_size": "inference runs inside the program",
    "inference.timeout_ms": "inference runs inside the program",
    "inference.broadcast_period": "inference runs inside the program",
    "inference.device_ids": "inference runs inside the program",
    "agents_per_env": "agent rows run on Sebulba",
    "team_reward": "agent rows run on Sebulba",
    "replay.tolerance": "the sample-to-insert ratio is exact",
    "agent_slots": "agent rows (simultaneous moves) run on Sebulba",
}
