"""Tools around runs: evaluate checkpoints, load a policy, plot curves, launch processes."""
