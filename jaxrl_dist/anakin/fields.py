"""What the Anakin engine does with the shared run fields the shell leaves to it
(`run/fields.py`: `SHELL_FIELDS` are honoured alike by every engine), and the ones it refuses.
Its own section, `config.anakin` (`config/engine_sections.py`), is read by it alone; Sebulba's
actors, EnvPools, queues and inference servers (`config.sebulba`) have no counterpart in one
jitted program."""

SECTION = "anakin"

USES = {
    "anakin": "seeds vmapped in one program",
    "unroll_length": "T, steps per rollout",
    "batch_size": "envs per seed (one segment each per update)",
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

REFUSES = {
    "replay.tolerance": "the sample-to-insert ratio is exact",
}
