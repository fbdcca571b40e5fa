"""What the Sebulba engine does with the run fields the shell leaves to it (`run/fields.py`:
`SHELL_FIELDS` are honoured alike by every engine), and the fields it refuses."""

USES = {
    "num_actor_threads": "actor threads per process",
    "envs_per_actor": "envs in each actor's EnvPool",
    "async_envs": "async EnvPools (half the envs per recv)",
    "env_threads_per_actor": "EnvPool's C++ threads",
    "actor_loop": "the Python loop or the jitted XLA unroll",
    "env_groups_per_actor": "the XLA unroll's env groups stepped in turn",
    "actor_hang_timeout_s": "a hung XLA unroll stops the run",
    "env_start_timeout_s": "a Python env's worker start (its envs built and first reset)",
    "env_thread_affinity_offset": "EnvPool thread pinning",
    "unroll_length": "T, steps per segment",
    "batch_size": "segments (or transitions) per update, over all processes",
    "queue_size": "on-policy back-pressure",
    "max_policy_lag": "stragglers dropped",
    "max_updates_per_s": "each agent's learner waits its turn",
    "actor_max_restarts": "the actors' restart budget",
    "actor_restart_window_s": "the restart budget's window",
    "actor_device_ids": "the actors' (and evaluation's) devices",
    "learner_device_ids": "the learner mesh",
    "sync_collection": "synchronous collection",
    "fraction_samples": "stragglers of synchronous collection",
    "video_every_evals": "GIFs of evaluation episodes (EnvPool rendering)",
    "deterministic": "lockstep actors, actor-ordered batches, the GPU XLA flags",
    "env_epoch_updates": "lockstep env epochs (the replay a resume needs)",
    "inference": "local inference or the central inference server",
    # The replay fields as the agent's data flow reads them (a flow refuses the ones it does
    # not read: `DataFlow.reads`); the inference server's fields with `inference.client`
    # 'server' (the local client refuses them).
    "replay.capacity": "the replay's size",
    "replay.min_size": "learning starts",
    "replay.samples_per_insert": "the rate limiter",
    "replay.tolerance": "the rate limiter's slack",
    "replay.n_step": "prioritized windows",
    "replay.priority_exponent": "priorities",
    "replay.priority_epsilon": "priorities",
    "replay.save": "the replay's contents in checkpoints",
    "seats": "turn-based games: roles, masks, the opponent pool, openings, evaluation",
    "agents_per_env": "simultaneous agents, one stream each",
    "team_reward": "agents learn from the team's reward",
    "agents": "several learning agents, a lane each (learner, data, params, pool, actors)",
    "learning_mask": "agents that play without learning",
    "exploration_mask": "agents that act greedily",
    "agent_slots": "several agents on a simultaneous-move task, a slot each",
}

REFUSES = {
    "num_seeds": "one seed per run; config.runtime='anakin' vmaps seeds",
    "replay.batch_size": "the learner samples config.batch_size",
}
