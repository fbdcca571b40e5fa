"""Learning: the device mesh, the learner half jitted on it, and process coordination."""
