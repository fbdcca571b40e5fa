"""Tools around runs: evaluate checkpoints, plot curves, launch processes (`load_policy` is
`jaxrl_dist.checkpoints.policy`'s)."""
